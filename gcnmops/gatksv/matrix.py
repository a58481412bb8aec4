"""GATK-SV depth matrices as the cn.MOPS step's shell sees them: text tables ``#Chr Start End <samples>`` of
0-based, half-open bins with one cell per sample, kept as numbers where a cell is a plain integer and verbatim
where it is not (the scripts' tools each read such a cell their own way: see :mod:`.shelltools`).

Also the two steps of a ``CNSampleNormal`` task before ``cnMOPS_workflow.sh``: GATK ``PrintSVEvidence -L
<contig>`` (the contig's rows, sample columns in Java String order) and the sex passes' column selection
(``grep -wf ids.to.include`` over the numbered header, then awk).
"""
from __future__ import annotations

import csv
import gzip
import io
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from .intervals import contig_runs, rows_of
from .shelltools import awk_equal, grep_words

_PLAIN_INT = re.compile(r"[-+]?\d+")
#: a bgzipped matrix's text above this share of the available memory is parsed as it is inflated, never held
#: whole (one more inflating pass first, to count its lines: ~1.3 s per 4.4 GB of text on 16 cores)
STREAM_TEXT_SHARE = 0.25


def select(values: np.ndarray, rows: np.ndarray, cols) -> np.ndarray:
    """``values[rows][:, cols]`` (index arrays) as a new Fortran-ordered array: runs of consecutive rows copied as
    blocks, else column by column (fancy indexing both axes of a Fortran-ordered matrix is many times slower)."""
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    out = np.empty((len(rows), len(cols)), dtype=values.dtype, order="F")
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    if len(breaks) <= 64:
        for a, b in zip(np.r_[0, breaks], np.r_[breaks, len(rows)]):
            out[a:b] = values[rows[a]:rows[a] + b - a][:, cols]
    else:
        for j, k in enumerate(cols):
            np.take(values[:, k], rows, out=out[:, j], mode="clip")  # rows are valid: no bounds check
    return out


@dataclass
class DepthMatrix:
    """Rows (m) x samples (N) of a depth matrix.

    header: the header line as written (no newline); samples: its fields after the first three; contig (m,)
    object, start/end (m,) int64 as written (0-based start); base (M, K) float64, order F: each plain-integer
    cell's value, NaN where the cell is not one (int32 where every cell is a 32-bit integer: the fast reader's),
    of this matrix or of the matrix it was taken from; rows (m,) and
    cols (N,): this matrix's rows and columns in ``base`` (None: all of them, in order); text: {(row, column):
    cell} of the other cells, verbatim (a matrix with text holds its own ``base``)."""

    header: str
    samples: list[str]
    contig: np.ndarray
    start: np.ndarray
    end: np.ndarray
    base: np.ndarray
    text: dict = field(default_factory=dict)
    rows: np.ndarray | None = None
    cols: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return len(self.start)

    def base_rows(self) -> np.ndarray:
        """This matrix's rows in ``base``, (m,) int64."""
        return np.arange(self.n_rows, dtype=np.int64) if self.rows is None else self.rows

    def base_cols(self) -> np.ndarray:
        """This matrix's columns in ``base``, (N,) int64."""
        return np.arange(len(self.samples), dtype=np.int64) if self.cols is None else self.cols

    @cached_property
    def runs(self) -> tuple[list, np.ndarray]:
        """The runs of one contig name in the rows (``intervals.contig_runs``), found once per matrix."""
        return contig_runs(self.contig)

    def contig_names(self) -> list[str]:
        """The distinct contig names, in order of first appearance."""
        return list(dict.fromkeys(self.runs[0]))

    def rows_of(self, names) -> np.ndarray:
        """The rows (sorted, int64) whose contig is one of ``names``."""
        return rows_of(self.runs, names)

    @cached_property
    def values(self) -> np.ndarray:
        """The cells (m, N) float64, order F (copied out of ``base`` once, where this matrix is a selection or
        ``base`` holds int32)."""
        cells = self.base if self.rows is None and self.cols is None else select(self.base, self.base_rows(),
                                                                                  self.base_cols())
        return cells if cells.dtype == np.float64 else cells.astype(np.float64, order="F")

    def take(self, rows, columns=None, header: str | None = None) -> "DepthMatrix":
        """The matrix of ``rows`` (index array or slice) and sample ``columns`` (indices; all by default); without
        text cells a selection of the same ``base``, nothing copied."""
        rows = np.arange(self.n_rows)[rows] if isinstance(rows, slice) else np.asarray(rows, dtype=np.int64)
        cols = np.arange(len(self.samples)) if columns is None else np.asarray(columns, dtype=np.int64)
        samples = [self.samples[c] for c in cols]
        if header is None:
            header = "\t".join(self.header.split("\t")[:3] + samples)
        coords = (self.contig[rows], self.start[rows], self.end[rows])
        if not self.text:
            return DepthMatrix(header, samples, *coords, self.base, {}, self.base_rows()[rows], self.base_cols()[cols])
        row_at = {int(r): i for i, r in enumerate(rows)}
        col_at = {int(c): j for j, c in enumerate(cols)}
        text = {(row_at[r], col_at[c]): t for (r, c), t in self.text.items() if r in row_at and c in col_at}
        return DepthMatrix(header, samples, *coords, select(self.values, rows, cols), text)

    def numbers(self, reader) -> np.ndarray:
        """The cells as the tool ``reader`` (:func:`.shelltools.bedtools_number` or ``r_number``) reads them."""
        if not self.text:
            return self.values
        out = self.values.copy(order="F")
        for (r, c), t in self.text.items():
            out[r, c] = reader(t)
        return out

    def cell_text(self, r: int, c: int) -> str:
        t = self.text.get((r, c))
        return t if t is not None else str(int(self.values[r, c]))

    def lines(self):
        """The table as text lines (no newlines), header first, cells as written."""
        yield self.header
        ints = np.where(np.isnan(self.values), 0, self.values).astype(np.int64)
        for r in range(self.n_rows):
            cells = [str(v) for v in ints[r].tolist()]
            for (rr, c), t in self.text.items():
                if rr == r:
                    cells[c] = t
            yield "\t".join([str(self.contig[r]), str(self.start[r]), str(self.end[r])] + cells)


def _open_text(path: Path):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="surrogateescape", newline="")
    return open(path, "rt", encoding="utf-8", errors="surrogateescape", newline="")


def read_depth_matrix(path: str | os.PathLike, *, threads: int | None = None) -> DepthMatrix:
    """A depth matrix from a text file (plain, gzip or bgzip): its first line is the header. A matrix of plain
    integers is read by :func:`_read_fast` (bgzip blocks inflated and the text parsed on ``threads`` threads;
    default every core); one with any other cell (NA, '.', a number beyond 32 bits, ragged rows) by pandas, cell by
    cell, as the scripts' tools see them."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"Depth matrix not found: {path}")
    with _open_text(p) as fh:
        header = fh.readline().rstrip("\n")
    if not header:
        raise InputError(f"{path} is empty: a depth matrix starts with its header line '#Chr<TAB>Start<TAB>End<TAB>"
                         "<samples>'.")
    fields = header.split("\t")
    if len(fields) < 4:
        raise InputError(f"{path}: the header line has {len(fields)} tab-separated fields; a depth matrix has "
                         "#Chr, Start, End and one column per sample.")
    return _read_rows(p, header, fields, threads, 1)


def _read_rows(p: Path, header: str, fields: list[str], threads: int | None, skip: int) -> DepthMatrix:
    """The rows after the first ``skip`` lines of ``p`` as a matrix of ``fields`` columns."""
    fast = _read_fast(p, header, fields, threads, skip)
    if fast is not None:
        return fast
    try:
        df = pd.read_csv(p, sep="\t", header=None, skiprows=skip, na_filter=False, quoting=csv.QUOTE_NONE,
                         dtype={j: object for j in [0] + list(range(3, len(fields)))},  # cells as written
                         low_memory=False, compression="gzip" if _gz(p) else None, encoding="utf-8",
                         encoding_errors="surrogateescape")
    except pd.errors.EmptyDataError:
        df = pd.DataFrame(columns=range(len(fields)))
    except pd.errors.ParserError as e:
        raise InputError(f"Cannot read {p} as a depth matrix: {e}") from None
    return _matrix(df, header, fields, str(p))


def read_sample_bincov(path: str | os.PathLike, name: str) -> DepthMatrix:
    """One sample's binCov file (plain, gzip or bgzip; BED: chrom, 0-based start, end, count, further columns
    ignored; leading '#', 'track' and 'browser' lines skipped, as bedtools does) as a one-column matrix of
    sample ``name``."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"binCov file of sample {name} not found: {path}")
    skip, first = 0, ""
    with _open_text(p) as fh:
        for line in fh:
            if not line.startswith(("#", "track", "browser")):
                first = line.rstrip("\r\n")
                break
            skip += 1
    width = len(first.split("\t"))
    if width < 4:
        raise InputError(f"{path}: binCov rows have chrom, start, end and a count; its first row has {width} "
                         "tab-separated field(s).")
    fields = ["chrom", "start", "end", name] + [f"_{k}" for k in range(4, width)]
    m = _read_rows(p, "\t".join(fields), fields, None, skip)
    return m.take(slice(None), [0], header="\t".join(fields[:4]))


def _pieces(p: Path, threads: int):
    """The text of ``p`` in pieces of bytes: BGZF blocks inflated on ``threads`` threads, gzip and plain files read
    in parts."""
    from ..alignments.bam import inflate_bgzf, is_bgzf

    if is_bgzf(p):
        yield from inflate_bgzf(p, threads=threads, kind="bincov matrix")
        return
    with (gzip.open(p, "rb") if _gz(p) else open(p, "rb")) as fh:
        yield from iter(lambda: fh.read(8 << 20), b"")


def _read_fast(p: Path, header: str, fields: list[str], threads: int | None, skip: int) -> DepthMatrix | None:
    """The matrix through :func:`..io.inttable.read_int_table` (text inflated and parsed on ``threads`` threads,
    default every core); None when a cell is not a plain 32-bit integer (or the rows are ragged, or a contig name
    is not UTF-8, or there are no rows): pandas then reads it cell by cell. A bgzipped matrix whose text is more
    than STREAM_TEXT_SHARE of the memory available has its lines counted first (a pass of inflating alone), so
    that each part of the text is parsed as soon as it is inflated and let go: memory for the matrix, not for its
    text too."""
    from ..data import usable_cores
    from ..io.inttable import count_lines, line_stats, read_int_table

    threads = threads or usable_cores()
    rows = None
    if _streamed(p):
        from ..alignments.bam import inflate_bgzf

        rows = count_lines(inflate_bgzf(p, threads=threads, kind="bincov matrix", each=line_stats)) - skip
    table = read_int_table(_pieces(p, threads), len(fields) - 3, skip=skip, threads=threads, rows=rows)
    if table is None:
        return None
    return DepthMatrix(header, fields[3:], table.names, table.first, table.second, table.cells)


def _streamed(p: Path) -> bool:
    """Whether ``p`` is bgzipped and its text (estimated from its first blocks) is more than STREAM_TEXT_SHARE of
    the memory available."""
    from ..alignments.bam import bgzf_inflated_size, is_bgzf
    from ..io.npz import available_memory

    if not is_bgzf(p):
        return False
    available = available_memory()
    return available is not None and bgzf_inflated_size(p, "bincov matrix") > STREAM_TEXT_SHARE * available


def _gz(p: Path) -> bool:
    with open(p, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def _matrix(df: pd.DataFrame, header: str, fields: list[str], shown: str) -> DepthMatrix:
    if df.shape[1] != len(fields):
        raise InputError(f"{shown}: the data rows have {df.shape[1]} fields but the header has {len(fields)}.")
    coords = []
    for j, name in ((1, "Start"), (2, "End")):
        col = df.iloc[:, j]
        if col.dtype.kind != "i":
            num = pd.to_numeric(col, errors="coerce")
            bad = num.isna() | (num != np.floor(num))
            i = int(np.argmax(bad.to_numpy()))
            raise InputError(f"{shown}, data row {i + 1}: {name} {col.iloc[i]!r} is not a whole number.")
        coords.append(col.to_numpy(dtype=np.int64))
    samples = fields[3:]
    m, n = len(df), len(samples)
    values = np.empty((m, n), dtype=np.float64, order="F")
    text: dict = {}
    for k in range(n):
        cells = df.iloc[:, 3 + k].astype(str)
        plain = cells.str.fullmatch(_PLAIN_INT.pattern).to_numpy(dtype=bool)
        values[:, k] = np.nan
        if plain.any():
            values[plain, k] = pd.to_numeric(cells[plain]).to_numpy(dtype=np.float64)
        for r in np.flatnonzero(~plain):
            text[(int(r), k)] = cells.iloc[r]
    contig = df.iloc[:, 0].astype(str).to_numpy(dtype=object)
    return DepthMatrix(header, samples, contig, coords[0], coords[1], values, text)


def java_order(names: list[str]) -> list[int]:
    """Indices of ``names`` in Java String order (UTF-16 code units), the order of a TreeSet<String>."""
    return sorted(range(len(names)), key=lambda i: names[i].encode("utf-16-be", "surrogatepass"))


def print_sv_evidence(m: DepthMatrix, contig: str) -> DepthMatrix:
    """``PrintSVEvidence --evidence-file <matrix> -L <contig>``: the contig's rows, the sample columns in Java
    String order, the header ``#Chr Start End <samples>``."""
    rows = m.rows_of([contig])
    order = java_order(m.samples)
    return m.take(rows, order, header="\t".join(["#Chr", "Start", "End"] + [m.samples[i] for i in order]))


def ped_samples(ped: str | os.PathLike, sex: str | None = None) -> list[str]:
    """``cut -f2`` of the ped's lines (of those whose 5th whitespace-separated field equals ``sex`` in awk's
    comparison, when given): the sample IDs the WDL takes from it."""
    p = Path(ped)
    if not p.is_file():
        raise InputError(f"Ped file not found: {ped}")
    out = []
    for line in p.read_text(encoding="utf-8", errors="surrogateescape").splitlines():
        if sex is not None:
            f = line.split()
            if len(f) < 5 or not awk_equal(f[4], sex):
                continue
        cells = line.split("\t")
        out.append(cells[1] if len(cells) > 1 else cells[0])
    return out


def sex_columns(m: DepthMatrix, ids: list[str], what: str) -> DepthMatrix:
    """The task's column selection for a sex pass: header fields numbered as ``cat -n`` numbers them, those
    that ``grep -wf ids.to.include`` prints kept (awk ``$1,$2,$3,$k...``: whitespace-split, in header order)."""
    fields = m.header.split("\t")
    if any(re.search(r"\s", f) or not f for f in fields) or any(re.search(r"\s", t) or not t for t in m.text.values()):
        raise InputError(f"{what}: a sample name or cell is empty or holds a blank; the task's awk column selection "
                         "splits on blanks and would misplace the columns.")
    numbered = [f"{k:6d}\t{f}" for k, f in enumerate(fields, start=1)]
    chosen = [k + 1 for k in grep_words(numbered, ids)]
    if not chosen:
        raise InputError(f"{what}: no column of the matrix belongs to a sample of this sex in the ped file (the task's "
                         "awk program would be empty and fail).")
    if any(k <= 3 for k in chosen):
        raise InputError(f"{what}: a sample ID of the ped file matches the coordinate column(s) "
                         f"{', '.join(fields[k - 1] for k in chosen if k <= 3)} as a word.")
    cols = [k - 4 for k in chosen]
    return m.take(slice(None), cols)


__all__ = ["DepthMatrix", "select", "read_depth_matrix", "read_sample_bincov", "java_order", "print_sv_evidence",
           "ped_samples", "sex_columns"]
