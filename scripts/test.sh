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
    $SUDO apt-get install -y -q qemu-utils
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

# Integration tests mostly wait on their own server processes, so run more
# of them at once than there are cores.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --locked -- --test-threads=8 2>&1 | tee "$log"

# One closing line for the whole run (cargo's last line is the doc tests').
awk '/^test result:/ { p += $4; f += $6 } END { printf "total: %d passed, %d failed\n", p, f }' "$log"

# The web console in real headless Chromium, against the svs binary cargo test
# just built (installs Debian's chromium and e2e/node_modules when missing).
SVS_BIN=target/debug/svs e2e/run.sh
