#!/usr/bin/env bash
# Installs what the container image needs when it is missing: podman and runc, from Debian's
# packages; with --tests, what its tests need too: catatonit (a pod's infra process),
# qemu-user-static (the arm64 binary under emulation), nginx-light (its binary goes into the
# stand-in of the public nginx image, scripts/stand_in_images.py), and podman-compose from
# PyPI, in a virtual environment of its own (Debian 12's 1.0.3 adds a bridge network's alias
# to every `network_mode: host` service, which podman refuses; 1.2.0 does not); with --arch
# arm64, Debian's cross compiler and glibc for arm64 and rustup's aarch64 target. Packages'
# services are not started (scripts/apt-install.sh). Changes no configuration of the
# machine's: the scripts give podman theirs (scripts/podman.conf). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

arch=amd64 tests=""
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    --tests) tests=1; shift ;;
    *) echo "ensure-podman: unknown argument $1" >&2; exit 2 ;;
  esac
done
COMPOSE_VERSION=1.2.0

# What building an image needs; the tests' tools besides (--tests).
tools="podman:podman runc:runc"
if [ -n "$tests" ]; then
  tools="$tools catatonit:catatonit qemu-aarch64-static:qemu-user-static"
fi
packages=()
for cmd in $tools; do
  command -v "${cmd%%:*}" >/dev/null 2>&1 || [ -x "/usr/libexec/podman/${cmd%%:*}" ] \
    || packages+=("${cmd#*:}")
done
if [ "$arch" = arm64 ]; then
  command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || packages+=(gcc-aarch64-linux-gnu)
  [ -e /usr/aarch64-linux-gnu/lib/libc.so.6 ] || packages+=(libc6-dev-arm64-cross)
fi
if [ -n "$tests" ]; then
  python3 -c "import ensurepip" 2>/dev/null || packages+=(python3-venv)
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || packages+=(nginx-light)
fi
if [ ${#packages[@]} -gt 0 ]; then
  echo "hookrelay: installing ${packages[*]} (Debian packages, for the container image)"
  scripts/apt-install.sh "${packages[@]}"
fi
compose="${HOOKRELAY_COMPOSE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hookrelay/podman-compose}"
if [ -n "$tests" ] && ! "$compose/bin/podman-compose" --version 2>/dev/null | grep -q "version $COMPOSE_VERSION"; then
  echo "hookrelay: installing podman-compose $COMPOSE_VERSION (PyPI) in $compose"
  rm -rf "$compose"
  python3 -m venv "$compose"
  "$compose/bin/pip" install -q "podman-compose==$COMPOSE_VERSION"
fi
if [ "$arch" = arm64 ] && ! rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
  echo "hookrelay: installing the aarch64-unknown-linux-gnu target (rustup)"
  rustup target add aarch64-unknown-linux-gnu
fi
