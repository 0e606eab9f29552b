#!/usr/bin/env bash
# Several `svs serve` on one PostgreSQL database (issue 22), in the same run:
# one instance, then three, each time behind the repository's HAProxy
# configuration (deploy/haproxy/svs.cfg, a third server line added for
# three), the clients on the balancer's address. Every copy on one storage
# node (`svs storage-node`, 127.0.0.2), as several instances require
# (storage_nodes_only, fronts on the nodes). Release build, SVS_LOG=warn,
# PostgreSQL with its durable defaults (as bench/store.sh). Runs from a fresh
# clone on Debian as root:
#
#   bench/instances.sh
#
#   1. authenticated GET /volumes/{volume}, wrk -t2 -c64 through the balancer:
#      req/s and p99, and the CPU seconds every svs serve, PostgreSQL, HAProxy
#      and wrk spent during it (the target of issue 22: three instances at
#      least 2x one instance)
#   2. volume creations: BENCH_JOBS sent at once by 16 clients through the
#      balancer, jobs Done per second (each job claimed by one instance)
#   3. in-place resize -> job Done on each instance (resize_latency.py, as
#      bench/store.sh): median
#
# Environment: BENCH_SETTINGS (more lines of every instance's svs.toml),
# BENCH_SVS_BIN (an svs binary instead of building one),
# BENCH_WRK_SECS (default 10), BENCH_JOBS (default 200), BENCH_RESIZES
# (default 30).
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
WRK_SECS="${BENCH_WRK_SECS:-10}"
JOBS="${BENCH_JOBS:-200}"
RESIZES="${BENCH_RESIZES:-30}"
ADMIN_EMAIL="bench@example.com"
ADMIN_PASSWORD="bench-password-$$"

PG_PID="" SN1_PID="" LB_PID="" SVS2_PID="" SVS3_PID=""
# shellcheck source=bench/lib.sh
source "$BENCH_DIR/lib.sh"
stop_on_exit LB_PID SVS3_PID SVS2_PID SN1_PID PG_PID

# ---- prerequisites ----
phase "prerequisites"
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }
command -v wrk >/dev/null || apt_install wrk
command -v haproxy >/dev/null || [[ -x /usr/sbin/haproxy ]] || apt_install haproxy
HAPROXY="$(command -v haproxy || echo /usr/sbin/haproxy)"
require_postgres
echo "wrk, $("$HAPROXY" -v | head -1), $("$PG_BIN/postgres" --version); $(nproc) CPUs"

phase "build (cargo build --release)"
build_release
make_work_dir svs-instances-bench
RESULTS="$WORK/results"
: >"$RESULTS"

phase "start PostgreSQL (durable defaults)"
start_postgres
echo "PostgreSQL on 127.0.0.1:$PG_PORT (pid $PG_PID)"

# `start_instance K`: svs serve K on the database, its own data directory
# and files; sets SVSK_PID and BASEK.
start_instance() {
    local k="$1"
    cat >"$WORK/svs-$k.toml" <<TOML
store = "$PG_URL"
storage_nodes_only = true
fronts = "nodes"
${BENCH_SETTINGS:-}
TOML
    SVS_LOG=warn SVS_ADMIN_EMAIL="$ADMIN_EMAIL" SVS_ADMIN_PASSWORD="$ADMIN_PASSWORD" \
        "$SVS" serve --listen 127.0.0.1:0 --nbd-listen 127.0.0.1:0 \
        --config "$WORK/svs-$k.toml" --data-dir "$WORK/data-$k" \
        >"$WORK/svs-$k.out" 2>"$WORK/svs-$k.log" &
    printf -v "SVS${k}_PID" '%s' "$!"
    local base="" line
    for _ in $(seq 300); do
        if grep -q '^svs nbd listening on ' "$WORK/svs-$k.out" 2>/dev/null; then
            line="$(grep -m1 '^svs listening on ' "$WORK/svs-$k.out")"
            base="${line#svs listening on }"
            break
        fi
        sleep 0.1
    done
    [[ -n "$base" ]] || { echo "svs serve $k did not start:" >&2; cat "$WORK/svs-$k.log" >&2; exit 1; }
    printf -v "BASE$k" '%s' "$base"
    echo "svs serve $k at $base"
}

# `start_balancer BASE...`: HAProxy with deploy/haproxy/svs.cfg in front of
# the given instances (servers beyond two added to a copy of the file).
start_balancer() {
    stop "$LB_PID"
    LB_PID=""
    local config="$WORK/haproxy.cfg" i=0 base
    cp "$REPO/deploy/haproxy/svs.cfg" "$config"
    for base in "$@"; do
        i=$((i + 1))
        export "SVS_INSTANCE_$i=${base#http://}"
        if ((i > 2)); then
            printf '    server svs%d "${SVS_INSTANCE_%d}" check inter 1s fall 2 rise 2\n' "$i" "$i" >>"$config"
        fi
    done
    # One instance: both of the file's servers are that one.
    if ((i == 1)); then export SVS_INSTANCE_2="$SVS_INSTANCE_1"; fi
    LB="127.0.0.1:$(free_port 127.0.0.1)"
    SVS_LB_LISTEN="$LB" "$HAPROXY" -db -f "$config" >"$WORK/haproxy.log" 2>&1 &
    LB_PID=$!
    for _ in $(seq 100); do
        curl -fs "http://$LB/readyz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    curl -fs "http://$LB/readyz" >/dev/null
    echo "HAProxy at $LB in front of $i instance(s)"
}

# CPU seconds (user + system) of a process and its children so far.
cpu_of() {
    local pid total=0 t
    for pid in "$@"; do
        t="$(awk '{print $14 + $15 + $16 + $17}' "/proc/$pid/stat" 2>/dev/null || echo 0)"
        total=$((total + t))
    done
    echo "$total"
}

# Every process below $1 (children, grandchildren, ...).
descendants() {
    local child
    for child in $(pgrep -P "$1"); do
        echo "$child"
        descendants "$child"
    done
}

# CPU ticks of the PostgreSQL server's processes: the postmaster (under
# runuser when root) and every backend it forked.
pg_cpu() {
    # shellcheck disable=SC2046
    cpu_of $(descendants "$PG_PID")
}

# `measure_get LABEL INSTANCE_PIDS...`: wrk through the balancer, with the
# CPU each part spent.
measure_get() {
    local label="$1"
    shift
    local url="http://$LB/volumes/bench-get" hz
    hz="$(getconf CLK_TCK)"
    wrk -t2 -c64 -d2s -H "authorization: Bearer $TOKEN" "$url" >/dev/null
    local svs0 pg0 lb0
    svs0="$(cpu_of "$@")" pg0="$(pg_cpu)" lb0="$(cpu_of "$LB_PID")"
    /usr/bin/time -f '%U %S' -o "$WORK/wrk.cpu" \
        wrk -t2 -c64 -d"${WRK_SECS}s" --latency -H "authorization: Bearer $TOKEN" "$url" >"$WORK/wrk.out"
    local svs1 pg1 lb1
    svs1="$(cpu_of "$@")" pg1="$(pg_cpu)" lb1="$(cpu_of "$LB_PID")"
    grep -E '^Requests/sec|^ +(50|99)%' "$WORK/wrk.out" | sed 's/^/  | /'
    python3 "$BENCH_DIR/parse_wrk.py" "$RESULTS" "${label}_get" <"$WORK/wrk.out"
    python3 - "$RESULTS" "$label" "$hz" "$((svs1 - svs0))" "$((pg1 - pg0))" "$((lb1 - lb0))" \
        "$(awk '{print $1 + $2}' "$WORK/wrk.cpu")" "$WRK_SECS" <<'EOF'
import sys
results, label, hz, svs, pg, lb, wrk, secs = sys.argv[1:]
hz, secs = float(hz), float(secs)
parts = {"svs": float(svs) / hz, "pg": float(pg) / hz, "lb": float(lb) / hz, "wrk": float(wrk)}
print("  CPU seconds over the run: " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items())
      + f" (of {2 * secs:.0f} on 2 cores)")
with open(results, "a") as f:
    for k, v in parts.items():
        f.write(f"{label}_cpu_{k} {v / secs:.3f}\n")
EOF
}

# ---- one instance and the storage node ----
phase "svs serve 1, storage node sn-1, benchmark volumes"
start_instance 1
BASE="$BASE1"
python3 "$BENCH_DIR/nodes_setup.py" "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" "$WORK" 1
launch_storage_node 1 2000
SIGNED_IN="$(cd "$BENCH_DIR" && python3 -c '
import sys
from svs_api import Api
print(Api(sys.argv[1]).sign_in(sys.argv[2], sys.argv[3]))' "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD")"
for _ in $(seq 150); do
    curl -fs -H "authorization: $SIGNED_IN" "$BASE/media" | grep -q '"sn1-d0"' && break
    sleep 0.2
done
curl -fs -H "authorization: $SIGNED_IN" "$BASE/media" | grep -q '"sn1-d0"'
# Its slice server answers once it got its first registration's answer.
sleep 2
TOKEN="$(cd "$BENCH_DIR" && python3 svs_api.py setup "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD")"
echo "signed in; policy 'bench', volumes bench-get and bench-resize on sn1-d0"

phase "one instance behind HAProxy"
start_balancer "$BASE1"
phase "1 instance: 1. GET /volumes/bench-get through the balancer, ${WRK_SECS}s"
measure_get one "$SVS1_PID"
phase "1 instance: 2. $JOBS volume creations through the balancer"
(cd "$BENCH_DIR" && python3 job_rate.py "http://$LB" "$TOKEN" "$JOBS" one "$RESULTS")
phase "1 instance: 3. in-place resize -> Done, $RESIZES times"
(cd "$BENCH_DIR" && python3 resize_latency.py "$BASE1" "$TOKEN" bench-resize "$RESIZES" "$WORK/resize")
sed "s/^/one_/" "$WORK/resize" >>"$RESULTS"
rm -f "$WORK/resize"

# ---- three instances ----
phase "svs serve 2 and 3 on the same database; HAProxy in front of the three"
start_instance 2
start_instance 3
sleep 3
start_balancer "$BASE1" "$BASE2" "$BASE3"
phase "3 instances: 1. GET /volumes/bench-get through the balancer, ${WRK_SECS}s"
measure_get three "$SVS1_PID" "$SVS2_PID" "$SVS3_PID"
phase "3 instances: 2. $JOBS volume creations through the balancer"
(cd "$BENCH_DIR" && python3 job_rate.py "http://$LB" "$TOKEN" "$JOBS" three "$RESULTS")
for k in 1 2 3; do
    phase "3 instances: 3. in-place resize -> Done on instance $k, $RESIZES times"
    base_var="BASE$k"
    (cd "$BENCH_DIR" && python3 resize_latency.py "${!base_var}" "$TOKEN" bench-resize "$RESIZES" "$WORK/resize")
    sed "s/^/three_${k}_/" "$WORK/resize" >>"$RESULTS"
    rm -f "$WORK/resize"
done
for k in 1 2 3; do check_svs_log "svs serve $k" "$WORK/svs-$k.log"; done

# ---- summary ----
phase "summary ($(nproc) CPUs)"
python3 - "$RESULTS" <<'EOF'
import sys
r = {}
for line in open(sys.argv[1]):
    key, value = line.split()
    r[key] = float(value)
rows = [
    ("GET /volumes/{v}, 64 connections (req/s)", "get_rps", "{:,.0f}"),
    ("GET /volumes/{v} p99 (ms)", "get_p99_ms", "{:.2f}"),
    ("CPU of svs serve (cores)", "cpu_svs", "{:.2f}"),
    ("CPU of PostgreSQL (cores)", "cpu_pg", "{:.2f}"),
    ("CPU of HAProxy (cores)", "cpu_lb", "{:.2f}"),
    ("CPU of wrk (cores)", "cpu_wrk", "{:.2f}"),
    ("volume creations Done per second", "jobs_per_s", "{:,.0f}"),
    ("creations accepted per second", "accept_per_s", "{:,.0f}"),
]
print(f"{'figure':<44} {'1 instance':>11} {'3 instances':>12} {'3/1':>7}")
for label, key, fmt in rows:
    one, three = r[f"one_{key}"], r[f"three_{key}"]
    ratio = f"{three / one:>6.2f}x" if one else "      -"
    print(f"{label:<44} {fmt.format(one):>11} {fmt.format(three):>12} {ratio}")
print(f"\nin-place resize -> Done, median (ms): 1 instance {r['one_resize_median_ms']:.1f}; "
      + "3 instances: " + ", ".join(f"on {k} {r[f'three_{k}_resize_median_ms']:.1f}" for k in (1, 2, 3)))
ratio = r["three_get_rps"] / r["one_get_rps"]
print(f"issue 22's target: 3 instances >= 2x one instance's GET throughput: {ratio:.2f}x "
      f"({'met' if ratio >= 2 else 'not met'})")
print(f"issue 22's target: PostgreSQL resize -> Done median < 50 ms: "
      f"{max(r['one_resize_median_ms'], *(r[f'three_{k}_resize_median_ms'] for k in (1, 2, 3))):.1f} ms at most")
EOF
