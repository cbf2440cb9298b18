#!/usr/bin/env bash
# Runs the whole test suite: unit tests, and integration tests that start their own
# redis-server processes (and a Prometheus, Ralph, an LRS, and a headless Chromium) on free ports, real HTTP receivers on loopback, and
# the WebAssembly plugins built from plugins/ (and the rules plugin's own unit tests); then builds the Debian package and checks it
# (scripts/check-package.sh), and builds and tests the Python and JavaScript example plugins
# (scripts/test-plugin-examples.sh). The Rust tests run under cargo-nextest: each test in a
# process of its own, a hang a named failure after 5 minutes, no retries (.config/nextest.toml).
# Ends with one "tests: N passed, N failed" line summing every test.
#
# scripts/test.sh --quick: the unit tests and the core integration tests (API, delivery,
# durability, plugins), nothing installed, no package: the contributors' loop.
# scripts/test.sh --build-only: only the one build the tests run (.ci/run builds it while the
# tests' tools are still being installed).
set -euo pipefail
cd "$(dirname "$0")/.."

# One build of everything the tests run (the package check reuses it): the test binaries, the
# relay, the examples the tests start. The tests then build nothing themselves.
build() {
  cargo test --all-targets --no-run "$@" && cargo build --examples --bins "$@"
}
quick=""
case "${1:-}" in
  --quick) quick=1; shift ;;
  --build-only) shift; build "$@"; exit ;;
esac

scripts/ensure-redis.sh
scripts/ensure-brokers.sh
scripts/ensure-otlp.sh
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "hookrelay: installing cargo-nextest (crates.io)"
  cargo install --quiet --locked cargo-nextest
fi
if [ -z "$quick" ]; then
  scripts/ensure-prometheus.sh
  scripts/ensure-plugin-languages.sh
  scripts/ensure-ralph.sh
  scripts/ensure-chromium.sh
  scripts/ensure-standard-webhooks.sh
  scripts/ensure-schema-tools.sh
  scripts/ensure-podman.sh --arch arm64 --tests
  # The dashboard tests must then evaluate bbb-exporter's and hookrelay's queries in a real
  # Prometheus, the xAPI tests send to a real LRS, the status page is tried in a real browser,
  # JSON callbacks are verified by the official Standard Webhooks libraries, and types are
  # generated from the events' schemas as docs/integrators.md says.
  export TEST_REQUIRE_PROMETHEUS=1 TEST_REQUIRE_RALPH=1 TEST_REQUIRE_CHROMIUM=1 TEST_REQUIRE_STANDARD_WEBHOOKS=1
  export TEST_REQUIRE_SCHEMA_TOOLS=1 TEST_REQUIRE_PODMAN=1
fi
scripts/build-plugins.sh
# nextest's output, and cargo test's (whose "test result:" lines are counted; nextest prints
# such lines inside a failed test's output too).
log=$(mktemp)
cargo_log=$(mktemp)
trap 'rm -f "$log" "$cargo_log"' EXIT
status=0
# Each step's time goes where .ci/run asks (CI_PHASE_TIMES), else nowhere.
times=${CI_PHASE_TIMES:-/dev/null}
step() {
  local name=$1 start=$SECONDS
  shift
  "$@" || status=$?
  echo "    $name: $((SECONDS - start))" >>"$times"
}
step build build "$@"
export TEST_PLUGINS_BUILT=1 TEST_EXAMPLES_BUILT=1
# The container images the tests run (tests/it/containers.rs, deploy.rs), made by the script
# that makes users' images: amd64 from the build above, arm64 cross-compiled (profile
# cross-test: it only has to start under qemu), and stand-ins for the compose files' public
# images, from Debian's packages.
if [ -z "$quick" ]; then
  export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/scripts/podman.conf}
  step images bash -c 'scripts/image.sh --profile dev --tag hookrelay-test --no-build &&
    scripts/image.sh --arch arm64 --profile cross-test --tag hookrelay-test &&
    python3 scripts/stand_in_images.py localhost/hookrelay-test'
fi
# nextest's JUnit report (in its store, target/nextest under the workspace whatever
# CARGO_TARGET_DIR says): each test binary's time, the sum of its tests'.
junit="target/nextest/default/junit.xml"
rm -f "$junit"
if [ -n "$quick" ]; then
  filter='kind(lib) | test(/^(api|delivery|durability|plugins)::/)'
  step rust-tests bash -c 'cargo nextest run --lib --test it -E "$1" 2>&1 | tee "$0"; exit "${PIPESTATUS[0]}"' "$log" "$filter"
else
  step rust-tests bash -c 'cargo nextest run --lib --tests "$@" 2>&1 | tee "$0"; exit "${PIPESTATUS[0]}"' "$log" "$@"
  # The benchmarks, once each in test mode (criterion's harness).
  step bench-smoke bash -c 'cargo test --benches "$@" 2>&1 | tee -a "$0"; exit "${PIPESTATUS[0]}"' "$cargo_log" "$@"
  # The plugins' own unit tests (the rules plugin's pattern language), on this machine's target.
  step plugin-tests bash -c '(cd plugins && cargo test --quiet -p rules --target-dir target) 2>&1 | tee -a "$0"; exit "${PIPESTATUS[0]}"' "$cargo_log"
  step plugin-examples bash -c 'scripts/test-plugin-examples.sh 2>&1 | tee -a "$0"; exit "${PIPESTATUS[0]}"' "$cargo_log"
  step package scripts/check-package.sh
fi
if [ -f "$junit" ]; then
  python3 - "$junit" >>"$times" <<'PY' || true
import sys, xml.etree.ElementTree as ET
for suite in ET.parse(sys.argv[1]).getroot().iter("testsuite"):
    cases = list(suite.iter("testcase"))
    total = sum(float(c.get("time", 0)) for c in cases)
    print(f"      {suite.get('name')}: {total:.0f} s in its {len(cases)} tests")
PY
fi
# nextest's summary ("N tests run: P passed, F failed, T timed out, S skipped") and cargo's
# "test result:" lines, summed.
{ grep -E '^ *Summary \[.*tests run:' "$log" || true; grep -E '^test result:' "$cargo_log" || true; } \
  | awk '{ for (i = 1; i <= NF; i++) { w = $(i); gsub(/[,;]/, "", w); if (w == "passed") p += $(i-1); if (w == "failed") f += $(i-1); if (w == "timed") f += $(i-1) } }
         END { printf "tests: %d passed, %d failed\n", p, f }'
exit "$status"
