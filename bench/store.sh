#!/usr/bin/env bash
# The store under the API: the same `svs serve` (release build, demo media,
# SVS_LOG=warn) on its embedded SQLite file, then on a PostgreSQL database,
# driven by the same clients in the same run. Runs from a fresh clone on
# Debian as root:
#
#   bench/store.sh
#
#   1. authenticated GET /volumes/{volume}, 64 connections (wrk, as bench/run.sh):
#      req/s and p99
#   2. in-place resize request -> job Done (resize_latency.py, as bench/run.sh):
#      median and p90; the target of issue 22 is a median under 50 ms on PostgreSQL
#
# PostgreSQL: a server of Debian's binaries started for the run (initdb into the
# work directory, as the postgres user, on a free port of 127.0.0.1, reached over
# TCP with a password) with its durable defaults (fsync on, synchronous_commit
# on, full_page_writes on): a committed change survives a crash, as SQLite's
# `synchronous = FULL` keeps it. Several instances on one database:
# bench/instances.sh.
#
# Everything lives in a temporary directory (TMPDIR, default /tmp) removed on
# exit. Environment: BENCH_SVS_BIN (an svs binary instead of building one),
# BENCH_RESIZES (default 50), BENCH_WRK_SECS (default 10).
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
RESIZES="${BENCH_RESIZES:-50}"
WRK_SECS="${BENCH_WRK_SECS:-10}"
ADMIN_EMAIL="bench@example.com"
ADMIN_PASSWORD="bench-password-$$"

PG_PID=""
# shellcheck source=bench/lib.sh
source "$BENCH_DIR/lib.sh"
stop_on_exit PG_PID

# ---- prerequisites ----
phase "prerequisites"
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }
command -v wrk >/dev/null || apt_install wrk
require_postgres
echo "wrk: $(command -v wrk); PostgreSQL: $("$PG_BIN/postgres" --version); $(nproc) CPUs"

# ---- build ----
phase "build (cargo build --release)"
build_release
make_work_dir svs-store-bench
RESULTS="$WORK/results"
: >"$RESULTS"

# ---- PostgreSQL ----
phase "start PostgreSQL (initdb, durable defaults, TCP with a password)"
start_postgres
echo "PostgreSQL on 127.0.0.1:$PG_PORT (pid $PG_PID): fsync, synchronous_commit, full_page_writes on"

# ---- figures, one store after the other ----
for store in sqlite postgres; do
    phase "svs serve on $store"
    rm -rf "$WORK/data"
    if [[ "$store" == sqlite ]]; then
        printf 'demo = true\n' >"$WORK/svs.toml"
    else
        printf 'demo = true\nstore = "%s"\n' "$PG_URL" >"$WORK/svs.toml"
    fi
    start_svs
    TOKEN="$(cd "$BENCH_DIR" && python3 svs_api.py setup "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD")"
    echo "signed in; policy 'bench', volumes bench-get and bench-resize created"

    phase "$store: 1. GET /volumes/bench-get, wrk -t2 -c64 -d${WRK_SECS}s --latency (after a 2s warm-up)"
    URL="$BASE/volumes/bench-get"
    wrk -t2 -c64 -d2s -H "authorization: Bearer $TOKEN" "$URL" >/dev/null
    wrk -t2 -c64 -d"${WRK_SECS}s" --latency -H "authorization: Bearer $TOKEN" "$URL" >"$WORK/wrk.out"
    grep -E '^Requests/sec|^ +(50|99)%' "$WORK/wrk.out" | sed 's/^/  | /'
    python3 "$BENCH_DIR/parse_wrk.py" "$RESULTS" "${store}_get" <"$WORK/wrk.out"

    phase "$store: 2. in-place resize -> job Done, $RESIZES times"
    (cd "$BENCH_DIR" && python3 resize_latency.py "$BASE" "$TOKEN" bench-resize "$RESIZES" "$WORK/resize")
    sed "s/^/${store}_/" "$WORK/resize" >>"$RESULTS"
    rm -f "$WORK/resize"

    check_svs_log
    kill "$SERVER_PID"
    wait "$SERVER_PID" || true
    SERVER_PID=""
done

# ---- summary ----
phase "summary ($(nproc) CPUs, $(findmnt -n -o FSTYPE -T "$WORK" || echo '?') at ${TMPDIR:-/tmp})"
python3 - "$RESULTS" <<'EOF'
import sys
r = {}
for line in open(sys.argv[1]):
    key, value = line.split()
    r[key] = float(value)
rows = [
    ("GET /volumes/{v}, 64 connections (req/s)", "get_rps", "{:,.0f}"),
    ("GET /volumes/{v} p99 (ms)", "get_p99_ms", "{:.2f}"),
    ("in-place resize -> Done, median (ms)", "resize_median_ms", "{:.1f}"),
    ("in-place resize -> Done, p90 (ms)", "resize_p90_ms", "{:.1f}"),
]
print(f"{'figure':<44} {'SQLite':>10} {'PostgreSQL':>11} {'PG/SQLite':>10}")
for label, key, fmt in rows:
    s, p = r[f"sqlite_{key}"], r[f"postgres_{key}"]
    print(f"{label:<44} {fmt.format(s):>10} {fmt.format(p):>11} {p / s:>9.2f}x")
median = r["postgres_resize_median_ms"]
print(f"\nissue 22's target: PostgreSQL resize -> Done median < 50 ms: {median:.1f} ms "
      f"({'met' if median < 50 else 'not met'})")
EOF
