#!/usr/bin/env bash
# Builds the Debian package (target/debian/hookrelay_<version>-1_<arch>.deb) from a release
# build and the example plugins (scripts/build-plugins.sh), installing cargo-deb from crates.io first if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO_DEB_VERSION=3.8.0
if ! cargo deb --version 2>/dev/null | grep -q "$CARGO_DEB_VERSION"; then
  cargo install --locked cargo-deb --version "$CARGO_DEB_VERSION"
fi
# The package carries the example plugins, built.
scripts/build-plugins.sh
cargo deb "$@"
