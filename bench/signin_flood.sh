#!/usr/bin/env bash
# A sign-in flood: CONCURRENCY clients send wrong passwords for SECONDS while
# GET /version latency is sampled (bench/signin_flood.py). Runs svs from
# SVS_BIN (default: a release build) on a temporary data directory, in up to
# three rounds:
#   before   SVS_BIN_BEFORE, if set (e.g. a build of an older commit): as is
#   throttle SVS_BIN, default settings: every guess at one account
#   pool     SVS_BIN, throttle out of the way (huge free-failure counts) and a
#            new e-mail per guess: only the bounded password pool protects
#
#   SVS_BIN_BEFORE=/path/to/old/svs bench/signin_flood.sh [CONCURRENCY] [SECONDS]
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
if [[ -z "${SVS_BIN:-}" ]]; then
    (cd "$REPO" && cargo build --release --quiet)
    SVS_BIN="$REPO/target/release/svs"
fi
CONCURRENCY="${1:-200}"
SECONDS_="${2:-10}"
WORK="$(mktemp -d)"
SERVER_PID=""
stop_server() {
    if [[ -n "$SERVER_PID" ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}
cleanup() {
    stop_server
    rm -rf "$WORK"
}
trap cleanup EXIT
ulimit -n 20000 2>/dev/null || true

# round NAME BINARY EMAIL_MODE [VAR=VALUE ...]: one svs, one flood.
round() {
    local name="$1" bin="$2" mode="$3"
    shift 3
    rm -rf "$WORK/data"
    # Only svs settings in its environment (SVS_BIN* are ours).
    env -u SVS_BIN -u SVS_BIN_BEFORE SVS_LOG=warn SVS_ADMIN_EMAIL=admin@example.com \
        SVS_ADMIN_PASSWORD=admin-password "$@" \
        "$bin" serve --data-dir "$WORK/data" --listen 127.0.0.1:0 --nbd-listen 127.0.0.1:0 \
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
    local http
    http="$(sed -n 's/^svs listening on //p' "$WORK/out")"
    echo "== $name: $bin ($mode e-mail(s), $CONCURRENCY clients, $SECONDS_ s)"
    python3 "$BENCH_DIR/signin_flood.py" "$http" "$CONCURRENCY" "$SECONDS_" "$mode"
    stop_server
}

if [[ -n "${SVS_BIN_BEFORE:-}" ]]; then
    round before "$SVS_BIN_BEFORE" one
fi
round throttle "$SVS_BIN" one
round pool "$SVS_BIN" many SVS_SIGNIN_ACCOUNT_FREE_FAILURES=1000000000 \
    SVS_SIGNIN_ADDRESS_FREE_FAILURES=1000000000
