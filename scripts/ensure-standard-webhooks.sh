#!/usr/bin/env bash
# Installs the official Standard Webhooks libraries when they are missing: the Python package
# (PyPI standardwebhooks 1.1.0, with pip, for python3) and the JavaScript one (npm
# standardwebhooks 1.1.1, in the user's cache, hookrelay/npm-standardwebhooks, or $STANDARDWEBHOOKS_NPM).
# The signed-callback tests check the relay's callbacks with their verify(), through
# tests/it/support/standard_webhooks_verify.{py,mjs}. Prints nothing when both are there. Safe
# to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -c 'import standardwebhooks, sys; sys.exit(standardwebhooks.__version__ != "1.1.0")' 2>/dev/null; then
  echo "hookrelay: installing standardwebhooks 1.1.0 (PyPI, for the signed-callback tests)"
  python3 -m pip install -q --disable-pip-version-check "standardwebhooks==1.1.0"
fi

npm_dir="${STANDARDWEBHOOKS_NPM:-${XDG_CACHE_HOME:-$HOME/.cache}/hookrelay/npm-standardwebhooks}"
if ! (cd "$npm_dir" 2>/dev/null && node -e 'require("standardwebhooks");
    process.exit(require("standardwebhooks/package.json").version === "1.1.1" ? 0 : 1)') 2>/dev/null; then
  command -v npm >/dev/null 2>&1 || scripts/ensure-plugin-languages.sh
  echo "hookrelay: installing standardwebhooks 1.1.1 (npm, for the signed-callback tests) in $npm_dir"
  mkdir -p "$npm_dir"
  npm install --prefix "$npm_dir" --save-exact --no-audit --no-fund --silent "standardwebhooks@1.1.1" >/dev/null
fi
