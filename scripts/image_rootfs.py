#!/usr/bin/env python3
"""The image's root file system as one tar archive (scripts/image.sh adds it to an empty image).

What goes in: the relay's binary (stripped), the C libraries it links and its program
interpreter, copied from Debian's glibc of the image's architecture; Debian's CA roots; every
asset of the Debian package (Cargo.toml's [package.metadata.deb] assets: example
configuration, event schemas, plugins, WIT, dashboards, documents) but the ones that only
make sense beside systemd and BigBlueButton's nginx; the user and group the relay runs as;
the folders it writes to, its own and no one else's. Every entry's owner, mode and time are
set here, not taken from the machine that builds, so the same inputs give the same archive.

Usage: image_rootfs.py --binary PATH --libdir DIR --multiarch TRIPLE --strip TOOL --sbom FILE
                       --out FILE [--mtime SECONDS]
"""

import argparse
import glob
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

# The relay's user and group (the "nonroot" number of distroless images).
UID = GID = 65532
# Assets of the package that the image leaves out: the package's binary (this build's is
# used), BigBlueButton's nginx location (the host's nginx, not the container's) and the
# documentation's pages (0.6 MiB of the 40 the image may take; README.md stays, and points to
# them).
LEFT_OUT = ("target/", "etc/bigbluebutton/", "usr/share/doc/hookrelay/docs/")
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def needed(path):
    """The shared libraries an ELF file names (DT_NEEDED)."""
    out = run("readelf", "-d", "-W", path)
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


def interpreter(path):
    out = run("readelf", "-l", "-W", path)
    for line in out.splitlines():
        if "Requesting program interpreter:" in line:
            return line.split(":", 1)[1].strip().rstrip("]")
    sys.exit(f"image: {path} names no program interpreter (a static binary needs no libraries)")


def libraries(binary, libdir):
    """Every library the binary needs, transitively, but the loader (which the program names
    by its own path): name -> the file in libdir."""
    loader = os.path.basename(interpreter(binary))
    found, todo = {}, needed(binary)
    while todo:
        name = todo.pop()
        if name in found or name == loader:
            continue
        path = os.path.join(libdir, name)
        if not os.path.exists(path):
            sys.exit(f"image: {name}, which the relay links, is not in {libdir}")
        found[name] = os.path.realpath(path)
        todo.extend(needed(found[name]))
    return found


class Archive:
    """A tar archive whose entries carry the owner, mode and time given here."""

    def __init__(self, out, mtime):
        self.tar = tarfile.open(out, "w", format=tarfile.PAX_FORMAT)
        self.mtime = mtime
        self.dirs = set()

    def _info(self, name, kind, mode, owner):
        info = tarfile.TarInfo(name.lstrip("/"))
        info.type, info.mode, info.mtime = kind, mode, self.mtime
        info.uid, info.gid = owner
        info.uname = info.gname = ""
        return info

    def dir(self, name, mode=0o755, owner=(0, 0)):
        name = name.rstrip("/")
        parent = os.path.dirname(name)
        if parent not in ("", "/") and parent not in self.dirs:
            self.dir(parent)
        if name in self.dirs:
            return
        self.dirs.add(name)
        self.tar.addfile(self._info(name, tarfile.DIRTYPE, mode, owner))

    def file(self, name, data, mode=0o644, owner=(0, 0)):
        self.dir(os.path.dirname(name))
        info = self._info(name, tarfile.REGTYPE, mode, owner)
        info.size = len(data)
        self.tar.addfile(info, io.BytesIO(data))

    def close(self):
        self.tar.close()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def deb_assets():
    """(source, destination, mode) of each file the Debian package ships, globs expanded."""
    meta = json.loads(run("cargo", "metadata", "--no-deps", "--format-version", "1"))
    package = next(p for p in meta["packages"] if p["name"] == "hookrelay")
    for source, dest, mode in package["metadata"]["deb"]["assets"]:
        if source.startswith(LEFT_OUT) or dest.startswith(LEFT_OUT):
            continue
        files = sorted(glob.glob(source))
        if not files:
            sys.exit(f"image: {source} (a package asset) is missing: build the plugins first")
        for f in files:
            to = os.path.join(dest, os.path.basename(f)) if dest.endswith("/") else dest
            yield f, "/" + to, int(mode, 8)


def main():
    args = argparse.ArgumentParser()
    for flag in ("--binary", "--libdir", "--strip", "--sbom", "--out"):
        args.add_argument(flag, required=True)
    args.add_argument("--multiarch", required=True, help="x86_64-linux-gnu, aarch64-linux-gnu")
    args.add_argument("--mtime", type=int, default=0)
    a = args.parse_args()

    tar = Archive(a.out, a.mtime)
    with tempfile.TemporaryDirectory() as tmp:
        stripped = os.path.join(tmp, "hookrelay")
        run(a.strip, "--strip-all", "-o", stripped, a.binary)
        tar.file("/usr/bin/hookrelay", read(stripped), 0o755)
    # The libraries where this glibc's loader looks for them without a cache (its multiarch
    # folder), and the loader where the binary names it.
    multiarch = f"/lib/{a.multiarch}"
    for name, path in sorted(libraries(a.binary, a.libdir).items()):
        tar.file(f"{multiarch}/{name}", read(path), 0o755)
    loader = interpreter(a.binary)
    tar.file(loader, read(os.path.join(a.libdir, os.path.basename(loader))), 0o755)

    tar.file(CA_BUNDLE, read(CA_BUNDLE))
    tar.file("/etc/passwd", b"root:x:0:0:root:/root:/sbin/nologin\n"
             b"hookrelay:x:65532:65532:hookrelay:/var/lib/hookrelay:/sbin/nologin\n")
    tar.file("/etc/group", b"root:x:0:\nhookrelay:x:65532:\n")
    tar.file("/etc/nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files dns\n")
    # The configuration as the package has it: root's, readable by the relay's group only.
    tar.dir("/etc/hookrelay", 0o750, (0, GID))
    for source, dest, mode in deb_assets():
        owner = (0, GID) if dest.startswith("/etc/hookrelay/") else (0, 0)
        tar.file(dest, read(source), mode, owner)
    tar.file("/usr/share/doc/hookrelay/sbom.cdx.json", read(a.sbom))
    # What the relay writes: the plugins' compiled cache (it must be the relay's own, 0700),
    # its home, and /tmp for the admin socket when no runtime folder is given.
    tar.dir("/var/cache/hookrelay", 0o700, (UID, GID))
    tar.dir("/var/lib/hookrelay", 0o700, (UID, GID))
    tar.dir("/tmp", 0o1777)
    tar.close()


if __name__ == "__main__":
    main()
