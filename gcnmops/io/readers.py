"""Read-count matrices from files and in-memory objects -> :class:`CountData`.

Tables (text, Parquet, pandas, R data.frame) hold optional coordinate columns ``seqnames`` (or
``chr``/``chrom``/``chromosome``, any case), ``start``, ``end`` and one numeric column per sample.
Without coordinate columns every column is a sample and the regions are row indices on the
pseudo-chromosome "undef" (cn.mops's matrix input). Validation of counts, names and ranges is
:func:`gcnmops.data.make_count_data`'s and the column rules :mod:`gcnmops.io.columns`'; this module only
turns formats into columns and reports format problems (missing file, ragged lines, non-numeric cells)
with the file, line and column. Messages quote the path as the caller gave it.

Text tables, the rules:

- ``#`` lines at the top are comments and skipped, except a header line starting ``#chr``/``#chrom`` (BED).
- The first other line is the header when a cell is not a number, is quoted (R quotes names, never numbers)
  or is empty (pandas' index header), when it has one field less than the next line (R's write.table with
  row names), or when its cells are the sample numbers 1..N or 0..N-1 with N >= 3 (as cn.mops's
  read.table(header=TRUE) takes them). Any other line of numbers is the first region's counts: the file has
  no header, the samples are Sample_1..Sample_N (said in a log line).
- An unnamed first column (empty header cell, pandas' 'Unnamed: 0') holding 1..m, 0..m-1 or text is the
  row names of R's write.csv or pandas' to_csv: dropped, with a log line; any other unnamed column is an
  error naming it (:mod:`gcnmops.io.columns`).
- Counts: numbers in [0, 2^53]; coordinates: whole numbers in [0, 2^53], end >= start. Regions whose starts
  decrease within a chromosome are sorted (by chromosome in order of first appearance, start, end; with a
  warning); overlapping and identical regions are kept, as cn.mops keeps them (:mod:`gcnmops.data`).
- Sample and chromosome names must not hold tabs, newlines or other control characters; chromosome names must be
  contig IDs of the VCF and SAM specifications not starting with '#' (:func:`gcnmops.data.check_contig`).
- A NUL byte anywhere in a text table is refused (the parser would end the cell there).
- Parquet tables and DataFrames may keep the coordinates in their (Multi)Index (``set_index``): read from there.
"""
from __future__ import annotations

import bz2
import csv
import gzip
import logging
import lzma
import os
import re
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..data import (CountData, Validated, chromosome_blocks, coordinates, make_count_data, rows_grouped,
                    unsorted_rows)
from ..errors import InputError
from .columns import (SEQNAMES_ALIASES, count_data_from_array, count_data_from_columns, count_data_from_frame,
                      FrameColumns, file_start_offset, with_index_coordinates)
from .coordinates import AUTO, check_choice
from .npz import read_npy, read_npz
from .toolformats import read_tool_file, sniff, stdin_copy

log = logging.getLogger("gcnmops")

#: Accepted file extensions (text formats may add .gz, .bz2 or .xz).
SUPPORTED_EXTENSIONS = (".tsv", ".txt", ".csv", ".bed", ".parquet", ".npz", ".npy", ".rds")
_COMPRESSIONS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_TEXT = (".tsv", ".txt", ".csv", ".bed")


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------
def read_counts(path_or_obj: Any, *, min_samples: int = 2, coordinates: str = AUTO,
                depth_to_counts: float | None = None) -> CountData:
    """Read a regions x samples read-count matrix from a file or an in-memory object.

    Files, by extension: ``.tsv``, ``.txt`` (tab, comma or whitespace separated), ``.csv`` (each
    optionally ``.gz``/``.bz2``/``.xz`` compressed) with a header line; ``.parquet``; ``.npz``
    (``counts`` (m, N) and optional ``sample_names``, ``seqnames``, ``start``, ``end``); ``.npy``
    (a bare matrix); ``.rds`` (a GRanges with one numeric metadata column per sample, a numeric
    matrix, a data.frame or a numeric vector; needs rpy2 and R).

    In memory: a :class:`CountData` (validated again for ``min_samples``), a numpy array (2-D:
    regions x samples; 1-D: one region as in cn.mops, or one sample when ``min_samples == 1`` as in
    singlecn.mops), a pandas DataFrame, or an rpy2 R object of the kinds above.

    Parameters
    ----------
    path_or_obj : path, CountData, ndarray, DataFrame or R object
        the counts (above); table columns ``seqnames`` (or chr/chrom), ``start``, ``end`` (1-based, closed)
        + one numeric column per sample.
    min_samples : int, default 2
        fewest samples accepted (cn.mops needs a cohort; singlecn.mops 1).
    coordinates : {"auto", "0-based", "1-based"}, default "auto"
        a file's start convention: "auto" reads BED-style files (a ``#`` header, ``.bed``, a tool's own format)
        as 0-based, half-open and others as 1-based, closed, and refuses a file whose bins contradict that
        (:mod:`gcnmops.io.coordinates`); 0-based starts are converted to cn.mops's 1-based ones.
    depth_to_counts : float, optional
        a tool's file of mean depths (mosdepth, CNVkit, a bedGraph of depths; :mod:`gcnmops.io.toolformats`): the
        read length that converts them to read counts (depth x width / read length, rounded); without it such
        files are refused.

    Returns
    -------
    CountData
        counts float64 (regions x samples, order F), sample names, ranges (None for a bare matrix).

    Raises
    ------
    InputError
        with a message naming what to fix.
    """
    if isinstance(path_or_obj, Validated):  # our own callers' data, validated as they read it
        if path_or_obj.data.n_samples >= min_samples:
            return path_or_obj.data
        path_or_obj = path_or_obj.data  # too few samples: make_count_data says so
    if isinstance(path_or_obj, CountData):
        return make_count_data(path_or_obj.counts, path_or_obj.sample_names, path_or_obj.ranges,
                               min_samples=min_samples)
    if isinstance(path_or_obj, (str, os.PathLike)):
        return read_count_file(path_or_obj, min_samples=min_samples, coordinates=coordinates,
                               depth_to_counts=depth_to_counts)
    if isinstance(path_or_obj, pd.DataFrame):
        return count_data_from_frame(path_or_obj, min_samples=min_samples)
    if isinstance(path_or_obj, np.ndarray):
        return count_data_from_array(path_or_obj, min_samples=min_samples)
    if type(path_or_obj).__module__.startswith("rpy2"):
        from .rds import count_data_from_r

        return count_data_from_r(path_or_obj, min_samples=min_samples)
    raise InputError(
        f"Cannot read counts from a {type(path_or_obj).__name__}: give a file path "
        f"({', '.join(SUPPORTED_EXTENSIONS)}), a numpy array, a pandas DataFrame, an R object "
        "(GRanges or matrix, through rpy2) or a CountData."
    )


def read_count_file(path: str | os.PathLike, *, min_samples: int = 2, coordinates: str = AUTO,
                    depth_to_counts: float | None = None, shown: str | None = None) -> CountData:
    """Read counts from a file (``-``: stdin); the format is taken from the extension, a tool's count file
    (:mod:`gcnmops.io.toolformats`) from its name and first lines (see :func:`read_counts`). Messages quote the
    path as given (or ``shown``)."""
    check_choice(coordinates)
    if os.fspath(path) == "-":
        import tempfile

        with tempfile.TemporaryDirectory(prefix="gcnmops-stdin-") as folder:
            return read_count_file(stdin_copy(Path(folder)), min_samples=min_samples, coordinates=coordinates,
                                   depth_to_counts=depth_to_counts, shown="stdin")
    p = Path(path)
    shown = shown or (str(os.fspath(path)) if not isinstance(os.fspath(path), bytes) else os.fsdecode(path))
    try:
        fmt, compression = detect_format(p)
        unknown = None
    except InputError as e:
        fmt, compression, unknown = None, None, e
    if not p.exists():
        raise unknown or InputError(f"Count file not found: {shown}")
    if p.is_dir():
        raise InputError(f"{shown} is a directory, not a count file.")
    if p.stat().st_size == 0:
        raise InputError(f"Count file {shown} is empty.")
    tool = sniff(p)
    if tool is not None:
        return read_tool_file(p, tool, shown=shown, coordinates=coordinates, depth_to_counts=depth_to_counts,
                              min_samples=min_samples)
    if unknown is not None:
        raise unknown
    if depth_to_counts is not None:
        raise InputError(f"--depth-to-counts converts the mean depths of a tool's file (mosdepth, CNVkit, bedGraph); "
                         f"{shown} is a count table: leave it out.")
    if fmt in _TEXT:
        return _read_text(p, fmt, compression, min_samples, shown, coordinates)
    if fmt == ".parquet":
        return _read_parquet(p, min_samples, shown, coordinates)
    if fmt in (".npz", ".npy"):
        try:
            return read_npz(p, min_samples) if fmt == ".npz" else read_npy(p, min_samples)
        except InputError:
            raise
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError, KeyError, ValueError) as e:  # a damaged file
            what = "an .npz archive" if fmt == ".npz" else "a .npy array"
            raise InputError(f"Cannot read {shown} as {what}: {e}") from None
    from .rds import read_rds  # fmt == ".rds"

    return read_rds(p, min_samples=min_samples)


def detect_format(path: Path) -> tuple[str, str | None]:
    """(format extension, compression extension or None) of a file name; InputError if unknown."""
    suffixes = [s.lower() for s in path.suffixes]
    compression = None
    if suffixes and suffixes[-1] in _COMPRESSIONS:
        compression = suffixes.pop()
    fmt = suffixes[-1] if suffixes else ""
    if fmt in SUPPORTED_EXTENSIONS and (compression is None or fmt in _TEXT):
        return fmt, compression
    raise InputError(
        f"Cannot tell the format of '{path.name}' from its extension: use .tsv, .txt or .csv (optionally "
        ".gz/.bz2/.xz compressed), .parquet, .npz, .npy or .rds, or a count file of GATK CollectReadCounts (.tsv, "
        ".hdf5), GATK-SV (.RD.txt.gz), mosdepth (.regions.bed.gz), CNVkit (.cnn) or a bedGraph."
    )


# --------------------------------------------------------------------------------------------
# text tables
# --------------------------------------------------------------------------------------------
def _open_text(path: Path, compression: str | None):
    opener = _COMPRESSIONS.get(compression, open)
    return opener(path, "rt", encoding="utf-8-sig", newline="")


def _split(line: str, sep: str) -> list[str]:
    if sep == "whitespace":
        return line.split()
    return next(csv.reader([line], delimiter=sep, skipinitialspace=True))


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _is_comment(line: str) -> bool:
    """A line of its own starting with '#' (not a '#chr'/'#chrom' header line, BED style)."""
    t = line.lstrip()
    if not t.startswith("#"):
        return False
    first = re.split(r"[\t,\s]", t, maxsplit=1)[0].strip().lower()
    return first not in SEQNAMES_ALIASES


def _table_start(path: Path, compression: str | None, shown: str) -> tuple[str, int, str | None, int]:
    """(first line, its 1-based number, the next line or None, number of '#' comment lines skipped): the
    first non-blank line that is not a '#' comment at the top of the file."""
    first, first_no, comments = None, 0, 0
    try:
        with _open_text(path, compression) as fh:
            for no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                if first is None:
                    if _is_comment(line):
                        comments += 1
                        continue
                    first, first_no = line.rstrip("\r\n"), no
                    continue
                return first, first_no, line.rstrip("\r\n"), comments
    except (OSError, EOFError, lzma.LZMAError, zipfile.BadZipFile) as e:
        raise InputError(f"Cannot read {shown}: {e} (is it really {compression or 'plain text'}?)") from None
    except UnicodeDecodeError:
        raise InputError(f"{shown} is not a UTF-8 text table; check its format and extension.") from None
    return first or "", first_no, None, comments


def _has_header(fields: list[str], line: str, next_fields: list[str] | None, shown: str) -> bool:
    """Whether the first line of a table names its columns.

    It does when a cell is not a number, when a cell is quoted (R quotes names, never numbers) or empty (the
    row-name column's header cell of pandas' to_csv; counts cannot be missing), when it has one
    field less than the next line (R's write.table with row names), or when its cells are the sample numbers
    1..N or 0..N-1 (N >= 3; as cn.mops's read.table(header=TRUE) would take them). Any other line of numbers is
    the first region's counts (a file without header: samples Sample_1..Sample_N), said in a log line."""
    cells = [f for f in fields if f]
    if not all(_is_number(f) for f in cells):
        return True
    if '"' in line or "'" in line or len(cells) < len(fields):  # quoted, or an empty cell (pandas' index header)
        return True
    if next_fields is not None and len(next_fields) == len(fields) + 1:
        return True
    if len(cells) == len(fields) >= 3 and all(re.fullmatch(r"\d+", f) for f in fields):
        numbers = [int(f) for f in fields]
        if numbers in (list(range(1, len(fields) + 1)), list(range(len(fields)))):
            log.info(f"{shown}: the first line ({' '.join(fields)}) is taken as the sample names (a header), as "
                     "cn.mops's read.table(header=TRUE) takes it.")
            return True
    log.info(f"{shown}: the first line holds only numbers: read as the first region's counts (no header line); the "
             "samples are named Sample_1, Sample_2, ...")
    return False


#: a text table is parsed in parts of about this many bytes (of the uncompressed file, estimated from its first line)
TEXT_PART_BYTES = 64 << 20


def _rows_per_part(path: Path, first_line: str) -> int:
    """Rows per part of ``_read_text``: about TEXT_PART_BYTES each (a file a few times its compressed size)."""
    compressed = path.suffix.lower() in _COMPRESSIONS
    line = max(1, len(first_line.encode()) + 1) * (4 if compressed else 1)
    return max(1024, TEXT_PART_BYTES // line)


def _joined(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The table of ``_read_text``'s parts (a single part as it is)."""
    if len(parts) == 1:
        return parts[0]
    return pd.concat(parts, copy=False) if parts else pd.DataFrame()


def _read_text(path: Path, fmt: str, compression: str | None, min_samples: int, shown: str | None = None,
               coordinates: str = AUTO) -> CountData:
    shown = shown or str(path)
    table = _TextTable(path, fmt, compression, shown, coordinates)
    df = _joined(list(table.parts()))
    if len(df) == 0:
        raise InputError(f"Count file {shown} has a header but no data rows.")
    return table.count_data(df, min_samples)


class _TextTable:
    """A text count table's layout (comments, header, separator; see the module docstring), read in parts of
    about TEXT_PART_BYTES (``parts``) and turned into CountData (``count_data``) with the file's messages."""

    def __init__(self, path: Path, fmt: str, compression: str | None, shown: str, coordinates: str = AUTO):
        self.path, self.compression, self.shown = path, compression, shown
        self.coordinates, self.offset = coordinates, None
        header_line, header_no, next_line, comments = _table_start(path, compression, shown)
        if not header_line:
            raise InputError(f"Count file {shown} is empty (no non-blank line{' besides # comments' if comments else ''}).")
        if fmt in (".tsv", ".bed"):
            sep = "\t"
        elif fmt == ".csv":
            sep = ","
        else:  # .txt: tab, comma, or runs of whitespace
            sep = "\t" if "\t" in header_line else ("," if "," in header_line else "whitespace")
        try:
            fields = [f.strip() for f in _split(header_line, sep)]
            next_fields = None if next_line is None else [f.strip() for f in _split(next_line, sep)]
        except csv.Error as e:
            raise InputError(f"Cannot parse {shown}, line {header_no}: {e}") from None
        has_header = _has_header(fields, header_line, next_fields, shown)
        if has_header:
            seen, dups = set(), []
            for f in fields:
                if f and f in seen and f not in dups:
                    dups.append(f)
                seen.add(f)
            if dups:
                raise InputError(f"{shown}: the header names column(s) {', '.join(map(repr, dups))} more than once; "
                                 "sample names must be unique.")
        self.sep, self.has_header, self.header_line, self.header_no = sep, has_header, header_line, header_no
        self.seq_cols = [f for f in fields if f.lower() in SEQNAMES_ALIASES] if has_header else []
        self.first_data_no = header_no + 1 if has_header else header_no
        self.declared = ("a BED-style '#' header line" if has_header and header_line.lstrip().startswith("#") else
                         "a .bed file" if fmt == ".bed" else None)

    def parts(self, rows: int | None = None):
        """The table's rows as DataFrames of about TEXT_PART_BYTES (``rows`` rows each, if given); parse
        errors as InputErrors naming the line."""
        sep, shown = self.sep, self.shown
        try:
            source = _NulGuard(_COMPRESSIONS.get(self.compression, open)(self.path, "rb"), shown)
            parts = pd.read_csv(
                source,
                sep=r"\s+" if sep == "whitespace" else sep,
                header=0 if self.has_header else None,
                skiprows=self.header_no - 1,
                dtype={c: str for c in self.seq_cols} or None,
                encoding="utf-8-sig",
                low_memory=False,
                skip_blank_lines=True,
                skipinitialspace=sep != "whitespace",
                chunksize=rows or _rows_per_part(self.path, self.header_line),
            )
            with source, parts:  # parts of a large file: Ctrl-C is seen between them
                yield from parts
        except InputError:
            raise
        except pd.errors.EmptyDataError:
            raise InputError(f"Count file {shown} is empty.") from None
        except pd.errors.ParserError as e:
            msg = str(e)
            m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", msg)
            if m:
                exp, line, saw = m.groups()
                try:  # pandas' line numbers count the skipped lines in some versions, not in others: count here
                    line, saw, exp = _find_ragged_line(self.path, self.compression, sep, self.has_header,
                                                       self.first_data_no) or (line, saw, exp)
                except (OSError, EOFError, lzma.LZMAError, csv.Error, UnicodeDecodeError):
                    pass
                raise InputError(
                    f"{shown}, line {line}: {saw} fields where the lines before have {exp} (ragged rows); every line "
                    f"must have the same number of {_sep_name(sep)}-separated fields."
                ) from None
            raise InputError(f"Cannot parse {shown}: {msg.strip()}") from None
        except UnicodeDecodeError:
            raise InputError(f"{shown} is not a UTF-8 text table; check its format and extension.") from None
        except (OSError, EOFError, lzma.LZMAError, zipfile.BadZipFile) as e:
            raise InputError(f"Cannot read {shown}: {e}") from None
        except (ValueError, OverflowError) as e:  # pandas' own conversions (e.g. a dtype it cannot apply)
            raise InputError(f"Cannot parse {shown}: {e}") from None

    def count_data(self, df: pd.DataFrame, min_samples: int, first_row: int = 0) -> CountData:
        """The CountData of rows ``df`` (the table's data rows from ``first_row``, 0-based)."""
        path, compression, sep, shown = self.path, self.compression, self.sep, self.shown
        if df.isna().to_numpy().any():
            ragged = _find_ragged_line(path, compression, sep, self.has_header, self.first_data_no)
            if ragged is not None:
                line, saw, exp = ragged
                raise InputError(
                    f"{shown}, line {line}: {saw} fields where the lines before have {exp} (ragged rows); every line "
                    f"must have the same number of {_sep_name(sep)}-separated fields."
                )
        line_of = (_data_line_numbers(path, compression, self.first_data_no)
                   if _needs_line_numbers(df, self.seq_cols) else None)
        columns = FrameColumns(df)
        if self.offset is None:  # the first part decides the file's convention
            self.offset = file_start_offset(list(df.columns), columns, coordinates=self.coordinates,
                                            declared=self.declared, source=shown)

        def row_label(i: int) -> str:
            i += first_row
            if line_of is not None and i < len(line_of):
                return f"line {line_of[i]}"
            return f"data row {i + 1}"

        return count_data_from_columns(
            list(df.columns), columns, source=shown,
            min_samples=min_samples, default_sample_names=not self.has_header, row_label=row_label,
            start_offset=self.offset,
        )


class _NulGuard:
    """A binary file for pandas' parser that refuses a NUL byte (the parser would end the cell there: ``6\\x002``
    read as 6), checked in each block as it is read (no second pass over the file)."""

    def __init__(self, raw, shown: str):
        self.raw, self.shown, self.at = raw, shown, 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        k = data.find(b"\x00")
        if k >= 0:
            raise InputError(f"{self.shown} holds a NUL byte (at byte {self.at + k + 1} of its text): a count table "
                             "is plain text; is the file damaged, or in another format?")
        self.at += len(data)
        return data

    def __iter__(self):
        return iter(self.read, b"")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.raw.close()


def read_count_parts(path: str | os.PathLike, *, min_samples: int = 2, rows: int | None = None,
                     coordinates: str = AUTO):
    """A text or Parquet count file (as :func:`read_counts` reads it) in parts of rows: (CountData of the part,
    False) for each part, in file order, each checked as ``read_counts`` checks a file; (None, True) for a part
    whose chromosomes are not contiguous or whose starts decrease (``read_counts`` sorts the whole file: read
    it whole). ``rows``: rows per part
    (default about TEXT_PART_BYTES of text; Parquet 262,144)."""
    p = Path(path)
    shown = str(os.fspath(path))
    fmt, compression = detect_format(p)
    if not p.is_file():
        raise InputError(f"Count file not found: {shown}")
    if fmt in _TEXT:
        table = _TextTable(p, fmt, compression, shown, coordinates)
        parts = table.parts(rows)

        def convert(df, at):
            return table.count_data(df, min_samples, at)
    elif fmt == ".parquet":
        import pyarrow.parquet as pq

        try:
            f = pq.ParquetFile(p)
        except Exception as e:  # pyarrow raises ArrowInvalid / OSError on a corrupt file
            raise InputError(f"Cannot read {shown} as Parquet: {e}") from None
        names = [c for c in f.schema_arrow.names if not c.startswith("__index_level_")]
        parts = (b.to_pandas() for b in f.iter_batches(batch_size=rows or 1 << 18, columns=names))
        offset: list[int] = []  # the first part decides the file's convention; the others follow it

        def convert(df, at):
            cols = FrameColumns(df)
            if not offset:
                offset.append(file_start_offset(list(df.columns), cols, coordinates=coordinates, declared=None,
                                                source=shown))
            return count_data_from_columns(list(df.columns), cols, source=shown, min_samples=min_samples,
                                           start_offset=offset[0])
    else:
        raise InputError(f"{shown}: only text and Parquet tables are read in parts.")
    at = 0
    for df in parts:
        df = with_index_coordinates(df)
        if not isinstance(df.index, pd.RangeIndex) or df.index.start != 0:
            df = df.reset_index(drop=True)
        try:
            reordered = _reordered(df)
        except InputError:  # bad coordinates: the conversion says where
            reordered = False
        yield (None if reordered else convert(df, at)), reordered
        at += len(df)


def _reordered(df: pd.DataFrame) -> bool:
    """Whether ``make_count_data`` regroups or sorts the rows of the table part ``df`` (its coordinates valid)."""
    lower = {str(c).lower(): c for c in df.columns}
    seq = next((lower[a] for a in SEQNAMES_ALIASES if a in lower), None)
    if seq is None or "start" not in lower:
        return False
    names = df[seq].astype(str).to_numpy(dtype=object)
    blocks = chromosome_blocks(names)
    start = pd.DataFrame({"start": coordinates(df[lower["start"]], "start")})
    return not rows_grouped(blocks) or unsorted_rows(start, blocks).size > 0


def _sep_name(sep: str) -> str:
    return {"\t": "tab", ",": "comma"}.get(sep, "whitespace")


def _needs_line_numbers(df: pd.DataFrame, text_columns=()) -> bool:
    """Only an error report needs file line numbers: a missing, non-numeric (but in ``text_columns``, the
    seqnames) or out-of-range cell, a region that ends before it starts (cheap checks first; the reading itself
    costs far more)."""
    return bool(df.isna().to_numpy().any()) or any(
        not (pd.api.types.is_numeric_dtype(dtype)) or dtype.kind in "cu" for c, dtype in zip(df.columns, df.dtypes)
        if c not in text_columns
    ) or _suspect_values(df)


def _suspect_values(df: pd.DataFrame) -> bool:
    dtypes = list(df.dtypes)
    runs = [j for j in range(1, len(dtypes)) if dtypes[j] != dtypes[j - 1]]
    for a, b in zip([0] + runs, runs + [len(dtypes)]):  # columns of one dtype: one block's maxima and minima
        if dtypes[a].kind in "if" and len(df):
            run = df.iloc[:, a:b]
            if (run.max() > 2 ** 53).any() or (run.min() < 0).any():
                return True
    keys = {str(c).strip().lower(): c for c in df.columns}
    if "start" in keys and "end" in keys:
        try:
            return bool((pd.to_numeric(df[keys["end"]], errors="coerce")
                         < pd.to_numeric(df[keys["start"]], errors="coerce")).any())
        except (TypeError, ValueError):
            return True
    return False


def _data_line_numbers(path: Path, compression: str | None, first_data_no: int) -> list[int]:
    """1-based file line numbers of the data rows (from line ``first_data_no`` on), blank lines skipped."""
    out: list[int] = []
    with _open_text(path, compression) as fh:
        for no, line in enumerate(fh, start=1):
            if no >= first_data_no and line.strip():
                out.append(no)
    return out


def _find_ragged_line(path: Path, compression: str | None, sep: str, has_header: bool, first_data_no: int):
    """(line, fields, expected) of the first line whose field count differs, or None."""
    expected = None
    header_n = None
    with _open_text(path, compression) as fh:
        for no, line in enumerate(fh, start=1):
            if not line.strip() or no < first_data_no - (1 if has_header else 0):
                continue
            n = len(_split(line.rstrip("\r\n"), sep))
            if has_header and header_n is None:
                header_n = n
                continue
            if expected is None:
                # pandas takes one extra leading field on the data lines as row names (R's write.table)
                expected = n if header_n is None or n in (header_n, header_n + 1) else header_n
                if n != expected:
                    return no, n, expected
                continue
            if n != expected:
                return no, n, expected
    return None


# --------------------------------------------------------------------------------------------
# binary formats
# --------------------------------------------------------------------------------------------
def _read_parquet(path: Path, min_samples: int, shown: str | None = None, coordinates: str = AUTO) -> CountData:
    shown = shown or str(path)
    try:
        df = pd.read_parquet(path)
    except ImportError as e:
        raise InputError(f"Reading Parquet needs pyarrow (pip install pyarrow): {e}") from None
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError on a corrupt file
        raise InputError(f"Cannot read {shown} as Parquet: {e}") from None
    if df.shape[1] == 0 or len(df) == 0:
        raise InputError(f"Parquet file {shown} holds no data (no columns or no rows).")
    df = with_index_coordinates(df)
    if not isinstance(df.index, pd.RangeIndex):
        df = df.reset_index(drop=True)
    return count_data_from_frame(df, min_samples=min_samples, source=shown, coordinates=coordinates)


__all__ = [
    "read_counts", "read_count_file", "read_count_parts", "detect_format", "count_data_from_array",
    "count_data_from_frame", "SUPPORTED_EXTENSIONS",
]
