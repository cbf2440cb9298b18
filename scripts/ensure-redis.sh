#!/usr/bin/env bash
# Installs redis-server (and redis-cli, which the cluster tests use to join their nodes, and
# openssl, which the TLS tests make their CAs with) from
# Debian's packages when either is missing. Sourced or run by the other
# scripts; safe to run again.
set -euo pipefail

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  echo "hookrelay: installing redis-server (Debian package)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
fi

# openssl makes the certificate authorities of the TLS tests (tests/it/support/tls.rs).
if ! command -v openssl >/dev/null 2>&1; then
  echo "hookrelay: installing openssl (Debian package, for the TLS tests)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openssl >/dev/null
fi
