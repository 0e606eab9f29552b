#!/usr/bin/env bash
# svs snapshot benchmark (issue 10): snapshot creation time against volume
# size, and the write cost after a snapshot, through the API and over NBD.
# Runs from a fresh clone on Debian as root:
#
#   bench/snapshot.sh
#
# svs (release build, SVS_LOG=warn, demo media under a temporary data dir)
# serves volumes with one copy (policy 0/0/0), attached read-write to node-a
# (127.0.0.1 in the demo topology); `qemu-img bench -f raw` over their
# nbd:// URIs writes to them (the client bench/nbd.sh uses). See
# bench/snapshot_bench.py for the details of each figure:
#   1. snapshot creation -> job Done (POST, then GET /jobs/{id} every 1 ms),
#      a 1 GiB and a 64 GiB volume with the same 256 MiB written: median,
#      min, max of BENCH_SNAPSHOT_ROUNDS rounds (default 15), 64 KiB written
#      before each snapshot; snapshots are kept (round k has k - 1 older
#      ones). Reference: an in-place resize -> Done in the same rounds.
#   2. 4 KiB writes, depth 16, on a 1 GiB volume: (a) no snapshot, (b) right
#      after a snapshot, the first write to each 64 KiB chunk, (c) later
#      writes to chunks already saved: IOPS medians of BENCH_ROUNDS rounds
#      (default 7) and the ratio to (a). Snapshots are deleted before (a).
#
# Exits 0 when the benchmark ran, whatever the figures; non-zero if something
# broke. All data lives in a temporary directory (TMPDIR, default /tmp)
# removed on exit; the server is stopped on exit. Takes about 2 minutes
# after the build.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
ROUNDS="${BENCH_ROUNDS:-7}"
SNAPSHOT_ROUNDS="${BENCH_SNAPSHOT_ROUNDS:-15}"
ADMIN_EMAIL="bench@example.com"
ADMIN_PASSWORD="bench-password-$$"

WORK=""
SERVER_PID=""
stop() {
    local pid="$1"
    if [[ -n "$pid" ]]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
}
cleanup() {
    local rc=$?
    stop "$SERVER_PID"
    if [[ -n "$WORK" ]]; then
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

T0=$SECONDS
phase() { printf '\n== %s  [t=%ds]\n' "$*" "$((SECONDS - T0))"; }

# ---- prerequisites ----
phase "prerequisites"
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }
if ! command -v qemu-img >/dev/null; then
    echo "installing qemu-utils"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y qemu-utils; then
        apt-get update
        apt-get install -y qemu-utils
    fi
fi
echo "$(qemu-img --version | head -1); $(nproc) CPUs"

# ---- build ----
phase "build (cargo build --release)"
cd "$REPO"
cargo build --release
TARGET_DIR="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
SVS="$TARGET_DIR/release/svs"
[[ -x "$SVS" ]] || { echo "build output missing: $SVS" >&2; exit 1; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/svs-snapshot-bench.XXXXXX")"
echo "work directory: $WORK ($(findmnt -n -o FSTYPE -T "$WORK" || echo '?'))"

# ---- svs ----
phase "start svs serve (SVS_LOG=warn, demo media)"
printf '# svs snapshot benchmark: defaults, embedded demo media\n' >"$WORK/svs.toml"
SVS_LOG=warn SVS_ADMIN_EMAIL="$ADMIN_EMAIL" SVS_ADMIN_PASSWORD="$ADMIN_PASSWORD" \
    "$SVS" serve --listen 127.0.0.1:0 --nbd-listen 127.0.0.1:0 \
    --config "$WORK/svs.toml" --data-dir "$WORK/data" \
    >"$WORK/svs.out" 2>"$WORK/svs.log" &
SERVER_PID=$!
BASE=""
for _ in $(seq 300); do
    if grep -q '^svs nbd listening on ' "$WORK/svs.out" 2>/dev/null; then
        line="$(grep -m1 '^svs listening on ' "$WORK/svs.out")"
        BASE="${line#svs listening on }"
        break
    fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        break
    fi
    sleep 0.1
done
if [[ -z "$BASE" ]]; then
    echo "svs serve did not start; its log:" >&2
    cat "$WORK/svs.log" >&2
    exit 1
fi
echo "svs at $BASE, $(grep -m1 '^svs nbd listening on ' "$WORK/svs.out" | sed 's/^svs //') (pid $SERVER_PID)"

phase "figures: $SNAPSHOT_ROUNDS creation rounds, $ROUNDS write-cost rounds"
(cd "$BENCH_DIR" && python3 snapshot_bench.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" \
    "$SERVER_PID" "$WORK/data" "$SNAPSHOT_ROUNDS" "$ROUNDS")

if grep -qiE '\b(ERROR|panicked)\b' "$WORK/svs.log"; then
    echo "svs logged errors:" >&2
    grep -iE '\b(ERROR|panicked)\b' "$WORK/svs.log" | head -20 >&2
    exit 1
fi
phase "done ($(nproc) CPUs, $(findmnt -n -o FSTYPE -T "$WORK" || echo '?') at ${TMPDIR:-/tmp})"
