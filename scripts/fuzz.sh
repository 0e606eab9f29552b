#!/usr/bin/env bash
# Fuzzes the API of a real `svs serve` with schemathesis (PyPI, pinned).
#
#   scripts/fuzz.sh [own|volumez|all]      (default: all)
#
#   own      every operation of svs's own document (/openapi.json), all checks
#   volumez  the Volumez reference document (../shared/reference/
#            volumez-api-subset.yaml beside the repository, read in place),
#            the operations svs implements, all checks, with the reviewed
#            departures of scripts/fuzz/volumez-allowlist.toml
#
# Environment:
#   FUZZ_EXAMPLES  test cases per operation and phase (default 40; the
#                  longer run: FUZZ_EXAMPLES=1000)
#   FUZZ_SEED      schemathesis seed, to replay a run
#   SVS_BIN        the svs binary (default: target/debug/svs, built here)
#   VOLUMEZ_REFERENCE  the reference document (default as above)
#
# Exits non-zero on any failure; reports land in target/fuzz-report/.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

mode=${1:-all}
case "$mode" in own | volumez | all) ;; *)
    echo "usage: $0 [own|volumez|all]" >&2
    exit 2
    ;;
esac

SCHEMATHESIS_VERSION=4.32.5
examples=${FUZZ_EXAMPLES:-40}
venv=$repo/target/fuzz-venv
reports=$repo/target/fuzz-report
reference=${VOLUMEZ_REFERENCE:-$repo/../shared/reference/volumez-api-subset.yaml}

if [ "$mode" = volumez ] && [ ! -f "$reference" ]; then
    echo "fuzz volumez: skipped, no reference document at $reference"
    exit 0
fi

# The venv is kept between runs; reinstalled when the pin changes.
if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -qF "$SCHEMATHESIS_VERSION"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"
fi

if [ -z "${SVS_BIN:-}" ]; then
    cargo build -q --bin svs
    SVS_BIN=$repo/target/debug/svs
fi

work=$(mktemp -d)
svs_pid=
cleanup() {
    if [ -n "$svs_pid" ]; then
        kill "$svs_pid" 2>/dev/null || true
        wait "$svs_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# A fresh service: random ports, a temporary data directory, the demo media.
admin_email=fuzz-admin@example.com
admin_password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
mkfifo "$work/stdout"
# (SVS_BIN names this script's binary, not a setting of the service.)
env -u SVS_BIN SVS_ADMIN_EMAIL=$admin_email SVS_ADMIN_PASSWORD=$admin_password \
    SVS_NBD_LISTEN=127.0.0.1:0 SVS_LOG=warn \
    "$SVS_BIN" serve --listen 127.0.0.1:0 --data-dir "$work/data" \
    >"$work/stdout" 2>"$work/svs.log" &
svs_pid=$!
exec 3<"$work/stdout"
read -r -t 60 line <&3 || {
    cat "$work/svs.log" >&2
    exit 1
}
base=${line#svs listening on }
# Keep draining stdout so the service never blocks on it.
cat <&3 >/dev/null &

mkdir -p "$reports"
export FUZZ_BASE=$base FUZZ_EMAIL=$admin_email FUZZ_PASSWORD=$admin_password
# Where POST /media may make its directory (scripts/fuzz/own.toml).
export FUZZ_MEDIA_DIR=$work/api-media
{ read -r token; read -r refresh_token; } < <("$venv/bin/python" "$repo/scripts/fuzz/seed.py")
[ -n "$token" ] && [ -n "$refresh_token" ] || { echo "fuzz: seeding failed" >&2; exit 1; }
# The Volumez refresh takes a real RefreshToken (own.toml); it does not
# rotate, so one token serves the whole run.
export FUZZ_REFRESH_TOKEN=$refresh_token

run() {
    local name=$1 location=$2 config=$3
    shift 3
    local args=(
        run "$location" --url "$base" -H "authorization: $token"
        --checks all --max-examples "$examples" --phases examples,coverage,fuzzing
        # One worker: with two, hypothesis parses lambdas' source on two
        # threads at once and CPython 3.11's ast module fails now and then
        # ("AST constructor recursion depth mismatch"), a tool error that
        # is not svs's.
        --request-timeout 30 --workers 1
        --report junit --report-junit-path "$reports/$name.xml"
    )
    [ -n "${FUZZ_SEED:-}" ] && args+=(--seed "$FUZZ_SEED")
    echo "fuzz $name: $location, $examples examples per operation and phase"
    local started=$SECONDS status=0
    "$venv/bin/schemathesis" --no-color --config-file "$config" "${args[@]}" "$@" \
        >"$reports/$name.log" 2>&1 || status=$?
    # The summary: operations, test cases, failures.
    sed -n '/= SUMMARY =/,$p' "$reports/$name.log"
    echo "fuzz $name: exit $status after $((SECONDS - started)) s (log: $reports/$name.log)"
    if [ "$status" != 0 ]; then
        sed -n '/= ERRORS =/,/= WARNINGS =/p' "$reports/$name.log" | cut -c1-300 | head -150
    fi
    return "$status"
}

status=0
if [ "$mode" = own ] || [ "$mode" = all ]; then
    run own "$base/openapi.json" scripts/fuzz/own.toml || status=1
fi
if [ "$mode" = volumez ] || [ "$mode" = all ]; then
    if [ -f "$reference" ]; then
        # The hook applies the allow-list to the reference as it is loaded.
        SCHEMATHESIS_HOOKS=volumez_hooks PYTHONPATH=$repo/scripts/fuzz \
            FUZZ_ALLOWLIST=$repo/scripts/fuzz/volumez-allowlist.toml \
            run volumez "$reference" scripts/fuzz/volumez.toml || status=1
    else
        echo "fuzz volumez: skipped, no reference document at $reference"
    fi
fi
if ! kill -0 "$svs_pid" 2>/dev/null; then
    echo "fuzz: svs serve died during the run" >&2
    cat "$work/svs.log" >&2
    status=1
fi
if grep -q "panicked" "$work/svs.log"; then
    echo "fuzz: svs logged a panic" >&2
    grep -B2 -A5 "panicked" "$work/svs.log" >&2
    status=1
fi
exit "$status"
