#!/usr/bin/env bash
# Installs Debian packages (as root, or with sudo) without starting their services: a package's
# service (Prometheus on 9090, nginx on 80) would take a port of this machine's. Used by the
# ensure-*.sh scripts: scripts/apt-install.sh PACKAGE...
set -euo pipefail
[ $# -gt 0 ] || exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "hookrelay: installing $* needs root (or sudo, which is missing): install them, then run this again" >&2
    exit 1
  fi
  SUDO="sudo"
fi
policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  policy=/usr/sbin/policy-rc.d
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
  trap '$SUDO rm -f "$policy"' EXIT
fi
$SUDO apt-get update -qq
# Through env: sudo would drop the variable, and a package's question would wait unseen.
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
