#!/usr/bin/env bash
# Installs Chromium and its WebDriver (Debian's chromium and chromium-driver packages) when
# they are missing: the status page test drives a real headless Chromium through chromedriver,
# started by the test on a free port. Prints nothing when they are there. Safe to run again.
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  echo "hookrelay: installing chromium and chromium-driver (Debian packages, for the status page test)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    chromium chromium-driver fonts-dejavu-core >/dev/null
fi
