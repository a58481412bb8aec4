"""Tab-separated tables of a name, two 64-bit integers and plain 32-bit integer cells (``chr1<TAB>0<TAB>100<TAB>
12<TAB>7...``, the depth matrices GATK-SV and binCov write), parsed in parallel: the text is cut into chunks at line
ends, and each chunk is parsed by a compiled kernel (numba, GIL released) on its own thread straight into its rows
of the table.

Strict by design: the kernel accepts only lines of exactly the expected fields, separated by single tabs and ended
by ``\\n``, a non-empty name without ``\\r``, and integers ``[-+]?[0-9]+`` within their type. Anything else (NA,
'.', decimals, a number beyond 32 bits, spaces, CRLF, blank or ragged lines, a name that is not UTF-8) makes
:func:`read_int_table` return None, and the caller reads the file by its exact, slower path.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable

import numpy as np
from numba import njit

#: text per parse task (bytes): enough to amortize a task, small enough to spread a file over every core
CHUNK_BYTES = 16 << 20

_TAB, _NL, _CR = 9, 10, 13
_OK, _ODD = 0, 1
_INT32_MAX, _INT64_DIGITS = 2147483647, 18  # int64 fields: at most 18 digits, never overflowing


@dataclass
class IntTable:
    """m rows: ``names`` (m,) object, the first field; ``first``, ``second`` (m,) int64; ``cells`` (m, n) int32,
    order F."""

    names: np.ndarray
    first: np.ndarray
    second: np.ndarray
    cells: np.ndarray


@njit(cache=True, nogil=True)
def _count_lines(buf):
    n = 0
    for b in buf:
        if b == _NL:
            n += 1
    return n


@njit(cache=True, nogil=True)
def _parse(buf, rows, r0, cells, first, second, name_id, name_at, name_len):
    """Parse the ``rows`` lines of ``buf`` (each ended by a newline, the last one too) into rows ``r0 ..
    r0 + rows - 1`` of the table: ``cells`` (m, n) int32 order F, ``first``/``second`` (m,) int64 and ``name_id``
    (m,) int32, an index into the chunk's distinct names, whose offsets and lengths in ``buf`` go to
    ``name_at``/``name_len`` in order of appearance. Returns (number of distinct names, status): status 0 when
    every line is as the module says, else 1. (The whole table and an offset, not views: one compiled variant.)"""
    n = cells.shape[1]
    end = buf.size
    p = 0
    names = 0
    for r in range(r0, r0 + rows):
        q = p
        while q < end and buf[q] != _TAB and buf[q] != _NL and buf[q] != _CR:
            q += 1
        if q == p or q >= end or buf[q] != _TAB:
            return names, _ODD
        length = q - p
        found = -1
        for t in range(names):  # the latest name first: a chunk holds runs of one contig
            j = names - 1 - t
            if name_len[j] == length:
                a = name_at[j]
                same = True
                for i in range(length):
                    if buf[a + i] != buf[p + i]:
                        same = False
                        break
                if same:
                    found = j
                    break
        if found < 0:
            name_at[names] = p
            name_len[names] = length
            found = names
            names += 1
        name_id[r] = found
        p = q + 1
        # the numeric fields: -2 and -1 (first, second), then the n cells; the buffer ends with a newline, so
        # every scan below stops inside it
        for f in range(-2, n):
            b = buf[p]
            neg = b == 45  # '-'
            if neg or b == 43:  # '+'
                p += 1
            v = np.int64(0)
            at = p
            while True:
                d = np.int64(buf[p]) - 48
                if d < 0 or d > 9:
                    break
                v = v * 10 + d
                p += 1
            digits = p - at
            if digits == 0 or digits > _INT64_DIGITS or buf[p] != (_TAB if f < n - 1 else _NL):
                return names, _ODD
            p += 1
            if neg:
                v = -v
            if f == -2:
                first[r] = v
            elif f == -1:
                second[r] = v
            elif digits > 10 or v > _INT32_MAX or v < -_INT32_MAX - 1:
                return names, _ODD
            else:
                cells[r, f] = v
    if p != end:
        return names, _ODD
    return names, _OK


@njit(cache=True, nogil=True)
def _after_last_newline(buf):
    for i in range(buf.size - 1, -1, -1):
        if buf[i] == _NL:
            return i + 1
    return 0


def line_end(piece) -> int:
    """The offset after the last newline of ``piece`` (bytes or any byte buffer), 0 when it has none."""
    if isinstance(piece, bytes):
        return piece.rfind(b"\n") + 1
    return int(_after_last_newline(np.frombuffer(piece, dtype=np.uint8)))


def _gather(pieces: list) -> tuple[np.ndarray, int]:
    """One chunk's pieces of text as one buffer ending with a newline (the file's last line may lack its own),
    and its number of lines. Run on a pool thread: the copies and the count leave the reading thread free."""
    size = sum(len(p) for p in pieces)
    buf = np.empty(size + 1, dtype=np.uint8)
    at = 0
    for p in pieces:
        buf[at:at + len(p)] = np.frombuffer(p, dtype=np.uint8)
        at += len(p)
    if size and buf[size - 1] == _NL:
        buf = buf[:size]
    else:  # the file's last line, without its newline
        buf[size] = _NL
    return buf, int(_count_lines(buf))


def _parse_chunk(buf: np.ndarray, rows: int, r0: int, cells: np.ndarray, first: np.ndarray, second: np.ndarray,
                 name_id: np.ndarray) -> list[str] | None:
    """Parse one gathered chunk into rows ``r0 ..`` of the table; its distinct names (``name_id`` indexes them),
    or None when a line is not of the module's form."""
    name_at, name_len = np.empty(rows, np.int64), np.empty(rows, np.int64)
    names, status = _parse(buf, rows, r0, cells, first, second, name_id, name_at, name_len)
    if status != _OK:
        return None
    try:
        return [buf[a:a + b].tobytes().decode("utf-8")
                for a, b in zip(name_at[:names].tolist(), name_len[:names].tolist())]
    except UnicodeDecodeError:
        return None


def read_int_table(pieces: Iterable, n: int, *, skip: int = 0, threads: int = 1,
                   rows: int | None = None) -> IntTable | None:
    """The table in the text ``pieces`` (bytes or byte buffers in file order, e.g. inflated BGZF blocks) after
    its first ``skip`` lines: rows of a name, two int64 and ``n`` int32 fields. None when a line is not of that
    form (see the module), when there are no rows, or when ``rows`` is given and the text has another number.

    On ``threads`` threads: the pieces are gathered into chunks (each ends at the last line end of the piece that
    fills it) and their lines counted as they arrive; each chunk is parsed straight into its rows of the one
    order-F matrix. Without ``rows`` the matrix is made once every chunk is counted: memory, the text and the
    table. With ``rows`` (the number of table rows, known beforehand: :func:`count_lines`) each chunk is parsed
    as soon as it is counted and its text let go: memory, the table and a few chunks (``2 * threads``)."""
    threads = max(1, threads)
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gcnmops-parse")
    table = _Table(rows, n, pool) if rows is not None else None
    try:
        gathered: deque = deque()
        held: list = []
        size = 0
        for piece in pieces:
            if skip:
                piece = b"".join(held + [piece])
                while skip and (at := piece.find(b"\n")) >= 0:
                    piece, skip = piece[at + 1:], skip - 1
                held, size = [], 0
                if skip:
                    held, size = [piece], len(piece)
                    continue
            held.append(piece)
            size += len(piece)
            if size < CHUNK_BYTES:
                continue
            cut = line_end(piece)
            if cut == 0:  # no line ends in this piece: keep reading
                continue
            tail = piece[cut:]
            held[-1] = memoryview(piece)[:cut]
            gathered.append(pool.submit(_gather, held))
            held, size = ([tail], len(tail)) if len(tail) else ([], 0)
            if table is not None and not table.take(gathered, 2 * threads):
                return None
        if skip:
            return None
        if size:
            gathered.append(pool.submit(_gather, held))
        del held
        if table is None:
            chunks = deque(f.result() for f in gathered)
            gathered.clear()
            table = _Table(sum(k for _, k in chunks), n, pool)
            gathered = chunks
        if not table.take(gathered, None) or table.at != table.m:
            return None
        return table.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class _Table:
    """The matrix of ``m`` rows being filled: counted chunks parsed into their rows on ``pool``, in file order."""

    def __init__(self, m: int, n: int, pool: ThreadPoolExecutor) -> None:
        self.m, self.pool, self.at = m, pool, 0
        self.cells = np.empty((m, n), dtype=np.int32, order="F")
        self.first, self.second, self.ids = np.empty(m, np.int64), np.empty(m, np.int64), np.empty(m, np.int32)
        self.parsed: list = []  # (rows, future) of each chunk, in order
        self.running: deque = deque()  # the parses not yet seen done, oldest first

    def _submit(self, chunk) -> bool:
        """Start parsing ``chunk`` (a future of, or a pair of, buffer and lines; waited for); False when its rows
        would pass the matrix's end."""
        buf, k = chunk.result() if hasattr(chunk, "result") else chunk
        if self.at + k > self.m:
            return False
        fut = self.pool.submit(_parse_chunk, buf, k, self.at, self.cells, self.first, self.second, self.ids)
        self.parsed.append((slice(self.at, self.at + k), fut))
        self.running.append(fut)
        self.at += k
        return True

    def take(self, gathered: deque, limit: int | None) -> bool:
        """Hand the chunks of ``gathered`` (in order) to the parser: every one (``limit`` None), or until at most
        ``limit`` chunks are gathered or parsing, waiting for the oldest where more are (memory: their text).
        False when the chunks hold more rows than the matrix."""
        if limit is None:
            while gathered:
                if not self._submit(gathered.popleft()):
                    return False
            return True
        while True:
            while self.running and self.running[0].done():
                self.running.popleft().result()
            while gathered and gathered[0].done():
                if not self._submit(gathered.popleft()):
                    return False
            if len(gathered) + len(self.running) <= limit:
                return True
            if self.running:
                self.running[0].result()
            elif not self._submit(gathered.popleft()):
                return False

    def result(self) -> IntTable | None:
        if self.m == 0:
            return None
        names: dict[str, int] = {}
        for rs, fut in self.parsed:
            distinct = fut.result()
            if distinct is None:
                return None
            local = np.array([names.setdefault(name, len(names)) for name in distinct], dtype=np.int32)
            self.ids[rs] = local[self.ids[rs]]
        return IntTable(np.asarray(list(names), dtype=object)[self.ids], self.first, self.second, self.cells)


def line_stats(piece) -> tuple[int, int]:
    """(the newlines in ``piece``, bytes or any byte buffer; its last byte, -1 when it is empty): what
    :func:`count_lines` sums, computed where the piece is (a pool thread)."""
    buf = np.frombuffer(piece, dtype=np.uint8)
    return int(_count_lines(buf)), int(buf[-1]) if buf.size else -1


def count_lines(stats: Iterable[tuple[int, int]]) -> int:
    """The lines of a text from its pieces' :func:`line_stats` in order: the newlines, and one more where the text
    does not end with one."""
    lines, last = 0, _NL
    for count, end in stats:
        lines += count
        last = end if end >= 0 else last
    return lines + (last != _NL)
