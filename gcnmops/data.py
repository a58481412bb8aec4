"""CountData: the read-count matrix with its regions and sample names, validated.

Counts are float64, shape (regions, samples), column-major (region-fastest), exactly the
memory order of an R matrix.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import InputError

log = logging.getLogger("gcnmops")

UNDEF_CHROMOSOME = "undef"


@dataclass
class CountData:
    """Read counts of m regions x N samples.

    ``counts``: float64 (m, N), order F. ``ranges``: DataFrame with ``seqnames, start, end``
    (1-based, closed, as in R) or None for a bare matrix (regions are then row indices on the
    pseudo-chromosome "undef"). ``sample_names``: N unique strings.
    """

    counts: np.ndarray
    sample_names: list[str]
    ranges: pd.DataFrame | None = None

    @property
    def n_regions(self) -> int:
        return self.counts.shape[0]

    @property
    def n_samples(self) -> int:
        return self.counts.shape[1]

    @property
    def chromosomes(self) -> np.ndarray:
        """Chromosome name of every row, shape (m,), dtype object."""
        if self.ranges is None:
            return np.full(self.n_regions, UNDEF_CHROMOSOME, dtype=object)
        return self.ranges["seqnames"].to_numpy(dtype=object)

    def blocks(self) -> list[tuple[str, int, int]]:
        """``chromosome_blocks`` of the rows (name, first_row, end_row_exclusive), computed once per ``ranges``
        object (one pass over the m chromosome names)."""
        key = (id(self.ranges), self.n_regions)
        cached = self.__dict__.get("_blocks")
        if cached is None or cached[0] != key:
            chrom = self.chromosomes if self.ranges is None else self.ranges["seqnames"]
            self._keep_blocks(chromosome_blocks(chrom))
        return self.__dict__["_blocks"][1]

    def _keep_blocks(self, blocks: list[tuple[str, int, int]]) -> None:
        """Cache ``blocks`` as the chromosome blocks of the current ``ranges``."""
        self.__dict__["_blocks"] = ((id(self.ranges), self.n_regions), blocks)

    def genomic_ranges(self) -> pd.DataFrame:
        """The ``gr`` table: seqnames, start, end for every region (row indices for a matrix).

        When ``ranges`` is exactly that table (as ``make_count_data`` builds it) this is a shallow copy: the
        columns are shared, not copied (the result shares its matrices with the data in the same way)."""
        if self.ranges is not None:
            r = self.ranges
            if list(r.columns) == ["seqnames", "start", "end"] and isinstance(r.index, pd.RangeIndex) \
                    and r.index.start == 0 and r.index.step == 1:
                return r.copy(deep=False)
            return r[["seqnames", "start", "end"]].reset_index(drop=True)
        idx = np.arange(1, self.n_regions + 1, dtype=np.int64)
        return pd.DataFrame({"seqnames": UNDEF_CHROMOSOME, "start": idx, "end": idx})


def region_names(gr: pd.DataFrame) -> list[str]:
    """cn.mops's row names of ranged input: "chr_start_end" for every row of ``gr``."""
    return (gr["seqnames"].astype(str) + "_" + gr["start"].astype(str) + "_" + gr["end"].astype(str)).tolist()


def validate_counts(values: np.ndarray, what: str = "read count matrix") -> np.ndarray:
    """Return ``values`` as a float64 (m, N) column-major matrix after cn.mops's count checks."""
    arr = np.asarray(values)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise InputError(f"The {what} contains non-numeric values; every count must be a number.")
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise InputError(f"The {what} must be two-dimensional (regions x samples), got {arr.ndim} dimensions.")
    if arr.shape[0] == 0:
        raise InputError(f"The {what} has no regions (rows).")
    arr = np.asarray(arr, dtype=np.float64, order="F")
    bad = ~np.isfinite(arr)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise InputError(
            f"Read counts must be finite: the {what} holds {int(bad.sum())} NaN/Inf value(s), "
            f"the first at region {r + 1}, sample {c + 1}."
        )
    if (arr < 0).any():
        r, c = np.argwhere(arr < 0)[0]
        raise InputError(
            f"Read counts must be non-negative: the {what} holds {int((arr < 0).sum())} negative value(s), "
            f"the first at region {r + 1}, sample {c + 1}."
        )
    return arr


def _default_sample_names(n: int) -> list[str]:
    return [f"Sample_{k + 1}" for k in range(n)]


def make_count_data(
    counts: np.ndarray,
    sample_names: list[str] | None = None,
    ranges: pd.DataFrame | None = None,
    *,
    min_samples: int = 2,
    what: str = "read count matrix",
) -> CountData:
    """Validate counts, names and ranges and bring the rows of each chromosome together.

    Rows of one chromosome must be contiguous (cn.mops cuts the matrix per chromosome); if they are
    not, rows are stably regrouped by chromosome in order of first appearance, with a warning.
    """
    arr = validate_counts(counts, what)
    m, n = arr.shape
    if n < min_samples:
        raise InputError(
            "It is not possible to run cn.mops on only ONE sample: give at least two samples "
            "(columns), or use single_cn_mops() for one sample."
            if min_samples == 2
            else f"The {what} needs at least {min_samples} samples, got {n}."
        )
    if sample_names is None or all(s is None for s in sample_names):
        names = _default_sample_names(n)
    else:
        names = [str(s) for s in sample_names]
        if len(names) != n:
            raise InputError(f"{len(names)} sample names given for {n} sample columns.")
        dup = sorted({s for s in names if names.count(s) > 1})
        if dup:
            raise InputError(f"Sample names must be unique; duplicated: {', '.join(dup)}.")
    blocks = None
    if ranges is not None:
        ranges = validate_ranges(ranges, m)
        blocks = chromosome_blocks(ranges["seqnames"])
        if not rows_grouped(blocks):
            log.warning("Rows of a chromosome were not contiguous: regrouping rows by chromosome.")
            codes, _ = pd.factorize(ranges["seqnames"].to_numpy(dtype=object))
            order = np.argsort(codes, kind="stable")
            ranges = ranges.iloc[order].reset_index(drop=True)
            arr = np.asarray(arr[order], order="F")
            blocks = None
    data = CountData(counts=arr, sample_names=names, ranges=ranges)
    if blocks is not None:
        data._keep_blocks(blocks)  # already computed for the contiguity check
    return data


def validate_ranges(ranges: pd.DataFrame, m: int) -> pd.DataFrame:
    missing = [c for c in ("seqnames", "start", "end") if c not in ranges.columns]
    if missing:
        raise InputError(f"Region table lacks column(s) {', '.join(missing)} (need seqnames, start, end).")
    if len(ranges) != m:
        raise InputError(f"{len(ranges)} regions given for a count matrix of {m} rows; they must match.")
    out = pd.DataFrame({"seqnames": _seqnames(ranges["seqnames"])})
    for col in ("start", "end"):
        vals = pd.to_numeric(ranges[col], errors="coerce")
        if vals.isna().any():
            raise InputError(f"Region column '{col}' must hold integer coordinates; found non-numeric values.")
        out[col] = vals.astype(np.int64).to_numpy()
    if (out["end"] < out["start"]).any():
        i = int(np.argmax((out["end"] < out["start"]).to_numpy()))
        raise InputError(f"Region {i + 1} ends before it starts ({out['start'][i]} > {out['end'][i]}).")
    return out


def _seqnames(col: pd.Series) -> pd.Series:
    """Chromosome names as Python strings in an object column (also where pandas would infer Arrow strings:
    the engine reads them as an object array). Strings are not converted again (Arrow's astype(str) costs
    ~2 s per 7M rows)."""
    if isinstance(col.dtype, pd.StringDtype) or (
            col.dtype == object and pd.api.types.infer_dtype(col, skipna=False) == "string"):
        names = col.to_numpy(dtype=object)
    else:
        names = col.astype(str).to_numpy(dtype=object)
    return pd.Series(names, dtype=object)


def rows_grouped(blocks: list[tuple[str, int, int]]) -> bool:
    """True if each chromosome has one block (``chromosome_blocks``): its rows are contiguous."""
    return len({name for name, _, _ in blocks}) == len(blocks)


def chromosome_blocks(chrom) -> list[tuple[str, int, int]]:
    """(name, first_row, end_row_exclusive) of each chromosome in order of appearance (rows grouped).

    ``chrom``: the name of each row, a numpy array or a pandas Series; Arrow-backed strings (pandas 3's
    default) and categoricals are compared as they are stored, not converted to Python strings first."""
    n = len(chrom)
    if n == 0:
        return []
    cut = np.flatnonzero(_name_changes(chrom)) + 1
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [n]])
    first = chrom.iloc[starts] if isinstance(chrom, pd.Series) else np.asarray(chrom, dtype=object)[starts]
    return [(str(name), int(s), int(e)) for name, s, e in zip(first, starts, ends)]


def _name_changes(chrom) -> np.ndarray:
    """(n - 1,) bool: row i + 1 names another chromosome than row i."""
    values = chrom.array if isinstance(chrom, pd.Series) else chrom
    if isinstance(values, pd.Categorical):
        return values.codes[1:] != values.codes[:-1]
    if hasattr(values, "__arrow_array__"):
        import pyarrow.compute as pc

        arr = values.__arrow_array__()
        return pc.not_equal(arr.slice(1), arr.slice(0, len(arr) - 1)).to_numpy(zero_copy_only=False)
    values = np.asarray(values, dtype=object)
    return values[1:] != values[:-1]
