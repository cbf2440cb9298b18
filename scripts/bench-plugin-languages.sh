#!/usr/bin/env bash
# The `plugin new` template in Rust, Python and JavaScript, side by side: makes and builds the
# three projects in target/plugin-languages (timing each build), prints what `plugin check`
# says of each (size, compile time, memory of one instance), then runs the criterion
# benchmark benches/plugin_languages.rs over them.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin hookrelay
bin=${CARGO_TARGET_DIR:-$PWD/target}/release/hookrelay
root=$PWD/target/plugin-languages
mkdir -p "$root"
for lang in rust python js; do
  name=bench-$lang
  rm -rf "${root:?}/$name/build"
  [ -d "$root/$name" ] || (cd "$root" && "$bin" plugin new "$name" --lang "$lang" >/dev/null)
  start=$(date +%s.%N)
  wasm=$(cd "$root/$name" && "$bin" plugin build 2>/dev/null)
  end=$(date +%s.%N)
  printf '%s: build %.1f s, %s bytes\n' "$lang" "$(awk "BEGIN { print $end - $start }")" "$(stat -c %s "$wasm")"
  "$bin" plugin check "$wasm" 2>/dev/null | sed "s/^/$lang: /"
done
HOOKRELAY_LANG_PLUGINS=$root cargo bench --bench plugin_languages -- "$@"
