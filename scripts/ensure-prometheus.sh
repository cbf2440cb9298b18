#!/usr/bin/env bash
# Installs Prometheus from Debian's package when it is missing: the dashboard tests load the
# relay's exposition into a real Prometheus (started by the test on a free port) and evaluate
# bbb-exporter's dashboard queries there. The package's own service is not started. Safe to
# run again.
set -euo pipefail

if ! command -v prometheus >/dev/null 2>&1; then
  echo "hookrelay: installing prometheus (Debian package, for the dashboard tests)"
  "$(dirname "$0")/apt-install.sh" prometheus
fi
