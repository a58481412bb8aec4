"""One sample's counts in the file format of the tool that made them -> CountData (one sample column, cn.mops's
1-based, closed ranges). A cohort of such files is :mod:`.samplesheet`'s.

The formats, told apart by the file's name and first lines (:func:`sniff`):

======================  ==========================================================  ============  ===============
format                  file                                                        coordinates   values
======================  ==========================================================  ============  ===============
GATK CollectReadCounts  ``@HD/@SQ/@RG`` lines, then ``CONTIG START END COUNT``      1-based       read counts
  TSV                   (sample: the ``@RG`` line's ``SM``; read with pysam)
GATK CollectReadCounts  HDF5 (``/sample_metadata/sample_name``,                     1-based       read counts
  HDF5                  ``/intervals/{indexed_contig_names,transposed_index_start_end}``,
                        ``/counts/values``; read with h5py)
GATK-SV bincov          ``*.RD.txt[.gz]`` without a header: chrom start end count   0-based       read counts
mosdepth                ``*.regions.bed[.gz]``: chrom start end [name] mean         0-based       mean depth
CNVkit                  ``.cnn`` (``chromosome start end gene depth log2 ...``)     0-based       mean depth
bedGraph                ``.bedgraph``/``.bg`` or a ``track``/``browser`` first      0-based       counts or depth
                        line: chrom start end value, on fixed windows
BED rows                a table without header: chrom start end value               ``.bed``:     counts or depth
                                                                                    0-based,
                                                                                    else undeclared
======================  ==========================================================  ============  ===============

A GATK-SV per-sample file with its ``#Chr Start End <sample>`` header is a one-sample depth matrix, read by the text
tables' reader (:mod:`.readers`). Coordinates follow :mod:`.coordinates` (a tool's convention is declared; the
flags win). Mean depths are not read counts: refused unless ``depth_to_counts`` (the command line's
``--depth-to-counts READ_LENGTH``) gives the read length; then reads = depth x region width / READ_LENGTH, rounded
to the nearest whole read (CNVkit's own estimate of a bin's reads: its base count / read length). In a file of
counts, values that are not whole numbers are refused the same way; never rounded silently.
"""
from __future__ import annotations

import bz2
import contextlib
import gzip
import logging
import lzma
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import CountData
from ..data import coordinates as coordinate_values
from ..errors import InputError
from .columns import count_data_from_columns
from .coordinates import AUTO, one_based_offset, start_offset

log = logging.getLogger("gcnmops")

GATK_TSV, GATK_HDF5, GATKSV_RD, MOSDEPTH, CNVKIT, BEDGRAPH, BED_ROWS = (
    "GATK CollectReadCounts TSV", "GATK CollectReadCounts HDF5", "GATK-SV bincov", "mosdepth", "CNVkit", "bedGraph",
    "BED rows")
#: the option that converts mean depths to read counts (its Python twin: ``depth_to_counts=``)
DEPTH_OPTION = "--depth-to-counts READ_LENGTH"
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_OPENERS = ((b"\x1f\x8b", gzip.open, "gzip"), (b"BZh", bz2.open, "bz2"), (b"\xfd7zXZ\x00", lzma.open, "xz"))
_COMPRESSED = (".gz", ".bgz", ".bz2", ".xz")
_NOT_TOOLS = (".parquet", ".npz", ".npy", ".rds", ".zarr")
_INT = re.compile(r"\d+")
#: the GATK CollectReadCounts HDF5 datasets read (HDF5SimpleCountCollection's layout)
HDF5_PATHS = ("sample_metadata/sample_name", "intervals/indexed_contig_names", "intervals/transposed_index_start_end",
              "counts/values")


# --------------------------------------------------------------------------------------------
# telling the formats apart
# --------------------------------------------------------------------------------------------
def _compression(path: Path) -> str | None:
    """'gzip', 'bz2', 'xz' (by the file's first bytes; bgzip is gzip) or None."""
    with open(path, "rb") as fh:
        head = fh.read(6)
    return next((name for magic, _, name in _OPENERS if head.startswith(magic)), None)


def _open_text(path: Path):
    opener = next((op for magic, op, name in _OPENERS if name == _compression(path)), open)
    return opener(path, "rt", encoding="utf-8", errors="replace", newline="")


def _base_name(path: Path) -> str:
    """The file name in lower case without its compression suffix."""
    name = path.name.lower()
    for suffix in _COMPRESSED:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _first_lines(path: Path, n: int = 2) -> list[str]:
    """The first ``n`` non-blank lines (no line ends)."""
    out: list[str] = []
    with _open_text(path) as fh:
        for line in fh:
            if line.strip():
                out.append(line.rstrip("\r\n"))
                if len(out) == n:
                    break
    return out


def _bed_row(line: str) -> bool:
    """A data row of a BED-like table: a name that is not a number, then whole-number start <= end, then values."""
    f = line.split()
    if len(f) < 4 or not _INT.fullmatch(f[1]) or not _INT.fullmatch(f[2]) or int(f[2]) < int(f[1]):
        return False
    try:
        float(f[0])
    except ValueError:
        return True
    return False


def sniff(path: Path) -> str | None:
    """The tool format of an existing file (one of the names above), or None for other files (count tables,
    Parquet, .npz, .rds: :mod:`.readers`)."""
    with open(path, "rb") as fh:
        if fh.read(8).startswith(HDF5_SIGNATURE):
            return GATK_HDF5
    base = _base_name(path)
    if base.endswith((".hdf5", ".h5")):
        return GATK_HDF5
    if base.endswith(_NOT_TOOLS):
        return None
    try:
        lines = _first_lines(path)
    except (OSError, EOFError, lzma.LZMAError):
        return None  # the table readers say what is wrong with it
    if not lines:
        return None
    first = lines[0]
    if first.startswith("@"):
        return GATK_TSV
    fields = {f.strip().lower() for f in first.split("\t")}
    if base.endswith(".cnn") or {"chromosome", "start", "end", "log2"} <= fields:
        return CNVKIT
    if base.endswith(".regions.bed"):
        return MOSDEPTH
    if base.endswith((".bedgraph", ".bg")) or first.startswith(("track", "browser")):
        return BEDGRAPH
    if all(_bed_row(line) for line in lines):
        return GATKSV_RD if base.endswith(".rd.txt") else BED_ROWS
    return None


def sample_stem(path: Path, suffixes: tuple[str, ...]) -> str:
    """The file's name without its compression suffix and the first of ``suffixes`` it ends with (any case)."""
    name = path.name
    for suffix in _COMPRESSED + suffixes:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name


# --------------------------------------------------------------------------------------------
# one sample
# --------------------------------------------------------------------------------------------
@dataclass
class _Opened:
    """A tool's file opened for reading: its sample's name, how the tool writes coordinates (``declared``: why
    they are 0-based, None when undeclared; ``one_based``) and values (``holds``: "counts", "depth" or "either"),
    and ``frames``: its rows as (seqnames, start, end, value) columns, in parts of at most the rows asked for."""

    name: str
    tool: str
    declared: str | None
    one_based: bool
    holds: str
    frames: Iterator[tuple]


def tool_file_parts(path: Path, kind: str, *, shown: str, coordinates: str = AUTO,
                    depth_to_counts: float | None = None, rows: int | None = None) -> Iterator[CountData]:
    """The one sample of a tool's file of format ``kind`` (:func:`sniff`'s answer) in parts of at most ``rows``
    rows (one part when None), in file order, each checked as the whole file is; the first part decides the
    coordinate convention, the others follow it. ``depth_to_counts``: the read length that converts mean depths
    to read counts (None: depths are refused). Memory: one part."""
    if depth_to_counts is not None and not (np.isfinite(depth_to_counts) and depth_to_counts > 0):
        raise InputError(f"The read length of --depth-to-counts must be a positive number, not {depth_to_counts}.")
    if rows is not None and rows < 1:
        raise InputError(f"Rows per part must be at least 1, not {rows}.")
    opened = _OPEN[kind](path, shown, rows)
    offset, at = None, 0
    for seq, start, end, values in opened.frames:
        data, offset = _one_sample(opened, seq, start, end, values, source=shown, coordinates=coordinates,
                                   depth_to_counts=depth_to_counts, offset=offset, first_row=at)
        at += data.n_regions
        yield data


def read_tool_file(path: Path, kind: str, *, shown: str, coordinates: str = AUTO,
                   depth_to_counts: float | None = None, min_samples: int = 1) -> CountData:
    """The one sample of a tool's file of format ``kind``, read whole (:func:`tool_file_parts`)."""
    data, = tool_file_parts(path, kind, shown=shown, coordinates=coordinates, depth_to_counts=depth_to_counts)
    if data.n_samples < min_samples:
        raise InputError(
            f"{shown} holds one sample's counts ({kind}); cn.mops needs a cohort of at least {min_samples}: list the "
            "samples' files in a sample sheet (a TSV of name<TAB>path lines) and give it with --samples SHEET "
            "(read_sample_sheet() in Python), or use --method single for one sample.")
    return data


def _one_sample(opened: _Opened, seq, start, end, values: pd.Series, *, source: str, coordinates: str,
                depth_to_counts: float | None, offset: int | None, first_row: int) -> tuple[CountData, int]:
    """(CountData of one sample's rows, the start offset): ``offset`` that of the file's parts before (None: the
    first part, which decides it); ``first_row``: the rows before (for messages). Values in a file that ``holds``
    "either" are counts unless ``depth_to_counts``."""
    tool, holds, first = opened.tool, opened.holds, offset is None
    row = lambda i: f"data row {first_row + i + 1}"  # noqa: E731
    try:
        start = coordinate_values(start, "start", where=row)
        end = coordinate_values(end, "end", where=row)
    except InputError as e:
        raise InputError(f"{source}: {e}") from None
    seq = pd.Series(seq).astype(str)
    if offset is not None:
        pass
    elif opened.one_based:
        offset = one_based_offset(seq, start, end, coordinates=coordinates, tool=tool, source=source)
    else:
        offset = start_offset(seq, start, end, coordinates=coordinates, declared=opened.declared, source=source)
    values = pd.Series(values)
    numbers = pd.to_numeric(values, errors="coerce") if values.dtype == object else values
    if pd.api.types.is_numeric_dtype(numbers.dtype) and not pd.api.types.is_bool_dtype(numbers.dtype) and \
            not (numbers.isna() & values.notna()).any():  # else count_data_from_columns names the bad cell
        v = numbers.to_numpy(dtype=np.float64, na_value=np.nan)
        values = numbers
        if holds == "depth" or (holds == "either" and depth_to_counts is not None):
            if depth_to_counts is None:
                raise InputError(
                    f"{source} holds mean depths ({tool}'s per-base coverage of each region), not read counts, which "
                    f"cn.mops models. Give {DEPTH_OPTION} (the sequencing read length) to convert them: reads = depth "
                    "x region width / read length, rounded to whole reads; or count the reads of the BAM/CRAM files "
                    "(gcnmops count).")
            width = (end - (start + offset) + 1).astype(np.float64)
            values = pd.Series(np.floor(v * width / depth_to_counts + 0.5))
            if first:
                log.info(f"{source}: mean depths converted to read counts (depth x width / {depth_to_counts:g}, "
                         "rounded).")
        else:
            if depth_to_counts is not None:
                raise InputError(f"{source} holds read counts ({tool}); --depth-to-counts converts mean depths and "
                                 "does not apply to it: leave it out.")
            frac = np.isfinite(v) & (v != np.floor(v))
            if frac.any():
                i = int(np.argmax(frac))
                raise InputError(
                    f"{source}: {int(frac.sum())} of its values are not whole numbers (the first, {v[i]:g}, at "
                    f"{row(i)}): they are not read counts, and are not rounded. If they are mean depths, give "
                    f"{DEPTH_OPTION} to convert them (reads = depth x region width / read length, rounded).")
    data = count_data_from_columns(["seqnames", "start", "end", opened.name], [seq, start, end, values],
                                   source=source, min_samples=1, row_label=row, start_offset=offset)
    return data, offset


def _table(path: Path, shown: str, rows: int | None, *, skip: int = 0, header: int | None = None,
           whitespace: bool = False, text_columns=(0,)) -> Iterator[pd.DataFrame]:
    """A tab- (or whitespace-) separated table of the file, the first ``skip`` lines skipped, in parts of at most
    ``rows`` rows (whole when None)."""

    def failed(e: Exception) -> InputError:
        if isinstance(e, pd.errors.EmptyDataError):
            return InputError(f"{shown} holds no regions.")
        if isinstance(e, pd.errors.ParserError):
            return InputError(f"Cannot read {shown}: {str(e).strip()} (every line needs the same number of fields).")
        return InputError(f"Cannot read {shown}: {e}")

    errors = (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError, EOFError,
              lzma.LZMAError)
    try:
        parts = pd.read_csv(path, sep=r"\s+" if whitespace else "\t", header=header, skiprows=skip,
                            dtype={c: str for c in text_columns}, compression=_compression(path), low_memory=False,
                            encoding="utf-8", comment=None, chunksize=rows)
        if rows is None:
            parts = iter([parts])
        with contextlib.closing(parts) if hasattr(parts, "close") else contextlib.nullcontext():
            seen = False
            while True:
                try:
                    df = next(parts, None)
                except errors as e:
                    raise failed(e) from None
                if df is None:
                    break
                if len(df) == 0:
                    continue
                seen = True
                yield df.reset_index(drop=True)
    except errors as e:
        raise failed(e) from None
    if not seen:
        raise InputError(f"{shown} holds no regions.")


def _leading_lines(path: Path, starts: tuple[str, ...]) -> list[str]:
    """The lines at the top of the file that start with one of ``starts``."""
    out = []
    with _open_text(path) as fh:
        for line in fh:
            if not line.startswith(starts):
                break
            out.append(line)
    return out


def _gatk_sample(header: str, shown: str, fallback: str) -> str:
    """The sample of a GATK SAM-style header (its @RG lines' SM), read with pysam."""
    try:
        import pysam
    except ImportError:
        raise InputError(f"Reading {shown} (GATK's SAM-style header) needs pysam: pip install 'gcnmops[formats]'.") \
            from None
    try:
        parsed = pysam.AlignmentHeader.from_text(header).to_dict()
    except (AssertionError, ValueError, KeyError) as e:
        raise InputError(f"{shown}: its '@' lines are not a SAM header ({e}).") from None
    names = list(dict.fromkeys(rg["SM"] for rg in parsed.get("RG", []) if "SM" in rg))
    if len(names) > 1:
        raise InputError(f"{shown}: its @RG lines name several samples ({', '.join(names)}); a CollectReadCounts file "
                         "holds one.")
    if not names:
        log.info(f"{shown}: no @RG line names the sample (SM): named {fallback} after the file.")
        return fallback
    return names[0]


def _open_gatk_tsv(path: Path, shown: str, rows: int | None) -> _Opened:
    header = _leading_lines(path, ("@",))
    name = _gatk_sample("".join(header), shown, sample_stem(path, (".counts.tsv", ".tsv")))

    def frames():
        for df in _table(path, shown, rows, skip=len(header), header=0, text_columns=("CONTIG",)):
            cols = [str(c) for c in df.columns]
            if cols[:4] != ["CONTIG", "START", "END", "COUNT"]:
                raise InputError(f"{shown}: after the '@' header lines GATK CollectReadCounts writes the column names "
                                 f"CONTIG, START, END, COUNT; this file has {', '.join(cols)}.")
            yield df["CONTIG"], df["START"], df["END"], df["COUNT"]

    return _Opened(name, GATK_TSV, None, True, "counts", frames())


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _open_gatk_hdf5(path: Path, shown: str, rows: int | None) -> _Opened:
    try:
        import h5py
    except ImportError:
        raise InputError(f"Reading {shown} (HDF5) needs h5py: pip install 'gcnmops[formats]'.") from None
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise InputError(f"Cannot read {shown} as HDF5: {e}") from None
    try:
        missing = [p for p in HDF5_PATHS if p not in f]
        if missing:
            raise InputError(f"{shown} is an HDF5 file but not GATK CollectReadCounts's (--format HDF5): it lacks "
                             f"{', '.join('/' + p for p in missing)}.")
        name = _text(np.asarray(f[HDF5_PATHS[0]][()]).ravel()[0])
        contigs = np.array([_text(c) for c in np.asarray(f[HDF5_PATHS[1]][()]).ravel()], dtype=object)
        intervals, counts = f[HDF5_PATHS[2]], f[HDF5_PATHS[3]]
        if len(intervals.shape) != 2 or intervals.shape[0] != 3 or counts.size != intervals.shape[1]:
            raise InputError(f"{shown}: /intervals/transposed_index_start_end is {intervals.shape} and /counts/values "
                             f"{counts.shape}; GATK writes 3 x n and 1 x n.")
    except BaseException:
        f.close()
        raise

    def frames():
        with f:
            n = intervals.shape[1]
            step = rows or max(n, 1)
            for a in range(0, n, step):
                matrix = np.asarray(intervals[:, a:a + step], dtype=np.float64)
                values = np.asarray(counts[..., a:a + step], dtype=np.float64).ravel()
                index = matrix[0]
                bad = (index != np.floor(index)) | (index < 0) | (index >= len(contigs))
                if bad.any():
                    raise InputError(f"{shown}: interval {a + int(np.argmax(bad)) + 1} names contig index "
                                     f"{index[bad][0]:g}, but /intervals/indexed_contig_names has {len(contigs)} "
                                     "names.")
                yield contigs[index.astype(np.int64)], matrix[1], matrix[2], pd.Series(values)

    return _Opened(name, GATK_HDF5, None, True, "counts", frames())


def _bed_columns(df: pd.DataFrame, shown: str, tool: str, names: tuple[int, ...] = (4,)) -> pd.Series:
    """The value column of a chrom/start/end/value table (``names``: the column counts accepted, the value last)."""
    if df.shape[1] not in names:
        raise InputError(f"{shown} has {df.shape[1]} columns; {tool} files have "
                         f"{' or '.join(map(str, names))} (chrom, start, end, ..., one sample's value). A table of "
                         "several samples needs a header line naming them (#chrom start end sample1 sample2 ...).")
    return df.iloc[:, -1]


def _open_mosdepth(path: Path, shown: str, rows: int | None) -> _Opened:
    frames = ((df[0], df[1], df[2], _bed_columns(df, shown, MOSDEPTH, (4, 5)))
              for df in _table(path, shown, rows, text_columns=(0, 3)))
    return _Opened(sample_stem(path, (".regions.bed",)), MOSDEPTH, "mosdepth's format", False, "depth", frames)


def _open_cnvkit(path: Path, shown: str, rows: int | None) -> _Opened:
    def frames():
        for df in _table(path, shown, rows, header=0, text_columns=("chromosome", "gene")):
            cols = {str(c).lower(): c for c in df.columns}
            if "spread" in cols:
                raise InputError(f"{shown} is a CNVkit reference (it has a 'spread' column): it holds a pooled "
                                 "reference, not one sample's coverage; give the samples' .targetcoverage.cnn files.")
            if "depth" not in cols or not {"chromosome", "start", "end"} <= set(cols):
                raise InputError(f"{shown}: a CNVkit .cnn file has the columns chromosome, start, end, gene, depth, "
                                 f"log2; this one has {', '.join(map(str, df.columns))} (CNVkit before 0.8 wrote no "
                                 "depth column: run cnvkit.py coverage again).")
            yield df[cols["chromosome"]], df[cols["start"]], df[cols["end"]], df[cols["depth"]]

    name = sample_stem(path, (".targetcoverage.cnn", ".antitargetcoverage.cnn", ".cnn"))
    return _Opened(name, CNVKIT, "CNVkit's format", False, "depth", frames())


def _open_bedgraph(path: Path, shown: str, rows: int | None) -> _Opened:
    skip = len(_leading_lines(path, ("track", "browser", "#")))

    def frames():
        windows = _FixedWindows(shown)
        for df in _table(path, shown, rows, skip=skip, whitespace=True):
            values = _bed_columns(df, shown, BEDGRAPH)
            windows.check(df)
            yield df[0], df[1], df[2], values

    return _Opened(sample_stem(path, (".bedgraph", ".bg")), BEDGRAPH, "bedGraph's format", False, "either", frames())


class _FixedWindows:
    """Checks, part after part, that every region of a chromosome is as wide as its first, but the chromosome's
    last (which may be shorter)."""

    def __init__(self, shown: str):
        self.shown, self.rows = shown, 0
        self.seq, self.window, self.short = None, np.nan, None  # the part before's last chromosome

    def check(self, df: pd.DataFrame) -> None:
        seq = df[0].astype(str).to_numpy()
        width = pd.to_numeric(df[2], errors="coerce").to_numpy() - pd.to_numeric(df[1], errors="coerce").to_numpy()
        if self.short is not None and seq[0] == self.seq:
            self._fail(*self.short)  # a short window that was not its chromosome's last
        first = np.insert(seq[1:] != seq[:-1], 0, seq[0] != self.seq)
        window = pd.Series(np.where(first, width, np.nan))
        if not first[0]:
            window.iloc[0] = self.window
        window = window.ffill().to_numpy()
        inner = np.append(seq[1:] == seq[:-1], False)
        wrong = (width != window) & (inner | (width > window))
        if wrong.any():
            i = int(np.argmax(wrong))
            self._fail(self.rows + i, seq[i], df[1].iloc[i], df[2].iloc[i], width[i], window[i])
        k = len(seq) - 1
        self.short = (self.rows + k, seq[k], df[1].iloc[k], df[2].iloc[k], width[k], window[k]) \
            if width[k] < window[k] else None
        self.seq, self.window, self.rows = seq[k], window[k], self.rows + len(seq)

    def _fail(self, i, seq, start, end, width, window):
        raise InputError(
            f"{self.shown}: the bedGraph's regions are not fixed windows (data row {i + 1}, {seq}:{start}-{end}, is "
            f"{width:g} bp wide where the chromosome's windows are {window:g} bp). A bedGraph that joins neighbouring "
            "windows of equal value (bedtools genomecov -bg) holds no count per window: write one line per window.")


def _open_bed_rows(path: Path, shown: str, rows: int | None) -> _Opened:
    frames = ((df[0], df[1], df[2], _bed_columns(df, shown, "header-less BED")) for df in _table(path, shown, rows))
    declared = "a .bed file" if ".bed" in _base_name(path) else None
    return _Opened(sample_stem(path, (".bed",)), BED_ROWS, declared, False, "either", frames)


def _open_gatksv_rd(path: Path, shown: str, rows: int | None) -> _Opened:
    frames = ((df[0], df[1], df[2], _bed_columns(df, shown, GATKSV_RD)) for df in _table(path, shown, rows))
    return _Opened(sample_stem(path, (".rd.txt",)), GATKSV_RD, "GATK-SV's bincov format", False, "counts", frames)


_OPEN = {GATK_TSV: _open_gatk_tsv, GATK_HDF5: _open_gatk_hdf5, GATKSV_RD: _open_gatksv_rd, MOSDEPTH: _open_mosdepth,
         CNVKIT: _open_cnvkit, BEDGRAPH: _open_bedgraph, BED_ROWS: _open_bed_rows}


# --------------------------------------------------------------------------------------------
# stdin
# --------------------------------------------------------------------------------------------
def stdin_copy(folder: Path) -> Path:
    """What arrives on stdin, copied to a file in ``folder`` whose name says its format (by its content: HDF5,
    Parquet, .npz, .npy, .rds, or a text table: .tsv when its first line holds a tab, .csv a comma, else .txt;
    compressed ones keep .gz/.bz2/.xz), for the readers that go by names."""
    raw = folder / "stdin"
    with open(raw, "wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out, 1 << 22)
    if raw.stat().st_size == 0:
        raise InputError("Nothing arrived on stdin ('-' reads the counts from stdin).")
    with open(raw, "rb") as fh:
        head = fh.read(8)
    compression = _compression(raw)
    suffix = {"gzip": ".gz", "bz2": ".bz2", "xz": ".xz"}.get(compression, "")
    binary = {HDF5_SIGNATURE: ".hdf5", b"PAR1": ".parquet", b"PK": ".npz", b"\x93NUMPY": ".npy", b"X\n": ".rds"}
    kind = next((ext for magic, ext in binary.items() if head.startswith(magic)), None)
    if kind is None and compression is not None:
        with _open_text(raw) as fh:
            if fh.read(2) in ("X\n", "A\n", "B\n"):  # R's serialization (.rds): gzip of 'X\n' ...
                kind, suffix = ".rds", ""
    if kind is None:
        lines = _first_lines(raw, 1)
        first = lines[0] if lines else ""
        kind = ".tsv" if "\t" in first else ".csv" if "," in first else ".txt"
    path = folder / f"stdin{kind}{suffix}"
    raw.rename(path)
    return path


__all__ = ["sniff", "read_tool_file", "tool_file_parts", "stdin_copy", "sample_stem", "DEPTH_OPTION", "GATK_TSV",
           "GATK_HDF5",
           "GATKSV_RD", "MOSDEPTH", "CNVKIT", "BEDGRAPH", "BED_ROWS", "HDF5_PATHS"]
