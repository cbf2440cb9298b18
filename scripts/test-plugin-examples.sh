#!/usr/bin/env bash
# Builds the Python and JavaScript example plugins with `hookrelay plugin build` (which installs
# componentize-py, jco and componentize-js, pinned, when missing) and runs their test cases with
# `hookrelay plugin test`, as their authors would. Uses the test build's binary.
set -euo pipefail
cd "$(dirname "$0")/.."
# The test build's features (its examples pull in the dev-dependencies): nothing rebuilt after scripts/test.sh.
cargo build --quiet --bins --examples
bin=${CARGO_TARGET_DIR:-$PWD/target}/debug/hookrelay
status=0
for dir in plugins/python/*/ plugins/js/*/; do
  echo "plugin examples: $dir"
  if ! (cd "$dir" && "$bin" plugin build >/dev/null && "$bin" plugin test); then
    echo "plugin examples: $dir FAILED" >&2
    status=1
  fi
done
exit "$status"
