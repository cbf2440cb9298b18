#!/usr/bin/env bash
# Runs the whole test suite: unit tests, and integration tests that start their own
# redis-server processes (and a Prometheus, Ralph, an LRS, and a headless Chromium) on free ports, real HTTP receivers on loopback, and
# the WebAssembly plugins built from plugins/ (and the rules plugin's own unit tests); then builds the Debian package and checks it
# (scripts/check-package.sh), and builds and tests the Python and JavaScript example plugins
# (scripts/test-plugin-examples.sh). Ends with one "tests: N passed, N failed" line summing every
# test binary.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-redis.sh
scripts/ensure-prometheus.sh
scripts/ensure-plugin-languages.sh
scripts/ensure-ralph.sh
scripts/ensure-chromium.sh
scripts/ensure-standard-webhooks.sh
# The dashboard tests must then evaluate bbb-exporter's and hookrelay's queries in a real
# Prometheus, the xAPI tests send to a real LRS, the status page is tried in a real browser, and
# JSON callbacks are verified by the official Standard Webhooks libraries.
export TEST_REQUIRE_PROMETHEUS=1 TEST_REQUIRE_RALPH=1 TEST_REQUIRE_CHROMIUM=1 TEST_REQUIRE_STANDARD_WEBHOOKS=1
scripts/build-plugins.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --all-targets "$@" 2>&1 | tee "$log" || status=$?
# The plugins' own unit tests (the rules plugin's pattern language), on this machine's target.
(cd plugins && cargo test --quiet -p rules --target-dir target) 2>&1 | tee -a "$log" || status=$?
scripts/test-plugin-examples.sh 2>&1 | tee -a "$log" || status=$?
scripts/check-package.sh || status=$?
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed/) p += $(i-1); if ($(i) ~ /^failed/) f += $(i-1) } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
