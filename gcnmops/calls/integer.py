"""calcIntegerCopyNumbers: one integer copy number per CNV, per sample and per CNV region.

Each CNV segment's regions (trimmed by one at each end when there are 3 or more) are averaged per
sample and refitted with the run's model in one batched call (every CNV is one "region" of the
batch); the label of the CNV's own sample is its copy number.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from numba import njit, prange

from ..data import chromosome_blocks
from ..errors import InputError
from ..cuda.config import INTEGER_GPU_MIN_CELLS
from ..cuda.probe import Backend, resolve_backend
from ..model import fit
from ..model.onestep import REFERENCE_FLOOR, OneStepSpec, fit_onestep, ld_mean
from ..model.spec import ModelSpec
from ..result import Result, cnvr_frame

NO_CNVR_MESSAGE = "No CNV regions in result object. Rerun cn.mops with different parameters!"


def calc_integer_copy_numbers(result: Result, backend: str = "cpu") -> Result:
    """cn.mops's ``calcIntegerCopyNumbers``: a new result whose segmentation, cnvs and cnvr carry integer
    copy-number labels ("CN0", "CN1", ...).

    Each CNV (each CNV region per sample) is refitted with the method's model on the mean counts of its
    regions; the class of highest posterior is its copy number. The EM refit of every CNV is one batched fit (on
    the GPU one kernel launch, from cuda/config.py's INTEGER_GPU_MIN_CELLS CNVs x samples; fewer on the CPU,
    whose EM gives the same doubles); the range means stay on the host (R's long-double ``mean``); the reference
    model's one-step refit is one pass over the CNVs on the CPU. A result whose matrices live in a store or in
    Dask has only the regions around its CNVs read (``rows_near``); a path running blocks of whole chromosomes
    labels each block's result (every CNV lies in one chromosome) and a block without CNVs with
    ``segment_labels``.

    Parameters
    ----------
    result : Result
        a result of :func:`gcnmops.cn_mops` or another method of the family (in memory, a store or Dask).
    backend : {"cpu", "gpu", "auto"}, default "cpu"
        where the EM refit runs (resolved here, once; a small refit on the CPU whatever it says); the labels are
        the same.

    Returns
    -------
    Result
        the same result with CN labels in ``segmentation``, ``cnvs`` and ``cnvr`` (one column per sample);
        arrays are shared, not copied.
    """
    if len(result.cnvr) == 0 or len(result.cnvs) == 0:
        raise InputError(NO_CNVR_MESSAGE)
    p = result.params
    if "caseMode" in p or "sex" in p:
        how = "against a stored reference" if "caseMode" in p else "sex-aware"
        raise InputError(f"This result was called {how}: its copy numbers need the fitted parameters (or the whole "
                         "cohort) the call used, which the result does not hold. Ask for them in the call: "
                         "call_samples(..., integer=True) (gcnmops call does, unless --no-integer).")
    backend = resolve_backend(backend)
    near = result if result.in_memory else result.rows(rows_near(result.gr, result.cnvs), ("normalized_data", "L"))
    classes = np.asarray(p["classes"], dtype=object)
    main = p["mainClass"]

    seg = result.segmentation.reset_index(drop=True)
    key = ["seqnames", "start", "end", "sampleName"]
    seg_pos = pd.Series(np.arange(len(seg)), index=pd.MultiIndex.from_frame(seg[key]))
    cnv_seg = seg_pos.reindex(pd.MultiIndex.from_frame(result.cnvs[key])).to_numpy()
    if np.isnan(cnv_seg.astype(float)).any():
        raise InputError("Some CNVs have no segment of the same sample and coordinates in the segmentation.")
    cnv_seg = cnv_seg.astype(np.int64)

    lo, hi = overlapping_rows(near.gr, seg.iloc[cnv_seg])
    means = _range_means(np.asarray(near.normalized_data, dtype=np.float64), lo, hi)
    cov = np.asarray(p["cov"], dtype=np.float64)  # cn.mops passes params$cov to every refit (haplo too)
    if p["method"] == "referencecn.mops":
        # referencecn.mops (and singlecn.mops, whose result says so too): the one-step model, lambda = mean of
        # the CN2 lambdas over the same regions, likelihood floor 1e-100
        lam_main = np.asfortranarray(np.asarray(near.params["L"], dtype=np.float64)[:, [list(classes).index(main)]])
        lam = _range_means(lam_main, lo, hi)[:, 0]
        spec1 = OneStepSpec.build(p["folds"], classes, p["priorImpact"], REFERENCE_FLOOR, p["minReadCount"])
        refit = fit_onestep(means, cov, lam, spec1)
    else:
        spec = ModelSpec.build(p["folds"], classes, main, p["priorImpact"], p["cyc"], p["minReadCount"])
        refit = fit(means, cov, spec, backend=backend if means.size >= INTEGER_GPU_MIN_CELLS else Backend.CPU)
    sample_idx = pd.Index(result.sample_names).get_indexer(seg["sampleName"].iloc[cnv_seg])

    seg_cn = np.full(len(seg), main, dtype=object)
    seg_cn[cnv_seg] = classes[refit.cn[np.arange(cnv_seg.size), sample_idx]]
    segmentation = seg.assign(CN=_main_fallback(seg_cn, seg, p))
    cnvs = result.cnvs.reset_index(drop=True).assign(CN=segmentation["CN"].to_numpy()[cnv_seg])
    return result.replace(segmentation=segmentation, cnvs=cnvs, cnvr=cnvr_labels(result.cnvr, cnvs, main,
                                                                                 result.sample_names))


def segment_labels(segmentation: pd.DataFrame, params: dict) -> pd.DataFrame:
    """The segments of a block without CNVs labelled as calc_integer_copy_numbers labels them (the main class,
    or its neighbour beyond a threshold); ``params``: the result's (cn.mops's names)."""
    main = np.full(len(segmentation), params["mainClass"], dtype=object)
    return segmentation.assign(CN=_main_fallback(main, segmentation, params))


def _main_fallback(cn: np.ndarray, seg: pd.DataFrame, p: dict) -> np.ndarray:
    """threshold_fallback of the segments ``seg`` around the result's main class (``p``: its params)."""
    classes = np.asarray(p["classes"], dtype=object)
    stat = seg["median" if p.get("useMedian", False) else "mean"].to_numpy(float)
    return threshold_fallback(cn, stat, p, classes, list(classes).index(p["mainClass"]))


def threshold_fallback(cn, stat, p, classes, mi):
    """Segments still at the main class but beyond a threshold get the neighbouring class."""
    cn = cn.copy()
    at_main = cn == classes[mi]
    if mi + 1 < len(classes):
        cn[at_main & (stat > p["upperThreshold"])] = classes[mi + 1]
    if mi > 0:
        cn[at_main & (stat < p["lowerThreshold"])] = classes[mi - 1]
    return cn


@njit(parallel=True, cache=True, nogil=True)
def _range_means(x, lo, hi):
    """(k, N) order F: column means of rows lo[j]:hi[j] of x, bit for bit R's ``apply(x[ii, ], 2, mean)``
    (``mean()``'s two-pass long double arithmetic, emulated exactly), the ranges on every core."""
    k = lo.shape[0]
    n = x.shape[1]
    out = np.empty((n, k)).T
    for j in prange(k):
        for c in range(n):
            out[j, c] = ld_mean(x[lo[j]:hi[j], c], hi[j] - lo[j])
    return out


def overlapping_rows(gr: pd.DataFrame, segs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Row range [lo, hi) of the regions of ``gr`` overlapping each segment, trimmed by one region at
    each end when there are 3 or more (regions of a chromosome sorted, not nested)."""
    lo = np.empty(len(segs), dtype=np.int64)
    hi = np.empty(len(segs), dtype=np.int64)
    starts = gr["start"].to_numpy()
    ends = gr["end"].to_numpy()
    seg_chrom = segs["seqnames"].astype(str).to_numpy()
    for name, b0, b1 in chromosome_blocks(gr["seqnames"]):
        idx = np.flatnonzero(seg_chrom == name)
        if idx.size == 0:
            continue
        s = segs["start"].to_numpy()[idx]
        e = segs["end"].to_numpy()[idx]
        bs, be = starts[b0:b1], ends[b0:b1]
        if (np.diff(bs) >= 0).all() and (np.diff(be) >= 0).all():
            lo[idx] = b0 + np.searchsorted(be, s, side="left")
            hi[idx] = b0 + np.searchsorted(bs, e, side="right")
        else:
            for j, (sj, ej) in zip(idx, zip(s, e)):
                rows = np.flatnonzero((bs <= ej) & (be >= sj))
                lo[j], hi[j] = b0 + rows[0], b0 + rows[-1] + 1
    trim = hi - lo >= 3
    lo[trim] += 1
    hi[trim] -= 1
    return lo, hi


def rows_near(gr: pd.DataFrame, ranges: pd.DataFrame) -> np.ndarray:
    """Sorted rows of ``gr`` within two regions of the rows each of ``ranges`` (CNVs, CNV regions) covers
    (overlapping_rows trims them by one region at each end): every region overlapping one and those between."""
    lo, hi = overlapping_rows(gr, ranges)
    edges = np.zeros(len(gr) + 1, dtype=np.int64)  # +1 / -1 at the ends of the ranges, then a running sum
    np.add.at(edges, np.clip(lo - 2, 0, len(gr)), 1)
    np.add.at(edges, np.clip(hi + 2, 0, len(gr)), -1)
    return np.flatnonzero(np.cumsum(edges)[:-1] > 0)


def cnvr_labels(cnvr: pd.DataFrame, cnvs: pd.DataFrame, main: str, sample_names: list[str]) -> pd.DataFrame:
    """Per CNV region and sample: the CN of that sample's first overlapping CNV, else the main class.

    CNV regions are unions of the CNVs, so each CNV lies in exactly one region of its chromosome."""
    out = cnvr[["seqnames", "start", "end"]].reset_index(drop=True).copy()
    labels = np.full((len(out), len(sample_names)), main, dtype=object)
    region = np.full(len(cnvs), -1, dtype=np.int64)
    cnv_chrom = cnvs["seqnames"].astype(str).to_numpy()
    for name, idx in out.groupby(out["seqnames"].astype(str), sort=False).indices.items():
        order = idx[np.argsort(out["start"].to_numpy()[idx], kind="stable")]
        sel = np.flatnonzero(cnv_chrom == name)
        pos = np.searchsorted(out["start"].to_numpy()[order], cnvs["start"].to_numpy()[sel], side="right") - 1
        region[sel] = order[np.clip(pos, 0, None)]
    col = pd.Index(sample_names).get_indexer(cnvs["sampleName"])
    first = pd.DataFrame({"region": region, "col": col}).drop_duplicates(keep="first").index.to_numpy()
    first = first[region[first] >= 0]
    labels[region[first], col[first]] = cnvs["CN"].to_numpy()[first]
    return cnvr_frame(out["seqnames"], out["start"], out["end"], sample_names, labels)
