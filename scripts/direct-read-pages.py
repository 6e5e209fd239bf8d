#!/usr/bin/env python3
"""Direct (O_DIRECT) sequential reads of REQUEST bytes from FILE into a
buffer of ordinary 4 KiB pages and into one offered for transparent huge
pages (MADV_HUGEPAGE), in alternating rounds of SECONDS each: how much a
direct read's cost depends on the pages its buffer sits in.

Usage: scripts/direct-read-pages.py FILE [REQUEST_BYTES] [ROUNDS] [SECONDS]
Offsets wrap at the end of FILE.
"""
import ctypes
import mmap
import os
import sys
import time

HUGE = 2 << 20


def rate_mib_s(fd, size, request, huge, seconds):
    m = mmap.mmap(-1, request + 2 * HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge:
        m.madvise(mmap.MADV_HUGEPAGE)
    view = memoryview(m)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    start = (-addr) % HUGE
    buf = view[start:start + request]
    for i in range(0, request, 4096):
        buf[i] = 1  # faulted in before timing
    n, offset, t0 = 0, 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        os.preadv(fd, [buf], offset)
        offset = (offset + request) % (size - size % request)
        n += 1
    elapsed = time.monotonic() - t0
    del buf
    view.release()
    m.close()
    return n * request / elapsed / (1 << 20)


def main():
    path = sys.argv[1]
    request = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 20
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    size = os.fstat(fd).st_size
    print(f"direct reads of {request} bytes from {path}, MiB/s")
    print("| round | 4 KiB pages | huge pages | huge / 4 KiB |")
    print("|---|---|---|---|")
    for r in range(rounds):
        small = rate_mib_s(fd, size, request, False, seconds)
        huge = rate_mib_s(fd, size, request, True, seconds)
        print(f"| {r + 1} | {small:.0f} | {huge:.0f} | {huge / small:.2f} |")


if __name__ == "__main__":
    main()
