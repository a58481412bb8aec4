"""CountData from named columns, arrays and frames: the one home of the column rules every reader follows.

Tables (text, Parquet, pandas, R data.frame) hold optional coordinate columns ``seqnames`` (or
``chr``/``chrom``/``chromosome``, any case), ``start``, ``end`` and one numeric column per sample.
Without coordinate columns every column is a sample and the regions are row indices on the
pseudo-chromosome "undef" (cn.mops's matrix input). Columns are found by name, in any order. With
coordinates, a ``strand`` column of strands (+, -, *) and a ``width`` column of the regions' widths
(``as.data.frame(<GRanges>)``) are checked (one strand) and dropped; a column of either name holding
anything else is a sample's. Validation of counts,
names and ranges is :func:`gcnmops.data.make_count_data`'s; this module reports column problems
(non-numeric or missing cells, incomplete coordinates) with the source, row and column.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..data import MAX_COUNT, CountData, check_count_type, coordinates, make_count_data
from ..errors import InputError
from .coordinates import start_offset

log = logging.getLogger("gcnmops")
#: pandas' name for a column whose header cell is empty
_UNNAMED = re.compile(r"^Unnamed: \d+$")

#: Names (lower case) accepted for the coordinate columns.
SEQNAMES_ALIASES = ("seqnames", "seqname", "chr", "chrom", "chromosome", "#chr", "#chrom")
START_ALIASES = ("start",)
END_ALIASES = ("end",)


def count_data_from_array(arr: np.ndarray, *, min_samples: int = 2, sample_names=None, ranges=None,
                          what: str = "read count matrix") -> CountData:
    """A numpy matrix (regions x samples) -> CountData.

    A 1-D array is one region with one count per sample (cn.mops's vector input), or, when
    ``min_samples == 1``, one sample with one count per region (singlecn.mops's vector input).
    """
    check_count_type(arr, what)
    a = np.asarray(arr)
    if a.dtype.names is not None:
        raise InputError("Structured numpy arrays are not supported: give a plain numeric matrix or a DataFrame.")
    if a.ndim == 1:
        a = a.reshape(-1, 1) if min_samples <= 1 else a.reshape(1, -1)
    return make_count_data(a, sample_names, ranges, min_samples=min_samples, what=what)


def count_data_from_frame(df: pd.DataFrame, *, min_samples: int = 2, source: str = "the DataFrame",
                          coordinates: str | None = None, declared: str | None = None) -> CountData:
    """A DataFrame with optional seqnames/start/end columns and one numeric column per sample. ``coordinates``
    (a file's table: "auto", "0-based" or "1-based") and ``declared`` (why it is BED style, or None): the start
    convention as :func:`gcnmops.io.coordinates.start_offset` decides it; None: 1-based, as they are."""
    df = with_index_coordinates(df)
    if df.shape[1] == 0:
        raise InputError(f"{capitalized(source)} has no columns.")
    default_names = isinstance(df.columns, pd.RangeIndex)
    names = list(df.columns)
    cols = FrameColumns(df)
    offset = 0 if coordinates is None else file_start_offset(names, cols, coordinates=coordinates,
                                                             declared=declared, source=source)
    return count_data_from_columns(names, cols, source=source, min_samples=min_samples,
                                    default_sample_names=default_names, start_offset=offset)


class FrameColumns(Sequence):
    """The columns of a DataFrame (or those at ``positions``) as a sequence of Series, each made when asked for: a
    table of a million samples is not held as a million Series at once."""

    def __init__(self, frame: pd.DataFrame, positions: range | None = None):
        self.frame = frame
        self.positions = range(frame.shape[1]) if positions is None else positions

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return FrameColumns(self.frame, self.positions[k])
        return self.frame.iloc[:, self.positions[k]]


def with_index_coordinates(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with coordinates kept in its (Multi)Index (``set_index(["seqnames", "start", "end"])``, as Parquet
    and pandas keep them) as columns; ``df`` itself when its index holds none (row labels, not read)."""
    coordinate_names = set(SEQNAMES_ALIASES + START_ALIASES + END_ALIASES)
    if any(n is not None and str(n).strip().lower() in coordinate_names for n in df.index.names):
        return df.reset_index()
    return df


def file_start_offset(names: Sequence[Any], columns: Sequence[Any], *, coordinates: str, declared: str | None,
                      source: str) -> int:
    """What to add to the starts of a file's table (named columns) to make them 1-based: 0 without coordinate
    columns, else :func:`gcnmops.io.coordinates.start_offset`'s answer (one log line)."""
    keys = [str(n).strip().lower() for n in names]
    found = [next((j for j, k in enumerate(keys) if k in aliases), None)
             for aliases in (SEQNAMES_ALIASES, START_ALIASES, END_ALIASES)]
    if None in found:
        return 0
    seq, start, end = (columns[j] for j in found)
    return start_offset(seq, start, end, coordinates=coordinates, declared=declared, source=source)


def count_data_from_columns(
    names: Sequence[Any],
    columns: Sequence[Any],
    *,
    source: str,
    min_samples: int,
    default_sample_names: bool = False,
    row_label: Callable[[int], str] | None = None,
    start_offset: int = 0,
) -> CountData:
    """Shared core: split columns into coordinates and samples, convert samples once into (m, N) F. ``start_offset``
    is added to the starts (1: a 0-based file's, see :mod:`gcnmops.io.coordinates`)."""
    row_label = row_label or (lambda i: f"data row {i + 1}")
    columns = columns if isinstance(columns, Sequence) else list(columns)
    names, columns = _without_row_names(list(names), columns, source, default_sample_names)
    keys = [str(n).strip().lower() for n in names]
    coord = {}
    for role, aliases in (("seqnames", SEQNAMES_ALIASES), ("start", START_ALIASES), ("end", END_ALIASES)):
        hits = [j for j, k in enumerate(keys) if k in aliases]
        if len(hits) > 1:
            raise InputError(
                f"{capitalized(source)} has several {role} columns ({', '.join(repr(str(names[j])) for j in hits)}); keep one."
            )
        if hits:
            coord[role] = hits[0]
    if coord and len(coord) < 3:
        have = ", ".join(f"'{names[j]}'" for j in coord.values())
        lack = ", ".join(r for r in ("seqnames", "start", "end") if r not in coord)
        raise InputError(
            f"{capitalized(source)} has coordinate column(s) {have} but lacks {lack}: give all of seqnames "
            "(or chr/chrom/chromosome), start and end, or none (then every column is a sample)."
        )
    skip = set(coord.values())
    ranges = None
    if coord:
        seq = columns[coord["seqnames"]]
        seq = seq.to_numpy(dtype=object) if isinstance(seq, pd.Series) else np.asarray(seq, dtype=object)
        missing = pd.isna(seq)
        if missing.any():
            i = int(np.argmax(missing))
            raise InputError(f"{capitalized(source)}: seqnames column '{names[coord['seqnames']]}' is empty at {row_label(i)}.")
        ranges = pd.DataFrame({
            "seqnames": seq.astype(str),
            "start": _coordinate_column(columns[coord["start"]], str(names[coord["start"]]), source, row_label)
            + start_offset,
            "end": _coordinate_column(columns[coord["end"]], str(names[coord["end"]]), source, row_label),
        })
        _check_ends(ranges, source, row_label)
        for j, k in enumerate(keys):
            if k == "strand" and _is_strand(columns[j]):
                _check_single_strand(columns[j], source)
                skip.add(j)
            elif k == "width" and _is_width(columns[j], ranges):
                skip.add(j)
    sample_idx = [j for j in range(len(names)) if j not in skip]
    if not sample_idx:
        raise InputError(f"{capitalized(source)} has no sample columns: give one numeric column of read counts per sample.")

    m = len(columns[0])
    counts = np.empty((m, len(sample_idx)), dtype=np.float64, order="F")
    for k, j in enumerate(sample_idx):
        counts[:, k] = _numeric_column(columns[j], str(names[j]), source, bool(coord), row_label)
    sample_names = None if default_sample_names else [str(names[j]) for j in sample_idx]
    return make_count_data(counts, sample_names, ranges, min_samples=min_samples,
                           what=f"read count matrix of {source}")


def _numeric_column(col: Any, name: str, source: str, has_coords: bool, row_label) -> np.ndarray:
    """One sample column as float64 (a view where possible); non-numeric, missing, complex or too large
    (above 2^53) cells -> InputError."""
    if isinstance(col, np.ndarray) and col.dtype.kind in "fiub":
        vals = col
    else:
        s = col if isinstance(col, pd.Series) else pd.Series(np.asarray(col, dtype=object))
        if isinstance(s.dtype, np.dtype) and s.dtype.kind == "c":
            _complex_column(name, source)
        if isinstance(s.dtype, np.dtype) and s.dtype.kind in "fiub":
            vals = s.to_numpy()  # a view; the caller's assignment converts once
        elif pd.api.types.is_bool_dtype(s.dtype) or pd.api.types.is_numeric_dtype(s.dtype):
            if pd.api.types.is_complex_dtype(s.dtype):
                _complex_column(name, source)
            if pd.api.types.is_integer_dtype(s.dtype) and len(s) and s.max() > MAX_COUNT:  # nullable Int64, UInt64
                i = int(np.argmax((s > MAX_COUNT).fillna(False).to_numpy(dtype=bool)))
                _too_large(str(int(s.iloc[i])), name, source, row_label(i))
            vals = s.to_numpy(dtype=np.float64, na_value=np.nan)  # nullable dtypes: pd.NA -> NaN
        else:
            obj = s.astype(object)
            if any(isinstance(v, complex) for v in obj):
                _complex_column(name, source)
            num = pd.to_numeric(obj, errors="coerce")
            bad = (num.isna() & obj.notna()).to_numpy()
            if bad.any():
                i = int(np.argmax(bad))
                hint = "" if has_coords else (
                    " If this column holds chromosome names, call it seqnames (or chr/chrom/chromosome) and add "
                    "start and end columns."
                )
                raise InputError(
                    f"Column '{name}' of {source} holds the non-numeric value {obj.iloc[i]!r} at {row_label(i)}: "
                    f"every column other than seqnames/start/end must hold one sample's read counts.{hint}"
                )
            big = ((num > MAX_COUNT) & (num != np.inf)).to_numpy(dtype=bool)  # infinite: validate_counts' message
            if big.any():
                i = int(np.argmax(big))
                _too_large(str(obj.iloc[i]), name, source, row_label(i))
            vals = num.to_numpy(dtype=np.float64, na_value=np.nan)
    if vals.dtype.kind == "f":
        nan = np.isnan(vals)
        if nan.any():
            i = int(np.argmax(nan))
            raise InputError(
                f"Column '{name}' of {source} has a missing value (empty field, NA or NaN) at {row_label(i)}; "
                "every read count must be a number."
            )
    if vals.dtype.kind in "iuf" and vals.size and vals.max() > MAX_COUNT:  # ints before float64 rounds them
        big = (vals > MAX_COUNT) & (vals != np.inf)  # infinite: validate_counts' message
        if not big.any():
            return vals
        i = int(np.argmax(big))
        _too_large(str(int(vals[i])) if vals.dtype.kind in "iu" else f"{vals[i]:.17g}", name, source, row_label(i))
    return vals


def _too_large(shown: str, name: str, source: str, where: str) -> None:
    raise InputError(
        f"Count {shown} in sample '{name}' of {source} at {where} exceeds 2^53 ({MAX_COUNT}), the largest whole "
        "number a float64 count holds exactly; cn.mops cannot model such counts: check the input (an overflow, or "
        "a wrong column?) or scale the counts down."
    )


def _complex_column(name: str, source: str) -> None:
    raise InputError(f"Column '{name}' of {source} holds complex numbers; read counts must be real numbers.")


def _coordinate_column(col: Any, name: str, source: str, row_label) -> np.ndarray:
    try:
        return coordinates(col, name, where=row_label)
    except InputError as e:
        raise InputError(f"{capitalized(source)}: {e}") from None


def _check_ends(ranges: pd.DataFrame, source: str, row_label) -> None:
    early = (ranges["end"] < ranges["start"]).to_numpy()
    if early.any():
        i = int(np.argmax(early))
        region = f"{ranges['seqnames'][i]}:{ranges['start'][i]}-{ranges['end'][i]}"
        raise InputError(
            f"{capitalized(source)}: the region at {row_label(i)} ({region}) ends before it starts "
            f"({int(early.sum())} such region(s)): are the start and end columns swapped?"
        )


def _without_row_names(names: list, columns: list, source: str, default_sample_names: bool) -> tuple[list, list]:
    """``names``/``columns`` without a leading row-name column: an unnamed first column (empty header cell, as
    R's write.csv and pandas' to_csv with its index write it; pandas reads it as 'Unnamed: 0') holding the row
    numbers 1..m or 0..m-1, or text (region names). It is dropped with a log line; an unnamed column holding
    anything else, or an unnamed column elsewhere, is an InputError naming it."""
    if default_sample_names or not names:
        return names, columns
    unnamed = [j for j, n in enumerate(names) if n is None or not str(n).strip() or _UNNAMED.match(str(n))]
    if not unnamed:
        return names, columns
    if unnamed[0] == 0:
        kind = _row_names_kind(columns[0])
        if kind is not None:
            log.warning(f"{source}: the first column has no name and holds {kind}: taken as row names (R's "
                        "write.csv, pandas' to_csv with its index), not a sample; dropped.")
            names, columns = names[1:], columns[1:]
            unnamed = [j - 1 for j in unnamed[1:]]
            if not unnamed:
                return names, columns
        else:
            raise InputError(
                f"Column 1 of {source} has no name (an empty header cell) but does not hold row numbers 1..m or "
                "row names: give it a sample name in the header, or remove it."
            )
    j = unnamed[0]
    raise InputError(f"Column {j + 1} of {source} has no name (an empty header cell): every sample column needs a "
                     "name in the header.")


def _row_names_kind(col) -> str | None:
    """'row numbers 1..m' / 'row numbers 0..m-1' / 'row names (text)' for a column of row names, else None."""
    s = col if isinstance(col, pd.Series) else pd.Series(np.asarray(col, dtype=object))
    m = len(s)
    if m == 0:
        return None
    if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
        v = s.to_numpy(dtype=np.float64, na_value=np.nan)
        if np.array_equal(v, np.arange(1, m + 1)):
            return f"the row numbers 1..{m}"
        if np.array_equal(v, np.arange(m)):
            return f"the row numbers 0..{m - 1}"
        return None
    obj = s.astype(object)
    if obj.isna().any():
        return None
    num = pd.to_numeric(obj, errors="coerce")
    if num.isna().all():
        return "text (region or row names)"
    if num.notna().all():
        return _row_names_kind(num)
    return None


def _is_strand(col: Any) -> bool:
    """Whether a column named ``strand`` holds strands (+, -, *: ``as.data.frame(<GRanges>)``), not counts."""
    vals = pd.unique(pd.Series(np.asarray(col, dtype=object)).dropna().astype(str).str.strip())
    return len(vals) > 0 and set(vals) <= {"+", "-", "*"}


def _is_width(col: Any, ranges: pd.DataFrame) -> bool:
    """Whether a column named ``width`` holds each region's width, end - start + 1 (``as.data.frame(<GRanges>)``);
    any other column of that name is a sample's counts."""
    width = pd.to_numeric(pd.Series(np.asarray(col, dtype=object)), errors="coerce").to_numpy(dtype=np.float64)
    return bool(np.array_equal(width, (ranges["end"] - ranges["start"] + 1).to_numpy(dtype=np.float64)))


def _check_single_strand(col: Any, source: str) -> None:
    vals = pd.unique(pd.Series(np.asarray(col, dtype=object)).dropna().astype(str))
    if len(vals) > 1:
        raise InputError(
            f"{capitalized(source)} holds regions on more than one strand ({', '.join(sorted(vals))}); cn.mops needs "
            "all regions on one strand (count reads on both strands together, strand '*')."
        )


def capitalized(s: str) -> str:
    """``s`` as the subject at the start of a sentence: our own phrases ("the DataFrame") with an upper-case
    first letter; anything else (a file path) exactly as given."""
    return s[:1].upper() + s[1:] if s.startswith(("the ", "a ", "an ")) else s


__all__ = [
    "count_data_from_array", "count_data_from_frame", "count_data_from_columns", "SEQNAMES_ALIASES", "START_ALIASES",
    "END_ALIASES", "capitalized", "file_start_offset", "with_index_coordinates", "FrameColumns",
]
