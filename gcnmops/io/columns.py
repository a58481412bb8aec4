"""CountData from named columns, arrays and frames: the one home of the column rules every reader follows.

Tables (text, Parquet, pandas, R data.frame) hold optional coordinate columns ``seqnames`` (or
``chr``/``chrom``/``chromosome``, any case), ``start``, ``end`` and one numeric column per sample.
Without coordinate columns every column is a sample and the regions are row indices on the
pseudo-chromosome "undef" (cn.mops's matrix input). ``strand`` and ``width`` columns next to the
coordinates (``as.data.frame(<GRanges>)``) are checked (one strand) and dropped. Validation of counts,
names and ranges is :func:`gcnmops.data.make_count_data`'s; this module reports column problems
(non-numeric or missing cells, incomplete coordinates) with the source, row and column.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..data import CountData, make_count_data
from ..errors import InputError

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
    a = np.asarray(arr)
    if a.dtype.names is not None:
        raise InputError("Structured numpy arrays are not supported: give a plain numeric matrix or a DataFrame.")
    if a.ndim == 1:
        a = a.reshape(-1, 1) if min_samples <= 1 else a.reshape(1, -1)
    return make_count_data(a, sample_names, ranges, min_samples=min_samples, what=what)


def count_data_from_frame(df: pd.DataFrame, *, min_samples: int = 2, source: str = "the DataFrame") -> CountData:
    """A DataFrame with optional seqnames/start/end columns and one numeric column per sample."""
    coordinate_names = set(SEQNAMES_ALIASES + START_ALIASES + END_ALIASES)
    if any(n is not None and str(n).strip().lower() in coordinate_names for n in df.index.names):
        df = df.reset_index()  # coordinates kept in the (Multi)Index
    if df.shape[1] == 0:
        raise InputError(f"{capitalized(source)} has no columns.")
    default_names = isinstance(df.columns, pd.RangeIndex)
    names = list(df.columns)
    cols = [df.iloc[:, j] for j in range(df.shape[1])]
    return count_data_from_columns(names, cols, source=source, min_samples=min_samples,
                                    default_sample_names=default_names)


def count_data_from_columns(
    names: Sequence[Any],
    columns: Sequence[Any],
    *,
    source: str,
    min_samples: int,
    default_sample_names: bool = False,
    row_label: Callable[[int], str] | None = None,
) -> CountData:
    """Shared core: split columns into coordinates and samples, convert samples once into (m, N) F."""
    row_label = row_label or (lambda i: f"data row {i + 1}")
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
    if coord:
        for j, k in enumerate(keys):
            if k == "strand":
                _check_single_strand(columns[j], source)
                skip.add(j)
            elif k == "width":
                skip.add(j)
    sample_idx = [j for j in range(len(names)) if j not in skip]
    if not sample_idx:
        raise InputError(f"{capitalized(source)} has no sample columns: give one numeric column of read counts per sample.")

    m = len(columns[0])
    counts = np.empty((m, len(sample_idx)), dtype=np.float64, order="F")
    for k, j in enumerate(sample_idx):
        counts[:, k] = _numeric_column(columns[j], str(names[j]), source, bool(coord), row_label)
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
            "start": _coordinate_column(columns[coord["start"]], str(names[coord["start"]]), source, row_label),
            "end": _coordinate_column(columns[coord["end"]], str(names[coord["end"]]), source, row_label),
        })
    sample_names = None if default_sample_names else [str(names[j]) for j in sample_idx]
    return make_count_data(counts, sample_names, ranges, min_samples=min_samples,
                           what=f"read count matrix of {source}")


def _numeric_column(col: Any, name: str, source: str, has_coords: bool, row_label) -> np.ndarray:
    """One sample column as float64 (a view where possible); non-numeric or missing cells -> InputError."""
    if isinstance(col, np.ndarray) and col.dtype.kind in "fiub":
        vals = col
    else:
        s = col if isinstance(col, pd.Series) else pd.Series(np.asarray(col, dtype=object))
        if isinstance(s.dtype, np.dtype) and s.dtype.kind in "fiub":
            vals = s.to_numpy()  # a view; the caller's assignment converts once
        elif pd.api.types.is_bool_dtype(s.dtype) or pd.api.types.is_numeric_dtype(s.dtype):
            vals = s.to_numpy(dtype=np.float64, na_value=np.nan)  # nullable dtypes: pd.NA -> NaN
        else:
            obj = s.astype(object)
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
            vals = num.to_numpy(dtype=np.float64, na_value=np.nan)
    if vals.dtype.kind == "f":
        nan = np.isnan(vals)
        if nan.any():
            i = int(np.argmax(nan))
            raise InputError(
                f"Column '{name}' of {source} has a missing value (empty field, NA or NaN) at {row_label(i)}; "
                "every read count must be a number."
            )
    return vals


def _coordinate_column(col: Any, name: str, source: str, row_label) -> np.ndarray:
    s = col if isinstance(col, pd.Series) else pd.Series(np.asarray(col))
    if not pd.api.types.is_numeric_dtype(s.dtype):
        s = s.astype(object)
    num = pd.to_numeric(s, errors="coerce")
    bad = num.isna().to_numpy()
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"Coordinate column '{name}' of {source} must hold integer positions; found {s.iloc[i]!r} at {row_label(i)}."
        )
    v = num.to_numpy(dtype=np.float64)
    if (v != np.floor(v)).any():
        i = int(np.argmax(v != np.floor(v)))
        raise InputError(f"Coordinate column '{name}' of {source} must hold integers; found {v[i]!r} at {row_label(i)}.")
    return v.astype(np.int64)


def _check_single_strand(col: Any, source: str) -> None:
    vals = pd.unique(pd.Series(np.asarray(col, dtype=object)).dropna().astype(str))
    if len(vals) > 1:
        raise InputError(
            f"{capitalized(source)} holds regions on more than one strand ({', '.join(sorted(vals))}); cn.mops needs "
            "all regions on one strand (count reads on both strands together, strand '*')."
        )


def capitalized(s: str) -> str:
    """``s`` with its first letter upper case (a message's subject at the start of a sentence)."""
    return s[:1].upper() + s[1:]


__all__ = [
    "count_data_from_array", "count_data_from_frame", "count_data_from_columns", "SEQNAMES_ALIASES", "START_ALIASES",
    "END_ALIASES", "capitalized",
]
