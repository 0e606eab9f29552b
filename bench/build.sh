#!/usr/bin/env bash
# Build times (docs/benchmarks.md, "Build times"): a release build of the
# `svs` binary from an empty target directory, then again after one line
# added to one API handler (HANDLER), and the debug rebuild after the same
# touch (debug builds are incremental: the one a developer edits against).
# The handler is restored on exit. Its own target directory (TARGET, default
# a temporary one, removed after), so the checkout's own stays as it is; run
# it with nothing else on the machine.
#
#   bench/build.sh [REV]     REV: a commit to measure instead of the working
#                            tree (checked out into a temporary worktree)
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
HANDLER="${HANDLER:-crates/api/src/api/volumes.rs}"
REV="${1:-}"

SCRATCH="$(mktemp -d)"
TREE="$REPO"
cleanup() {
    if [[ -n "$REV" ]]; then
        git -C "$REPO" worktree remove --force "$SCRATCH/tree" 2>/dev/null || true
    elif [[ -f "$SCRATCH/handler" ]]; then
        cp "$SCRATCH/handler" "$TREE/$HANDLER"
    fi
    rm -rf "$SCRATCH"
}
trap cleanup EXIT
if [[ -n "$REV" ]]; then
    git -C "$REPO" worktree add --detach "$SCRATCH/tree" "$REV" >/dev/null
    TREE="$SCRATCH/tree"
fi
[[ -f "$TREE/$HANDLER" ]] || { echo "no handler file $HANDLER in the tree (set HANDLER)" >&2; exit 2; }
export CARGO_TARGET_DIR="${TARGET:-$SCRATCH/target}"

seconds() { # command... → the wall time in seconds, the command's output hidden
    local start end
    start=$(date +%s.%N)
    "$@" >"$SCRATCH/out" 2>&1 || { cat "$SCRATCH/out" >&2; exit 1; }
    end=$(date +%s.%N)
    echo "$start $end" | awk '{printf "%.1f", $2 - $1}'
}
touch_handler() {
    [[ -f "$SCRATCH/handler" ]] || cp "$TREE/$HANDLER" "$SCRATCH/handler"
    echo "// touched by bench/build.sh $(date +%s%N)" >>"$TREE/$HANDLER"
}

cd "$TREE"
echo "tree: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)'), $(nproc) cores"
clean=$(seconds cargo build --release --locked)
echo "clean release build: ${clean} s"
touch_handler
rebuild=$(seconds cargo build --release --locked)
echo "release rebuild after one line in $HANDLER: ${rebuild} s"
echo "binary: $(stat -c %s "$CARGO_TARGET_DIR/release/svs" | awk '{printf "%.1f MB", $1 / 1e6}')"
seconds cargo build --locked >/dev/null
for run in 1 2; do
    touch_handler
    echo "debug rebuild after one line in $HANDLER (run $run): $(seconds cargo build --locked) s"
done
