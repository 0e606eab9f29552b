#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests of every crate and the
# integration tests that run the real `svs serve`. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

# NBD tests drive the service with real clients from Debian's qemu-utils.
if ! command -v qemu-io >/dev/null || ! command -v qemu-img >/dev/null || ! command -v qemu-nbd >/dev/null; then
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo --preserve-env=DEBIAN_FRONTEND"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends qemu-utils
fi
# Multi-connection NBD tests copy with nbdcopy and inspect with nbdinfo,
# from Debian's libnbd-bin.
if ! command -v nbdcopy >/dev/null || ! command -v nbdinfo >/dev/null; then
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo --preserve-env=DEBIAN_FRONTEND"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends libnbd-bin
fi
# The README's quick start (tests/readme.rs runs its blocks) uses curl and jq.
if ! command -v jq >/dev/null || ! command -v curl >/dev/null; then
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo --preserve-env=DEBIAN_FRONTEND"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends jq curl
fi
# The host-side block path (crates/hostdev) makes and grows real ext4 and XFS
# filesystems on loop devices over a FUSE file: it needs xfsprogs beside
# e2fsprogs and util-linux (always there on Debian). As root, FUSE mounts go
# straight through mount(2), so fusermount3 (Debian's fuse3) is not needed.
if ! command -v mkfs.xfs >/dev/null || ! command -v xfs_growfs >/dev/null; then
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo --preserve-env=DEBIAN_FRONTEND"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends xfsprogs
fi

# The PostgreSQL store's tests start their own throwaway server from Debian's
# postgresql binaries (initdb, postgres) unless SVS_TEST_DATABASE_URL names one
# (crates/store/src/test_postgres.rs).
if [ -z "${SVS_TEST_DATABASE_URL:-}" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
    && ! command -v initdb >/dev/null; then
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo --preserve-env=DEBIAN_FRONTEND"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends postgresql
fi

# HAProxy, which tests/api/control/instances.rs runs in front of two instances with
# the repository's deploy/haproxy/svs.cfg.
if ! command -v haproxy >/dev/null && [ ! -x /usr/sbin/haproxy ]; then
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo --preserve-env=DEBIAN_FRONTEND"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends haproxy
fi

# Prometheus and promtool (Debian's prometheus): tests/deploy.rs tests the
# alert rules with promtool, tests/api/control/metrics.rs has a real Prometheus
# scrape svs.
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo --preserve-env=DEBIAN_FRONTEND"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends prometheus
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

# Integration tests mostly wait on their own server processes, so run more
# of them at once than there are cores.
log=$(mktemp)
fuzz_log=$(mktemp)
e2e_log=$(mktemp)
trap 'rm -f "$log" "$fuzz_log" "$e2e_log"' EXIT
cargo test --workspace --locked -- --test-threads=8 2>&1 | tee "$log"

# One closing line for the whole run (cargo's last line is the doc tests').
awk '/^test result:/ { p += $4; f += $6 } END { printf "total: %d passed, %d failed\n", p, f }' "$log"

# Fuzzing of the API against its document and the Volumez reference
# (schemathesis, scripts/fuzz.sh), beside the web console's end-to-end tests
# in real headless Chromium (installs Debian's chromium and e2e/node_modules
# when missing); both against the svs binary cargo test just built.
SVS_BIN=target/debug/svs scripts/fuzz.sh all >"$fuzz_log" 2>&1 &
fuzz_pid=$!
e2e_status=0
SVS_BIN=target/debug/svs e2e/run.sh 2>&1 | tee "$e2e_log" || e2e_status=$?
fuzz_status=0
wait "$fuzz_pid" || fuzz_status=$?
cat "$fuzz_log"
fuzz_failed=$(grep -c '^fuzz [a-z]*: exit [1-9]' "$fuzz_log" || true)
fuzz_passed=$(grep -c '^fuzz [a-z]*: exit 0' "$fuzz_log" || true)
echo "fuzz: $fuzz_passed passed, $fuzz_failed failed"

# The closing line: cargo tests, console tests and fuzzing runs together.
{ cat "$log"; cat "$e2e_log"; echo "fuzz: $fuzz_passed passed, $fuzz_failed failed"; } | awk '
    /^test result:/ { p += $4; f += $6 }
    /^(e2e|fuzz): [0-9]+ passed, [0-9]+ failed$/ { p += $2; f += $4 }
    END { printf "all: %d passed, %d failed\n", p, f }'
[ "$e2e_status" = 0 ] && [ "$fuzz_status" = 0 ]
