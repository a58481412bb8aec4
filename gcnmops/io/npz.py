"""NumPy archives of counts: ``.npz`` (counts, sample names, optionally seqnames/start/end) and ``.npy`` (a bare
matrix), read without following member paths, their sizes checked against the archive and the memory there
before anything is allocated, and the members' CRC-32s checked beside the conversion."""
from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import CountData, make_count_data, usable_cores
from ..errors import InputError
from .columns import count_data_from_array


def array_header(fh) -> tuple | None:
    """(shape, fortran order, dtype) of the .npy header at ``fh``'s position (left after it); None for a layout
    other than versions 1.0 and 2.0."""
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fh)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(fh)
    return None


def read_npz(path: Path, min_samples: int) -> CountData:
    """An .npz archive (see :func:`read_counts`). Arrays stored uncompressed (``np.savez``) are read in place
    (``_npz_member``): the counts are converted to float64 straight from the file and the seqnames become one
    Python string per run of equal names; their CRC-32s are checked (as ``np.load`` checks them) on every core
    beside that work (``_NpzCrc``)."""
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise InputError(f"Cannot read {path} as an .npz archive: {e}") from None
    if not hasattr(z, "files"):
        raise InputError(f"{path} is not an .npz archive (a single array? name it .npy).")
    checks = []  # (member name, ZipInfo, where its data starts in the file) of the members read in place
    try:
        keys = set(z.files)
        if "counts" not in keys:
            raise InputError(
                f"{path} has no array 'counts' (found: {', '.join(sorted(keys)) or 'none'}); save the "
                "regions x samples matrix as counts=..., optionally with sample_names, seqnames, start, end."
            )
        for key in ("counts", "sample_names", "seqnames", "start", "end"):
            if key in keys:
                name = key + ".npy" if key + ".npy" in z.zip.namelist() else key
                info = z.zip.getinfo(name)
                if info.flag_bits & 0x1:
                    raise InputError(f"{path}: the array {key!r} is encrypted; save the archive without a password.")
                with z.zip.open(info) as fh:  # only its header is read (inflated) here
                    _check_npy_size(fh, info.file_size, f"{path} (array {key!r})")
        counts = _npz_member(z, path, "counts", checks, keep_float64=False)
        names = z["sample_names"] if "sample_names" in keys else None
        coords = {k: _npz_member(z, path, k, checks) for k in ("seqnames", "start", "end") if k in keys}
    except InputError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        msg = str(e)
        if "allow_pickle" in msg or "Object arrays" in msg:
            raise InputError(f"{path} stores Python objects; save sample_names and seqnames as "
                             "string arrays (np.array(..., dtype=str)).") from None
        raise InputError(f"Cannot read {path} as an .npz archive: {msg}") from None
    finally:
        z.close()
    crc = _NpzCrc(path, checks)
    try:
        if counts.ndim != 2:
            raise InputError(f"{path}: 'counts' must be a 2-D regions x samples matrix, got shape {counts.shape}.")
        if names is not None:
            names = [str(s) for s in np.asarray(names).ravel()]
        ranges = None
        if coords:
            if len(coords) < 3:
                lack = ", ".join(k for k in ("seqnames", "start", "end") if k not in coords)
                raise InputError(f"{path} has coordinate array(s) {', '.join(coords)} but lacks {lack}; give all three "
                                 "or none.")
            ranges = pd.DataFrame({k: (_seqname_objects(v) if k == "seqnames" else np.asarray(v).ravel())
                                   for k, v in coords.items()}, copy=False)  # the coordinates copied once, checked
        data = make_count_data(counts, names, ranges, min_samples=min_samples, what=f"read count matrix of {path}",
                               owned_ranges=True)
    except InputError:
        crc.check()  # a damaged archive explains a bad value: say that first
        raise
    crc.check()
    return data


def _npz_member(z, path: Path, key: str, checks: list, keep_float64: bool = True) -> np.ndarray:
    """Array ``key`` of the open archive ``z``. Stored uncompressed, as ``np.savez`` stores it, it is mapped from
    the file (read-only ``np.memmap``; its CRC-32 is left to the caller: ``checks``), except a float64 Fortran
    array for ``keep_float64=False`` (the counts, which would be used as they are: read into memory then).
    Compressed, encrypted or unusual members are read by ``np.load`` (which checks the CRC-32)."""
    import struct

    name = key + ".npy" if key + ".npy" in z.zip.namelist() else key
    info = z.zip.getinfo(name)
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1 or info.file_size < 16:
        return z[key]
    try:
        with open(path, "rb") as fh:
            fh.seek(info.header_offset)
            local = fh.read(30)
            if len(local) != 30 or local[:4] != b"PK\x03\x04":
                return z[key]
            start = info.header_offset + 30 + sum(struct.unpack("<HH", local[26:30]))
            fh.seek(start)
            header = array_header(fh)
            if header is None:
                return z[key]
            shape, fortran, dtype = header
            offset = fh.tell()
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if dtype.hasobject or nbytes == 0 or offset - start + nbytes != info.file_size or \
                (not keep_float64 and dtype == np.float64 and (fortran or len(shape) < 2)):
            return z[key]
        arr = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")
    except (OSError, ValueError, struct.error):
        return z[key]  # np.load names the problem
    checks.append((name, info, start))
    return arr


class _NpzCrc:
    """The CRC-32s of the archive's members mapped by ``_npz_member``, computed from construction on, in pieces of
    32 MB on every core (zlib releases the GIL) and combined (``_crc32_combine``); ``check()`` waits and raises
    the InputError ``np.load`` would have led to."""

    PIECE = 1 << 25

    def __init__(self, path: Path, checks: list):
        import zlib
        from concurrent.futures import ThreadPoolExecutor

        self.path, self.jobs = path, []
        self.pool = ThreadPoolExecutor(max_workers=usable_cores()) if checks else None
        for name, info, start in checks:
            data = np.memmap(path, dtype=np.uint8, mode="r", offset=start, shape=(info.file_size,))
            pieces = [(self.pool.submit(zlib.crc32, data[a:a + self.PIECE]), min(self.PIECE, info.file_size - a))
                      for a in range(0, info.file_size, self.PIECE)]
            self.jobs.append((name, info.CRC, pieces))

    def check(self) -> None:
        jobs, self.jobs = self.jobs, []
        try:
            for name, expected, pieces in jobs:
                crc = 0
                for piece, length in pieces:
                    crc = _crc32_combine(crc, piece.result(), length)
                if crc != expected:
                    raise InputError(f"Cannot read {self.path} as an .npz archive: Bad CRC-32 for file {name!r}")
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=False, cancel_futures=True)


_CRC_POLY = 0xEDB88320  # CRC-32 (zlib's), reflected


def _gf2_multiply(a: int, b: int) -> int:
    """a(x) b(x) modulo the CRC polynomial (zlib's multmodp)."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if a & (m - 1) == 0:
                return p
        m >>= 1
        b = (b >> 1) ^ _CRC_POLY if b & 1 else b >> 1


def _x_power_table() -> list[int]:
    table, p = [], 1 << 30  # x^1
    for _ in range(32):
        table.append(p)
        p = _gf2_multiply(p, p)
    return table


_X_POWERS = _x_power_table()  # x^(2^k) modulo the polynomial


def _crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32 of A + B from crc1 = CRC-32(A), crc2 = CRC-32(B) and len(B) (zlib's crc32_combine)."""
    p, k, n = 1 << 31, 3, length2  # x^(8 n) = x^(n 2^3)
    while n:
        if n & 1:
            p = _gf2_multiply(_X_POWERS[k & 31], p)
        n >>= 1
        k += 1
    return _gf2_multiply(p, crc1) ^ crc2


def _seqname_objects(values: np.ndarray):
    """Chromosome names of a numpy unicode array as a pandas object Series of Python strings (the column pandas 2
    makes of such an array; pandas 3 would make Arrow strings, which the checks turn back into objects), with one
    string object per run of equal names (the rows of a chromosome), found by comparing the names' bytes in
    threads: no Python object per row is made or compared. Other arrays are returned as they are."""
    v = np.asarray(values).ravel()
    if v.dtype.kind != "U" or v.size < 2:
        return v
    step = 1 << 18

    def changes(a: int) -> np.ndarray:
        b = min(v.size - 1, a + step)
        try:
            raw = v[a:b + 1].view(f"V{v.dtype.itemsize}")
            changed = raw[1:] != raw[:-1]
        except (TypeError, ValueError):  # a numpy without void comparisons
            changed = v[a + 1:b + 1] != v[a:b]
        return np.flatnonzero(changed) + (a + 1)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, min(usable_cores(), -(-(v.size - 1) // step)))) as pool:
        firsts = np.concatenate([np.zeros(1, dtype=np.intp), *pool.map(changes, range(0, v.size - 1, step))])
    ends = np.append(firsts[1:], v.size)
    if firsts.size > 4096:
        out = np.repeat(v[firsts].astype(object), ends - firsts)
    else:
        out = np.empty(v.size, dtype=object)
        for name, a, b in zip(v[firsts].astype(object), firsts, ends):
            out[a:b] = name
    return pd.Series(out, dtype=object)


def _check_npy_size(fh, size: int, what: str) -> None:
    """Refuse, before anything is allocated, the .npy array read from ``fh`` (at its start; ``size`` bytes, its
    real, uncompressed length) whose header's shape x itemsize is not the data that follows (a damaged file, or a
    header claiming a huge array) or would not fit in the available memory (``available_memory``): InputError."""
    header = array_header(fh)
    if header is None:
        return  # a newer layout: np.load checks it
    shape, _, dtype = header
    if dtype.hasobject:
        return  # refused by np.load (no pickles)
    nbytes = math.prod(shape) * dtype.itemsize
    data = size - fh.tell()
    if nbytes != data:
        raise InputError(f"{what}: the header claims an array of shape {shape} ({nbytes:,} bytes of "
                         f"{dtype}), but {data:,} bytes of data follow: the file is damaged or not a .npy array "
                         "numpy wrote.")
    available = available_memory()
    if available is not None and nbytes > available:
        raise InputError(f"{what} is an array of shape {shape} ({nbytes / 1e9:,.1f} GB in memory), more than the "
                         f"memory available ({available / 1e9:,.1f} GB): nothing was read. Convert it with "
                         "`gcnmops convert` and run with --stream, or use a machine with more memory.")


def available_memory() -> int | None:
    """Bytes of memory this process can still take (the system's available memory, within a cgroup's limit),
    or None where the system does not say."""
    found = []
    try:
        with open("/proc/meminfo") as fh:
            found += [int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:")]
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            found.append(int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return max(0, min(found)) if found else None


def read_npy(path: Path, min_samples: int) -> CountData:
    try:
        with open(path, "rb") as fh:
            _check_npy_size(fh, os.fstat(fh.fileno()).st_size, str(path))
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise InputError(f"Cannot read {path} as a .npy array: {e}") from None
    if not isinstance(arr, np.ndarray):
        raise InputError(f"{path} is not a single .npy array.")
    return count_data_from_array(arr, min_samples=min_samples, what=f"read count matrix of {path}")


__all__ = ["read_npz", "read_npy", "available_memory"]
