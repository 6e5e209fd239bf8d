"""NBD conformance of `tiermux serve`, checked with libnbd (python3-libnbd):
FUA accepted on every command, write-zeroes and trim larger than the
largest read or write, zeros read back after write-zeroes with unaligned
ends, FAST_ZERO refused at once with ENOTSUP, and structured replies: a
large read arrives in chunks, one chunk when the client asks for it
("don't fragment"), and a client without structured replies reads the
same bytes.

Usage: /usr/bin/python3 conformance.py NBD_URI
"""
import sys

import nbd

h = nbd.NBD()
h.set_strict_mode(0)
h.connect_uri(sys.argv[1])
assert h.can_fua() and h.can_trim() and h.can_zero() and h.can_fast_zero()
size = h.get_size()
bs = 4096
# FUA on every command (client-side flag checks off, so that libnbd sends
# what the protocol allows rather than what it thinks useful).
h.pwrite(b'\xab' * (1 << 20), 0, nbd.CMD_FLAG_FUA)
assert h.pread(1 << 20, 0, nbd.CMD_FLAG_FUA) == b'\xab' * (1 << 20)
h.flush(nbd.CMD_FLAG_FUA)
h.trim(1 << 20, 0, nbd.CMD_FLAG_FUA)
# Large write-zeroes (more than 32 MiB, unaligned ends) reads back zeros.
for off in range(0, size, 32 << 20):
    n = min(32 << 20, size - off)
    h.pwrite(b'\x5c' * n, off)
zoff, zlen = 1000, 48 * (1 << 20) + 123
h.zero(zlen, zoff, nbd.CMD_FLAG_FUA)
got = h.pread(4096, 0)
assert got[:1000] == b'\x5c' * 1000 and got[1000:] == b'\0' * (4096 - 1000), "head"
for off in range(0, zoff + zlen, 8 << 20):
    n = min(8 << 20, zoff + zlen - off)
    chunk = h.pread(n, off)
    lo, hi = max(zoff - off, 0), min(zoff + zlen - off, n)
    assert chunk[lo:hi] == b'\0' * (hi - lo), "zeros at %d" % off
tail = h.pread(4096, zoff + zlen)
assert tail == b'\x5c' * 4096, "after the zeroed range"
# Large trim is accepted (advisory).
h.trim(size, 0)
# FAST_ZERO: refused at once with ENOTSUP.
try:
    h.zero(4096, 0, nbd.CMD_FLAG_FAST_ZERO)
    raise SystemExit("fast zero accepted")
except nbd.Error as e:
    assert e.errno == 95 or 'not supported' in str(e).lower(), e
# Structured replies: agreed by default; a 2 MiB read at an unaligned
# offset arrives in chunks of at most 256 KiB that cover it exactly.
assert h.get_structured_replies_negotiated() and h.can_df()
h.pwrite(bytes(range(256)) * (16 << 12), 0)
want = h.pread(2 << 20, 1000, nbd.CMD_FLAG_DF)
chunks = []


def chunk(subbuf, offset, status, error):
    assert status == nbd.READ_DATA and error.value == 0, (status, error)
    chunks.append((offset, bytes(subbuf)))
    return 0


got = h.pread_structured(2 << 20, 1000, chunk)
assert got == want == (bytes(range(256)) * (16 << 12))[1000:1000 + (2 << 20)]
assert len(chunks) == 9 and all(len(c) <= 256 << 10 for _, c in chunks), len(chunks)
assert b"".join(c for _, c in sorted(chunks)) == want
chunks.clear()
h.pread_structured(2 << 20, 1000, chunk, nbd.CMD_FLAG_DF)
assert len(chunks) == 1, len(chunks)
# A client that does not ask for structured replies reads the same bytes.
plain = nbd.NBD()
plain.set_request_structured_replies(False)
plain.connect_uri(sys.argv[1])
assert not plain.get_structured_replies_negotiated() and not plain.can_df()
assert plain.pread(2 << 20, 1000) == want
plain.shutdown()
print("conformance ok")
