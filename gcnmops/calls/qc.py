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
  cohort's median normalized count in the window; windows where m = 0 are left out (NaN);
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

import warnings

import numpy as np
import pandas as pd

from ..errors import InputError

#: the cohort rule's multiple of the scaled MAD
K = 5.0
#: scales the median absolute deviation to a normal distribution's standard deviation
MAD_SCALE = 1.4826
#: the reasons known from the read counts alone (before the model)
COVERAGE_REASONS = ("median_zero", "empty_windows")
#: the columns of sample_qc.tsv, in order ("sex" only where the run inferred or was given the samples' sexes)
QC_COLUMNS = ("sample", "total_count", "median_count", "empty_fraction", "log2_mad", "log2_iqr", "log2_bivar",
              "sini_mad", "sini_iqr", "sini_bivar", "cnvs", "called_bases", "outlier", "reasons", "excluded")


def _mad(a: np.ndarray) -> float:
    return float(np.median(np.abs(a - np.median(a))) * MAD_SCALE)


def biweight_location(a: np.ndarray, c: float = 6.0, epsilon: float = 1e-3, max_iter: int = 5) -> float:
    """Tukey's biweight location of ``a`` (finite values), started at the median."""
    loc = float(np.median(a))
    for _ in range(max_iter):
        d = a - loc
        u = d / max(c * float(np.median(np.abs(d))), epsilon)
        inside = np.abs(u) < 1
        w = (1 - u[inside] ** 2) ** 2
        if w.sum() == 0:
            return loc
        step = float((d[inside] * w).sum() / w.sum())
        loc += step
        if abs(step) <= epsilon:
            break
    return loc


def biweight_midvariance(a: np.ndarray, c: float = 9.0, epsilon: float = 1e-3) -> float:
    """The square root of the biweight midvariance of ``a`` (finite values), a robust standard deviation."""
    d = a - biweight_location(a)
    mad = float(np.median(np.abs(d)))
    u = d / max(c * mad, epsilon)
    inside = np.abs(u) < 1
    if u[inside].sum() == 0:
        return mad * MAD_SCALE
    d, u2 = d[inside], u[inside] ** 2
    return float(np.sqrt(inside.sum() * (d ** 2 * (1 - u2) ** 4).sum() / ((1 - u2) * (1 - 5 * u2)).sum() ** 2))


def spread(values: np.ndarray) -> tuple[float, float, float]:
    """(scaled MAD, IQR, biweight midvariance's root) of the finite ``values``; NaN each where there are none."""
    a = np.asarray(values, dtype=np.float64)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return np.nan, np.nan, np.nan
    q1, q3 = np.percentile(a, [25, 75])
    return _mad(a), float(q3 - q1), biweight_midvariance(a)


def window_medians(normalized: np.ndarray) -> np.ndarray:
    """(m,) each window's median over the samples' finite normalized counts ``normalized`` (m, N) (NaN where none
    is finite); a window's own values decide it, so blocks of windows give the whole matrix's medians."""
    x = np.asarray(normalized, dtype=np.float64)
    med = np.median(x, axis=1)
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():  # the median of the finite counts (nanmedian is slower: only where needed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a window without a finite count: NaN
            med[bad] = np.nanmedian(np.where(np.isfinite(x[bad]), x[bad], np.nan), axis=1)
    return med


def log2_ratios(normalized: np.ndarray, medians: np.ndarray | None = None) -> np.ndarray:
    """(m, N) log2((x + 1) / (m + 1)) of the normalized counts ``normalized`` (m, N) against each window's median
    over the samples' finite counts (``medians`` (m,), default ``window_medians(normalized)``; a column group of
    the matrix with the whole matrix's medians gives those columns' ratios); NaN where that median is 0 or a count
    is not finite."""
    x = np.asarray(normalized, dtype=np.float64)
    med = (window_medians(x) if medians is None else np.asarray(medians, dtype=np.float64))[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.log2((x + 1.0) / (med + 1.0))
    out[~(med[:, 0] > 0)] = np.nan
    out[~np.isfinite(out)] = np.nan
    return np.asfortranarray(out)


#: values of a group of columns whose spreads are taken at once (``column_spreads``)
_CELLS = 1 << 20


def column_spreads(values: np.ndarray) -> np.ndarray:
    """(N, 3) ``spread`` of each column of ``values`` (m, N): the columns whose values are all finite and all
    inside the biweight's window at every step a group at a time (``_inside_spreads``: the same arithmetic on
    whole columns), the others one by one."""
    v = np.asarray(values, dtype=np.float64)
    m, N = v.shape
    out = np.full((N, 3), np.nan)
    group = max(1, _CELLS // max(m, 1))
    for a in range(0, N, group):
        block = v[:, a:a + group]
        done = _inside_spreads(block, out[a:a + group]) if m else np.zeros(block.shape[1], bool)
        for j in np.flatnonzero(~done):
            out[a + j] = spread(block[:, j])
    return out


def _inside_spreads(block: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``spread`` into the rows of ``out`` (k, 3) of the columns of ``block`` (m, k) whose values are all finite
    and all inside the biweight's window at every step; which those are (k,). Every sum runs over a whole
    column of a column-major array, as numpy sums the column alone (pairwise, in its order)."""
    cols = np.flatnonzero(np.isfinite(block).all(axis=0))
    a = np.asfortranarray(block[:, cols])
    q1, q3 = np.percentile(a, [25, 75], axis=0)
    mad = np.median(np.abs(a - np.median(a, axis=0)), axis=0) * MAD_SCALE
    loc, ok = _inside_locations(a)
    d = a - loc
    dmad = np.median(np.abs(d), axis=0)
    u = d / np.maximum(9.0 * dmad, 1e-3)
    ok &= (np.abs(u) < 1).all(axis=0)
    u2 = u ** 2
    # the denominator squared as numpy squares a float64 scalar (pow, not x * x: they may differ in the last bit)
    square = np.array([x ** 2 for x in ((1 - u2) * (1 - 5 * u2)).sum(axis=0)], dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        bivar = np.sqrt(a.shape[0] * (d ** 2 * (1 - u2) ** 4).sum(axis=0) / square)
    bivar = np.where(u.sum(axis=0) == 0, dmad * MAD_SCALE, bivar)
    out[cols[ok]] = np.stack([mad, q3 - q1, bivar], axis=1)[ok]
    done = np.zeros(block.shape[1], bool)
    done[cols[ok]] = True
    return done


def _inside_locations(a: np.ndarray, c: float = 6.0, epsilon: float = 1e-3, max_iter: int = 5):
    """(``biweight_location`` of each column of ``a`` (m, k) column-major, whether every value of the column was
    inside the window at every step (where not, the location is not this one's))."""
    loc = np.median(a, axis=0)
    ok = np.ones(a.shape[1], bool)
    active = np.ones(a.shape[1], bool)
    for _ in range(max_iter):
        at = np.flatnonzero(active)
        if at.size == 0:
            break
        x = np.asfortranarray(a[:, at])
        d = x - loc[at]
        u = d / np.maximum(c * np.median(np.abs(d), axis=0), epsilon)
        inside = (np.abs(u) < 1).all(axis=0)
        ok[at[~inside]] = False
        w = (1 - u ** 2) ** 2
        total = w.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            step = (d * w).sum(axis=0) / total
        moving = inside & (total != 0)
        loc[at[moving]] += step[moving]
        active[at] = moving & ~(np.abs(step) <= epsilon)
    return loc, ok


def coverage_qc(counts: np.ndarray, sample_names) -> pd.DataFrame:
    """sample, total_count, median_count, empty_fraction of the read counts ``counts`` (m, N)."""
    x = np.asarray(counts, dtype=np.float64)
    m = max(x.shape[0], 1)
    return pd.DataFrame({"sample": [str(s) for s in sample_names],
                         "total_count": np.nansum(x, axis=0),
                         "median_count": np.median(x, axis=0) if x.shape[0] else np.full(x.shape[1], np.nan),
                         "empty_fraction": (x == 0).sum(axis=0) / m})


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


def sample_qc(result, coverage: pd.DataFrame, excluded=(), spreads: np.ndarray | None = None) -> pd.DataFrame:
    """The QC_COLUMNS table: ``coverage`` (``coverage_qc`` of every input sample, the ``excluded`` ones too) with
    the spread, CNVs and called bases of ``result``'s samples (NaN for excluded samples), the outlier flag and its
    reasons (comma separated, empty if none) and whether the sample was excluded; a ``sex`` column after
    ``sample`` where ``result.params["sex"]`` holds the samples' sexes. ``spreads``: (N, 6) ``column_spreads`` of
    the log2 ratios, then of sINI, of ``result``'s samples where the caller gathered them (a streamed run);
    default from ``result``'s normalized data and sINI in memory."""
    table = coverage.copy().reset_index(drop=True)
    col = {s: j for j, s in enumerate(result.sample_names)}
    if spreads is None:
        spreads = np.hstack([column_spreads(log2_ratios(result.normalized_data)),
                             column_spreads(result.local_assessments)])
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


__all__ = ["K", "COVERAGE_REASONS", "QC_COLUMNS", "spread", "biweight_location", "biweight_midvariance",
           "window_medians", "log2_ratios", "column_spreads", "coverage_qc", "outlier_reasons", "auto_excluded", "excluded_samples", "sample_qc"]
