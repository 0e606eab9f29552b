#!/usr/bin/env bash
# End-to-end tests of the web console in real headless Chromium. Installs what
# is missing (Debian's chromium, playwright-core from package-lock.json; no
# browser download), runs every e2e/*.test.mjs against SVS_BIN (default
# target/debug/svs) and prints "e2e: N passed, M failed". Exits non-zero on
# any failure. Arguments name the test files to run instead of all of them
# (`e2e/run.sh e2e/volume-page.test.mjs`).
set -euo pipefail
# Test files given relative to where we are called from; resolved before cd.
files=()
for f in "$@"; do files+=("$(realpath -m "$f")"); done
# SVS_BIN is relative to where we are called from; resolve it before cd.
SVS_BIN="$(realpath -m "${SVS_BIN:-$(dirname "$0")/../target/debug/svs}")"
export SVS_BIN
cd "$(dirname "$0")"

if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo --preserve-env=DEBIAN_FRONTEND"; fi
export DEBIAN_FRONTEND=noninteractive
if [ ! -x /usr/bin/chromium ]; then
    # Only what Chromium needs (recommends would pull ~100 more packages, a
    # systemd upgrade among them), plus one font family for readable
    # screenshots.
    pkgs="chromium fonts-liberation"
    $SUDO apt-get install -y -q --no-install-recommends $pkgs || { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends $pkgs; }
fi
if [ ! -d node_modules/playwright-core ]; then
    npm ci --no-audit --no-fund
fi
[ -x "$SVS_BIN" ] || (cd .. && cargo build --locked)

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
[ ${#files[@]} -gt 0 ] || files=(./*.test.mjs)
node --test --test-reporter=tap "${files[@]}" 2>&1 | tee "$log" || status=$?
awk '/^# pass / { p = $3 } /^# fail / { f = $3 } END { printf "e2e: %d passed, %d failed\n", p, f }' "$log"
if [ "$status" -ne 0 ] || ! grep -q '^# fail 0$' "$log"; then
    echo "e2e: FAILED (screenshots in e2e/artifacts/)" >&2
    exit 1
fi
