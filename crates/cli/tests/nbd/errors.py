"""Reads and writes through a tiermux server whose devices inject errors.

Usage: errors.py URI SIZE_BYTES MODE
MODE "spared": no request may fail (the errors hit a write-through cache).
MODE "degraded": requests may fail with EIO, but a read that succeeds
returns exactly the last write that succeeded to each block (the blocks a
failed write touched may hold either version).

Prints "errors ok" and counts on success; raises on wrong data.
"""
import random
import sys

import nbd

uri, size, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
BS = 4096
h = nbd.NBD()
h.connect_uri(uri)
rng = random.Random(7)
blocks = size // BS
# What each block holds: a set of possible contents (one after a write that
# succeeded, two after one that failed).
held = {b: {bytes(BS)} for b in range(blocks)}
failed = {"read": 0, "write": 0, "flush": 0}
checked = 0


def content(b, v):
    return (b.to_bytes(8, "little") + v.to_bytes(8, "little")) * (BS // 16)


def write(first, n, v):
    data = b"".join(content(b, v) for b in range(first, first + n))
    try:
        h.pwrite(data, first * BS)
        for b in range(first, first + n):
            held[b] = {content(b, v)}
    except nbd.Error:
        if mode == "spared":
            raise
        failed["write"] += 1
        for b in range(first, first + n):
            held[b] = held[b] | {content(b, v)}


def read(first, n):
    global checked
    try:
        data = h.pread(n * BS, first * BS)
    except nbd.Error:
        if mode == "spared":
            raise
        failed["read"] += 1
        return
    for i in range(n):
        b = first + i
        got = bytes(data[i * BS:(i + 1) * BS])
        assert got in held[b], f"block {b} returned data never written to it"
        held[b] = {got}
        checked += 1


version = 0
for b in range(0, blocks, 16):
    version += 1
    write(b, 16, version)
for _ in range(3):
    for b in range(0, blocks, 16):
        read(b, 16)
for _ in range(4000):
    n = rng.randint(1, 4)
    first = rng.randrange(0, blocks // 4 - n)
    if rng.random() < 0.3:
        version += 1
        write(first, n, version)
    else:
        read(first, n)
    if rng.random() < 0.01:
        try:
            h.flush()
        except nbd.Error:
            if mode == "spared":
                raise
            failed["flush"] += 1
for b in range(0, blocks, 16):
    read(b, 16)
h.shutdown()
print(f"errors ok: {checked} blocks checked, failed {failed}")
