#!/usr/bin/env bash
# Builds the container image hookrelay:<version> and hookrelay:latest with podman, from nothing
# (FROM scratch): this build's relay and the C libraries it links, copied from Debian's glibc
# of the image's architecture, Debian's CA roots, the Debian package's assets (plugins, event
# schemas, example configuration, ...) and a software bill of materials (CycloneDX, made by
# cargo-cyclonedx at build time). docs/containers.md says why and what is inside.
#
#   scripts/image.sh [--arch amd64|arm64] [--profile release|dev] [--tag NAME] [--no-build]
#                    [--save FILE]
#
# --arch arm64 cross-compiles (Debian's gcc-aarch64-linux-gnu, rustup's target) and tags
#   NAME:<version>-arm64 and NAME:latest-arm64.
# --profile dev packs the tests' build (the tests' images; users' images are release builds);
#   any profile of Cargo.toml may be named (the tests' arm64 image: cross-test).
# --tag NAME names the image (default hookrelay; the tests use hookrelay-test).
# --no-build takes the binary as the last cargo build left it.
# --save FILE writes the image to an archive (`podman load -i FILE` on the BBB server).
# --max-mib N fails when the image is larger (default: 40 for a release build, the size goal
#   docs/containers.md gives; none for others, whose binary is not optimized).
# What it needs from Debian, PyPI and rustup is installed by scripts/ensure-podman.sh, and
# cargo-cyclonedx from crates.io here.
# Prints the image's name and its size on the last line.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."

arch=amd64 profile=release name=hookrelay build=1 save="" max_mib=""
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --tag) name=$2; shift 2 ;;
    --no-build) build=""; shift ;;
    --save) save=$2; [ "${save#/}" = "$save" ] && save="$caller/$save"; shift 2 ;;
    --max-mib) max_mib=$2; shift 2 ;;
    *) echo "image: unknown argument $1 (see the head of $0)" >&2; exit 2 ;;
  esac
done
case "$arch" in
  amd64) triple=x86_64-unknown-linux-gnu multiarch=x86_64-linux-gnu libdir=/lib/x86_64-linux-gnu
         strip=strip suffix="" ;;
  arm64) triple=aarch64-unknown-linux-gnu multiarch=aarch64-linux-gnu libdir=/usr/aarch64-linux-gnu/lib
         strip=aarch64-linux-gnu-strip suffix=-arm64
         export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
         export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar ;;
  *) echo "image: --arch is amd64 or arm64" >&2; exit 2 ;;
esac
# Cargo's folder of the profile (dev's is debug).
profile_dir=$profile
[ "$profile" = dev ] && profile_dir=debug

scripts/ensure-podman.sh --arch "$arch"
CYCLONEDX_VERSION=0.5.9
if ! cargo cyclonedx --version 2>/dev/null | grep -q "$CYCLONEDX_VERSION"; then
  echo "hookrelay: installing cargo-cyclonedx $CYCLONEDX_VERSION (crates.io, the image's bill of materials)"
  cargo install --quiet --locked cargo-cyclonedx --version "$CYCLONEDX_VERSION"
fi
# The project's own podman settings unless the caller gives some (scripts/podman.conf).
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/scripts/podman.conf}

host_triple=$(rustc -vV | sed -n 's/^host: //p')
target_args=()
sub=""
if [ "$triple" != "$host_triple" ]; then
  target_args=(--target "$triple")
  sub="$triple/"
fi
if [ -n "$build" ]; then
  cargo build --quiet --profile "$profile" --bin hookrelay "${target_args[@]}"
fi
scripts/build-plugins.sh

meta=$(cargo metadata --no-deps --format-version 1)
version=$(python3 -c 'import json,sys; print(next(p["version"] for p in json.loads(sys.argv[1])["packages"] if p["name"]=="hookrelay"))' "$meta")
target_dir=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["target_directory"])' "$meta")
binary="$target_dir/$sub$profile_dir/hookrelay"
[ -x "$binary" ] || { echo "image: $binary is missing: build it, or drop --no-build" >&2; exit 1; }
if [ "$profile" = release ] && [ "$triple" = x86_64-unknown-linux-gnu ]; then
  # How much of the list of hot functions this build placed together (docs/architecture.md).
  scripts/symbol-order.sh --check "$binary" ||
    echo "image: the relay's hot code is spread out (more RSS); regenerate the list" >&2
fi

work="$target_dir/image/$arch"
rm -rf "$work"
mkdir -p "$work"
# The bill of materials: every crate compiled into the binary (cargo-cyclonedx, for this
# target), then the Debian packages whose files the image carries.
cargo cyclonedx --quiet --format json --describe binaries --target "$triple" --spec-version 1.5 \
  --no-build-deps
mv -f hookrelay_bin.cdx.json "$work/sbom.cdx.json"
python3 - "$work/sbom.cdx.json" "$arch" <<'PY'
import json, subprocess, sys
path, arch = sys.argv[1], sys.argv[2]
bom = json.load(open(path))
packages = ["libc6-arm64-cross" if arch == "arm64" else "libc6", "libgcc-s1-arm64-cross" if arch == "arm64" else "libgcc-s1", "ca-certificates"]
for pkg in packages:
    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True).stdout.strip()
    if not version:
        continue
    bom.setdefault("components", []).append({
        "type": "library" if pkg != "ca-certificates" else "data",
        "bom-ref": f"pkg:deb/debian/{pkg}@{version}",
        "name": pkg, "version": version, "purl": f"pkg:deb/debian/{pkg}@{version}",
        "description": "Debian package whose files the image carries",
    })
json.dump(bom, open(path, "w"), separators=(",", ":"))
PY
mtime=$(git log -1 --format=%ct 2>/dev/null || echo 0)
python3 scripts/image_rootfs.py --binary "$binary" --libdir "$libdir" --multiarch "$multiarch" \
  --strip "$strip" --sbom "$work/sbom.cdx.json" --mtime "$mtime" --out "$work/rootfs.tar"
cp Containerfile "$work/"

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# The image this build replaces, removed once nothing names it (rebuilds leave no pile).
previous=$(podman image inspect --format '{{.Id}}' "$name:$version$suffix" 2>/dev/null || true)
podman build --quiet --arch "$arch" --os linux \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  -t "$name:$version$suffix" -t "$name:latest$suffix" -f "$work/Containerfile" "$work" >/dev/null
current=$(podman image inspect --format '{{.Id}}' "$name:$version$suffix")
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
  podman rmi "$previous" >/dev/null 2>&1 || true
fi
if [ -n "$save" ]; then
  podman save --quiet -o "$save" "$name:$version$suffix"
fi
size=$(podman image inspect --format '{{.Size}}' "$name:$version$suffix")
echo "image: $name:$version$suffix ($arch, $profile), $((size / 1024 / 1024)) MiB ($size bytes); bill of materials: $work/sbom.cdx.json"
[ -z "$max_mib" ] && [ "$profile" = release ] && max_mib=40
if [ -n "$max_mib" ] && [ "$size" -gt $((max_mib * 1024 * 1024)) ]; then
  echo "image: $size bytes is over the $max_mib MiB goal" >&2
  exit 1
fi
