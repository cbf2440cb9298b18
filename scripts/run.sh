#!/usr/bin/env bash
# Runs the relay on this machine: installs redis-server if missing, starts a local Redis if none
# is listening on 127.0.0.1:6379, writes hookrelay.toml (with a random shared secret) on first
# use, then builds and runs `hookrelay serve`. Extra arguments go to hookrelay.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-redis.sh

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  mkdir -p .hookrelay/redis
  echo "hookrelay: starting a local redis-server on 127.0.0.1:6379 (data in .hookrelay/redis)"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --dir "$PWD/.hookrelay/redis" \
    --logfile "$PWD/.hookrelay/redis/redis.log"
  for _ in $(seq 1 50); do
    redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break
    sleep 0.1
  done
fi

CONFIG="${HOOKRELAY_CONFIG:-hookrelay.toml}"
if [ ! -f "$CONFIG" ]; then
  secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  sed "s/^secret = .*/secret = \"$secret\"/" hookrelay.example.toml > "$CONFIG"
  chmod 600 "$CONFIG"
  echo "hookrelay: wrote $CONFIG with a new shared secret; set bbb.secret to your server's (bbb-conf --secret)"
fi

exec cargo run --release --quiet -- serve --config "$CONFIG" "$@"
