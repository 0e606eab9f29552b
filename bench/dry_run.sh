#!/usr/bin/env bash
# svs dry-run benchmark: how long `PATCH /volumes/{v}?dryrun=true` (a
# resize's plan: in place, and with data movement, its moving slice's data
# measured), `POST /volumes?dryrun=true` (a creation's placement), and the
# plans of a drain (`PATCH /media/big?dryrun=true`, every volume on it) and
# of a rebalance of every medium take with BENCH_VOLUMES (default 3000)
# volumes in the store. Target: < 20 ms.
# Runs from a fresh clone on Debian as root:
#
#   bench/dry_run.sh
#
# svs (release build, SVS_LOG=warn) starts with m1 (20 GiB), m2 (16 GiB)
# and m3 (30 GiB) on nodes of their own; a 20 GiB filler takes m3 so that a
# mirrored 15 GiB "data" lands on m1 and m2 (32 MiB written to the copy on
# m2), then the filler goes and an 8 TiB medium is added through the API
# for the COUNT 1 GiB volumes (sparse slice files in a temporary
# directory). Each dry run is timed 50 times on one keep-alive connection;
# the median and best are printed. Exits 0 when the benchmark ran;
# everything is removed on exit.
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
make_work_dir svs-bench-dry-run
mkdir -p "$WORK/m1" "$WORK/m2" "$WORK/m3" "$WORK/big"
{
    echo "# svs benchmark: three small media (a movement plan), a big one added later"
    for m in "m1 n1 z1 20" "m2 n2 z2 16" "m3 n3 z3 30"; do
        set -- $m
        printf '[[media]]\nid = "%s"\nnode = "%s"\nzone = "%s"\ndirectory = "%s"\nsize_gib = %s\n' \
            "$1" "$2" "$3" "$WORK/$1" "$4"
    done
} >"$WORK/svs.toml"
start_svs
(cd "$BENCH_DIR" && python3 dry_run.py "$BASE" "$ADMIN_EMAIL" "$ADMIN_PASSWORD" "$COUNT" "$WORK")
check_svs_log
