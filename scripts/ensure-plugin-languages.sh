#!/usr/bin/env bash
# Installs what building Python and JavaScript plugins needs from Debian's packages when it is
# missing: Node.js with npm, and Python's venv module. (`hookrelay plugin build` then installs
# componentize-py from PyPI and jco from npm itself.) Safe to run again.
set -euo pipefail

packages=()
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || packages+=(python3-venv)
if [ "${#packages[@]}" -gt 0 ]; then
  echo "hookrelay: installing ${packages[*]} (Debian packages)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${packages[@]}" >/dev/null
fi
