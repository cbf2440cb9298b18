#!/usr/bin/env bash
# Installs redis-server from Debian's packages when it is missing. Sourced or run by the other
# scripts; safe to run again.
set -euo pipefail

if ! command -v redis-server >/dev/null 2>&1; then
  echo "hookrelay: installing redis-server (Debian package)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi
