#!/usr/bin/env python3
"""Prints the frame size of each Swift async function in a binary, largest first.

    scripts/lib/async-frames.py BINARY [REGEX] [COUNT]

An async function's frame comes from its task's allocator, whose memory stays with the task at the high-water mark
of its deepest call chain until the task ends: hundreds of checks in hand each keep that much. The size
is read from the function's "async function pointer" (symbol suffix `Tu`): a 32-bit relative offset to the code,
then the 32-bit size of its initial context, which is the frame. REGEX filters the demangled names (default: every
async function).
"""
import re
import struct
import subprocess
import sys


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    pattern = re.compile(sys.argv[2] if len(sys.argv) > 2 else "")
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 40

    symbols = {}
    for line in subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].endswith("Tu"):
            symbols[parts[2]] = int(parts[0], 16)
    sections = []  # (address, file offset, size)
    for line in subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+\S+\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        # Only sections loaded at an address (not .symtab, .debug_*: address 0), holding bytes in the file.
        if m and m.group(1) not in ("NULL", "NOBITS") and int(m.group(2), 16) != 0:
            sections.append((int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16)))
    names = list(symbols)
    demangled = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(names), capture_output=True,
                               text=True, check=True).stdout.splitlines()
    with open(binary, "rb") as f:
        data = f.read()
    rows = []
    for name, readable in zip(names, demangled):
        readable = readable.removeprefix("async function pointer to ")
        if not pattern.search(readable):
            continue
        address = symbols[name]
        for start, offset, size in sections:
            if start <= address < start + size:
                at = offset + address - start
                _, frame = struct.unpack("<iI", data[at:at + 8])
                rows.append((frame, readable))
                break
    if not rows:
        sys.exit(f"async-frames: no async function matching {pattern.pattern!r} in {binary} (a stripped binary has no symbols)")
    for frame, readable in sorted(rows, reverse=True)[:count]:
        print(f"{frame:7d}  {readable[:160]}")


if __name__ == "__main__":
    main()
