#!/usr/bin/env python3
"""Writes a reproducible text of mixed compressibility: the input of the trace-size figures.

Usage: python3 scripts/mixed-text.py SIZE OUT   (SIZE in bytes, or with K/M suffix: 4M)

The file cycles through 64KB stretches of three kinds, chosen by a fixed xorshift generator so
the same SIZE always gives the same bytes:
  - prose: words of a 40-word vocabulary in pseudo-random order, 72-column lines (compresses
    about 3.5x with gzip: long matches, many hash-chain hits);
  - log lines: a timestamp, a counter and a hex field that change on every line, around fixed
    text (compresses about 5x: short matches at fixed distances);
  - noise: base64 of pseudo-random bytes (compresses little: literals, short hash chains).
So gzip exercises its whole deflate path (lazy matching, literals, long and short chains) rather
than one regime. docs/trace-format.md ("Trace size") quotes figures recorded on SIZE=4M.
"""
import sys

WORDS = (
    "the superpage reservation of a page table walk memory is promoted when fully populated "
    "and demoted on write TLB miss buddy allocator frame object map entry fault handler "
    "policy bloat fragmentation daemon zero fill copy shared private anonymous file mapped "
    "kernel user"
).split()
B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
MASK = (1 << 64) - 1


class Rng:
    def __init__(self, seed):
        self.x = seed

    def next(self):
        x = self.x
        x ^= (x << 13) & MASK
        x ^= x >> 7
        x ^= (x << 17) & MASK
        self.x = x
        return x


def prose(r, n):
    out, line, size = [], 0, 0
    while size < n:
        w = WORDS[r.next() % len(WORDS)]
        if line + len(w) + 1 > 72:
            out.append("\n")
            line = 0
            size += 1
        elif line:
            out.append(" ")
            line += 1
            size += 1
        out.append(w)
        line += len(w)
        size += len(w)
    return "".join(out).encode()


def logs(r, n, state):
    out = []
    size = 0
    while size < n:
        state[0] += 1 + r.next() % 997
        state[1] += 1
        line = "2024-05-%02d %02d:%02d:%02d.%03d splab[%d]: event %d addr=0x%012x %s\n" % (
            1 + state[0] // 86400000 % 28,
            state[0] // 3600000 % 24,
            state[0] // 60000 % 60,
            state[0] // 1000 % 60,
            state[0] % 1000,
            1000 + r.next() % 8,
            state[1],
            r.next() & 0x7FFFFFFFF000,
            WORDS[r.next() % len(WORDS)],
        )
        out.append(line)
        size += len(line)
    return "".join(out).encode()


def noise(r, n):
    out = bytearray()
    while len(out) < n:
        x = r.next()
        for _ in range(10):
            out.append(B64[x & 63])
            x >>= 6
        if len(out) % 77 == 76:
            out.append(10)
    return bytes(out)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: mixed-text.py SIZE OUT (SIZE: bytes, or 4M, 512K)")
    s = sys.argv[1].upper()
    mult = {"K": 1 << 10, "M": 1 << 20}.get(s[-1:], 1)
    try:
        size = int(s.rstrip("KM")) * mult
    except ValueError:
        sys.exit("mixed-text.py: SIZE must be a number of bytes, optionally with K or M: got %r" % sys.argv[1])
    r = Rng(0x9E3779B97F4A7C15)
    state = [0, 0]
    parts, total = [], 0
    while total < size:
        pick = r.next() % 8
        chunk = 64 << 10
        if pick < 4:
            b = prose(r, chunk)
        elif pick < 6:
            b = logs(r, chunk, state)
        else:
            b = noise(r, chunk)
        parts.append(b)
        total += len(b)
    data = b"".join(parts)[:size]
    with open(sys.argv[2], "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
