"""Read-count matrices from files and in-memory objects -> :class:`CountData`.

Tables (text, Parquet, pandas, R data.frame) hold optional coordinate columns ``seqnames`` (or
``chr``/``chrom``/``chromosome``, any case), ``start``, ``end`` and one numeric column per sample.
Without coordinate columns every column is a sample and the regions are row indices on the
pseudo-chromosome "undef" (cn.mops's matrix input). Validation of counts, names and ranges is
:func:`gcnmops.data.make_count_data`'s and the column rules :mod:`gcnmops.io.columns`'; this module only
turns formats into columns and reports format problems (missing file, ragged lines, non-numeric cells)
with the file, line and column.
"""
from __future__ import annotations

import bz2
import csv
import gzip
import lzma
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..data import CountData, make_count_data
from ..errors import InputError
from .columns import SEQNAMES_ALIASES, count_data_from_array, count_data_from_columns, count_data_from_frame

#: Accepted file extensions (text formats may add .gz, .bz2 or .xz).
SUPPORTED_EXTENSIONS = (".tsv", ".txt", ".csv", ".parquet", ".npz", ".npy", ".rds")
_COMPRESSIONS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_TEXT = (".tsv", ".txt", ".csv")


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------
def read_counts(path_or_obj: Any, *, min_samples: int = 2) -> CountData:
    """Read a regions x samples read-count matrix from a file or an in-memory object.

    Files, by extension: ``.tsv``, ``.txt`` (tab, comma or whitespace separated), ``.csv`` (each
    optionally ``.gz``/``.bz2``/``.xz`` compressed) with a header line; ``.parquet``; ``.npz``
    (``counts`` (m, N) and optional ``sample_names``, ``seqnames``, ``start``, ``end``); ``.npy``
    (a bare matrix); ``.rds`` (a GRanges with one numeric metadata column per sample, a numeric
    matrix, a data.frame or a numeric vector; needs rpy2 and R).

    In memory: a :class:`CountData` (validated again for ``min_samples``), a numpy array (2-D:
    regions x samples; 1-D: one region as in cn.mops, or one sample when ``min_samples == 1`` as in
    singlecn.mops), a pandas DataFrame, or an rpy2 R object of the kinds above.

    Raises :class:`InputError` with a message naming what to fix.
    """
    if isinstance(path_or_obj, CountData):
        return make_count_data(path_or_obj.counts, path_or_obj.sample_names, path_or_obj.ranges,
                               min_samples=min_samples)
    if isinstance(path_or_obj, (str, os.PathLike)):
        return read_count_file(path_or_obj, min_samples=min_samples)
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


def read_count_file(path: str | os.PathLike, *, min_samples: int = 2) -> CountData:
    """Read counts from a file; the format is taken from the extension (see :func:`read_counts`)."""
    p = Path(path)
    fmt, compression = detect_format(p)
    if not p.exists():
        raise InputError(f"Count file not found: {p}")
    if p.is_dir():
        raise InputError(f"{p} is a directory, not a count file.")
    if p.stat().st_size == 0:
        raise InputError(f"Count file {p} is empty.")
    if fmt in _TEXT:
        return _read_text(p, fmt, compression, min_samples)
    if fmt == ".parquet":
        return _read_parquet(p, min_samples)
    if fmt == ".npz":
        return _read_npz(p, min_samples)
    if fmt == ".npy":
        return _read_npy(p, min_samples)
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
        ".gz/.bz2/.xz compressed), .parquet, .npz, .npy or .rds."
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


def _first_line(path: Path, compression: str | None) -> tuple[str, int]:
    """The first non-blank line and its 1-based line number ('' if none)."""
    try:
        with _open_text(path, compression) as fh:
            for no, line in enumerate(fh, start=1):
                if line.strip():
                    return line.rstrip("\r\n"), no
    except (OSError, EOFError, lzma.LZMAError, zipfile.BadZipFile) as e:
        raise InputError(f"Cannot read {path}: {e} (is it really {compression or 'plain text'}?)") from None
    except UnicodeDecodeError:
        raise InputError(f"{path} is not a UTF-8 text table; check its format and extension.") from None
    return "", 0


def _read_text(path: Path, fmt: str, compression: str | None, min_samples: int) -> CountData:
    header_line, _ = _first_line(path, compression)
    if not header_line:
        raise InputError(f"Count file {path} is empty (no non-blank line).")
    if fmt == ".tsv":
        sep = "\t"
    elif fmt == ".csv":
        sep = ","
    else:  # .txt: tab, comma, or runs of whitespace
        sep = "\t" if "\t" in header_line else ("," if "," in header_line else "whitespace")
    fields = [f.strip() for f in _split(header_line, sep)]
    has_header = not all(_is_number(f) for f in fields if f)
    if has_header:
        seen, dups = set(), []
        for f in fields:
            if f in seen and f not in dups:
                dups.append(f)
            seen.add(f)
        if dups:
            raise InputError(f"{path}: the header names column(s) {', '.join(map(repr, dups))} more than once; "
                             "sample names must be unique.")
    seq_cols = [f for f in fields if f.lower() in SEQNAMES_ALIASES] if has_header else []
    try:
        df = pd.read_csv(
            path,
            sep=r"\s+" if sep == "whitespace" else sep,
            header=0 if has_header else None,
            dtype={c: str for c in seq_cols} or None,
            compression="infer",
            encoding="utf-8-sig",
            low_memory=False,
            skip_blank_lines=True,
            skipinitialspace=sep != "whitespace",
        )
    except pd.errors.EmptyDataError:
        raise InputError(f"Count file {path} is empty.") from None
    except pd.errors.ParserError as e:
        msg = str(e)
        m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", msg)
        if m:
            exp, line, saw = m.groups()
            raise InputError(
                f"{path}, line {line}: {saw} fields where the lines before have {exp} (ragged rows); every line "
                f"must have the same number of {_sep_name(sep)}-separated fields."
            ) from None
        raise InputError(f"Cannot parse {path}: {msg.strip()}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path} is not a UTF-8 text table; check its format and extension.") from None
    except (OSError, EOFError, lzma.LZMAError) as e:
        raise InputError(f"Cannot read {path}: {e}") from None
    if len(df) == 0:
        raise InputError(f"Count file {path} has a header but no data rows.")
    if df.isna().to_numpy().any():
        ragged = _find_ragged_line(path, compression, sep, has_header)
        if ragged is not None:
            line, saw, exp = ragged
            raise InputError(
                f"{path}, line {line}: {saw} fields where the lines before have {exp} (ragged rows); every line "
                f"must have the same number of {_sep_name(sep)}-separated fields."
            )
    line_of = _data_line_numbers(path, compression, has_header) if _needs_line_numbers(df) else None

    def row_label(i: int) -> str:
        if line_of is not None and i < len(line_of):
            return f"line {line_of[i]}"
        return f"data row {i + 1}"

    return count_data_from_columns(
        list(df.columns), [df.iloc[:, j] for j in range(df.shape[1])], source=str(path),
        min_samples=min_samples, default_sample_names=not has_header, row_label=row_label,
    )


def _sep_name(sep: str) -> str:
    return {"\t": "tab", ",": "comma"}.get(sep, "whitespace")


def _needs_line_numbers(df: pd.DataFrame) -> bool:
    """Only an error report needs file line numbers: a missing or non-numeric cell."""
    return bool(df.isna().to_numpy().any()) or any(
        not (pd.api.types.is_numeric_dtype(df[c].dtype)) for c in df.columns
    )


def _data_line_numbers(path: Path, compression: str | None, has_header: bool) -> list[int]:
    """1-based file line numbers of the data rows (after the header line, if any), blank lines skipped."""
    out: list[int] = []
    with _open_text(path, compression) as fh:
        first = has_header
        for no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            if first:
                first = False
                continue
            out.append(no)
    return out


def _find_ragged_line(path: Path, compression: str | None, sep: str, has_header: bool):
    """(line, fields, expected) of the first line whose field count differs, or None."""
    expected = None
    header_n = None
    with _open_text(path, compression) as fh:
        for no, line in enumerate(fh, start=1):
            if not line.strip():
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
def _read_parquet(path: Path, min_samples: int) -> CountData:
    try:
        df = pd.read_parquet(path)
    except ImportError as e:
        raise InputError(f"Reading Parquet needs pyarrow (pip install pyarrow): {e}") from None
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError on a corrupt file
        raise InputError(f"Cannot read {path} as Parquet: {e}") from None
    if df.shape[1] == 0 or len(df) == 0:
        raise InputError(f"Parquet file {path} holds no data (no columns or no rows).")
    if not isinstance(df.index, pd.RangeIndex):
        df = df.reset_index(drop=True)
    return count_data_from_frame(df, min_samples=min_samples, source=str(path))


def _read_npz(path: Path, min_samples: int) -> CountData:
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise InputError(f"Cannot read {path} as an .npz archive: {e}") from None
    if not hasattr(z, "files"):
        raise InputError(f"{path} is not an .npz archive (a single array? name it .npy).")
    try:
        keys = set(z.files)
        if "counts" not in keys:
            raise InputError(
                f"{path} has no array 'counts' (found: {', '.join(sorted(keys)) or 'none'}); save the "
                "regions x samples matrix as counts=..., optionally with sample_names, seqnames, start, end."
            )
        counts = z["counts"]
        names = z["sample_names"] if "sample_names" in keys else None
        coords = {k: z[k] for k in ("seqnames", "start", "end") if k in keys}
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
    if counts.ndim != 2:
        raise InputError(f"{path}: 'counts' must be a 2-D regions x samples matrix, got shape {counts.shape}.")
    if names is not None:
        names = [str(s) for s in np.asarray(names).ravel()]
    ranges = None
    if coords:
        if len(coords) < 3:
            lack = ", ".join(k for k in ("seqnames", "start", "end") if k not in coords)
            raise InputError(f"{path} has coordinate array(s) {', '.join(coords)} but lacks {lack}; give all three or none.")
        ranges = pd.DataFrame({k: np.asarray(v).ravel() for k, v in coords.items()})
    return make_count_data(counts, names, ranges, min_samples=min_samples, what=f"read count matrix of {path}")


def _read_npy(path: Path, min_samples: int) -> CountData:
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise InputError(f"Cannot read {path} as a .npy array: {e}") from None
    if not isinstance(arr, np.ndarray):
        raise InputError(f"{path} is not a single .npy array.")
    return count_data_from_array(arr, min_samples=min_samples, what=f"read count matrix of {path}")


__all__ = [
    "read_counts", "read_count_file", "detect_format", "count_data_from_array", "count_data_from_frame",
    "SUPPORTED_EXTENSIONS",
]
