#!/usr/bin/env bash
# Runs the whole test suite: unit tests, and integration tests that start their own
# redis-server processes on free ports and real HTTP receivers on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-redis.sh
cargo test --all-targets "$@"
