"""BGZF, the blocked gzip that bgzip writes and tabix indexes, deflated on several threads.

The text is cut into blocks of ``BLOCK_BYTES`` (htslib's block size); each block is one gzip member with the
``BC`` extra field holding its compressed size, deflated by zlib at htslib's default level (``LEVEL``) on a pool
of threads (zlib releases Python's lock while it deflates), and written in order; the file ends with BGZF's empty
end-of-file block. Any reader of gzip, and htslib (tabix, bcftools, IGV), reads it as bgzip's own output.
"""
from __future__ import annotations

import struct
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..data import usable_cores

#: uncompressed bytes per block (htslib's BGZF_BLOCK_SIZE)
BLOCK_BYTES = 0xFF00
#: zlib's level (htslib's default, -1: zlib's 6)
LEVEL = 6
#: blocks handed to the threads at a time
BLOCKS_PER_ROUND = 64
#: the empty block that ends every BGZF file
EOF_BLOCK = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
_HEADER = struct.Struct("<4BI2BH2BHH")  # ID1 ID2 CM FLG, MTIME, XFL OS, XLEN, SI1 SI2, SLEN, BSIZE
_FOOTER = struct.Struct("<II")  # CRC32, ISIZE


def block(data: bytes, level: int = LEVEL) -> bytes:
    """One BGZF block of ``data`` (at most BLOCK_BYTES bytes); stored as is where deflating would not fit."""
    deflate = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = deflate.compress(data) + deflate.flush()
    if len(body) + 26 > 65536:  # incompressible: level 0 (stored) always fits a block of BLOCK_BYTES
        deflate = zlib.compressobj(0, zlib.DEFLATED, -15)
        body = deflate.compress(data) + deflate.flush()
    return (_HEADER.pack(31, 139, 8, 4, 0, 0, 255, 6, 66, 67, 2, len(body) + 25) + body
            + _FOOTER.pack(zlib.crc32(data), len(data)))


class BgzfWriter:
    """A binary file written as BGZF (``write(bytes)``, ``close()``; a context manager), its blocks deflated on
    ``threads`` threads (default: the usable cores, at most 8)."""

    def __init__(self, path, threads: int | None = None):
        self.out = open(Path(path), "wb")
        self.pool = ThreadPoolExecutor(max(1, threads or min(8, usable_cores())), thread_name_prefix="gcnmops-bgzf")
        self.pending = bytearray()

    def write(self, data: bytes) -> None:
        self.pending += data
        if len(self.pending) >= BLOCK_BYTES * BLOCKS_PER_ROUND:
            self._flush(whole_blocks=True)

    def _flush(self, whole_blocks: bool) -> None:
        n = len(self.pending) - len(self.pending) % BLOCK_BYTES if whole_blocks else len(self.pending)
        view = bytes(self.pending[:n])
        del self.pending[:n]
        for piece in self.pool.map(block, [view[a:a + BLOCK_BYTES] for a in range(0, n, BLOCK_BYTES)]):
            self.out.write(piece)

    def close(self) -> None:
        try:
            self._flush(whole_blocks=False)
            self.out.write(EOF_BLOCK)
        finally:
            self.pool.shutdown()
            self.out.close()

    def __enter__(self) -> "BgzfWriter":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.close()
        else:
            self.pool.shutdown(cancel_futures=True)
            self.out.close()


def bgzip_file(src, dst, threads: int | None = None) -> None:
    """BGZF-compress the file ``src`` into ``dst`` (what ``bgzip`` writes)."""
    with open(src, "rb") as fh, BgzfWriter(dst, threads) as out:
        while chunk := fh.read(BLOCK_BYTES * BLOCKS_PER_ROUND):
            out.write(chunk)


__all__ = ["BgzfWriter", "bgzip_file", "block", "BLOCK_BYTES"]
