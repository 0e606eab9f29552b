# Shared steps of the benchmark scripts (sourced, not run): stop processes,
# time phases, install qemu-utils (and nbdkit, libnbd-bin), build svs in
# release mode, start `svs serve` on the demo media in a work directory, start
# a reference NBD server on a free port, and check svs's log.
# The sourcing script sets BENCH_DIR, REPO, ADMIN_EMAIL and ADMIN_PASSWORD,
# then calls `stop_on_exit` with the variables of the processes it starts;
# these set WORK, SVS, SERVER_PID and BASE.

stop() {
    local pid="$1"
    if [[ -n "$pid" ]]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
}

WORK=""
SERVER_PID=""
STOP_ON_EXIT=(SERVER_PID)

# On exit (and on INT/TERM) stops the processes whose pids are in the
# variables named (SERVER_PID always) and removes $WORK (kept, for its logs,
# with BENCH_KEEP_WORK=1), keeping the exit code: `stop_on_exit [PID_VARIABLE...]`.
stop_on_exit() {
    STOP_ON_EXIT=(SERVER_PID "$@")
    trap bench_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}
bench_exit() {
    local rc=$? var
    for var in "${STOP_ON_EXIT[@]}"; do
        stop "${!var:-}"
    done
    if [[ -n "$WORK" && "${BENCH_KEEP_WORK:-0}" == 1 ]]; then
        echo "BENCH_KEEP_WORK=1: the work directory (logs, data) is kept: $WORK" >&2
    elif [[ -n "$WORK" ]]; then
        rm -rf "$WORK"
    fi
    # A bench's own cleanup, after its processes and $WORK are gone.
    if declare -F bench_exit_hook >/dev/null; then
        bench_exit_hook || true
    fi
    exit "$rc"
}

T0=$SECONDS
phase() { printf '\n== %s  [t=%ds]\n' "$*" "$((SECONDS - T0))"; }

# Installs Debian packages whose commands are missing: `apt_install PACKAGE...`.
apt_install() {
    echo "installing $*"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y --no-install-recommends "$@"; then
        apt-get update
        apt-get install -y --no-install-recommends "$@"
    fi
}

# cargo, python3 and qemu-utils (installed from Debian when missing).
require_tools() {
    command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
    command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }
    if ! command -v qemu-img >/dev/null || ! command -v qemu-nbd >/dev/null; then
        apt_install qemu-utils
    fi
}

# nbdkit (with its file plugin) and libnbd-bin (nbdcopy, nbdinfo), from
# Debian when missing.
require_nbd_tools() {
    if ! command -v nbdkit >/dev/null || ! nbdkit file --version >/dev/null 2>&1; then
        apt_install nbdkit
    fi
    if ! command -v nbdcopy >/dev/null || ! command -v nbdinfo >/dev/null; then
        apt_install libnbd-bin
    fi
}

# Cargo's target directory of the workspace.
target_dir() {
    (cd "$REPO" && cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
}

# Sets SVS to the release binary, or to BENCH_SVS_BIN when set (an svs
# binary built elsewhere, e.g. of another commit for a before/after run).
build_release() {
    cd "$REPO"
    if [[ -n "${BENCH_SVS_BIN:-}" ]]; then
        SVS="$BENCH_SVS_BIN"
        [[ -x "$SVS" ]] || { echo "BENCH_SVS_BIN is not an executable: $SVS" >&2; exit 1; }
        echo "svs binary: $SVS (BENCH_SVS_BIN, not built)"
        return
    fi
    cargo build --release
    SVS="$(target_dir)/release/svs"
    [[ -x "$SVS" ]] || { echo "build output missing: $SVS" >&2; exit 1; }
}

# Sets WORK to a new temporary directory named after $1.
make_work_dir() {
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")"
    echo "work directory: $WORK ($(findmnt -n -o FSTYPE -T "$WORK" || echo '?'))"
}

# Starts `svs serve` (SVS_LOG=warn, HTTP and NBD on free ports) in $WORK
# with $WORK/svs.toml, written for the demo media unless the caller wrote
# its own; sets SERVER_PID and BASE (its HTTP base URL).
start_svs() {
    if [[ ! -e "$WORK/svs.toml" ]]; then
        printf '# svs benchmark: defaults, embedded demo media\ndemo = true\n' >"$WORK/svs.toml"
    fi
    SVS_LOG=warn SVS_ADMIN_EMAIL="$ADMIN_EMAIL" SVS_ADMIN_PASSWORD="$ADMIN_PASSWORD" \
        "$SVS" serve --listen 127.0.0.1:0 --nbd-listen 127.0.0.1:0 \
        --config "$WORK/svs.toml" --data-dir "$WORK/data" \
        >"$WORK/svs.out" 2>"$WORK/svs.log" &
    SERVER_PID=$!
    BASE=""
    local line
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
}

# A port free now on ADDRESS: taken by the kernel, released, printed.
free_port() {
    python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$1"
}

# `launch_storage_node K GIB`: writes storage node sn-K's configuration (one
# medium sn<K>-d0 of GIB GiB under $WORK/sn-K, slice server on
# 127.0.0.(K+1), credential $WORK/sn-K.credential, registering with $BASE)
# and starts it in the background; its pid is in SN<K>_PID, its NBD server of
# volumes' fronts (`front_listen`) in SN<K>_FRONT, its log in $WORK/sn-K.log.
# With SLICE_DELAY_US set, the node registers (`slice_advertise`) a relay on
# its address that delays the slice connections by that much each way
# (bench/delay_relay.py; its pid in RELAY<K>_PID): fronts reach the node as
# over a longer network, its own copy in process as before.
launch_storage_node() {
    local k="$1" gib="$2"
    local ip="127.0.0.$((k + 1))"
    mkdir -p "$WORK/sn-$k/disk0"
    printf -v "SN${k}_FRONT" '%s' "$ip:$(free_port "$ip")"
    local front="SN${k}_FRONT"
    local slice="$ip:$(free_port "$ip")" advertise=""
    if [[ -n "${SLICE_DELAY_US:-}" ]]; then
        local relay_port
        relay_port="$(free_port "$ip")"
        python3 "$BENCH_DIR/delay_relay.py" "$ip" "$relay_port" "$ip" "${slice##*:}" "$SLICE_DELAY_US" &
        printf -v "RELAY${k}_PID" '%s' "$!"
        advertise="slice_advertise = \"$ip:$relay_port\""
    fi
    cat >"$WORK/sn-$k.toml" <<TOML
api = "$BASE"
node = "sn-$k"
credential_file = "$WORK/sn-$k.credential"
slice_listen = "$slice"
$advertise
front_listen = "${!front}"
state_dir = "$WORK/sn-$k/state"

[[media]]
name = "sn$k-d0"
directory = "$WORK/sn-$k/disk0"
size = "$gib GiB"
TOML
    SVS_LOG=warn "$SVS" storage-node --config "$WORK/sn-$k.toml" >"$WORK/sn-$k.log" 2>&1 &
    printf -v "SN${k}_PID" '%s' "$!"
}

# Starts a reference server on a free port: `start_ref LOG URI_PATH CMD...`,
# CMD containing the word PORT where the port goes. Sets REF_PID and REF_URI.
# The server listens on 127.0.0.1, or on REF_ADDRESS when set (CMD binds it
# itself: `REF_ADDRESS=127.0.0.2 start_ref ... -i 127.0.0.2 ...`).
start_ref() {
    local log="$1" path="$2" address="${REF_ADDRESS:-127.0.0.1}"
    shift 2
    REF_PID=""
    REF_URI=""
    local port arg cmd
    for _ in 1 2 3; do
        # A free port: taken by the kernel, released, then given to the
        # server (neither can report an ephemeral port); retried if lost.
        port="$(free_port "$address")"
        cmd=()
        for arg in "$@"; do
            cmd+=("${arg//PORT/$port}")
        done
        "${cmd[@]}" >"$log" 2>&1 &
        REF_PID=$!
        for _ in $(seq 100); do
            if ! kill -0 "$REF_PID" 2>/dev/null; then
                break
            fi
            if qemu-img info "nbd://$address:$port$path" >/dev/null 2>&1; then
                REF_URI="nbd://$address:$port$path"
                return 0
            fi
            sleep 0.1
        done
        stop "$REF_PID"
        REF_PID=""
    done
    echo "$1 did not start; its log:" >&2
    cat "$log" >&2
    exit 1
}

# Fails when a log (default $WORK/svs.log) has an ERROR line or a panic:
# `check_svs_log [NAME LOG [EXPECTED]]`. The level is matched as written (upper
# case), so a WARN line quoting an `error=` field does not count. EXPECTED, an
# extended regular expression, leaves out the ERROR lines the benchmark causes
# on purpose (a storage node it kills going Offline); never a panic.
check_svs_log() {
    local name="${1:-svs}" log="${2:-$WORK/svs.log}" expected="${3:-}" errors
    errors="$(grep -E '\bERROR\b|panicked' "$log" || true)"
    if [[ -n "$expected" && -n "$errors" ]]; then
        errors="$(grep -vE "$expected" <<<"$errors" || true)$(grep panicked <<<"$errors" || true)"
    fi
    if [[ -n "$errors" ]]; then
        echo "$name logged errors:" >&2
        head -20 <<<"$errors" >&2
        exit 1
    fi
}

# Sets PG_BIN to Debian's PostgreSQL binaries, installing `postgresql` when
# they are missing.
require_postgres() {
    PG_BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
    if [[ -z "$PG_BIN" || ! -x "$PG_BIN/initdb" ]]; then
        apt_install postgresql
        PG_BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
    fi
}

# Starts a PostgreSQL server of $PG_BIN for the run in $WORK/pg (initdb as
# the postgres user when root, on a free port of 127.0.0.1, reached over TCP
# with a password) with its durable defaults (fsync, synchronous_commit and
# full_page_writes on), and creates the database `svs`; sets PG_PID, PG_PORT
# and PG_URL. The caller lists PG_PID in `stop_on_exit`.
start_postgres() {
    local dir="$WORK/pg" password="bench-pg-$$"
    mkdir -p "$dir"
    echo "$password" >"$dir/password"
    local as_postgres=()
    if [[ "$(id -u)" == 0 ]]; then
        chown -R postgres:postgres "$dir"
        chmod 755 "$WORK"
        as_postgres=(runuser -u postgres --)
    fi
    "${as_postgres[@]}" "$PG_BIN/initdb" -U svs --auth-local=trust --auth-host=scram-sha-256 \
        --pwfile="$dir/password" -E UTF8 --locale=C -D "$dir/data" >"$WORK/initdb.log"
    PG_PORT="$(free_port 127.0.0.1)"
    "${as_postgres[@]}" "$PG_BIN/postgres" -D "$dir/data" -p "$PG_PORT" -h 127.0.0.1 -k "$dir" \
        -c max_connections=200 >"$WORK/postgres.log" 2>&1 &
    PG_PID=$!
    for _ in $(seq 100); do
        "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && break
        sleep 0.1
    done
    "$PG_BIN/pg_isready" -h 127.0.0.1 -p "$PG_PORT"
    "$PG_BIN/psql" -q "postgres://svs:$password@127.0.0.1:$PG_PORT/postgres" -c "CREATE DATABASE svs"
    PG_URL="postgres://svs:$password@127.0.0.1:$PG_PORT/svs"
}
