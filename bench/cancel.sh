#!/usr/bin/env bash
# svs cancel benchmark: how long `DELETE /jobs/{job}` takes to return a
# volume to usable in the middle of a data movement of 10 GiB (issue 23's
# target: < 2 s). Runs from a fresh clone on Debian as root:
#
#   bench/cancel.sh
#
# svs (release build, SVS_LOG=warn) starts with m1 (40 GiB) and m2 (16 GiB)
# on nodes of their own; a mirrored 12 GiB volume "data" is created on them
# and BENCH_CANCEL_GIB (default 10) GiB of data written into its copy on m2;
# then m3 (64 GiB) is added through the API. Each of BENCH_ROUNDS (default
# 5) rounds resizes "data" to 20 GiB with data movement (its copy on m2 must
# move to m3, the one on m1 grows in place; copies at
# `movement_rate` BENCH_RATE, default "1 GiB"), waits until a third of the
# copy is done, cancels the job and times: the DELETE's answer; the job
# ending (Error, status Cancelled); and a snapshot, one of the nine
# operations a movement blocks, accepted again. Medians and the worst round
# are printed. Exits 0 when the benchmark ran; everything is removed on
# exit.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
GIB="${BENCH_CANCEL_GIB:-10}"
ROUNDS="${BENCH_ROUNDS:-5}"
RATE="${BENCH_RATE:-1 GiB}"
ADMIN_EMAIL="bench@example.com"
ADMIN_PASSWORD="bench-password-$$"
# shellcheck source=bench/lib.sh
source "$BENCH_DIR/lib.sh"
stop_on_exit

require_tools
build_release
make_work_dir svs-bench-cancel
mkdir -p "$WORK/m1" "$WORK/m2" "$WORK/m3"
{
    printf '# svs benchmark: two media; the target is added later\nmovement_rate = "%s"\n' "$RATE"
    for m in "m1 n1 z1 40" "m2 n2 z2 16"; do
        set -- $m
        printf '[[media]]\nid = "%s"\nnode = "%s"\nzone = "%s"\ndirectory = "%s"\nsize_gib = %s\n' \
            "$1" "$2" "$3" "$WORK/$1" "$4"
    done
} >"$WORK/svs.toml"
start_svs
(cd "$BENCH_DIR" && python3 cancel.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" "$WORK" "$GIB" "$ROUNDS")
check_svs_log
