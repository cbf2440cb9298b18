#!/usr/bin/env python3
"""Which pages of a running relay's own binary are resident: by section, and along its code.

Usage: scripts/resident-pages.py PID

Reads the process's mappings of its executable (/proc/PID/maps) and which of their pages are
present in its page tables (/proc/PID/pagemap: root, or the process's own user), and prints
the resident KiB of each section of the binary (readelf), then of each MiB of `.text`, where
build.rs places the functions of link/hot-symbols.txt first (BENCHMARKS.md, "Issue 63, peak
RSS"). A page of a file mapping counts in the RSS once it is in the process's page tables.
"""
import collections
import os
import re
import struct
import subprocess
import sys

PAGE = 4096


def sections(binary):
    """(name, address, file offset, size) of the binary's allocated sections."""
    out = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True, check=True)
    found = []
    for line in out.stdout.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m and int(m.group(2), 16) and int(m.group(4), 16):
            found.append((m.group(1), *(int(m.group(i), 16) for i in (2, 3, 4))))
    return found


def resident(pid, binary):
    """The file offsets of the binary's pages present in process `pid`'s page tables."""
    offsets = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for line in maps:
            fields = line.split()
            if len(fields) < 6 or fields[5] != binary:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            pages = (end - start) // PAGE
            pagemap.seek(start // PAGE * 8)
            entries = pagemap.read(pages * 8)
            for i in range(pages):
                if struct.unpack_from("<Q", entries, i * 8)[0] >> 63:
                    offsets.add(int(fields[2], 16) + i * PAGE)
    return offsets


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    pid = int(sys.argv[1])
    binary = os.readlink(f"/proc/{pid}/exe")
    present = resident(pid, binary)
    print(f"{binary}: {len(present) * 4} KiB of its pages resident")
    text = None
    for name, _, offset, size in sections(binary):
        kib = 4 * sum(1 for p in present if offset - PAGE < p < offset + size)
        if kib:
            print(f"  {name:20} {size / 1048576:7.2f} MiB, resident {kib:6} KiB")
        if name == ".text":
            text = (offset, size)
    if text:
        by_mib = collections.Counter((p - text[0]) // 1048576 for p in present if 0 <= p - text[0] < text[1])
        print("  .text, resident KiB by MiB from its start: "
              + ", ".join(f"{mib}: {4 * n}" for mib, n in sorted(by_mib.items())))


if __name__ == "__main__":
    main()
