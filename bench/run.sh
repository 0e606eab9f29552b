#!/usr/bin/env bash
# svs benchmark: three figures against their targets, with references from
# the same run. Runs from a fresh clone on Debian as root:
#
#   bench/run.sh
#
#   1. authenticated GET /volumes/{volume}, 64 connections (wrk): req/s, p99
#   2. in-place resize request -> job Done (50 resizes): median, p90
#   3. unthrottled slice move vs cp --sparse=always + fsync of its output
#      (target >= 1.0x, medians of >= 7 interleaved rounds, best-of printed;
#      plain cp for information): MiB/s
#
# Exits 0 when the benchmark ran, whatever the figures; non-zero if something
# broke. All data lives in a temporary directory (TMPDIR, default /tmp)
# removed on exit. Environment: BENCH_ROUNDS (slice-move rounds, default and
# minimum 7), BENCH_RESIZES (default 50), BENCH_WRK_SECS (default 10).
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
ROUNDS="${BENCH_ROUNDS:-7}"
if ((ROUNDS < 7)); then
    echo "BENCH_ROUNDS must be at least 7 (the slice-move figure is a median of >= 7 rounds)" >&2
    exit 2
fi
RESIZES="${BENCH_RESIZES:-50}"
WRK_SECS="${BENCH_WRK_SECS:-10}"
ADMIN_EMAIL="bench@example.com"
ADMIN_PASSWORD="bench-password-$$"

# shellcheck source=bench/lib.sh
source "$BENCH_DIR/lib.sh"
stop_on_exit

# ---- prerequisites ----
phase "prerequisites"
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }
command -v wrk >/dev/null || apt_install wrk
echo "wrk: $(command -v wrk); cp: $(cp --version | head -1); $(nproc) CPUs"

# ---- build ----
phase "build (cargo build --release)"
build_release
cargo build --release -p svs-dataplane --example slice_move
SLICE_MOVE="$(target_dir)/release/examples/slice_move"
[[ -x "$SLICE_MOVE" ]] || { echo "build output missing: $SLICE_MOVE" >&2; exit 1; }

make_work_dir svs-bench
RESULTS="$WORK/results"
: >"$RESULTS"

# ---- server ----
phase "start svs serve (SVS_LOG=warn, demo media)"
start_svs
TOKEN="$(cd "$BENCH_DIR" && python3 svs_api.py setup "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD")"
echo "signed in; policy 'bench' (0/0/0), volumes bench-get (1 GiB) and bench-resize (10 GiB) created"

# ---- figure 1 ----
phase "1. GET /volumes/bench-get: wrk -t2 -c64 -d${WRK_SECS}s --latency (after a 2s warm-up)"
URL="$BASE/volumes/bench-get"
wrk -t2 -c64 -d2s -H "authorization: Bearer $TOKEN" "$URL" >/dev/null
wrk -t2 -c64 -d"${WRK_SECS}s" --latency -H "authorization: Bearer $TOKEN" "$URL" >"$WORK/wrk.out"
sed 's/^/  | /' "$WORK/wrk.out"
python3 "$BENCH_DIR/parse_wrk.py" "$RESULTS" <"$WORK/wrk.out"
# Reference ceiling: the same HTTP stack without the token check and the
# store read (GET /version), same wrk settings, shorter.
echo "  reference: GET /version (no auth, no DB), wrk -t2 -c64 -d5s --latency"
wrk -t2 -c64 -d5s --latency "$BASE/version" >"$WORK/wrk-version.out"
grep -E '^Requests/sec|^ +99%' "$WORK/wrk-version.out" | sed 's/^/  | /'
python3 "$BENCH_DIR/parse_wrk.py" "$RESULTS" version <"$WORK/wrk-version.out"

# ---- figure 2 ----
phase "2. in-place resize -> job Done, $RESIZES times (poll every 1 ms, keep-alive)"
(cd "$BENCH_DIR" && python3 resize_latency.py "$BASE" "$TOKEN" bench-resize "$RESIZES" "$RESULTS")

if grep -qiE '\b(ERROR|panicked)\b' "$WORK/svs.log"; then
    echo "svs logged errors:" >&2
    grep -iE '\b(ERROR|panicked)\b' "$WORK/svs.log" | head -20 >&2
    exit 1
fi
kill "$SERVER_PID"
wait "$SERVER_PID" || true
SERVER_PID=""

# ---- figure 3 ----
phase "3. slice move (copy_slice, unthrottled) vs cp --sparse=always, $ROUNDS rounds, medians"
python3 "$BENCH_DIR/slice_move.py" "$SLICE_MOVE" "$WORK/media" "$ROUNDS" "$RESULTS"

# ---- summary ----
phase "summary ($(nproc) CPUs, $(findmnt -n -o FSTYPE -T "$WORK" || echo '?') at ${TMPDIR:-/tmp})"
python3 "$BENCH_DIR/summary.py" "$RESULTS"
