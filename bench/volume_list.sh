#!/usr/bin/env bash
# svs volume list benchmark: GET /volumes whole against one page (page,
# count), and GET /volumes/{volume} with 5 volumes and with many. Runs from a
# fresh clone on Debian as root:
#
#   bench/volume_list.sh
#
# svs (release build, SVS_LOG=warn) gets one 8 TiB medium (sparse slice files
# in a temporary directory); BENCH_VOLUMES (default 3000) volumes of 1 GiB
# are created through the API; each read is timed 50 times (the whole list
# 10 times) on one keep-alive connection and the median and best printed with
# the answer's size. A single volume's read should not grow with the number of
# volumes; a page of 100 should cost about a thirtieth of the whole list.
# Exits 0 when the benchmark ran; everything is removed on exit.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
COUNT="${BENCH_VOLUMES:-3000}"
ADMIN_EMAIL="bench@example.com"
ADMIN_PASSWORD="bench-password-$$"
# shellcheck source=bench/lib.sh
source "$BENCH_DIR/lib.sh"
stop_on_exit

require_tools
build_release
make_work_dir svs-bench-list
mkdir -p "$WORK/medium"
cat >"$WORK/svs.toml" <<TOML
# svs benchmark: one large medium (slice files are sparse)
[[media]]
id = "bench-medium"
node = "bench-node"
zone = "bench-zone"
directory = "$WORK/medium"
size_gib = 8192
TOML
start_svs
echo "creating $COUNT volumes"
(cd "$BENCH_DIR" && python3 volume_list.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" "$COUNT")
check_svs_log
