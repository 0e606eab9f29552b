#!/usr/bin/env bash
# svs over storage nodes: the data path of an attached volume whose copies
# are on storage nodes (issue 21), against a volume on svs serve's own medium,
# nbdkit's file plugin and qemu-nbd serving raw files, and an off-the-shelf
# mirror (qemu's quorum driver over nbdkit processes), driven by the same
# clients in the same run. Runs from a fresh clone on Debian as root:
#
#   bench/nodes.sh
#
# 1. svs serve (release build, SVS_LOG=warn) with one medium of its own
#    (`local-d0`, a directory in the temporary directory, on node `this-host`
#    in zone z0, exactly the size of one volume) and three `svs storage-node`
#    processes on 127.0.0.2, 127.0.0.3 and 127.0.0.4 (each with one medium, a
#    directory in the same temporary directory, zones z1-z3), over the slice
#    protocol in plain TCP (the service has no TLS here). Four volumes of
#    VOLUME_GIB GiB attached read-write to `this-host` (127.0.0.1) over NBD:
#    `svs` (one copy on local-d0: made first, asking for zone z0, it fills
#    that medium, so no copy of the others can land there), `nodes-1` (one
#    copy, on one node), `nodes-2` and `nodes-3` (every copy on its own node:
#    each write goes to two or three nodes). With BENCH_FRONTS=nodes (the
#    default; `fronts = "nodes"`) a node volume's front (stripes, copies,
#    the NBD export) runs on a storage node holding one of its copies:
#    client -> that node (NBD) -> every other copy's node (slice protocol);
#    its own copy through its own slice server, in process. With BENCH_FRONTS=serve it runs in svs serve:
#    client -> svs serve (NBD) -> storage node(s), one more process between.
# 2. nbdkit's file plugin and qemu-nbd serve raw files of the same size in
#    the same directory, as in bench/nbd.sh (see there for their exact flags).
# 3. The off-the-shelf mirrors, references of nodes-2 and nodes-3: three more
#    nbdkit processes, the same flags as the nbdkit above (buffered I/O
#    through the page cache, fdatasync only on FLUSH/FUA), one on each storage
#    node's address (127.0.0.2-4, free ports), each serving its own raw file
#    of the same size in the same directory, and qemu's quorum block driver in
#    the client over them: `quorum-2` over the first two, `quorum-3` over all
#    three (as nodes-2 and nodes-3 share the storage nodes), vote-threshold 1,
#    read-pattern fifo: every write goes to each child and completes when all
#    have, reads come from the first. qemu-img bench opens it as
#      json:{"driver":"raw","file":{"driver":"quorum","vote-threshold":1,
#        "read-pattern":"fifo","children":[{"driver":"nbd","server":
#        {"type":"inet","host":"127.0.0.2","port":"P1"}}, ...]}}
#    with `-f raw` like the others (raw over quorum over NBD, where the others
#    are raw over NBD). Why: on this CPU-bound machine the mirrored-write
#    target may be out of reach for any mirror; this one has no hop between
#    client and copies and servers that only pwrite, so quorum-N / nbdkit
#    is about the least a mirror of N copies costs here over one copy, and
#    nodes-N / quorum-N how svs compares with it. nbdcopy and the 4 readers
#    open one NBD export, not a quorum: "-" there. The data of all devices
#    is 17 x VOLUME_GIB (7 svs copies, 10 raw files), all of it read in every
#    round: the script warns when MemAvailable is less, as figures then
#    measure the disk for part (the page-cache residency lines show which).
#    The forwarding mirrors, `forward-2` and `forward-3`: qemu-storage-daemon
#    on 127.0.0.2 exporting NBD, its quorum (vote-threshold 1, fifo) over a
#    raw file of its own (aio=threads, buffered) and NBD connections to one
#    or two more nbdkit processes on 127.0.0.3-4 (own files, same flags):
#    client -> the forwarding process -> the other copies, the shape of a
#    front on a storage node, built from qemu's parts. forward-N / quorum-N
#    is what that hop costs here; nodes-N / forward-N compares svs with it.
# 4. bench/nbd_bench.py drives all ten with `qemu-img bench` (sequential
#    1 MiB at depth 1, random 4 KiB at depth 16) and the six NBD exports
#    with nbdcopy over 4 connections and 4 random readers, ROUNDS rounds
#    each, the order rotating, medians compared, devices compared at the end
#    (then every quorum child's file with qemu-nbd's). Besides its summary
#    (its PASS/FAIL column is bench/nbd.sh's target for local media,
#    information here) it prints each volume against `svs` (issue 21's mirrored random
#    write >= 0.8x a single copy's), beside it quorum-2 and quorum-3 against
#    nbdkit and nodes-2 / quorum-2, nodes-3 / quorum-3, and, per figure and
#    device (medians of the rounds), the CPU accounting:
#      - fan-out CPU per request: the process serving the export, svs
#        serve's for `svs` (and for node volumes with BENCH_FRONTS=serve),
#        the front's storage node's for node volumes (that process also
#        serves its own copy's slice; the other nodes' CPU is not in it);
#      - all-svs CPU per request: svs serve and every storage node together
#        (user + system from /proc/PID/stat; nbdkit, qemu-nbd: their own;
#        quorum-N: its N nbdkit processes together, and no fan-out CPU, "-":
#        its fan-out is in the client);
#      - client CPU per request: qemu-img bench / nbdcopy (getrusage of the
#        benchmark's children);
#      - busy %: (all-svs + client CPU) / (wall time x CPUs), beside
#        /proc/stat's busy % of the whole machine over the same run.
#    Last, the 4 KiB random write at depth 16 in one table (device, IOPS,
#    fan-out, all-svs and client CPU per request, busy %) and an ESTIMATE,
#    for each node volume, of the IOPS its fan-out point alone could
#    sustain on one core of its own (1e6 / its CPU microseconds per request).
#
# 5. BENCH_SLICE_DELAY_US=N puts bench/delay_relay.py between the fronts and
#    every storage node's slice server (the node registers the relay as its
#    slice_advertise) and between the client and every quorum child, each
#    delaying both directions by at least N microseconds: copies written
#    one after another pay the delay once per copy, copies sent at once
#    once (issue 51's "the copies really travel in parallel").
#
# Why: on a small machine the front, every storage node and the client
# share the same cores, so a mirrored write pays two nodes' CPU on those
# cores where real hosts give each node its own. When busy nears 100% the
# figures (issue 21's ratio among them) measure this machine's CPU, not the
# data path; the all-svs and client columns show how the CPU is shared, and
# quorum-N / nbdkit shows what mirroring costs here without svs.
#
# Exits 0 when the benchmark ran, whatever the figures; non-zero if something
# broke. Everything lives in a temporary directory (TMPDIR, default /tmp)
# removed on exit; every process is stopped on exit. Environment:
# BENCH_ROUNDS (default 5); BENCH_FRONTS (nodes or serve, default nodes);
# BENCH_SVS_BIN (an svs binary to run instead of
# building one); BENCH_VOLUME_GIB (default 1: the size of every device;
# the devices hold 17x it, all read in every round: it must fit in the page
# cache);
# NBD_BENCH_SCALE (default 1: the request counts of bench/nbd_bench.py are
# multiplied by it; 0.05 for a quick check of the script, not for figures).
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
ROUNDS="${BENCH_ROUNDS:-5}"
VOLUME_GIB="${BENCH_VOLUME_GIB:-1}"
VOLUME_BYTES=$((VOLUME_GIB << 30))
FRONTS="${BENCH_FRONTS:-nodes}"
[[ "$FRONTS" == nodes || "$FRONTS" == serve ]] || { echo "BENCH_FRONTS must be nodes or serve" >&2; exit 2; }
NODES=3
ADMIN_EMAIL="bench@example.com"
ADMIN_PASSWORD="bench-password-$$"

QNBD_PID=""
NBDKIT_PID=""
SN1_PID=""
SN2_PID=""
SN3_PID=""
QK1_PID=""
QK2_PID=""
QK3_PID=""
# shellcheck source=bench/lib.sh
source "$BENCH_DIR/lib.sh"
RELAY1_PID=""
RELAY2_PID=""
RELAY3_PID=""
QR1_PID=""
QR2_PID=""
QR3_PID=""
# BENCH_SLICE_DELAY_US (e.g. 500): the slice connections from fronts to the
# nodes go through a relay delaying them that much each way
# (bench/delay_relay.py), and so do the quorum children's NBD connections
# (the same relay in front of each nbdkit): copies sent one after another
# would pay it once per copy, copies sent at once once.
export SLICE_DELAY_US="${BENCH_SLICE_DELAY_US:-}"
stop_on_exit QNBD_PID NBDKIT_PID SN1_PID SN2_PID SN3_PID QK1_PID QK2_PID QK3_PID \
    RELAY1_PID RELAY2_PID RELAY3_PID QR1_PID QR2_PID QR3_PID FW2_PID FW3_PID

phase "prerequisites"
require_tools
require_nbd_tools

phase "build (cargo build --release)"
build_release
make_work_dir svs-nodes-bench

# ---- the control plane and the storage nodes ----
phase "start svs serve (one medium of its own) and $NODES storage nodes on 127.0.0.2-$((NODES + 1))"
# The local medium holds exactly one volume: once `svs` is on it, every copy
# of the node volumes has to go to the storage nodes.
mkdir -p "$WORK/local-d0"
cat >"$WORK/svs.toml" <<TOML
# svs benchmark: one medium of this host, the other copies on storage nodes
fronts = "$FRONTS"

[[nodes]]
name = "this-host"
zone = "z0"
address = "127.0.0.1"

[[media]]
id = "local-d0"
node = "this-host"
zone = "z0"
directory = "$WORK/local-d0"
size_gib = $VOLUME_GIB
TOML
start_svs
(cd "$BENCH_DIR" && python3 nodes_setup.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" "$WORK" "$NODES")
for k in $(seq "$NODES"); do
    launch_storage_node "$k" 8
done
# Every node's medium is Online once the node registered; svs serve connects
# to its slice server at the heartbeat after (every 3 s with the default
# storage_node_timeout), so one more period is waited for.
for _ in $(seq 300); do
    ready="$(cd "$BENCH_DIR" && python3 -c '
import sys
from svs_api import Api
api = Api(sys.argv[1]); api.sign_in(sys.argv[2], sys.argv[3])
print(sum(1 for m in api.request("GET", "/media") if m.get("state") == "Online" and m.get("node", "").startswith("sn-")))
' "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD")"
    [[ "$ready" == "$NODES" ]] && break
    sleep 0.2
done
[[ "$ready" == "$NODES" ]] || { echo "the storage nodes did not come up; logs:" >&2; tail -n 20 "$WORK"/sn-*.log >&2; exit 1; }
sleep 4
echo "$NODES storage nodes registered, their media Online"

phase "attach four ${VOLUME_GIB} GiB volumes (1 copy on local-d0; 1, 2 and 3 copies, each copy on its own node) to this-host"
# `attach VOLUME COPIES ZONE [nodes]`: zone z0 is local-d0's alone.
attach() {
    (cd "$BENCH_DIR" && NBD_BENCH_NODE=this-host NBD_BENCH_COPIES_ON="${4:-}" NBD_BENCH_ZONE="$3" \
        python3 nbd_attach.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" "$1" "$VOLUME_GIB" "$2")
}
URI_LOCAL="$(attach local-1 1 z0)"
URI_1="$(attach nodes-1 1 z1 nodes)"
URI_2="$(attach nodes-2 2 z1 nodes)"
URI_3="$(attach nodes-3 3 z1 nodes)"
# Where the copies landed: the figures mean nothing if a node volume's copy
# were on local-d0 or two copies on one node.
(cd "$BENCH_DIR" && python3 -c '
import sys
from svs_api import Api
api = Api(sys.argv[1]); api.sign_in(sys.argv[2], sys.argv[3])
for volume, copies in (("local-1", 1), ("nodes-1", 1), ("nodes-2", 2), ("nodes-3", 3)):
    slices = api.request("GET", f"/volumes/{volume}/slices")
    nodes = sorted({s["node"] for s in slices})
    local = all(s["media"] == "local-d0" for s in slices)
    ok = (local and copies == 1) if volume == "local-1" else (
        len(nodes) == copies and all(n.startswith("sn-") for n in nodes))
    media = sorted({s["media"] for s in slices})
    print(f"  {volume}: copies on nodes {nodes}, media {media}")
    if not ok:
        sys.exit(f"{volume}: copies not where the benchmark needs them: {slices}")
' "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD")
echo "exports: $URI_LOCAL $URI_1 $URI_2 $URI_3"
# The process that serves an export (its fan-out point): the storage node
# whose front address the URI names, else svs serve.
front_pid() {
    local address="${1#*://}"
    address="${address%%/*}"
    for k in $(seq "$NODES"); do
        local front="SN${k}_FRONT" pid="SN${k}_PID"
        if [[ "${!front}" == "$address" ]]; then
            echo "${!pid}"
            return
        fi
    done
    echo "$SERVER_PID"
}
if [[ "$FRONTS" == nodes ]]; then
    for uri in "$URI_1" "$URI_2" "$URI_3"; do
        [[ "$(front_pid "$uri")" != "$SERVER_PID" ]] || { echo "$uri: the front is not on a storage node" >&2; exit 1; }
    done
fi

# ---- the references ----
phase "start nbdkit (file plugin) and qemu-nbd on ${VOLUME_GIB} GiB raw files (same filesystem)"
NBDKIT_FILE="$WORK/nbdkit.raw"
QNBD_FILE="$WORK/qemu-nbd.raw"
truncate -s "$VOLUME_BYTES" "$NBDKIT_FILE" "$QNBD_FILE"
start_ref "$WORK/nbdkit.log" "" nbdkit --threads 16 -f -p PORT -i 127.0.0.1 --exit-with-parent \
    file "$NBDKIT_FILE"
NBDKIT_PID=$REF_PID
NBDKIT_URI=$REF_URI
start_ref "$WORK/qemu-nbd.log" /ref qemu-nbd -f raw -x ref -p PORT -b 127.0.0.1 --persistent \
    --shared=0 --cache=writeback --aio=threads "$QNBD_FILE"
QNBD_PID=$REF_PID
QNBD_URI=$REF_URI
echo "nbdkit: $NBDKIT_URI (pid $NBDKIT_PID); qemu-nbd: $QNBD_URI (pid $QNBD_PID)"

phase "start $NODES nbdkit (file plugin) on 127.0.0.2-$((NODES + 1)), ${VOLUME_GIB} GiB raw files each: the quorum mirrors' children"
# One per storage node address, flags as the nbdkit above: the same server,
# only the mirroring differs. QK<K>_PID, QK<K>_URI, QK<K>_FILE.
QUORUM_FILES=""
for k in $(seq "$NODES"); do
    ip="127.0.0.$((k + 1))"
    file="$WORK/quorum-child-$k.raw"
    truncate -s "$VOLUME_BYTES" "$file"
    REF_ADDRESS="$ip" start_ref "$WORK/quorum-child-$k.log" "" \
        nbdkit --threads 16 -f -p PORT -i "$ip" --exit-with-parent file "$file"
    printf -v "QK${k}_PID" '%s' "$REF_PID"
    printf -v "QK${k}_URI" '%s' "$REF_URI"
    if [[ -n "$SLICE_DELAY_US" ]]; then
        # The quorum child behind the same delay as the slice connections.
        child_port="${REF_URI##*:}"
        child_port="${child_port%%/*}"
        relay_port="$(free_port "$ip")"
        python3 "$BENCH_DIR/delay_relay.py" "$ip" "$relay_port" "$ip" "$child_port" "$SLICE_DELAY_US" &
        printf -v "QR${k}_PID" '%s' "$!"
        printf -v "QK${k}_URI" '%s' "nbd://$ip:$relay_port"
    fi
    QUORUM_FILES+=" $file"
    echo "  child $k: $REF_URI (pid $REF_PID), $file"
done
# `quorum_uri URI...`: qemu's quorum over the nbd://HOST:PORT exports, in
# raw as `qemu-img bench -f raw` opens every device (a bare quorum json is
# refused with -f raw). vote-threshold 1 and fifo: writes go to every child
# and complete when all have, reads come from the first: a plain mirror.
quorum_uri() {
    python3 -c '
import json, sys, urllib.parse
children = []
for uri in sys.argv[1:]:
    u = urllib.parse.urlsplit(uri)
    children.append({"driver": "nbd", "server": {"type": "inet", "host": u.hostname, "port": str(u.port)}})
quorum = {"driver": "quorum", "vote-threshold": 1, "read-pattern": "fifo", "children": children}
print("json:" + json.dumps({"driver": "raw", "file": quorum}, separators=(",", ":")))
' "$@"
}
QUORUM2_URI="$(quorum_uri "$QK1_URI" "$QK2_URI")"
QUORUM3_URI="$(quorum_uri "$QK1_URI" "$QK2_URI" "$QK3_URI")"
for uri in "$QUORUM2_URI" "$QUORUM3_URI"; do
    size="$(qemu-img info -f raw --output=json "$uri" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["virtual-size"])')"
    [[ "$size" == "$VOLUME_BYTES" ]] || { echo "$uri: size $size, expected $VOLUME_BYTES" >&2; exit 1; }
done
echo "quorum-2: $QUORUM2_URI"
echo "quorum-3: $QUORUM3_URI"

phase "start the forwarding mirrors: qemu-storage-daemon on 127.0.0.2 over a file of its own and nbdkit on 127.0.0.3(-4)"
# The off-the-shelf twin of a front on a storage node: one process serving
# NBD that writes its own copy (a raw file beside it, buffered, threads) and
# forwards every write to the other copies' servers over NBD (nbdkit, flags
# as above, on the other nodes' addresses, behind the delay relay when there
# is one), answering once all have: qemu's quorum driver in
# qemu-storage-daemon rather than in the client. forward-N / quorum-N is
# what the extra hop of any forwarding front costs here; nodes-N /
# forward-N how svs compares with a front built the same way.
# `forward_mirror COPIES`: FW<COPIES>_PID (the daemon), FW<COPIES>_URI,
# FW<COPIES>_CHILD_PIDS, and the files appended to FORWARD_FILES.
FORWARD_FILES=""
FW2_PID=""
FW3_PID=""
# `stop_also PID`: stopped on exit with the others.
stop_also() {
    printf -v "EXTRA${#STOP_ON_EXIT[@]}_PID" '%s' "$1"
    STOP_ON_EXIT+=("EXTRA${#STOP_ON_EXIT[@]}_PID")
}
forward_mirror() {
    local copies="$1" local_file="$WORK/forward-$1-local.raw" children='"own"' blockdevs=() k ip file
    truncate -s "$VOLUME_BYTES" "$local_file"
    FORWARD_FILES+=" $local_file"
    blockdevs+=(--blockdev "driver=file,node-name=own,filename=$local_file,aio=threads,cache.direct=off")
    local child_pids=""
    for k in $(seq 2 "$copies"); do
        ip="127.0.0.$((k + 1))"
        file="$WORK/forward-$copies-child-$k.raw"
        truncate -s "$VOLUME_BYTES" "$file"
        FORWARD_FILES+=" $file"
        REF_ADDRESS="$ip" start_ref "$WORK/forward-$copies-child-$k.log" "" \
            nbdkit --threads 16 -f -p PORT -i "$ip" --exit-with-parent file "$file"
        stop_also "$REF_PID"
        child_pids+=",$REF_PID"
        local host="$ip" port="${REF_URI##*:}"
        port="${port%%/*}"
        if [[ -n "$SLICE_DELAY_US" ]]; then
            local relay_port
            relay_port="$(free_port "$ip")"
            python3 "$BENCH_DIR/delay_relay.py" "$ip" "$relay_port" "$ip" "$port" "$SLICE_DELAY_US" &
            stop_also "$!"
            port="$relay_port"
        fi
        blockdevs+=(--blockdev "driver=nbd,node-name=c$k,server.type=inet,server.host=$host,server.port=$port")
        children+=",\"c$k\""
    done
    blockdevs+=(--blockdev "{\"driver\":\"quorum\",\"node-name\":\"mirror\",\"vote-threshold\":1,\"read-pattern\":\"fifo\",\"children\":[$children]}")
    REF_ADDRESS=127.0.0.2 start_ref "$WORK/forward-$copies.log" /mirror \
        qemu-storage-daemon "${blockdevs[@]}" \
        --nbd-server addr.type=inet,addr.host=127.0.0.2,addr.port=PORT \
        --export type=nbd,id=export,node-name=mirror,name=mirror,writable=on
    printf -v "FW${copies}_PID" '%s' "$REF_PID"
    printf -v "FW${copies}_URI" '%s' "$REF_URI"
    printf -v "FW${copies}_CHILD_PIDS" '%s' "$child_pids"
    echo "  forward-$copies: $REF_URI (pid $REF_PID; children$child_pids)"
}
forward_mirror 2
forward_mirror 3

# ---- figures ----
# Every figure reads or writes all devices: more data than memory evicts
# some of it, and those figures measure the disk.
data_gib=$(((1 + 1 + 2 + 3 + 2 + NODES + 5) * VOLUME_GIB))
avail_gib=$(($(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) >> 20))
if ((data_gib > avail_gib)); then
    echo "WARNING: the devices hold ${data_gib} GiB, MemAvailable is ${avail_gib} GiB: the page cache" \
        "cannot hold them all, so some figures measure the disk (see the residency lines);" \
        "a smaller BENCH_VOLUME_GIB avoids it" >&2
fi
phase "figures, $ROUNDS rounds per figure, rotating"
# Each svs device's PIDS: its fan-out point first, then every svs process
# (nbd_bench.py counts each once), whose CPU together is the cluster's.
ALL_SVS="$SERVER_PID"
for k in $(seq "$NODES"); do
    pid="SN${k}_PID"
    ALL_SVS+=",${!pid}"
done
# A quorum's PIDS: its nbdkit processes, none a fan-out point (the client
# fans out; nbd_bench.py knows a json: device).
NBD_BENCH_FILES="$(find "$WORK"/local-d0 "$WORK"/sn-* -name '*.slice' -printf '%p ') $NBDKIT_FILE $QNBD_FILE$QUORUM_FILES$FORWARD_FILES" \
    python3 "$BENCH_DIR/nbd_bench.py" "$VOLUME_BYTES" "$ROUNDS" \
    svs "$SERVER_PID,$ALL_SVS" "$URI_LOCAL" \
    nodes-1 "$(front_pid "$URI_1"),$ALL_SVS" "$URI_1" \
    nodes-2 "$(front_pid "$URI_2"),$ALL_SVS" "$URI_2" \
    nodes-3 "$(front_pid "$URI_3"),$ALL_SVS" "$URI_3" \
    nbdkit "$NBDKIT_PID" "$NBDKIT_URI" \
    qemu-nbd "$QNBD_PID" "$QNBD_URI" \
    quorum-2 "$QK1_PID,$QK2_PID" "$QUORUM2_URI" \
    quorum-3 "$QK1_PID,$QK2_PID,$QK3_PID" "$QUORUM3_URI" \
    forward-2 "$FW2_PID,$FW2_PID$FW2_CHILD_PIDS" "$FW2_URI" \
    forward-3 "$FW3_PID,$FW3_PID$FW3_CHILD_PIDS" "$FW3_URI"

# nbd_bench.py's compare reads a quorum's first child only (fifo): every
# child's file must hold what qemu-nbd's does, or the mirror dropped writes.
for file in $QUORUM_FILES; do
    cmp "$QNBD_FILE" "$file" || { echo "$file differs from $QNBD_FILE: a quorum child missed writes" >&2; exit 1; }
done
echo "every quorum child's file is identical to qemu-nbd's"

check_svs_log
for k in $(seq "$NODES"); do
    check_svs_log "storage node sn-$k" "$WORK/sn-$k.log"
done
phase "done ($(nproc) CPUs, $(findmnt -n -o FSTYPE -T "$WORK" || echo '?') at ${TMPDIR:-/tmp}); fronts = $FRONTS; svs = one copy on svs serve's own medium; fan-out CPU is the process serving the export (svs serve, or the front's storage node), all-svs CPU every svs process's; quorum-N = qemu's quorum over N nbdkit processes, fanned out in the client"
