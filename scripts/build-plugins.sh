#!/usr/bin/env bash
# Builds the example and test plugins in plugins/ for wasm32-wasip2 (installing the target with
# rustup when it is missing). The components land in plugins/target/wasm32-wasip2/release/.
# Safe to run again; cargo rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/../plugins"

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  echo "hookrelay: installing the wasm32-wasip2 target (rustup)"
  rustup target add wasm32-wasip2
fi
# Its own target folder, whatever CARGO_TARGET_DIR says: tests look for the plugins here.
cargo build --quiet --release --target wasm32-wasip2 --target-dir target "$@"
