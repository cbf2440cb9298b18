#!/usr/bin/env bash
# Installs Ralph, a real Learning Record Store (PyPI package ralph-malph), in a virtual
# environment of its own when it is missing: the xAPI tests start it on a free port and read
# the relay's statements back from it. Prints nothing when it is there. Safe to run again.
set -euo pipefail

venv="${HOOKRELAY_RALPH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hookrelay/ralph-venv}"
# Its API module wants a backend named at import (the tests run it with the file system one).
if [ -x "$venv/bin/python" ] && RALPH_RUNSERVER_BACKEND=fs "$venv/bin/python" -c "import ralph.api, ralph.cli, requests, uvicorn" 2>/dev/null; then
  exit 0
fi
echo "hookrelay: installing Ralph (an LRS, for the xAPI tests) in $venv"
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" 2>/dev/null; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q "ralph-malph[cli,lrs]==5.1.0" requests
