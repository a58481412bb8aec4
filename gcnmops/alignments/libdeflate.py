"""libdeflate's raw-DEFLATE decompressor and CRC32, called from a numba kernel: a run of BGZF blocks inflated into one
buffer in a single call without the GIL (through Python, each block takes the GIL twice, and with many threads those
hand-offs, not the inflating, bound a large file's read).

The functions are the ones the ``deflate`` package exports from its extension module (libdeflate linked in); they
reach the kernel as first-class function arguments, so the compiled kernel is cached like any other.
:data:`AVAILABLE` is False where that package or its symbols are missing: callers then inflate block by block.
"""
from __future__ import annotations

import ctypes

import numba
import numpy as np

#: status of :func:`inflate_run` for a block whose data is not DEFLATE data, one that inflates to another size
#: than its own (libdeflate's results 1, and 2 or 3), and one failing its CRC32
BAD_DATA, BAD_SIZE, BAD_CRC = 1, 2, 4


def _functions():
    """(alloc, free, decompress, crc32) as typed ctypes functions, or None."""
    try:
        import deflate

        lib = ctypes.CDLL(deflate._deflate.__file__)
        alloc, free = lib.libdeflate_alloc_decompressor, lib.libdeflate_free_decompressor
        decompress, crc32 = lib.libdeflate_deflate_decompress, lib.libdeflate_crc32
    except Exception:  # noqa: BLE001 - optional accelerator
        return None
    u64, size = ctypes.c_uint64, ctypes.c_size_t  # pointers as 64-bit integers: numba passes array addresses so
    alloc.argtypes, alloc.restype = [], u64
    free.argtypes, free.restype = [u64], None
    decompress.argtypes, decompress.restype = [u64, u64, size, u64, size, u64], ctypes.c_int
    crc32.argtypes, crc32.restype = [ctypes.c_uint32, u64, size], ctypes.c_uint32
    return alloc, free, decompress, crc32


_FUNCTIONS = _functions() if ctypes.sizeof(ctypes.c_void_p) == 8 else None
AVAILABLE = _FUNCTIONS is not None


@numba.njit(nogil=True, cache=True)
def _inflate_run(decompress, crc32, state, src, meta, out):  # pragma: no cover - numba
    """Inflate the blocks of ``meta`` (rows: offset, data start, data end, CRC32, inflated size, as
    bam._find_blocks fills them) from ``src`` (the file's bytes) into ``out``, one after the other, each checked
    for its size and CRC32. Returns (the first failing block or -1, its status: 0, BAD_DATA, BAD_SIZE or
    BAD_CRC)."""
    base_in = src.ctypes.data
    base_out = out.ctypes.data
    at = 0
    for k in range(meta.shape[1]):
        isize = meta[4, k]
        if isize == 0:
            continue
        d0 = meta[1, k]
        result = decompress(state, base_in + d0, meta[2, k] - d0, base_out + at, isize, 0)
        if result != 0:
            return k, 1 if result == 1 else 2
        if crc32(0, base_out + at, isize) != meta[3, k]:
            return k, 4
        at += isize
    return -1, 0


def inflate_run(src: np.ndarray, meta: np.ndarray, out: np.ndarray) -> tuple[int, int]:
    """The blocks of ``meta`` (5, k) int64 inflated from ``src`` (uint8, the mapped file) into ``out`` (uint8, room
    for their inflated sizes), with libdeflate and without the GIL. Returns (the first block that fails, or -1;
    BAD_DATA, BAD_SIZE or BAD_CRC, or 0)."""
    alloc, free, decompress, crc32 = _FUNCTIONS
    state = alloc()
    if not state:
        raise MemoryError("libdeflate could not allocate a decompressor")
    try:
        k, status = _inflate_run(decompress, crc32, state, src, meta, out)
    finally:
        free(state)
    return int(k), int(status)


__all__ = ["AVAILABLE", "BAD_DATA", "BAD_SIZE", "BAD_CRC", "inflate_run"]
