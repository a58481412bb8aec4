"""Normalization against a stored reference cohort: what cn.mops's normalizeChromosomes did to the cohort, kept
per chromosome, and applied to new samples.

normalizeChromosomes scales sample k on chromosome l by f_k = R_l / sf_k (/ D_l for normType "poisson"): sf_k is
the sample's size factor on the chromosome's non-silent rows (mean, median, quantile or mode of its counts), R_l
the level all samples are brought to (R's mean of the cohort's size factors for "mean"/"poisson", their median,
their quantile ``normQu``, or the most frequent count for "mode"; ``factors.reference_size``), D_l the density
mode of the scaled rows' variance-to-mean ratios ("poisson"); silent rows (every cohort count < 1) become 0.
The cohort's state is R_l, D_l, the silent rows and what cn.mops did where it could not normalize (a chromosome
without reads is left as it is; one with at most one non-silent row, or non-finite factors, gets factors 1).

A new sample j is scaled on chromosome l by f_j = R_l / sf_j (/ D_l): its own size factor on the cohort's
non-silent rows, against the cohort's level and mode, so it lands on the scale of the cohort's normalized data,
where the reference's lambdas live. For a sample of the cohort itself this is exactly cn.mops's factor (the same
operations on the same numbers: bit for bit, tests/test_casemode.py); a refit instead recomputes R_l and D_l with
the new samples in, which moves them by about 1/N. ``norm=2``: the model sees raw counts with coverage
cov_j = trimmed mean_j / the median of the cohort's trimmed means (cn.mops's cov, against the cohort's median).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..exact.rstats import r_median
from ..normalization.checks import check_columns_have_reads, count_matrix
from ..normalization.factors import (block_variance_to_mean, checked_size_factors, divided_by_mode, finite_or_ones,
                                     most_frequent_nonzero, ratios_mode, reference_size, size_factors,
                                     too_few_regions)
from ..normalization.kernels import column_coverages, scale_block, silent_rows
from ..params import CnMopsParams

#: what normalizeChromosomes did to a chromosome of the cohort
UNTOUCHED, ONES, SCALED = "untouched", "ones", "scaled"


@dataclass(frozen=True)
class ChromosomeLevel:
    """One chromosome block (rows ``first:end`` of the part) of the cohort: ``status`` UNTOUCHED (no reads: left
    as it is), ONES (factors 1, silent rows 0) or SCALED; ``reference`` R_l; ``mode`` D_l (NaN: none);
    ``totals``: the size factors were the samples' total counts (cn.mops's fall-back)."""

    name: str
    first: int
    end: int
    status: str
    reference: float = math.nan
    mode: float = math.nan
    totals: bool = False

    def to_json(self) -> dict:
        return {"name": self.name, "first": self.first, "end": self.end, "status": self.status,
                "reference": _num(self.reference), "mode": _num(self.mode), "totals": self.totals}

    @classmethod
    def from_json(cls, d: dict) -> "ChromosomeLevel":
        return cls(str(d["name"]), int(d["first"]), int(d["end"]), str(d["status"]), _float(d["reference"]),
                   _float(d["mode"]), bool(d["totals"]))


@dataclass
class NormState:
    """The cohort's normalization of one set of rows: ``norm`` (0, 1, 2), normType/sizeFactor/quSizeFactor,
    ``levels`` per chromosome block, ``silent`` (m,) bool: the rows silent in the cohort."""

    norm: int
    norm_type: str
    size_factor: str
    qu_size_factor: float
    levels: list[ChromosomeLevel]
    silent: np.ndarray

    def manifest(self) -> dict:
        return {"norm": self.norm, "norm_type": self.norm_type, "size_factor": self.size_factor,
                "qu_size_factor": self.qu_size_factor, "chromosomes": [c.to_json() for c in self.levels]}

    @classmethod
    def from_manifest(cls, d: dict, silent: np.ndarray) -> "NormState":
        return cls(int(d["norm"]), str(d["norm_type"]), str(d["size_factor"]), float(d["qu_size_factor"]),
                   [ChromosomeLevel.from_json(c) for c in d["chromosomes"]], silent)


def cohort_state(x: np.ndarray, blocks: list[tuple[str, int, int]], params: CnMopsParams) -> NormState:
    """The state of normalizeChromosomes(x) for the cohort ``x`` (m, N) float64 order F, chromosome ``blocks``
    (name, first, end) of its rows; its steps are normalization/cpu.py's, in its order (warnings silenced: the
    cohort's own normalization gives them)."""
    m, N = x.shape
    silent = np.zeros(m, dtype=np.bool_)
    levels = []
    if params.norm == 0 or N < 2:  # none, or cn.mops's single sample: left as it is
        return NormState(params.norm, params.norm_type, params.size_factor, params.qu_size_factor,
                         [ChromosomeLevel(name, b0, b1, UNTOUCHED) for name, b0, b1 in blocks], silent)
    colsums = x.sum(axis=0)
    check_columns_have_reads(colsums != 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, b0, b1 in blocks:
            block_silent, any_nonzero = silent_rows(x, b0, b1)
            silent[b0:b1] = block_silent
            if not any_nonzero:
                levels.append(ChromosomeLevel(name, b0, b1, UNTOUCHED))
                continue
            keep = ~block_silent
            n_keep = int(np.count_nonzero(keep))
            if too_few_regions(n_keep, name, stacklevel=2):
                levels.append(ChromosomeLevel(name, b0, b1, ONES))
                continue
            sf = size_factors(x, b0, keep, n_keep, params.norm_type, params.size_factor, params.qu_size_factor)
            totals = bool(np.isnan(sf).any())
            sf = checked_size_factors(sf, colsums, name, params.size_factor, stacklevel=2)
            ref = reference_size(sf, params.norm_type, params.norm_qu,
                                 count_mode=lambda: most_frequent_nonzero(x, b0, keep, 0, N))
            f = ref / sf
            mode = math.nan
            if params.norm_type == "poisson":
                mode = ratios_mode(block_variance_to_mean(x, b0, keep, f))
                f = divided_by_mode(f, mode)
            status = SCALED if np.isfinite(f).all() else ONES
            levels.append(ChromosomeLevel(name, b0, b1, status, float(ref), float(mode), totals))
    return NormState(params.norm, params.norm_type, params.size_factor, params.qu_size_factor, levels, silent)


def normalized_against(x: np.ndarray, state: NormState, sample_names: list[str]) -> np.ndarray:
    """New samples ``x`` (m, J) scaled against the cohort ``state`` (module docstring); a new float64 (m, J)
    order-F matrix. InputError for a sample without reads, or without reads on a chromosome the cohort has."""
    out = count_matrix(x)
    if state.norm == 0:
        return out
    colsums = out.sum(axis=0)
    if (colsums == 0).any():
        raise InputError(f"New sample(s) {_names(sample_names, colsums == 0)} have no reads at all: they cannot be "
                         "normalized against the reference; remove them.")
    for lv in state.levels:
        if lv.status == UNTOUCHED:
            continue
        keep = ~state.silent[lv.first:lv.end]
        f = np.ones(out.shape[1])
        if lv.status == SCALED:
            sf = size_factors(out, lv.first, keep, int(np.count_nonzero(keep)), state.norm_type, state.size_factor,
                              state.qu_size_factor)
            if (sf == 0).any():
                raise InputError(f"New sample(s) {_names(sample_names, sf == 0)} have no reads on chromosome "
                                 f"{lv.name} where the reference cohort has them (size factor 0): they cannot be "
                                 "normalized against the reference; remove them or that chromosome's regions.")
            sf = colsums.copy() if lv.totals else checked_size_factors(sf, colsums, lv.name, state.size_factor, 3)
            f = lv.reference / sf
            if state.norm_type == "poisson":
                f = divided_by_mode(f, lv.mode)
            f = np.array([finite_or_ones(f[k:k + 1], lv.name, 1, stacklevel=3)[0] for k in range(f.size)])
        scale_block(out, lv.first, f, state.silent[lv.first:lv.end])
    return out


def coverage_median(x: np.ndarray) -> float:
    """R's median of the cohort's per-sample trimmed means (``norm=2``'s divisor)."""
    return float(r_median(column_coverages(count_matrix(x))))


def coverage_against(x: np.ndarray, median: float, sample_names: list[str]) -> np.ndarray:
    """``norm=2`` coverages (J,) of new samples ``x`` (m, J): trimmed means / the cohort's ``median``."""
    cov = column_coverages(count_matrix(x))
    if np.isnan(cov).any():
        raise InputError(f"Coverage of new sample(s) {_names(sample_names, np.isnan(cov))} is undefined: no read "
                         "count lies strictly between the sample's 5% and 95% quantiles.")
    return cov / median


def _names(sample_names: list[str], mask: np.ndarray) -> str:
    return ", ".join(str(sample_names[k]) for k in np.flatnonzero(mask))


def _num(v: float):
    return None if math.isnan(v) else float(v)


def _float(v) -> float:
    return math.nan if v is None else float(v)


__all__ = ["ChromosomeLevel", "NormState", "cohort_state", "normalized_against", "coverage_median",
           "coverage_against", "UNTOUCHED", "ONES", "SCALED"]
