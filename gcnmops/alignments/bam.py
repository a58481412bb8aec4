"""Reading BAM files for read counting: headers, windows, regions, and a fast parallel record scanner.

cn.mops counts reads with Rsamtools (``getReadCountsFromBAM`` / ``getSegmentReadCountsFromBAM``).
The rule (spec 30, section 5; checked against the golden ``bam_counts`` and Rsamtools itself):

* a read counts iff it is mapped (flag 0x4 unset; Rsamtools reports an unmapped read's position and
  mapping quality as NA) and its mapping quality is >= ``min_mapq`` (1). A mapping quality of 255
  ("unavailable" in the SAM spec) is an ordinary 255 for Rsamtools, so it counts. Duplicates,
  secondary, supplementary and QC-failed reads are not filtered;
* it is counted at its leftmost aligned position ``pos`` (1-based), in every region holding it.

The scanner reads BAM (BGZF) itself rather than through htslib: the file is memory-mapped and its
BGZF blocks (CRC32 and size checked) are inflated with libdeflate (the ``deflate`` package), ISA-L
(``isal``) or zlib, whichever is installed first in that order; all release the GIL. A numba kernel
(nogil) walks the records and adds each qualifying read to its elementary interval between the
sorted breakpoints of the regions (windows are regions too), so a region's count is a difference
of prefix sums and overlapping regions cost nothing extra.

With several threads, each pool task inflates a group of consecutive blocks and scans it at once,
on the guess that a record starts at the group's first byte (htslib starts every record that fits
in a block at a block boundary). The main thread takes the groups in order: when the previous
group ended on a record boundary the guess holds and the task's run-length counts are merged;
otherwise (a record straddles the groups, as other writers produce) the group is scanned again in
order. So all the work runs in parallel and the result never depends on the guess.

No index is needed to count a whole file; when only some references are counted and a current
``.bai`` index is present, only the blocks holding those references are read.
``engine="pysam"`` counts through pysam instead (slower, same rule), which the tests use as an
independent check. CRAM files (told by their magic bytes) are always counted through pysam, decoded
against the reference FASTA they were written with.

A file's header and index are read by ``alignments.bamheader``; the windows, regions and counting plan are
``alignments.regions``'s.
"""
from __future__ import annotations

import logging
import mmap
import os
import zlib
from collections import deque
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

import numba
import numpy as np

from ..errors import InputError
from . import libdeflate
from .bamheader import BamHeader, HeaderParser, find_index, open_pysam, read_bai_spans
from .regions import CountPlan

log = logging.getLogger("gcnmops")

_BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
#: BGZF blocks inflated per thread-pool task (at most; fewer for small files).
_GROUP_BLOCKS = 16
#: BGZF blocks inflated per task by libdeflate's kernel (at most; ~8 MiB of text): few GIL hand-offs per file
_RUN_BLOCKS = 128
#: BGZF blocks located per call of the block finder.
_FIND_BATCH = 8192
#: blocks inflated here (no pool) between two reports of the bytes read
_INLINE_REPORT = 256


# --------------------------------------------------------------------------------------------
# inflating BGZF blocks
# --------------------------------------------------------------------------------------------
def _make_inflater() -> tuple[str, Callable[[memoryview, int], bytes], Callable[[bytes], int]]:
    """The fastest raw-DEFLATE decompressor available (libdeflate, ISA-L, else zlib) and a CRC32."""
    try:
        import deflate  # libdeflate

        fn = deflate.deflate_decompress
        return "libdeflate", (lambda data, isize: fn(data, isize) if isize else b""), deflate.crc32
    except Exception:  # noqa: BLE001 - optional accelerator
        pass
    try:
        from isal import isal_zlib

        return "isal", (lambda data, isize: isal_zlib.decompress(data, -15, max(isize, 1))), isal_zlib.crc32
    except Exception:  # noqa: BLE001
        pass
    return "zlib", (lambda data, isize: zlib.decompress(data, -15, max(isize, 1))), zlib.crc32


INFLATER_NAME, _inflate, _crc32 = _make_inflater()


@numba.njit(nogil=True, cache=True)
def _find_blocks(buf, start, stop, meta):  # pragma: no cover - numba
    """Locate up to ``meta.shape[1]`` complete BGZF blocks in buf[start:stop].

    Fills meta[:, k] = (block offset, data start, data end, CRC32, inflated size) of block k and
    returns (n blocks found, offset after the last one, status): status 0 ok, 1 a block runs past
    ``stop`` (truncated file), -1 not a gzip/BGZF header at that offset, -2 no BC subfield.
    """
    n = 0
    p = start
    max_blocks = meta.shape[1]
    while n < max_blocks and p < stop:
        if p + 18 > stop:
            return n, p, 1
        if buf[p] != 31 or buf[p + 1] != 139 or buf[p + 2] != 8 or (buf[p + 3] & 4) == 0:
            return n, p, -1
        xlen = np.int64(buf[p + 10]) | (np.int64(buf[p + 11]) << 8)
        q = p + 12
        xend = q + xlen
        bsize = np.int64(-1)
        while q + 4 <= xend:
            slen = np.int64(buf[q + 2]) | (np.int64(buf[q + 3]) << 8)
            if buf[q] == 66 and buf[q + 1] == 67 and slen == 2:
                bsize = (np.int64(buf[q + 4]) | (np.int64(buf[q + 5]) << 8)) + 1
            q += 4 + slen
        if bsize < 0:
            return n, p, -2
        if p + bsize > stop or xend + 8 > p + bsize:
            return n, p, 1
        e = p + bsize - 8
        meta[0, n] = p
        meta[1, n] = xend
        meta[2, n] = e
        meta[3, n] = (np.int64(buf[e]) | (np.int64(buf[e + 1]) << 8) | (np.int64(buf[e + 2]) << 16)
                      | (np.int64(buf[e + 3]) << 24))
        meta[4, n] = (np.int64(buf[e + 4]) | (np.int64(buf[e + 5]) << 8) | (np.int64(buf[e + 6]) << 16)
                      | (np.int64(buf[e + 7]) << 24))
        n += 1
        p += bsize
    return n, p, 0


def _inflate_block(view: memoryview, o: int, d: int, e: int, crc: int, isize: int, path: str) -> bytes:
    """Inflate one BGZF block (data view[d:e]) and check its size and CRC32."""
    try:
        data = _inflate(view[d:e], isize)
    except Exception as err:  # noqa: BLE001 - zlib.error, deflate.DeflateError, isal error
        raise InputError(f"{path}: corrupt BGZF block at byte {o} ({err}); the file is damaged.") from None
    if len(data) != isize or _crc32(data) != crc:
        raise InputError(f"{path}: BGZF block at byte {o} fails its {'size' if len(data) != isize else 'CRC32'} "
                         "check; the file is damaged.")
    return data


def _inflate_group(view: memoryview, blocks: list[tuple[int, int, int, int, int]], path: str) -> list[bytes]:
    """Inflate consecutive BGZF blocks (runs in a pool thread); empty blocks are left out."""
    out = []
    for o, d, e, crc, isize in blocks:
        data = _inflate_block(view, o, d, e, crc, isize, path)
        if data:
            out.append(data)
    return out


class _MappedFile:
    """A read-only memory map of a file (empty files are refused); ``kind`` names it in messages."""

    def __init__(self, path: Path, kind: str = "BAM file") -> None:
        self.path, self.kind = str(path), kind
        try:
            self._fh = open(path, "rb")
        except FileNotFoundError:
            raise InputError(f"{kind[:1].upper()}{kind[1:]} not found: {path}") from None
        except IsADirectoryError:
            raise InputError(f"{path} is a directory, not a {kind}.") from None
        except OSError as err:
            raise InputError(f"Cannot read {kind} {path}: {err.strerror or err}.") from None
        size = os.fstat(self._fh.fileno()).st_size
        if size == 0:
            self._fh.close()
            raise InputError(f"{kind[:1].upper()}{kind[1:]} {path} is empty.")
        self.size = size
        try:
            self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as err:
            self._fh.close()
            raise InputError(f"Cannot map {kind} {path} into memory ({err}): give a regular file.") from None
        self.view = memoryview(self._mm)
        self.array = np.frombuffer(self._mm, dtype=np.uint8)

    def close(self) -> None:
        del self.array
        try:
            self.view.release()
            self._mm.close()
        except BufferError:  # a slice handed to a pool thread is still alive; the map goes with it
            pass
        self._fh.close()

    def __enter__(self) -> "_MappedFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _group_size(nbytes: int, n_threads: int) -> int:
    """Blocks per pool task: at most _GROUP_BLOCKS (~1 MiB inflated), few enough that every thread
    gets several tasks (inline reading takes one block at a time, scanned while still in cache)."""
    est_blocks = max(nbytes, 1) // 20000 + 1
    return int(min(_GROUP_BLOCKS, max(1, est_blocks // (4 * n_threads))))


def _blocks_error(f: _MappedFile, p: int, status: int) -> InputError:
    """The error for no BGZF block found at byte ``p`` (``_find_blocks``' status)."""
    if status == 1:
        return InputError(f"{f.path}: truncated {f.kind} (a BGZF block at byte {p} runs past the end of the file).")
    what = "not a BGZF block" if status == -1 else "a gzip block without the BGZF size field"
    hint = " (gcnmops reads BAM and CRAM; convert SAM with samtools view -b)" if f.kind == "BAM file" else ""
    return InputError(f"{f.path}: {what} at byte {p}: not a {f.kind}, or a damaged one{hint}.")


def _block_groups(f: _MappedFile, start: int, stop: int, group: int) -> Iterator[np.ndarray]:
    """The BGZF blocks in compressed bytes [start, stop), in order, as (5, k) int64 arrays of up to ``group``
    consecutive blocks (_find_blocks' rows: offset, data offset, end, CRC32, inflated size); InputError where no
    block is found."""
    meta = np.empty((5, _FIND_BATCH), np.int64)
    p = start
    while p < stop:
        n, p_next, status = _find_blocks(f.array, p, stop, meta)
        if n == 0:
            raise _blocks_error(f, p, status)
        for a in range(0, n, group):
            yield meta[:, a:min(n, a + group)].copy()  # meta is refilled by the next search
        p = p_next


def _in_order(pool: Executor | None, n_threads: int, task: Callable, items: Iterator) -> Iterator:
    """``task(item)`` of each of ``items``, in order: here without a pool, else in the pool with at most
    ``4 * n_threads`` tasks in flight (those left cancelled when the reader stops early)."""
    if pool is None:
        for item in items:
            yield task(item)
        return
    pending: deque = deque()
    try:
        for item in items:
            pending.append(pool.submit(task, item))
            while len(pending) > 4 * n_threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for fut in pending:
            fut.cancel()


def _inflated_chunks(f: _MappedFile, start: int, stop: int, pool: Executor | None, n_threads: int,
                     on_bytes: Callable[[int], None] | None = None, plan: "CountPlan | None" = None,
                     min_mapq: int = 1, join: bool = True) -> Iterator["_Chunk"]:
    """Yield the BGZF blocks in compressed bytes [start, stop), inflated, in order, as chunks.
    ``join=False`` (no ``plan``): each chunk's data is the list of its blocks' bytes, not joined (the join is a
    copy under the GIL that a text reader copying the bytes anyway need not pay).

    Inline (no pool): one chunk per block, not scanned. With a pool: groups of blocks inflated (and,
    given a ``plan``, speculatively scanned) in the pool, at most ``4 * n_threads`` groups in
    flight. ``on_bytes(n)`` reports the compressed bytes of each group consumed.
    """
    if pool is None:
        for m in _block_groups(f, start, stop, _INLINE_REPORT):
            for o, d, e, crc, isize in m.T.tolist():
                data = _inflate_block(f.view, o, d, e, crc, isize, f.path)
                if data:
                    yield _Chunk(data if join else [data])
            if on_bytes:
                on_bytes(int(m[2, -1]) + 8 - int(m[0, 0]))
        return

    def task(m: np.ndarray):
        if libdeflate.AVAILABLE:  # the group in one call, without the GIL between its blocks
            data = _inflate_meta(f, m).tobytes()
            inflated = [data] if data else []
        else:
            inflated = _inflate_group(f.view, m.T.tolist(), f.path)
        nbytes = int(m[2, -1]) + 8 - int(m[0, 0])
        if plan is None:
            return _Chunk(b"".join(inflated) if join else inflated), nbytes
        return _speculate(inflated, plan, min_mapq), nbytes

    for chunk, nbytes in _in_order(pool, n_threads, task,
                                   _block_groups(f, start, stop, _group_size(stop - start, n_threads))):
        if on_bytes:
            on_bytes(nbytes)
        yield chunk


# --------------------------------------------------------------------------------------------
# the header
# --------------------------------------------------------------------------------------------
def _header_from(chunks: Iterator[_Chunk], path: str) -> tuple[BamHeader, bytes, int]:
    """Parse the header from the first inflated chunks; return it, the data consumed (which may
    hold the first records) and the offset of the first record in that data."""
    parser = HeaderParser(path)
    for chunk in chunks:
        parsed = parser.feed(chunk.data)
        if parsed is not None:
            return parsed[0], bytes(parser.buf), parsed[1]
    raise InputError(f"{path}: truncated BAM file (the header is incomplete).")


def read_bam_header(path: str | os.PathLike) -> BamHeader:
    """The reference names and lengths of a BAM file (InputError if missing or not a BAM)."""
    with _MappedFile(Path(path)) as f:
        chunks = _inflated_chunks(f, 0, f.size, None, 1)
        try:
            return _header_from(chunks, f.path)[0]
        finally:
            chunks.close()


# --------------------------------------------------------------------------------------------
# the record scanner
# --------------------------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True, inline="always")
def _i32(buf, p):  # pragma: no cover - numba
    v = np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16) | (np.int64(buf[p + 3]) << 24)
    if v >= 2147483648:
        v -= 4294967296
    return v


@numba.njit(nogil=True, cache=True)
def _scan_records(buf, start, ref_slot, bp, bp_off, cache, min_mapq, counts, run_j, run_n):  # pragma: no cover
    """Count the complete records of buf[start:].

    Each qualifying read adds one to ``counts[j]`` (its elementary interval), or, when ``run_j`` is
    not empty, to a run-length list (run_j, run_n) of the intervals hit, for merging later.
    Returns (offset of the first incomplete record, status, number of runs); status 0 ok, else
    the record at that offset is damaged: 1 block_size too small, 2 reference id out of range.
    """
    end = buf.size
    n_ref = ref_slot.size
    runs = run_j.size > 0
    n_runs = 0
    last = np.int64(-1)
    p = np.int64(start)
    while p + 4 <= end:
        bs = _i32(buf, p)
        if bs < 32:
            return p, 1, n_runs
        if p + 4 + bs > end:
            break
        refid = _i32(buf, p + 4)
        if refid >= n_ref or refid < -1:
            return p, 2, n_runs
        if refid >= 0:
            slot = ref_slot[refid]
            if slot >= 0:
                flag = np.int64(buf[p + 18]) | (np.int64(buf[p + 19]) << 8)
                if (flag & 4) == 0 and np.int64(buf[p + 13]) >= min_mapq:
                    x = _i32(buf, p + 8) + 1
                    lo = bp_off[slot]
                    hi = bp_off[slot + 1] - 1  # intervals lo .. hi-1
                    if hi > lo and bp[lo] <= x and x < bp[hi]:
                        j = cache[slot]
                        if not (bp[j] <= x and x < bp[j + 1]):
                            a = lo
                            b = hi  # bp[a] <= x < bp[b]
                            while b - a > 1:
                                mid = (a + b) >> 1
                                if bp[mid] <= x:
                                    a = mid
                                else:
                                    b = mid
                            j = a
                            cache[slot] = j
                        if not runs:
                            counts[j] += 1
                        elif j == last:
                            run_n[n_runs - 1] += 1
                        else:
                            run_j[n_runs] = j
                            run_n[n_runs] = 1
                            n_runs += 1
                            last = j
        p += 4 + bs
    return p, 0, n_runs


_NO_RUNS = np.empty(0, np.int64)
_MIN_RECORD = 36  # block_size field + 32 bytes of fixed fields


class _Chunk:
    """Inflated data of one or more consecutive BGZF blocks, with a speculative scan of it.

    ``spec`` = (end offset, status, run_j, run_n): the data scanned in a pool thread on the guess
    that a record starts at its first byte (true unless a record straddles the group's first block
    boundary: BAM writers such as htslib start records at block boundaries), or None.
    """

    __slots__ = ("data", "spec")

    def __init__(self, data: bytes, spec=None) -> None:
        self.data = data
        self.spec = spec


def _speculate(blocks: list[bytes], plan: "CountPlan", min_mapq: int) -> _Chunk:
    data = blocks[0] if len(blocks) == 1 else b"".join(blocks)
    n = len(data) // _MIN_RECORD + 1
    run_j = np.empty(n, np.int64)
    run_n = np.empty(n, np.int64)
    p, status, n_runs = _scan_records(np.frombuffer(data, np.uint8), 0, plan.ref_slot, plan.bp, plan.bp_off,
                                      plan.bp_off[:-1].copy(), min_mapq, _NO_RUNS, run_j, run_n)
    return _Chunk(data, (int(p), int(status), run_j[:n_runs], run_n[:n_runs]))


class _Scanner:
    """Feeds inflated chunks (records may straddle chunks) to the numba kernel."""

    def __init__(self, plan: CountPlan, counts: np.ndarray, min_mapq: int, path: str) -> None:
        self.plan = plan
        self.counts = counts
        self.min_mapq = int(min_mapq)
        self.path = path
        self.cache = plan.bp_off[:-1].copy()
        self.carry = b""

    def _scan(self, arr: np.ndarray, start: int) -> int:
        p, status, _ = _scan_records(arr, start, self.plan.ref_slot, self.plan.bp, self.plan.bp_off, self.cache,
                                     self.min_mapq, self.counts, _NO_RUNS, _NO_RUNS)
        self._check(status)
        return int(p)

    def _check(self, status: int) -> None:
        if status:
            why = "a record shorter than its fixed fields" if status == 1 else "a reference id beyond the header"
            raise InputError(f"{self.path}: damaged BAM record ({why}); the file is corrupt.")

    def feed_chunk(self, chunk: _Chunk) -> None:
        """Take a chunk's speculative scan when its guess holds (no record pending), else scan it here."""
        if chunk.spec is None or self.carry:
            self.feed(chunk.data)
            return
        p, status, run_j, run_n = chunk.spec
        self._check(status)
        if run_j.size:
            np.add.at(self.counts, run_j, run_n)
        self.carry = chunk.data[p:] if p < len(chunk.data) else b""

    def feed(self, chunk: bytes, start: int = 0) -> None:
        if self.carry:
            carry = self.carry
            if len(carry) < 4:
                take = min(4 - len(carry), len(chunk) - start)
                carry += chunk[start:start + take]
                start += take
                if len(carry) < 4:
                    self.carry = carry
                    return
            need = 4 + int.from_bytes(carry[:4], "little", signed=True) - len(carry)
            if need > len(chunk) - start:
                self.carry = carry + chunk[start:]
                return
            record = carry + chunk[start:start + need]
            start += need
            self.carry = b""
            arr = np.frombuffer(record, dtype=np.uint8)
            if self._scan(arr, 0) != len(record):
                raise InputError(f"{self.path}: damaged BAM record spanning two BGZF blocks.")
        arr = np.frombuffer(chunk, dtype=np.uint8)
        p = self._scan(arr, start)
        if p < len(chunk):
            self.carry = chunk[p:]


def count_bam_native(path: str | os.PathLike, header: BamHeader, plan: CountPlan, *, min_mapq: int = 1,
                     pool: Executor | None = None, n_threads: int = 1,
                     on_bytes: Callable[[int], None] | None = None) -> np.ndarray:
    """Elementary-interval counts (``plan`` layout) of one BAM file with the built-in scanner."""
    counts = plan.new_counts()
    done = [0]

    def advance(nbytes: int) -> None:
        done[0] += nbytes
        if on_bytes:
            on_bytes(nbytes)

    with _MappedFile(Path(path)) as f:
        _eof_check(f)
        spans = _restricted_spans(f, header, plan)
        if spans is None:
            chunks = _inflated_chunks(f, 0, f.size, pool, n_threads, advance, plan, min_mapq)
            head, buf, first = _header_from(chunks, f.path)
            if head.references != header.references or head.lengths != header.lengths:
                raise InputError(f"{f.path}: the BAM header differs from the one read before counting.")
            scanner = _Scanner(plan, counts, min_mapq, f.path)
            scanner.feed(buf, first)
            for chunk in chunks:
                scanner.feed_chunk(chunk)
            if scanner.carry:
                raise InputError(f"{f.path}: truncated BAM file (the last record is incomplete).")
        else:
            for (c_beg, u_beg), c_stop in spans:
                scanner = _Scanner(plan, counts, min_mapq, f.path)
                chunks = _inflated_chunks(f, c_beg, c_stop, pool, n_threads, advance, plan, min_mapq)
                first = next(chunks, None)
                if first is not None:
                    scanner.feed(first.data, u_beg)
                for chunk in chunks:
                    scanner.feed_chunk(chunk)
        if on_bytes and f.size > done[0]:
            on_bytes(f.size - done[0])  # the parts skipped with the index
    return counts


def _restricted_spans(f: _MappedFile, header: BamHeader, plan: CountPlan):
    """Compressed byte spans to read when the index lets us skip references, else None (whole file).

    Each span: ((block offset, offset in the inflated block) of the first record, compressed stop).
    """
    if len(plan.refs) == len(header.references):
        return None
    idx = find_index(f.path)
    if idx is None:
        return None
    try:
        if idx.stat().st_mtime < os.stat(f.path).st_mtime:
            log.warning("Index %s is older than %s: not using it.", idx, f.path)
            return None
    except OSError:
        return None
    spans = read_bai_spans(idx, len(header.references))
    if spans is None:
        return None
    wanted = sorted(spans[r] for r in plan.refs if spans[r] is not None)
    merged: list[list[int]] = []
    for beg, end in wanted:
        # merge spans that touch the same BGZF block: reading a span's last block whole must not
        # count the records of a later selected reference twice
        if merged and (beg >> 16) <= (merged[-1][1] >> 16):
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([beg, end])
    out = []
    for beg, end in merged:
        c_end, u_end = end >> 16, end & 0xFFFF
        stop = c_end
        if u_end:  # the block holding the end offset is needed too: find its size
            n, p_next, status = _find_blocks(f.array, c_end, f.size, np.empty((5, 1), np.int64))
            if n != 1:
                return None
            stop = p_next
        if not (0 <= (beg >> 16) < stop <= f.size):
            return None
        out.append(((beg >> 16, beg & 0xFFFF), stop))
    return out


def _eof_check(f: _MappedFile) -> None:
    """InputError unless the file ends with BGZF's end-of-file block (htslib warns "EOF marker is absent"): a
    file cut at a block boundary would otherwise count fewer reads without a word."""
    if f.size < 28 or bytes(f.view[f.size - 28:]) != _BGZF_EOF:
        raise InputError(f"{f.path}: truncated {f.kind} (no BGZF end-of-file block: htslib reports \"EOF marker "
                         "is absent\"): is the copy complete? Copy it again, or rewrite it with samtools view -b.")


# --------------------------------------------------------------------------------------------
# pysam engine (reference implementation; also reads what pysam reads)
# --------------------------------------------------------------------------------------------
def count_bam_pysam(path: str | os.PathLike, header: BamHeader, plan: CountPlan, *, min_mapq: int = 1,
                    n_threads: int = 1, reference: str | os.PathLike | None = None) -> np.ndarray:
    """Elementary-interval counts of one BAM, or of a CRAM decoded against the FASTA ``reference``, through
    pysam (fetch per reference with an index, else one pass over the file)."""
    counts = plan.new_counts()
    bam = open_pysam(path, reference, n_threads)
    with bam:
        names = [header.references[r] for r in plan.refs]
        positions = {r: [] for r in plan.refs}
        # one iterator at a time: CRAM iterators of one file share its decoder state (made all at once, the
        # second one's reads come back through the first)
        if bam.has_index():
            iters = ((r, lambda name=name: bam.fetch(name)) for r, name in zip(plan.refs, names))
        else:
            iters = iter([(None, lambda: bam.fetch(until_eof=True))])
        try:
            for ref, fetch in iters:
                for read in fetch():
                    if read.is_unmapped or read.mapping_quality < min_mapq:
                        continue
                    rid = read.reference_id if ref is None else ref
                    if rid in positions:
                        positions[rid].append(read.reference_start + 1)
        except (OSError, ValueError) as err:
            hint = f" (is {reference} the FASTA the CRAM was written with?)" if reference is not None else ""
            raise InputError(f"Reading {path} failed: {err}{hint}") from None
    for k, r in enumerate(plan.refs):
        x = np.asarray(positions[r], np.int64)
        bp = plan.bp[plan.bp_off[k]:plan.bp_off[k + 1]]
        j = np.searchsorted(bp, x, side="right") - 1
        ok = (j >= 0) & (j < bp.size - 1)
        counts[plan.bp_off[k]:plan.bp_off[k + 1]] += np.bincount(j[ok], minlength=bp.size)
    return counts


def is_bgzf(path: str | os.PathLike) -> bool:
    """Whether the file starts with a BGZF block (bgzip's and BAM's gzip with the 'BC' block-size field)."""
    with open(path, "rb") as fh:
        head = fh.read(18)
    return len(head) == 18 and head[:4] == b"\x1f\x8b\x08\x04" and head[12:14] == b"BC"


def inflate_bgzf(path: str | os.PathLike, *, threads: int | None = None, kind: str = "bgzipped file",
                 each: Callable | None = None) -> Iterator:
    """The inflated data of a BGZF file, in file order, as buffers (bytes, or uint8 arrays): the blocks are
    inflated on ``threads`` threads (default: every usable core) in groups, a few groups ahead of the reader, each
    block's size and CRC32 checked (InputError naming the ``kind`` of file and the byte). With libdeflate's
    kernel (:mod:`.libdeflate`) each group is one array, inflated without the GIL; else one buffer per block.
    ``each``: a function of a buffer, applied to every one where it was inflated; its results are yielded instead
    (the data itself let go: e.g. counting the lines of a file too large to hold)."""
    n = threads or default_threads()
    pool = make_pool(n)
    try:
        with _MappedFile(Path(path), kind) as f:
            _eof_check(f)
            if libdeflate.AVAILABLE:
                yield from _inflated_runs(f, pool, n, each)
                return
            for chunk in _inflated_chunks(f, 0, f.size, pool, n, join=False):
                yield from (chunk.data if each is None else map(each, chunk.data))
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def bgzf_inflated_size(path: str | os.PathLike, kind: str = "bgzipped file", blocks: int = 256) -> int:
    """The bytes a BGZF file inflates to, from its blocks' headers (nothing inflated): exact when it has at most
    ``blocks`` blocks, else estimated from its first ``blocks`` (their inflated over their compressed bytes, times
    the file's size; reading every header of a large file costs ~0.3 s per GB)."""
    meta = np.empty((5, max(1, blocks)), np.int64)
    with _MappedFile(Path(path), kind) as f:
        n, p, status = _find_blocks(f.array, 0, f.size, meta)
        if n == 0:
            raise _blocks_error(f, 0, status)
        inflated = int(meta[4, :n].sum())
        return inflated if p >= f.size else int(inflated * f.size / p)


def _inflate_meta(f: _MappedFile, m: np.ndarray) -> np.ndarray:
    """The blocks of ``m`` ((5, k) int64, as _find_blocks fills it) inflated by libdeflate's kernel into one uint8
    array, each checked (InputError naming the block's byte)."""
    out = np.empty(int(m[4].sum()), np.uint8)
    k, status = libdeflate.inflate_run(f.array, m, out)
    if k >= 0:
        at = int(m[0, k])
        if status == libdeflate.BAD_DATA:
            raise InputError(f"{f.path}: corrupt BGZF block at byte {at} (not DEFLATE data); the file is damaged.")
        check = "size" if status == libdeflate.BAD_SIZE else "CRC32"
        raise InputError(f"{f.path}: BGZF block at byte {at} fails its {check} check; the file is damaged.")
    return out


def _inflated_runs(f: _MappedFile, pool: Executor | None, n_threads: int, each: Callable | None = None) -> Iterator:
    """The whole file's blocks inflated by libdeflate's kernel, a group of consecutive blocks (up to
    _RUN_BLOCKS, fewer when that gives a thread fewer than 4 groups) into each uint8 array, in order (or
    ``each`` of it, applied in the task); with a pool, at most ``4 * n_threads`` groups in flight."""
    group = int(min(_RUN_BLOCKS, max(1, (f.size // 20000 + 1) // (4 * n_threads))))

    def task(m: np.ndarray):
        out = _inflate_meta(f, m)
        return out if each is None else each(out)

    yield from _in_order(pool, n_threads, task, _block_groups(f, 0, f.size, group))


def default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS / Windows
        return max(1, os.cpu_count() or 1)


def make_pool(n_threads: int) -> ThreadPoolExecutor | None:
    return ThreadPoolExecutor(n_threads, thread_name_prefix="gcnmops-bgzf") if n_threads > 1 else None
