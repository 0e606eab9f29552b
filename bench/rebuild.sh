#!/usr/bin/env bash
# Rebuild of a lost copy (issue 21): a mirrored volume whose two copies are on
# two storage nodes loses one (its node SIGKILLed); the recovery job rebuilds
# it on a third node, node to node through svs serve. Its throughput against
# `cp` + fsync of a file of the same size between two directories of the same
# filesystem, in the same run. Runs from a fresh clone on Debian as root:
#
#   bench/rebuild.sh
#
# 1. svs serve (release build, SVS_LOG=warn, `storage_nodes_only = true`,
#    `movement_rate = 0`: unthrottled, `storage_node_timeout = 5s`) and two
#    `svs storage-node` processes, sn-1 and sn-2 on 127.0.0.2 and 127.0.0.3
#    (one medium each, a directory in the temporary directory), plain TCP.
# 2. A volume `rebuilt` of ceil(DATA_MIB / 1024) GiB with two copies, one per
#    node (resiliency node 1), attached to `this-host` (127.0.0.1) over NBD;
#    a file of DATA_MIB MiB of random bytes (the cp source, cp-src/data) is
#    written to its start with `qemu-img convert -n` (the rest of the
#    volume, if any, is a hole), and read back with `qemu-img compare`.
# 3. ROUNDS rounds; in round R:
#      - storage node sn-(R+2) starts on 127.0.0.(R+3) (a fresh, empty node:
#        the rebuild target; the volume's copies are on sn-1 and sn-(R+1));
#      - cp: `cp cp-src/data cp-dst/data && sync cp-dst/data` (fsync of the
#        output: a rebuilt copy is durable before its job is Done), timed;
#      - rebuild: sn-(R+1) is SIGKILLed; once the control plane has it
#        Offline and its copy Lost, POST /volumes/rebuilt/recover and its
#        job polled every 5 ms until Done. The figure is the job's own time
#        (starttime to endtime); the copy is rebuilt from sn-1 onto
#        sn-(R+2), the only live node without a copy (never onto the killed
#        node: this measures a fresh copy, not a resync in place);
#      - check: the rebuilt slice file is byte-identical to sn-1's (cmp) and
#        the volume reads back as the source file (qemu-img compare).
#    cp and rebuild alternate which goes first. Before each timed run `sync`
#    runs (no dirty data of earlier steps is written back inside it) and,
#    with BENCH_DROP_CACHES=1, the page cache is dropped
#    (/proc/sys/vm/drop_caches = 3). By default caches are NOT dropped, for
#    either: both sources (sn-1's slice file, written through NBD, and
#    cp-src/data) were written in step 2 and are normally still cached;
#    fincore prints how much of each is cached before each timed run (of
#    the slice file's whole size: its holes, when the data does not fill
#    the volume, are cached as zero pages once something reads them).
#    Before each timed run, too, a file of BENCH_WARM_MIB MiB (default 1536)
#    is written in the temporary directory and deleted, so that both sides
#    write into memory the guest has just freed. Why: this machine is a VM
#    whose balloon reports freed guest memory to the host (virtio free page
#    reporting), and a write into a page the host took back costs several
#    times more (a first touch on the host). cp's output reuses the pages
#    of the file deleted just before it, where a rebuild's target node wrote
#    into pages freed long before: 1.3-1.8 s of the target node's CPU per
#    512 MiB went into copying into the page cache, 0.3 s after the warm-up
#    (docs/benchmarks.md). BENCH_WARM_MIB=0 leaves memory as it is.
# 4. bench/rebuild_bench.py prints every round (with the CPU seconds of svs
#    serve, the source node and the target node during the rebuild, and of
#    cp + sync) and the medians in MB/s, 10^6 bytes per second of DATA_MIB
#    MiB, and their ratio (the target: rebuild >= 0.8x cp + fsync).
#
# Exits 0 when the benchmark ran, whatever the figures; non-zero if something
# broke. Everything lives in a temporary directory (TMPDIR, default /tmp)
# removed on exit; every process is stopped on exit. Environment:
# BENCH_REBUILD_MIB (default 512: the data written, MiB), BENCH_ROUNDS
# (default 3), BENCH_DROP_CACHES (default 0; 1: drop the page cache before
# every timed run), BENCH_WARM_MIB (default 1536; 0: no warm-up),
# BENCH_SVS_BIN (an svs binary to run instead of building
# one), BENCH_RAM_DISK (default 0; 1: everything, cp's files and every node's
# medium, on an ext4 file system made for the run on a loop device over a
# file in /dev/shm, unmounted and removed on exit: a disk as fast as memory,
# so that the figures are svs's CPU and pipeline and not this VM's disk of
# the day; it takes about (DATA_MIB x (ROUNDS + 6) + BENCH_WARM_MIB) MiB of
# memory, twice that with the loop device's page cache).
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
DATA_MIB="${BENCH_REBUILD_MIB:-512}"
ROUNDS="${BENCH_ROUNDS:-3}"
DROP_CACHES="${BENCH_DROP_CACHES:-0}"
WARM_MIB="${BENCH_WARM_MIB:-1536}"
RAM_DISK="${BENCH_RAM_DISK:-0}"
[[ "$DATA_MIB" =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_REBUILD_MIB must be a positive integer (MiB)" >&2; exit 1; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_ROUNDS must be a positive integer" >&2; exit 1; }
[[ "$DROP_CACHES" == 0 || "$DROP_CACHES" == 1 ]] || { echo "BENCH_DROP_CACHES must be 0 or 1" >&2; exit 1; }
[[ "$RAM_DISK" == 0 || "$RAM_DISK" == 1 ]] || { echo "BENCH_RAM_DISK must be 0 or 1" >&2; exit 1; }
VOLUME_GIB=$(((DATA_MIB + 1023) / 1024))
DATA_BYTES=$((DATA_MIB << 20))
VOLUME=rebuilt
# sn-1 and sn-2 hold the first two copies; each round adds the node it
# rebuilds onto.
NODES=$((ROUNDS + 2))
ADMIN_EMAIL="bench@example.com"
ADMIN_PASSWORD="bench-password-$$"

NODE_PID_VARS=()
for k in $(seq "$NODES"); do
    printf -v "SN${k}_PID" '%s' ""
    NODE_PID_VARS+=("SN${k}_PID")
done
# shellcheck source=bench/lib.sh
source "$BENCH_DIR/lib.sh"
stop_on_exit "${NODE_PID_VARS[@]}"

phase "prerequisites"
require_tools

phase "build (cargo build --release)"
build_release

RAM_IMAGE=""
RAM_MOUNT=""
bench_exit_hook() {
    if [[ -n "$RAM_MOUNT" ]]; then
        umount "$RAM_MOUNT" 2>/dev/null
        rmdir "$RAM_MOUNT"
    fi
    if [[ -n "$RAM_IMAGE" ]]; then
        rm -f "$RAM_IMAGE"
    fi
}
if [[ "$RAM_DISK" == 1 ]]; then
    RAM_IMAGE="$(mktemp /dev/shm/svs-rebuild-ext4.XXXXXX)"
    truncate -s "$((DATA_MIB * (ROUNDS + 6) + WARM_MIB + 256))M" "$RAM_IMAGE"
    mkfs.ext4 -q -F "$RAM_IMAGE"
    RAM_MOUNT="$(mktemp -d "${TMPDIR:-/tmp}/svs-rebuild-ram.XXXXXX")"
    mount -o loop "$RAM_IMAGE" "$RAM_MOUNT"
    export TMPDIR="$RAM_MOUNT"
    echo "BENCH_RAM_DISK=1: ext4 on a loop device over $RAM_IMAGE, mounted at $RAM_MOUNT"
fi
make_work_dir svs-rebuild-bench

api() {
    (cd "$BENCH_DIR" && python3 rebuild_bench.py "$1" "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" "${@:2}")
}

# `start_node K`: storage node sn-K on 127.0.0.(K+1), one medium; waits until
# it and its medium are Online, then one heartbeat period more (svs serve
# connects to its slice server at the heartbeat after it registered).
start_node() {
    local k="$1" pid_var="SN${1}_PID"
    launch_storage_node "$k" "$((VOLUME_GIB + 1))"
    if ! api wait-online "sn-$k"; then
        echo "storage node sn-$k did not come up; its log:" >&2
        tail -n 20 "$WORK/sn-$k.log" >&2
        exit 1
    fi
    sleep 2
    echo "storage node sn-$k on 127.0.0.$((k + 1)) (pid ${!pid_var}), its medium Online"
}

# The one slice file of the volume on sn-K's medium.
slice_file() {
    local files
    mapfile -t files < <(find "$WORK/sn-$1/disk0" -name '*.slice' -type f)
    if [[ "${#files[@]}" != 1 ]]; then
        echo "expected one slice file on sn-$1, found: ${files[*]:-none}" >&2
        exit 1
    fi
    echo "${files[0]}"
}

# Before every timed run: no dirty data left to write back inside it, and
# the same page-cache conditions for both kinds of run.
settle() {
    if ((WARM_MIB > 0)); then
        dd if=/dev/zero of="$WORK/warm-up" bs=1M count="$WARM_MIB" status=none
        rm -f "$WORK/warm-up"
    fi
    sync
    if [[ "$DROP_CACHES" == 1 ]]; then
        echo 3 >/proc/sys/vm/drop_caches
    fi
    echo "    page cache: $(fincore --bytes --noheadings --output RES,SIZE,FILE "$@" |
        awk '{ printf "%s%s %d MiB cached (file size %d MiB)", sep, $3, $1 / 1048576, $2 / 1048576; sep = ", " }' |
        sed "s|$WORK/||g")"
}

phase "start svs serve (storage_nodes_only, movement_rate 0) and storage nodes sn-1, sn-2"
cat >"$WORK/svs.toml" <<TOML
# svs benchmark: every copy on storage nodes, rebuilds unthrottled
storage_nodes_only = true
movement_rate = "0"
storage_node_timeout = "5s"
TOML
start_svs
(cd "$BENCH_DIR" && python3 nodes_setup.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" "$WORK" "$NODES")
start_node 1
start_node 2

phase "a ${VOLUME_GIB} GiB volume with two copies (sn-1, sn-2), ${DATA_MIB} MiB of random data written through NBD"
URI="$(cd "$BENCH_DIR" && NBD_BENCH_NODE=this-host NBD_BENCH_COPIES_ON=nodes \
    python3 nbd_attach.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" "$VOLUME" "$VOLUME_GIB" 2)"
copies="$(api copies "$VOLUME")"
[[ "$copies" == "sn-1 sn-2" ]] || { echo "copies not on sn-1 and sn-2: $copies" >&2; exit 1; }
mkdir -p "$WORK/cp-src" "$WORK/cp-dst"
SRC="$WORK/cp-src/data"
DST="$WORK/cp-dst/data"
head -c "$DATA_BYTES" /dev/urandom >"$SRC"
t0=$SECONDS
qemu-img convert -n -f raw -O raw "$SRC" "$URI"
qemu-img compare -f raw -F raw "$URI" "$SRC"
sync
echo "written and read back in $((SECONDS - t0))s: $URI"

RESULTS="$WORK/results"
: >"$RESULTS"
time_cp() {
    rm -f "$DST"
    settle "$SRC"
    (cd "$BENCH_DIR" && python3 rebuild_bench.py cp "$SRC" "$DST") | tee -a "$RESULTS"
    # The same bytes over TCP to the target node's address, as a rebuild
    # carries them (no verification): the transport's own cost.
    rm -f "$DST"
    settle "$SRC"
    (cd "$BENCH_DIR" && python3 rebuild_bench.py net "$SRC" "$DST" "$1") | tee -a "$RESULTS"
}
# `time_rebuild R`: loses sn-(R+1)'s copy, rebuilds it on sn-(R+2).
time_rebuild() {
    local lost=$(($1 + 1)) target=$(($1 + 2)) lost_pid_var="SN$(($1 + 1))_PID" target_pid_var="SN$(($1 + 2))_PID"
    local lost_pid="${!lost_pid_var}"
    echo "    SIGKILL sn-$lost (pid $lost_pid)"
    kill -KILL "$lost_pid"
    wait "$lost_pid" 2>/dev/null || true
    printf -v "$lost_pid_var" '%s' ""
    api wait-lost "$VOLUME" "sn-$lost"
    local source_file rebuilt_file
    source_file="$(slice_file 1)"
    settle "$source_file"
    api rebuild "$VOLUME" "sn-$target" "$SERVER_PID" "$SN1_PID" "${!target_pid_var}" | tee -a "$RESULTS"
    rebuilt_file="$(slice_file "$target")"
    echo "    rebuilt copy: $(du -h --apparent-size "$rebuilt_file" | cut -f1) apparent, $(du -h "$rebuilt_file" | cut -f1) allocated"
    cmp "$source_file" "$rebuilt_file"
    qemu-img compare -f raw -F raw "$URI" "$SRC" >/dev/null
    echo "    sn-$target's copy is identical to sn-1's; the volume reads back as written"
}

for r in $(seq "$ROUNDS"); do
    phase "round $r of $ROUNDS: rebuild sn-$((r + 1))'s copy onto sn-$((r + 2)), and cp + fsync"
    start_node $((r + 2))
    copies="$(api copies "$VOLUME")"
    [[ "$copies" == "sn-1 sn-$((r + 1))" ]] || { echo "copies not on sn-1 and sn-$((r + 1)): $copies" >&2; exit 1; }
    if ((r % 2)); then
        time_cp "127.0.0.$((r + 3))"
        time_rebuild "$r"
    else
        time_rebuild "$r"
        time_cp "127.0.0.$((r + 3))"
    fi
done

(cd "$BENCH_DIR" && python3 rebuild_bench.py summary "$DATA_BYTES" "$RESULTS")
# Caused on purpose: the nodes this script kills going Offline. (Reconciler
# passes that meet a killed node are WARN lines: they try again.)
EXPECTED_ERRORS='ERROR svs::control::reconcile::storage_nodes: storage node is Offline'
echo "svs serve's log: $(grep -cE "$EXPECTED_ERRORS" "$WORK/svs.log" || true) ERROR line(s) caused by the killed nodes"
check_svs_log svs "$WORK/svs.log" "$EXPECTED_ERRORS"
for k in $(seq "$NODES"); do
    check_svs_log "storage node sn-$k" "$WORK/sn-$k.log"
done
phase "done ($(nproc) CPUs, $(findmnt -n -o FSTYPE -T "$WORK" || echo '?') at ${TMPDIR:-/tmp}; page cache $([[ "$DROP_CACHES" == 1 ]] && echo dropped || echo not dropped) before each timed run)"
