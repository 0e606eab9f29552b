#!/usr/bin/env bash
# svs NBD benchmark: the data path of an attached volume against nbdkit's
# file plugin and qemu-nbd serving raw files, driven by the same clients in
# the same run. Runs from a fresh clone on Debian as root:
#
#   bench/nbd.sh
#
# 1. svs (release build, SVS_LOG=warn, demo media) serves two 2 GiB volumes
#    attached read-write to node-a (127.0.0.1 in the demo topology) over NBD
#    on 127.0.0.1: `svs` (policy 0/0/0: one copy, one slice file) and
#    `svs-2-copies` (policy 1/0/0: two copies on two media, every write goes
#    to both, reads come from the first).
# 2. nbdkit's file plugin serves a 2 GiB raw file in the same temporary
#    directory (same filesystem as svs's slice files), over TCP on 127.0.0.1:
#      nbdkit --threads 16 -f -p PORT -i 127.0.0.1 --exit-with-parent \
#             file FILE
#    Its defaults (cache=default, fadvise=normal): buffered pread/pwrite
#    through the page cache on a pool of 16 threads, fdatasync only on
#    FLUSH/FUA, as svs does. nbdkit is the reference of the target.
# 3. qemu-nbd serves another 2 GiB raw file there, the same way:
#      qemu-nbd -f raw -x ref -p PORT -b 127.0.0.1 --persistent --shared=0 \
#               --cache=writeback --aio=threads FILE
#    (its defaults, spelled out, and any number of connections for the
#    multi-connection figures; --cache=none would add O_DIRECT, which svs
#    does not use: not comparable.)
# 4. All four are driven by `qemu-img bench -f raw` over nbd:// URIs (the
#    qemu NBD client, one connection, at most 16 requests in flight) and
#    by nbdcopy over 4 connections; same arguments for all; see
#    bench/nbd_bench.py for the figures:
#      sequential read and write, 1 MiB requests, depth 1: MB/s
#      random read and write, 4 KiB requests, depth 16: IOPS; offsets spread
#      by a step of 7919 * 4096 bytes (qemu-img bench has no random mode)
#      nbdcopy of the whole device to null: over 4 connections: MB/s
#      4 qemu-img bench random readers at once, 4 KiB, depth 16 each: IOPS
#    The whole device is pre-written first (reads hit data, not holes);
#    `sync` runs before every timed run; each figure runs ROUNDS times per
#    server, the order rotating, and the medians are compared (target: svs
#    with one copy at least 1.0x nbdkit in sequential read, random read and
#    random write, issue 14's figures; the rest, the 2-copy volume and
#    qemu-nbd are reported beside it). At the end the devices must be
#    identical.
#
# The summary (medians; the run of 2026-11-24 on 2 cores shared with other
# builds, load 7-20):
#
#   figure                                   svs      svs-2-copies  nbdkit  qemu-nbd  svs/nbdkit  svs/qemu-nbd  svs-2-copies/nbdkit  target              result
#   ---------------------------------------  -------  ------------  ------  --------  ----------  ------------  -------------------  ------------------  ------
#   sequential read, 1 MiB, depth 1 (MB/s)   2,491    2,603         3,869   1,176     0.64x       2.12x         0.67x                svs >= 1.0x nbdkit  FAIL
#   sequential write, 1 MiB, depth 1 (MB/s)  2,285    1,799         2,440   1,171     0.94x       1.95x         0.74x                (info)              -
#   random read, 4 KiB, depth 16 (IOPS)      74,850   73,529        55,188  34,880    1.36x       2.15x         1.33x                svs >= 1.0x nbdkit  PASS
#   random write, 4 KiB, depth 16 (IOPS)     26,082   13,298        23,375  18,149    1.12x       1.44x         0.57x                svs >= 1.0x nbdkit  PASS
#   nbdcopy read, 4 connections (MB/s)       2,258    2,311         2,786   1,992     0.81x       1.13x         0.83x                (info)              -
#   random read, 4 KiB, 4 x depth 16 (IOPS)  123,305  128,287       83,857  28,285    1.47x       4.36x         1.53x                (info)              -
#
# Before each figure the page-cache residency of every backing file is
# printed (fincore): a file partly evicted by other work on the machine
# makes that server's figure measure the disk.
#
# Reading the figures: the reads come from the page cache and the writes go
# to it, so they measure the servers' request paths over the same kernel
# file I/O, not the disk. The 4 KiB random writes are the exception in part:
# on kernels whose ext4 uses large folios, each 4 KiB write dirties a whole
# folio for the dirty-page accounting, so about 200 MiB of writes is counted
# as gigabytes of dirty data and all servers run at the background-writeback
# threshold. The rounds print the server CPU time per request of each run,
# which makes the cost of each request path easier to compare.
#
# Exits 0 when the benchmark ran, whatever the figures; non-zero if something
# broke. All data lives in a temporary directory (TMPDIR, default /tmp)
# removed on exit; every server is stopped on exit. Environment:
# BENCH_ROUNDS (default 5); BENCH_SVS_BIN (an svs binary to run instead of
# building one); BENCH_SVS_BEFORE (another svs binary, e.g. one built from an
# earlier commit: it serves a one-copy volume too, measured in the same
# rotation as `svs-before`, so that a change's cost on the data path reads
# as svs against svs-before). Takes about 6-8 minutes after the build.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
ROUNDS="${BENCH_ROUNDS:-5}"
VOLUME_GIB=2
VOLUME_BYTES=$((VOLUME_GIB << 30))
ADMIN_EMAIL="bench@example.com"
ADMIN_PASSWORD="bench-password-$$"

QNBD_PID=""
NBDKIT_PID=""
BEFORE_PID=""
# shellcheck source=bench/lib.sh
source "$BENCH_DIR/lib.sh"
stop_on_exit QNBD_PID NBDKIT_PID BEFORE_PID

# ---- prerequisites ----
phase "prerequisites"
require_tools
require_nbd_tools
echo "$(qemu-img --version | head -1); $(qemu-nbd --version | head -1); $(nbdkit --version);" \
    "$(nbdcopy --version | head -1); $(nproc) CPUs"

# ---- build ----
phase "build (cargo build --release)"
build_release

make_work_dir svs-nbd-bench

# ---- svs ----
phase "start svs serve (SVS_LOG=warn, demo media), attach two ${VOLUME_GIB} GiB volumes to node-a"
start_svs
SVS_URI="$(cd "$BENCH_DIR" &&
    python3 nbd_attach.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" nbd-bench "$VOLUME_GIB" 1)"
echo "svs export (one copy): $SVS_URI"
MIRROR_URI="$(cd "$BENCH_DIR" &&
    python3 nbd_attach.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" nbd-mirror "$VOLUME_GIB" 2)"
echo "svs export (two copies): $MIRROR_URI"
echo "slice files: $(find "$WORK/data" -name '*.slice' -printf '%p (%s bytes) ')"

# ---- svs-before (BENCH_SVS_BEFORE) ----
BEFORE_SERVER=()
if [[ -n "${BENCH_SVS_BEFORE:-}" ]]; then
    phase "start svs-before ($BENCH_SVS_BEFORE), its own data directory, one ${VOLUME_GIB} GiB volume"
    main=("$WORK" "$SERVER_PID" "$BASE" "$SVS")
    WORK="${main[0]}/before"
    SVS="$BENCH_SVS_BEFORE"
    mkdir -p "$WORK"
    start_svs
    BEFORE_PID=$SERVER_PID
    BEFORE_URI="$(cd "$BENCH_DIR" &&
        python3 nbd_attach.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" nbd-bench "$VOLUME_GIB" 1)"
    echo "svs-before export (one copy): $BEFORE_URI"
    WORK="${main[0]}" SERVER_PID="${main[1]}" BASE="${main[2]}" SVS="${main[3]}"
    BEFORE_SERVER=(svs-before "$BEFORE_PID" "$BEFORE_URI")
fi

# ---- nbdkit ----
phase "start nbdkit (file plugin) on a ${VOLUME_GIB} GiB raw file (same filesystem)"
NBDKIT_FILE="$WORK/nbdkit.raw"
truncate -s "$VOLUME_BYTES" "$NBDKIT_FILE"
start_ref "$WORK/nbdkit.log" "" nbdkit --threads 16 -f -p PORT -i 127.0.0.1 --exit-with-parent \
    file "$NBDKIT_FILE"
NBDKIT_PID=$REF_PID
NBDKIT_URI=$REF_URI
echo "nbdkit export: $NBDKIT_URI (pid $NBDKIT_PID)"

# ---- qemu-nbd ----
phase "start qemu-nbd on a ${VOLUME_GIB} GiB raw file (same filesystem)"
QNBD_FILE="$WORK/qemu-nbd.raw"
truncate -s "$VOLUME_BYTES" "$QNBD_FILE"
start_ref "$WORK/qemu-nbd.log" /ref qemu-nbd -f raw -x ref -p PORT -b 127.0.0.1 --persistent \
    --shared=0 --cache=writeback --aio=threads "$QNBD_FILE"
QNBD_PID=$REF_PID
QNBD_URI=$REF_URI
echo "qemu-nbd export: $QNBD_URI (pid $QNBD_PID)"

for uri in "$SVS_URI" "$MIRROR_URI" "$NBDKIT_URI" "$QNBD_URI"; do
    size="$(qemu-img info --output=json "$uri" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["virtual-size"])')"
    [[ "$size" == "$VOLUME_BYTES" ]] || { echo "$uri: size $size, expected $VOLUME_BYTES" >&2; exit 1; }
    # nbdcopy opens several connections only to a server that advertises
    # multi-conn.
    echo "$uri: can multi-conn: $(nbdinfo --can multi-conn "$uri" && echo yes || echo no)"
done

# ---- figures ----
phase "figures, $ROUNDS rounds per figure, rotating svs / svs-2-copies / nbdkit / qemu-nbd"
NBD_BENCH_FILES="$(find "$WORK" -name '*.slice' -printf '%p ') $NBDKIT_FILE $QNBD_FILE" \
    python3 "$BENCH_DIR/nbd_bench.py" "$VOLUME_BYTES" "$ROUNDS" \
    svs "$SERVER_PID" "$SVS_URI" \
    svs-2-copies "$SERVER_PID" "$MIRROR_URI" \
    "${BEFORE_SERVER[@]}" \
    nbdkit "$NBDKIT_PID" "$NBDKIT_URI" \
    qemu-nbd "$QNBD_PID" "$QNBD_URI"

check_svs_log
phase "done ($(nproc) CPUs, $(findmnt -n -o FSTYPE -T "$WORK" || echo '?') at ${TMPDIR:-/tmp})"
