#!/usr/bin/env bash
# Installs Prometheus from Debian's package when it is missing: the dashboard tests load the
# relay's exposition into a real Prometheus (started by the test on a free port) and evaluate
# bbb-exporter's dashboard queries there. The package's own service is not started. Safe to
# run again.
set -euo pipefail

if ! command -v prometheus >/dev/null 2>&1; then
  echo "hookrelay: installing prometheus (Debian package, for the dashboard tests)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  # Keep the package's service from starting (it would take port 9090 on this machine).
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod +x "$policy"
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  if [ -n "$policy" ]; then $SUDO rm -f "$policy"; fi
fi
