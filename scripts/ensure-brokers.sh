#!/usr/bin/env bash
# The message brokers the destination tests publish to (docs/destinations.md): Debian's
# nats-server, mosquitto and rabbitmq-server, installed where missing, and each started where
# nothing answers on its port (NATS with JetStream on 4222, Mosquitto on 1883, RabbitMQ on
# 5672 with guest/guest); and the consumers docs/destinations.md shows (PyPI's nats-py, pika
# and paho-mqtt, at the versions it was tried with). The tests start their own NATS and
# Mosquitto on free ports; they use the machine's RabbitMQ with exchanges of their own. Prints
# nothing when all is there. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
for pair in nats-server:nats-server mosquitto:mosquitto rabbitmq-server:rabbitmq-server; do
  bin=${pair%%:*} pkg=${pair##*:}
  if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ]; then missing+=("$pkg"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "hookrelay: installing ${missing[*]} (Debian packages, for the destination tests)"
  scripts/apt-install.sh "${missing[@]}"
fi

# Whether something answers on 127.0.0.1:$1.
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Waits up to $2 seconds for port $1.
wait_port() {
  local i
  for ((i = 0; i < $2 * 4; i++)); do answers "$1" && return 0; sleep 0.25; done
  echo "hookrelay: nothing answers on port $1 after $2 s" >&2
  return 1
}
PATH="$PATH:/usr/sbin"
state="${XDG_CACHE_HOME:-$HOME/.cache}/hookrelay/brokers"
mkdir -p "$state"
if ! answers 4222; then
  echo "hookrelay: starting nats-server with JetStream on 127.0.0.1:4222"
  mkdir -p "$state/nats"
  setsid nats-server -js -a 127.0.0.1 -p 4222 -sd "$state/nats" >"$state/nats.log" 2>&1 < /dev/null &
  wait_port 4222 10
fi
if ! answers 1883; then
  echo "hookrelay: starting mosquitto on 127.0.0.1:1883"
  setsid mosquitto -p 1883 >"$state/mosquitto.log" 2>&1 < /dev/null &
  wait_port 1883 10
fi
if ! answers 5672; then
  echo "hookrelay: starting rabbitmq-server on 127.0.0.1:5672"
  if command -v service >/dev/null 2>&1 && service rabbitmq-server start >/dev/null 2>&1; then :; else
    setsid rabbitmq-server >"$state/rabbitmq.log" 2>&1 < /dev/null &
  fi
  wait_port 5672 60
fi

if ! python3 -c 'import importlib.metadata as m, sys
want = {"nats-py": "2.16.0", "pika": "1.4.4", "paho-mqtt": "2.2.0"}
sys.exit(any(m.version(p) != v for p, v in want.items()))' 2>/dev/null; then
  echo "hookrelay: installing nats-py 2.16.0, pika 1.4.4 and paho-mqtt 2.2.0 (PyPI, for the destination docs' consumers)"
  python3 -m pip install -q --disable-pip-version-check "nats-py==2.16.0" "pika==1.4.4" "paho-mqtt==2.2.0"
fi
