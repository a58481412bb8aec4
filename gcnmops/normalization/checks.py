"""The input checks of cn.mops's normalization, shared by the CPU (cpu.py) and GPU (gpu.py) paths: arguments,
the count matrix, chromosome names, ploidy, zero columns.
Bad input raises InputError with normalize_chromosomes's messages, whichever path runs.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..data import UNDEF_CHROMOSOME, name_runs
from ..errors import InputError
from .kernels import copy_finite

NORM_TYPES = ("mean", "median", "poisson", "mode", "quant")
SIZE_FACTORS = ("mean", "median", "quant", "mode")

#: ploidy 0 is replaced by this (cn.mops)
PLOIDY_ZERO = 0.05


def check_choice(value, allowed: Sequence[str], name: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise InputError(f"{name} must be one of {', '.join(repr(a) for a in allowed)}; got {value!r}.")
    return value


def check_prob(value, name: str) -> float:
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number between 0 and 1; got {value!r}.") from None
    if not 0.0 <= p <= 1.0:
        raise InputError(f"{name} must be a number between 0 and 1; got {value!r}.")
    return p


def check_norm_args(norm_type, size_factor, qu, qu_size_factor) -> tuple[str, str, float, float]:
    """normalize_chromosomes's argument checks, in its order: (norm_type, size_factor, qu, qu_size_factor)."""
    return (check_choice(norm_type, NORM_TYPES, "normType"), check_choice(size_factor, SIZE_FACTORS, "sizeFactor"),
            check_prob(qu, "qu (normQu)"), check_prob(qu_size_factor, "quSizeFactor"))


def count_matrix(X, what: str = "read count matrix") -> np.ndarray:
    """X as a new float64 (m, N) order-F matrix; InputError for non-numeric, NA or infinite values."""
    arr = np.asarray(X)
    if arr.dtype == object or np.iscomplexobj(arr) or not (np.issubdtype(arr.dtype, np.number)
                                                          or arr.dtype == np.bool_):
        raise InputError(f"The {what} contains non-numeric values; every read count must be a number.")
    if arr.ndim != 2:
        raise InputError(f"The {what} must be two-dimensional (regions x samples), got {arr.ndim} dimension(s).")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"The {what} is empty ({arr.shape[0]} regions x {arr.shape[1]} samples).")
    if arr.dtype == np.float64 and arr.flags.f_contiguous and arr.flags.writeable:  # a CountData's counts: copied
        # and checked on every core (one kernel signature: writable float64 order F, as for the copy below)
        out = np.empty(arr.shape, order="F")
        if copy_finite(arr, out):
            return out
    else:
        out = np.array(arr, dtype=np.float64, order="F", copy=True)
        if np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_ or copy_finite(out, out):
            return out
    if np.isnan(out).any():
        k = int(np.flatnonzero(np.isnan(out).any(axis=0))[0])
        raise InputError(f"NAs in readcount matrix. Sample {k + 1} (and maybe others) has missing read counts; "
                         "remove or fill them before normalizing.")
    if np.isinf(out).any():
        k = int(np.flatnonzero(np.isinf(out).any(axis=0))[0])
        raise InputError(f"Infinite values in readcount matrix (sample {k + 1}); read counts must be finite.")
    return out


def check_columns_have_reads(has_reads: np.ndarray) -> None:
    """cn.mops's error for samples without any read; ``has_reads`` (N,) bool: the sample has a non-zero count."""
    if not has_reads.all():
        bad = [int(k) + 1 for k in np.flatnonzero(~has_reads)]
        raise InputError(f"Zero columns in readcount matrix. Sample(s) {bad} have no reads at all; remove them.")


def chromosome_rows(chr, m: int) -> list[tuple[str, slice | np.ndarray]]:
    """(name, rows) per chromosome in order of first appearance; rows a slice when contiguous. ``chr``: a name per
    row (numpy array, pandas Series, sequence) or one name. Rows grouped by chromosome (every input the readers
    make) are found from where the name changes (data.chromosome_blocks' comparison: no string is hashed); rows of
    a chromosome in several runs are gathered by factorizing the names."""
    if chr is None:
        return [(UNDEF_CHROMOSOME, slice(0, m))]
    if isinstance(chr, str):
        arr = np.array([chr], dtype=object)
    elif isinstance(chr, pd.Series) or (isinstance(chr, np.ndarray) and chr.ndim == 1 and chr.dtype.kind in "USO"):
        arr = chr
    else:
        arr = np.asarray(chr, dtype=object).ravel()
    if len(arr) != m:
        raise InputError(f"The chromosome vector has {len(arr)} entries but the read count matrix has {m} rows; "
                         "give one chromosome name per region (row).")
    runs = _grouped_runs(arr)
    if runs is not None:
        return runs
    arr = np.asarray(arr, dtype=object).ravel()
    codes, uniques = pd.factorize(arr, use_na_sentinel=True)
    if (codes < 0).any():
        i = int(np.flatnonzero(codes < 0)[0])
        raise InputError(f"The chromosome of region {i + 1} is missing (NA); every region needs a chromosome name.")
    if len(uniques) == 1:
        return [(str(uniques[0]), slice(0, m))]
    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(np.bincount(codes, minlength=len(uniques)))
    out = []
    start = 0
    for c, end in enumerate(ends):
        rows = order[start:end]
        if rows[-1] - rows[0] + 1 == rows.size:
            out.append((str(uniques[c]), slice(int(rows[0]), int(rows[-1]) + 1)))
        else:
            out.append((str(uniques[c]), rows))
        start = end
    return out


def _grouped_runs(arr) -> list[tuple[str, slice]] | None:
    """``chromosome_rows`` of names whose every chromosome is one run of rows, else None (a chromosome in several
    runs, a missing name, names that are not hashable)."""
    if len(arr) == 0:
        return None
    try:
        starts, ends, heads = name_runs(arr)
        heads = np.asarray(heads, dtype=object)
        if pd.isna(heads).any() or len(set(heads)) != len(heads):
            return None
    except TypeError:  # names that do not compare (pd.NA) or hash
        return None
    return [(str(h), slice(int(s), int(e))) for h, s, e in zip(heads, starts, ends)]


def check_ploidy(ploidy, n_samples: int) -> np.ndarray:
    """Ploidy per sample as float64 (N,) after cn.mops's rules (all equal -> 2; 0 -> 0.05)."""
    if ploidy is None:
        return np.full(n_samples, 2.0)
    p = np.asarray(ploidy)
    if p.ndim == 0:
        p = p.reshape(1)
    p = p.ravel()
    if p.size != n_samples:
        raise InputError(f"The ploidy vector has {p.size} entries but there are {n_samples} samples; "
                         "give one ploidy (copy number of the normal genome) per sample.")
    if p.dtype == object or not (np.issubdtype(p.dtype, np.number) or p.dtype == np.bool_):
        raise InputError("Ploidy values must be whole numbers (e.g. 2 for diploid samples).")
    pf = p.astype(np.float64)
    if not np.isfinite(pf).all() or (pf != np.round(pf)).any() or (pf < 0).any():
        raise InputError(f"Ploidy values must be non-negative whole numbers; got {p.tolist()}.")
    if (pf == pf[0]).all():
        return np.full(n_samples, 2.0)
    if not (pf >= 2).any():
        raise InputError("At least one sample with ploidy 2 or more is needed to normalize samples of "
                         f"different ploidy; got {p.tolist()}.")
    if not (pf == 2).any():
        raise InputError("Samples of different ploidy are scaled against the diploid samples: at least one "
                         f"sample must have ploidy 2; got {p.tolist()}.")
    pf[pf == 0] = PLOIDY_ZERO
    return pf


__all__ = ["NORM_TYPES", "SIZE_FACTORS", "PLOIDY_ZERO", "UNDEF_CHROMOSOME", "check_choice", "check_prob",
           "check_norm_args", "count_matrix", "check_columns_have_reads", "chromosome_rows", "check_ploidy"]
