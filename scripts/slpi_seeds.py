#!/usr/bin/env python3
"""Writes seed inputs for fuzz/fuzz_topo_slpi.c: buffers laid out as
GetLogicalProcessorInformationEx(RelationAll) fills them, for a 5900X-like
part (two 32 MB L3s) and a 9950X3D-like part (96 MB and 32 MB L3s).
The first byte of each seed is the fuzz target's flags byte.

usage: scripts/slpi_seeds.py OUT_DIR
"""
import struct
import sys


def group(ncpus):
    mask = (1 << ncpus) - 1
    info = struct.pack("<BB38xQ", ncpus, ncpus, mask)
    body = struct.pack("<HH20x", 1, 1) + info
    return struct.pack("<II", 4, 8 + len(body)) + body


def core(cpus):
    mask = sum(1 << c for c in cpus)
    body = struct.pack("<BB20xH", 1, 0, 1) + struct.pack("<QH6x", mask, 0)
    return struct.pack("<II", 0, 8 + len(body)) + body


def cache(level, kind, size, cpus):
    mask = sum(1 << c for c in cpus)
    body = struct.pack("<BBHII18xH", level, 16, 64, size, kind, 1) + struct.pack("<QH6x", mask, 0)
    return struct.pack("<II", 2, 8 + len(body)) + body


def part(cores_per_ccd, l3_sizes):
    ncpus = 2 * cores_per_ccd * len(l3_sizes)
    smt = ncpus // 2
    out = group(ncpus)
    for c in range(smt):
        pair = [c, c + smt]
        out += core(pair)
        out += cache(1, 2, 48 << 10, pair)
        out += cache(2, 0, 1 << 20, pair)
    for i, size in enumerate(l3_sizes):
        first = i * cores_per_ccd
        cpus = list(range(first, first + cores_per_ccd))
        cpus += [c + smt for c in cpus]
        out += cache(3, 0, size, cpus)
    return out


def main():
    out = sys.argv[1]
    seeds = {
        "5900x": part(6, [32 << 20, 32 << 20]),
        "9950x3d": part(8, [96 << 20, 32 << 20]),
        "one_l3": part(4, [16 << 20]),
    }
    for name, buf in seeds.items():
        for flags in (0, 1):
            with open(f"{out}/{name}-{flags}.bin", "wb") as f:
                f.write(bytes([flags]) + buf)


if __name__ == "__main__":
    main()
