#!/usr/bin/env bash
# svs snapshot benchmark (issue 10): snapshot creation time against volume
# size, and the write cost after a snapshot, through the API and over NBD.
# Runs from a fresh clone on Debian as root:
#
#   bench/snapshot.sh
#
# svs (release build, SVS_LOG=warn, demo media under a temporary data dir)
# serves volumes with one copy (policy 0/0/0), attached read-write to node-a
# (127.0.0.1 in the demo topology); `qemu-img bench -f raw` over their
# nbd:// URIs writes to them (the client bench/nbd.sh uses). See
# bench/snapshot_bench.py for the details of each figure:
#   1. snapshot creation -> job Done (POST, then GET /jobs/{id} every 1 ms),
#      a 1 GiB and a 64 GiB volume with the same 256 MiB written: median,
#      min, max of BENCH_SNAPSHOT_ROUNDS rounds (default 15), 64 KiB written
#      before each snapshot; snapshots are kept (round k has k - 1 older
#      ones). Reference: an in-place resize -> Done in the same rounds.
#   2. 4 KiB writes, depth 16, on a 1 GiB volume: (a) no snapshot, (b) right
#      after a snapshot, the first write to each 64 KiB chunk, (c) later
#      writes to chunks already saved: IOPS medians of BENCH_ROUNDS rounds
#      (default 7) and the ratio to (a). Snapshots are deleted before (a).
#   3. a clone of the 64 GiB volume (256 MiB of data) from its newest
#      snapshot -> job Done, BENCH_CLONE_ROUNDS rounds (default 5).
#
# Exits 0 when the benchmark ran, whatever the figures; non-zero if something
# broke. All data lives in a temporary directory (TMPDIR, default /tmp)
# removed on exit; the server is stopped on exit. Takes about 2 minutes
# after the build.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
ROUNDS="${BENCH_ROUNDS:-7}"
SNAPSHOT_ROUNDS="${BENCH_SNAPSHOT_ROUNDS:-15}"
ADMIN_EMAIL="bench@example.com"
ADMIN_PASSWORD="bench-password-$$"

# shellcheck source=bench/lib.sh
source "$BENCH_DIR/lib.sh"
stop_on_exit

# ---- prerequisites ----
phase "prerequisites"
require_tools
echo "$(qemu-img --version | head -1); $(nproc) CPUs"

# ---- build ----
phase "build (cargo build --release)"
build_release

make_work_dir svs-snapshot-bench

# ---- svs ----
phase "start svs serve (SVS_LOG=warn, demo media)"
start_svs

phase "figures: $SNAPSHOT_ROUNDS creation rounds, $ROUNDS write-cost rounds"
(cd "$BENCH_DIR" && python3 snapshot_bench.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" \
    "$SERVER_PID" "$WORK/data" "$SNAPSHOT_ROUNDS" "$ROUNDS")

check_svs_log
phase "done ($(nproc) CPUs, $(findmnt -n -o FSTYPE -T "$WORK" || echo '?') at ${TMPDIR:-/tmp})"
