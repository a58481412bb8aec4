"""Sample quality control: per sample its coverage, the spread of its per-window values, its calls, and whether it
is an outlier of the cohort (``sample_qc``); the samples ``--exclude-samples auto`` removes before the model
(``auto_excluded``).

Coverage (``coverage_qc``, from the read counts before normalization): total and median count, the fraction of
empty windows (count 0).

Spread (``spread``), with the estimators of CNVkit's ``metrics``: MAD scaled to a standard deviation (1.4826 x the
median absolute deviation from the median), IQR (the 75th minus the 25th percentile, linear interpolation) and the
square root of the biweight midvariance (c = 9 around the biweight location, c = 6, at most 5 steps to a change
<= 1e-3; the scaled MAD where no value has weight). Taken over the finite values of

- the log2 ratio of a window and sample (``log2_ratios``): log2((x + 1) / (m + 1)), x its normalized count, m the
  cohort's median normalized count in the window; windows where m = 0 are left out (NaN). New samples called
  against a reference cohort (``gcnmops call``) are too few for a median of their own (one sample's ratios would
  all be 0): m is then the window's normal level the reference fitted (``normal_levels``: the normal class's
  lambda; a sex-aware reference's chrX/chrY windows, whose level depends on the sample's sex, are left out);
- sINI (``local_assessments``, what cn.mops segments).

Outlier rule, robust against the cohort (its median and scaled MAD over the samples, each statistic over the samples
that have it; ``K`` = 5); a sample is flagged for each of

- ``median_zero``: its median count is 0 while the cohort's median of the medians is above 0 (GATK-SV drops such
  samples before cn.MOPS);
- ``empty_windows``: its fraction of empty windows > median + K x MAD and > median + 0.1;
- ``spread``: its log2-ratio MAD > median + K x MAD and > 1.5 x median;
- ``cnv_count``: its number of CNVs > median + K x MAD and > 2 x median + 10.

The absolute margins keep a tight cohort (MAD near 0) from flagging small differences. With fewer than 3 samples
only ``median_zero`` applies. The coverage reasons (``COVERAGE_REASONS``) are known before the model:
``--exclude-samples auto`` removes the samples flagged for them; the others are reported (remove such a sample
by name: ``--exclude-samples NAME``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..compat import in_bands
from ..cuda.probe import Backend, as_backend
from ..errors import InputError
from . import spreads
from .spreads import MAD_SCALE

#: the cohort rule's multiple of the scaled MAD
K = 5.0
#: the reasons known from the read counts alone (before the model)
COVERAGE_REASONS = ("median_zero", "empty_windows")
#: the columns of sample_qc.tsv, in order ("sex" only where the run inferred or was given the samples' sexes)
QC_COLUMNS = ("sample", "total_count", "median_count", "empty_fraction", "log2_mad", "log2_iqr", "log2_bivar",
              "sini_mad", "sini_iqr", "sini_bivar", "cnvs", "called_bases", "outlier", "reasons", "excluded")


def _mad(a: np.ndarray) -> float:
    return float(np.median(np.abs(a - np.median(a))) * MAD_SCALE)


def biweight_midvariance(a: np.ndarray, c: float = 9.0) -> float:
    """The square root of the biweight midvariance of ``a`` (finite values), a robust standard deviation."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    if not a.size:
        return np.nan
    scratch = np.empty(a.size)
    return float(spreads.biweight_midvariance(a, scratch, *spreads.centre_and_spread(a, scratch), c))


def spread(values: np.ndarray) -> tuple[float, float, float]:
    """(scaled MAD, IQR, biweight midvariance's root) of the finite ``values``; NaN each where there are none."""
    mad, iqr, bivar = column_spreads(np.asarray(values, dtype=np.float64).reshape(-1, 1))[0]
    return float(mad), float(iqr), float(bivar)


def window_medians(normalized: np.ndarray) -> np.ndarray:
    """(m,) each window's median over the samples' finite normalized counts ``normalized`` (m, N) (NaN where none
    is finite); a window's own values decide it, so blocks of windows give the whole matrix's medians."""
    return spreads.row_medians(normalized)


def log2_ratios(normalized: np.ndarray, medians: np.ndarray | None = None) -> np.ndarray:
    """(m, N) log2((x + 1) / (m + 1)) of the normalized counts ``normalized`` (m, N) against each window's median
    over the samples' finite counts (``medians`` (m,), default ``window_medians(normalized)``; a column group of
    the matrix with the whole matrix's medians gives those columns' ratios); NaN where that median is 0 or a count
    is not finite."""
    x = np.asarray(normalized, dtype=np.float64)
    med = window_medians(x) if medians is None else np.asarray(medians, dtype=np.float64)
    out = np.empty(x.shape, order="F")
    below = med + 1.0
    silent = ~(med > 0)

    def ratios(c0: int, c1: int) -> None:  # columns c0:c1, by numpy's elementwise arithmetic (the GIL released)
        for c in range(c0, c1):  # a column at a time: contiguous operands (a broadcast (m, 1) divisor is slow)
            o = out[:, c]
            with np.errstate(invalid="ignore", divide="ignore"):
                np.add(x[:, c], 1.0, out=o)
                np.divide(o, below, out=o)
                np.log2(o, out=o)
            np.copyto(o, np.nan, where=~np.isfinite(o))
            o[silent] = np.nan

    in_bands(ratios, x.shape[1])  # the run's thread count (--threads), as its kernels
    return out


def column_spreads(values: np.ndarray, more: np.ndarray | None = None, backend: Backend = Backend.CPU,
                   memory_fraction: float | None = None) -> np.ndarray:
    """(N, 3) ``spread`` of each column of ``values`` (m, N); (N, 6) with those of ``more`` (m, N) after them;
    every column in parallel on the CPU (calls/spreads.py) or on the current GPU (calls/spreads_gpu.py; within
    ``memory_fraction`` of its free memory, default cuda/config.py's SPREAD_MEMORY_FRACTION), the same doubles."""
    if as_backend(backend) is Backend.GPU:
        from .spreads_gpu import column_spreads_gpu

        fraction = {} if memory_fraction is None else {"memory_fraction": memory_fraction}
        return column_spreads_gpu(values, more, **fraction)
    return spreads.column_spreads(values, more)


def sample_spreads(result, medians: np.ndarray | None = None, backend: Backend = Backend.CPU,
                   memory_fraction: float | None = None) -> np.ndarray:
    """(N, 6) ``column_spreads`` of the log2 ratios of ``result``'s normalized data (against ``medians`` (m,),
    default the samples' window medians), then of its sINI: what ``sample_qc`` needs of the model's matrices, so
    it can be made as soon as the model has run."""
    return column_spreads(log2_ratios(result.normalized_data, medians), result.local_assessments, backend,
                          memory_fraction)


def coverage_qc(counts: np.ndarray, sample_names) -> pd.DataFrame:
    """sample, total_count, median_count, empty_fraction of the read counts ``counts`` (m, N)."""
    x = np.asarray(counts, dtype=np.float64)
    return coverage_frame(sample_names, *spreads.column_counts(x), x.shape[0])


def coverage_frame(sample_names, totals: np.ndarray, medians: np.ndarray, zeros: np.ndarray, m: int) -> pd.DataFrame:
    """``coverage_qc``'s table from each sample's total, median and number of zeros over ``m`` windows."""
    return pd.DataFrame({"sample": [str(s) for s in sample_names], "total_count": totals, "median_count": medians,
                         "empty_fraction": zeros / max(m, 1)})


def _above(values: np.ndarray, margin) -> np.ndarray:
    """Which of ``values`` lie above the cohort's median + K x scaled MAD and above ``margin(median)`` (NaN:
    never); all False with fewer than 3 finite values."""
    v = np.asarray(values, dtype=np.float64)
    have = np.isfinite(v)
    if have.sum() < 3:
        return np.zeros(v.shape, bool)
    med = float(np.median(v[have]))
    with np.errstate(invalid="ignore"):
        return have & (v > med + K * _mad(v[have])) & (v > margin(med))


def outlier_reasons(table: pd.DataFrame) -> list[list[str]]:
    """The module's reasons of each row of ``table`` (columns median_count, empty_fraction and, where known,
    log2_mad and cnvs; NaN: not known)."""
    med = table["median_count"].to_numpy(np.float64)
    have = np.isfinite(med)
    cohort = float(np.median(med[have])) if have.any() else 0.0
    flags = {"median_zero": have & (med == 0) & (cohort > 0),
             "empty_windows": _above(table["empty_fraction"].to_numpy(np.float64), lambda m: m + 0.1)}
    if "log2_mad" in table:
        flags["spread"] = _above(table["log2_mad"].to_numpy(np.float64), lambda m: 1.5 * m)
    if "cnvs" in table:
        flags["cnv_count"] = _above(table["cnvs"].to_numpy(np.float64), lambda m: 2 * m + 10)
    return [[name for name, f in flags.items() if f[i]] for i in range(len(table))]


def auto_excluded(coverage: pd.DataFrame) -> list[str]:
    """The samples of ``coverage`` (``coverage_qc``) flagged for a reason of COVERAGE_REASONS."""
    reasons = outlier_reasons(coverage)
    return [s for s, r in zip(coverage["sample"], reasons) if set(r) & set(COVERAGE_REASONS)]


def excluded_samples(spec, coverage: pd.DataFrame) -> list[str]:
    """The samples ``--exclude-samples`` names: ``"auto"`` (``auto_excluded``) or a list of names (a comma
    separated string too) of ``coverage``'s samples; InputError naming unknown ones."""
    if spec is None:
        return []
    names = [spec] if isinstance(spec, str) else list(spec)
    names = [s.strip() for n in names for s in str(n).split(",") if s.strip()]
    if names == ["auto"]:
        return auto_excluded(coverage)
    known = list(coverage["sample"])
    unknown = [s for s in names if s not in known]
    if unknown:
        raise InputError(f"--exclude-samples: unknown sample(s) {', '.join(unknown[:5])}; the samples are "
                         f"{', '.join(known[:10])}{' ...' if len(known) > 10 else ''} (or give 'auto').")
    return list(dict.fromkeys(names))


def normal_levels(result) -> np.ndarray:
    """Each window's normal level in ``result``'s model, (m,) float64: the lambda of its normal class (the
    fitted mean normalized count of a sample with the normal copy number there)."""
    classes = list(result.params["classes"])
    return np.array(np.asarray(result.params["L"], dtype=np.float64)[:, classes.index(result.params["mainClass"])])


def sample_qc(result, coverage: pd.DataFrame, excluded=(), spreads: np.ndarray | None = None,
              medians: np.ndarray | None = None, backend: Backend = Backend.CPU) -> pd.DataFrame:
    """The QC_COLUMNS table: ``coverage`` (``coverage_qc`` of every input sample, the ``excluded`` ones too) with
    the spread, CNVs and called bases of ``result``'s samples (NaN for excluded samples), the outlier flag and its
    reasons (comma separated, empty if none) and whether the sample was excluded; a ``sex`` column after
    ``sample`` where ``result.params["sex"]`` holds the samples' sexes. ``spreads``: (N, 6) ``column_spreads`` of
    the log2 ratios, then of sINI, of ``result``'s samples where the caller gathered them (a streamed run);
    default from ``result``'s normalized data and sINI in memory, the log2 ratios against ``medians`` (m,) where
    given (``normal_levels`` of a case-mode result), else the samples' window medians; their spreads on
    ``backend``."""
    table = coverage.copy().reset_index(drop=True)
    col = {s: j for j, s in enumerate(result.sample_names)}
    if spreads is None:
        spreads = sample_spreads(result, medians, backend)
    stats = np.full((len(table), 6), np.nan)
    for i, s in enumerate(table["sample"]):
        j = col.get(s)
        if j is not None:
            stats[i] = spreads[j]
    for k, name in enumerate(QC_COLUMNS[4:10]):
        table[name] = stats[:, k]
    cnvs = result.cnvs
    length = (cnvs["end"].to_numpy(np.int64) - cnvs["start"].to_numpy(np.int64) + 1) if len(cnvs) else np.zeros(0)
    by_sample = pd.DataFrame({"sample": cnvs["sampleName"].astype(str).to_numpy(), "bases": length})
    grouped = by_sample.groupby("sample")["bases"]
    n, bases = grouped.size(), grouped.sum()
    inside = table["sample"].isin(col)
    for name, per in (("cnvs", n), ("called_bases", bases)):  # whole numbers; NA for excluded samples
        table[name] = table["sample"].map(per).fillna(0).astype("Int64").where(inside)
    reasons = outlier_reasons(table)
    table["outlier"] = [bool(r) for r in reasons]
    table["reasons"] = [",".join(r) for r in reasons]
    table["excluded"] = table["sample"].isin(set(excluded))
    sexes = {d.get("sample"): d.get("sex") for d in result.params.get("sex", []) if isinstance(d, dict)}
    if sexes:
        table.insert(1, "sex", table["sample"].map(sexes))
    return table


__all__ = ["K", "COVERAGE_REASONS", "QC_COLUMNS", "spread", "biweight_midvariance", "window_medians", "normal_levels",
           "log2_ratios", "column_spreads", "sample_spreads", "coverage_qc", "coverage_frame", "outlier_reasons",
           "auto_excluded", "excluded_samples", "sample_qc"]
