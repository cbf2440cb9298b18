#!/usr/bin/env bash
# What the trace tests' OTLP collector needs (tests/it/support/otlp_receiver.py, docs/tracing.md):
# PyPI's opentelemetry-proto (the OTLP protobuf messages, as OpenTelemetry publishes them) and
# grpcio (its gRPC service); and for the receiver docs/tracing.md shows, OpenTelemetry's Python
# SDK with its OTLP exporter; at the versions the tests were written with. Prints nothing when
# they are there. Safe to run again.
set -euo pipefail
if ! python3 -c 'import importlib.metadata as m, sys
want = {"opentelemetry-proto": "1.45.2", "grpcio": "1.85.3", "opentelemetry-sdk": "1.45.2",
        "opentelemetry-exporter-otlp-proto-http": "1.45.2"}
sys.exit(any(m.version(p) != v for p, v in want.items()))' 2>/dev/null; then
  echo "hookrelay: installing opentelemetry-proto, -sdk and -exporter-otlp-proto-http 1.45.2 and grpcio 1.85.3 (PyPI, for the trace tests)"
  python3 -m pip install -q --disable-pip-version-check "opentelemetry-proto==1.45.2" "grpcio==1.85.3" \
    "opentelemetry-sdk==1.45.2" "opentelemetry-exporter-otlp-proto-http==1.45.2"
fi
