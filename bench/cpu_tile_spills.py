#!/usr/bin/env python3
"""The spill check of issue 27: in each per-ISA kernel function of libinfer.so whose name matches a pattern
(default: the AVX2 instantiations, `_avx2(`), the innermost loops that hold FMAs (a backward branch with no
other loop inside it), with their instruction and FMA counts and how many of their vector instructions touch
the stack (%rsp / %rbp). A register tile that fits shows up as e.g. (22, 12, 0): 12 FMAs, no stack access.
Reads `nm` and `objdump -d` only.

    bench/cpu_tile_spills.py build-cpu/libinfer.so ['_avx2\\(']
"""
import re
import subprocess
import sys


def functions(lib, pattern):
    for line in subprocess.run(["nm", "-S", "-C", lib], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[2] in "tT" and re.search(pattern, parts[3]):
            yield parts[3], int(parts[0], 16), int(parts[1], 16)


def fma_loops(lib, start, size):
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "--start-address=%d" % start,
                          "--stop-address=%d" % (start + size), lib], capture_output=True, text=True, check=True).stdout
    ins = [(int(m.group(1), 16), m.group(2)) for m in (re.match(r"\s+([0-9a-f]+):\s+(.*)", l) for l in dis.splitlines()) if m]
    loops = []
    for addr, text in ins:
        m = re.match(r"j\w+\s+([0-9a-f]+)", text)
        if m and int(m.group(1), 16) < addr:
            loops.append((int(m.group(1), 16), addr))
    out = []
    for lo, hi in loops:
        if any(lo <= a and b <= hi and (a, b) != (lo, hi) for a, b in loops):
            continue  # not innermost
        body = [t for a, t in ins if lo <= a <= hi]
        fma = sum(1 for t in body if re.match(r"v?(fmadd|fnmadd|mulps|addps)", t))
        stack = sum(1 for t in body if "mm" in t and re.search(r"\(%r[sb]p\)", t))
        if fma:
            out.append((len(body), fma, stack))
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lib, pattern = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else r"_avx2\("
    for name, start, size in functions(lib, pattern):
        loops = fma_loops(lib, start, size)
        if loops:
            tiles = sorted(set(l for l in loops if l[1] >= 8))
            print("%s\n  %d innermost FMA loops, %d with stack accesses; loops of >= 8 FMAs (instructions, FMAs, stack): %s"
                  % (name, len(loops), sum(1 for l in loops if l[2]), tiles))


if __name__ == "__main__":
    main()
