#!/usr/bin/env bash
# svs NBD benchmark: the data path of an attached volume against qemu-nbd
# serving a raw file, driven by the same client in the same run. Runs from a
# fresh clone on Debian as root:
#
#   bench/nbd.sh
#
# 1. svs (release build, SVS_LOG=warn, demo media) serves a 4 GiB volume
#    (policy 0/0/0: one copy, one slice file) attached read-write to node-a
#    (127.0.0.1 in the demo topology) over NBD on 127.0.0.1.
# 2. qemu-nbd serves a 4 GiB raw file in the same temporary directory (same
#    filesystem as svs's slice file), also over TCP on 127.0.0.1:
#      qemu-nbd -f raw -x ref -p PORT -b 127.0.0.1 --persistent \
#               --cache=writeback --aio=threads FILE
#    These are qemu-nbd's defaults, spelled out. They match what svs does:
#    buffered pread/pwrite on the slice file through the page cache, on a
#    pool of threads, with fdatasync only on FLUSH/FUA. (--cache=none would
#    add O_DIRECT, which svs does not use: not comparable.)
# 3. Both are driven by `qemu-img bench -f raw` over nbd:// URIs (the qemu
#    NBD client, one connection, at most 16 requests in flight), same
#    arguments for both; see bench/nbd_bench.py for the figures:
#      sequential read and write, 1 MiB requests, depth 1: MB/s
#      random read and write, 4 KiB requests, depth 16: IOPS; offsets spread
#      by a step of 7919 * 4096 bytes (qemu-img bench has no random mode)
#    The whole device is pre-written first (reads hit data, not holes);
#    `sync` runs before every timed run; each figure runs ROUNDS times per
#    server, alternating, and the medians are compared (target: svs at
#    least 1.0x qemu-nbd). At the end the two devices must be identical.
#
# Reading the figures: the reads come from the page cache and the writes go
# to it, so they measure the servers' request paths over the same kernel
# file I/O, not the disk. The 4 KiB random writes are the exception in part:
# on kernels whose ext4 uses large folios, each 4 KiB write dirties a whole
# folio for the dirty-page accounting, so about 200 MiB of writes is counted
# as gigabytes of dirty data and both servers run at the background-writeback
# threshold. The table prints the server CPU time per request of each run,
# which makes the cost of each request path easier to compare.
#
# Exits 0 when the benchmark ran, whatever the figures; non-zero if something
# broke. All data lives in a temporary directory (TMPDIR, default /tmp)
# removed on exit; both servers are stopped on exit. Environment:
# BENCH_ROUNDS (default 3). Takes about 2-3 minutes after the build.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
ROUNDS="${BENCH_ROUNDS:-3}"
VOLUME_GIB=4
VOLUME_BYTES=$((VOLUME_GIB << 30))
ADMIN_EMAIL="bench@example.com"
ADMIN_PASSWORD="bench-password-$$"

WORK=""
SERVER_PID=""
QNBD_PID=""
# shellcheck source=bench/lib.sh
source "$BENCH_DIR/lib.sh"
cleanup() {
    local rc=$?
    stop "$QNBD_PID"
    stop "$SERVER_PID"
    if [[ -n "$WORK" ]]; then
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- prerequisites ----
phase "prerequisites"
require_tools
echo "$(qemu-img --version | head -1); $(qemu-nbd --version | head -1); $(nproc) CPUs"

# ---- build ----
phase "build (cargo build --release)"
build_release

make_work_dir svs-nbd-bench

# ---- svs ----
phase "start svs serve (SVS_LOG=warn, demo media), attach a ${VOLUME_GIB} GiB volume to node-a"
start_svs
SVS_URI="$(cd "$BENCH_DIR" &&
    python3 nbd_attach.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" nbd-bench "$VOLUME_GIB")"
echo "svs export: $SVS_URI"
echo "slice files: $(find "$WORK/data" -name '*.slice' -printf '%p (%s bytes) ')"

# ---- qemu-nbd ----
phase "start qemu-nbd on a ${VOLUME_GIB} GiB raw file (same filesystem)"
REF_FILE="$WORK/ref.raw"
truncate -s "$VOLUME_BYTES" "$REF_FILE"
REF_URI=""
for _ in 1 2 3; do
    # A free port: taken by the kernel, released, then given to qemu-nbd
    # (which has no way to report an ephemeral port); retried if lost.
    PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    qemu-nbd -f raw -x ref -p "$PORT" -b 127.0.0.1 --persistent \
        --cache=writeback --aio=threads "$REF_FILE" >"$WORK/qemu-nbd.log" 2>&1 &
    QNBD_PID=$!
    for _ in $(seq 100); do
        if ! kill -0 "$QNBD_PID" 2>/dev/null; then
            break
        fi
        if qemu-img info "nbd://127.0.0.1:$PORT/ref" >/dev/null 2>&1; then
            REF_URI="nbd://127.0.0.1:$PORT/ref"
            break
        fi
        sleep 0.1
    done
    [[ -n "$REF_URI" ]] && break
    stop "$QNBD_PID"
    QNBD_PID=""
done
if [[ -z "$REF_URI" ]]; then
    echo "qemu-nbd did not start; its log:" >&2
    cat "$WORK/qemu-nbd.log" >&2
    exit 1
fi
echo "qemu-nbd export: $REF_URI (pid $QNBD_PID)"
for uri in "$SVS_URI" "$REF_URI"; do
    size="$(qemu-img info --output=json "$uri" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["virtual-size"])')"
    [[ "$size" == "$VOLUME_BYTES" ]] || { echo "$uri: size $size, expected $VOLUME_BYTES" >&2; exit 1; }
done

# ---- figures ----
phase "qemu-img bench, $ROUNDS rounds per figure, alternating svs / qemu-nbd"
python3 "$BENCH_DIR/nbd_bench.py" "$SERVER_PID" "$SVS_URI" "$QNBD_PID" "$REF_URI" \
    "$VOLUME_BYTES" "$ROUNDS"

check_svs_log
phase "done ($(nproc) CPUs, $(findmnt -n -o FSTYPE -T "$WORK" || echo '?') at ${TMPDIR:-/tmp})"
