#!/usr/bin/env bash
# Slow clients against svs: 3,000 slowloris HTTP connections and 300 idle NBD
# connections from a stranger, with /version latency and svs's descriptors
# sampled every second (bench/slow_clients.py). Runs svs from SVS_BIN
# (default: a release build) on a temporary data directory, removed on exit.
#
#   bench/slow_clients.sh [CONNECTIONS] [SECONDS]
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
if [[ -z "${SVS_BIN:-}" ]]; then
    (cd "$REPO" && cargo build --release --quiet)
    SVS_BIN="$REPO/target/release/svs"
fi
WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    [[ -n "$SERVER_PID" ]] && { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
    rm -rf "$WORK"
}
trap cleanup EXIT
ulimit -n 20000 2>/dev/null || true
# (SVS_BIN is ours, not a setting of svs serve.)
env -u SVS_BIN SVS_LOG=warn "$SVS_BIN" serve --data-dir "$WORK/data" --listen 127.0.0.1:0 --nbd-listen 127.0.0.1:0 \
    >"$WORK/out" 2>"$WORK/log" &
SERVER_PID=$!
for _ in $(seq 100); do
    [[ $(wc -l <"$WORK/out") -ge 2 ]] && break
    sleep 0.1
done
if [[ $(wc -l <"$WORK/out") -lt 2 ]]; then
    echo "svs did not start:" >&2
    cat "$WORK/log" >&2
    exit 1
fi
HTTP="$(sed -n 's/^svs listening on //p' "$WORK/out")"
NBD="$(sed -n 's|^svs nbd listening on nbd://||p' "$WORK/out")"
echo "svs: $HTTP, nbd $NBD, pid $SERVER_PID"
python3 "$BENCH_DIR/slow_clients.py" "$HTTP" "$NBD" "$SERVER_PID" "${1:-3000}" "${2:-20}"
