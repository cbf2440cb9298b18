#!/usr/bin/env bash
# Installs the tools integrators generate types with from docs/schemas/ when they are missing:
# datamodel-code-generator 0.89.0 (PyPI, with pip, for python3: Python's pydantic models) and
# json-schema-to-typescript 16.0.0 with typescript 7.0.2 (npm, in the user's cache,
# hookrelay/npm-schema-tools, or $SCHEMA_TOOLS_NPM: TypeScript types, type-checked). The
# schema tests (tests/it/schemas.rs) run them as docs/integrators.md shows. Prints nothing when
# they are there. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -c 'import importlib.metadata as m, sys; sys.exit(m.version("datamodel-code-generator") != "0.89.0")' 2>/dev/null; then
  echo "hookrelay: installing datamodel-code-generator 0.89.0 (PyPI, for the schema tests)"
  python3 -m pip install -q --disable-pip-version-check "datamodel-code-generator==0.89.0"
fi

npm_dir="${SCHEMA_TOOLS_NPM:-${XDG_CACHE_HOME:-$HOME/.cache}/hookrelay/npm-schema-tools}"
if ! (cd "$npm_dir" 2>/dev/null && node -e '
    const v = (p) => require(p + "/package.json").version;
    process.exit(v("json-schema-to-typescript") === "16.0.0" && v("typescript") === "7.0.2" ? 0 : 1)') 2>/dev/null; then
  command -v npm >/dev/null 2>&1 || scripts/ensure-plugin-languages.sh
  echo "hookrelay: installing json-schema-to-typescript 16.0.0 and typescript 7.0.2 (npm, for the schema tests) in $npm_dir"
  mkdir -p "$npm_dir"
  npm install --prefix "$npm_dir" --save-exact --no-audit --no-fund --silent \
    "json-schema-to-typescript@16.0.0" "typescript@7.0.2" >/dev/null
fi
