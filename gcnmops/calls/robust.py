"""cn.mops's makeRobustCNVR and calcFractionalCopyNumbers (spec part 2, section 4; no golden cases).

- ``make_robust_cnvr(result, robust=0.5, min_width=4)``: CNV regions confirmed by many samples, from a
  segmentation of the INI call (the per-region information gain, high where many samples deviate).
- ``calc_fractional_copy_numbers(result, seg_stat="mean")``: non-integer copy numbers ("CN2.4") of a
  referencecn.mops result's CNV regions, CNVs and segments (cn.mops marks it experimental).
"""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from ..data import chromosome_blocks
from ..errors import InputError
from ..exact.rstats import r_mean, r_median
from ..result import CNVDetectionResult, cnvr_frame, empty_cnvr
from ..segmentation import segment_columns_arrays

log = logging.getLogger("gcnmops")

NO_ROBUST_CNVR_MESSAGE = "No CNV regions detected with this settings."
NO_CNVS_MESSAGE = "No individual CNVs in the result object."
NO_CNVR_MESSAGE = "No CNV regions in result object. Rerun cn.mops with different parameters!"
ONLY_REFERENCE_MESSAGE = "Only possible for referencecn.mops!"
EXPERIMENTAL_MESSAGE = ("This is an experimental function that has not been tested thoroughly! "
                        "Please report bugs to the maintainer!")


# ------------------------------------------------------------------------------------------ makeRobustCNVR
def make_robust_cnvr(result: CNVDetectionResult, robust: float = 0.5, min_width: int = 4,
                     **segment_args) -> CNVDetectionResult:
    """A new result whose ``cnvr`` holds robust CNV regions (cn.mops's ``makeRobustCNVR``).

    ``robust > 0``: the INI call of each chromosome is segmented with ``segment(ini, seg_median_t=robust,
    min_seg=min_width, **segment_args)``; the segments with mean > ``robust`` become the CNV regions
    (genomic coordinates of their first and last region, copy-number columns None). None: an empty
    ``cnvr`` and the message "No CNV regions detected with this settings.". ``robust <= 0``: the CNV
    regions are the union of the CNVs (overlapping or touching ranges merged on genomic coordinates,
    GenomicRanges::reduce), or empty when there are no CNVs. Other slots are unchanged; run
    ``calc_integer_copy_numbers`` afterwards to label the new regions.
    """
    if isinstance(robust, (bool, str, bytes)) or not isinstance(robust, (int, float, np.number)) \
            or not np.isfinite(float(robust)):
        raise InputError(f"robust must be a single finite number, got {robust!r}.")
    robust = float(robust)
    names = list(result.sample_names)
    if robust > 0:
        gr = result.gr
        ini = np.asarray(result.ini_call, dtype=np.float64)
        blocks = chromosome_blocks(gr["seqnames"])
        seg = segment_columns_arrays(ini.reshape(-1, 1), [(b, e) for _, b, e in blocks], seg_median_t=robust,
                                     min_seg=min_width, **segment_args)
        keep = seg["mean"] > robust
        if not keep.any():
            log.info(NO_ROBUST_CNVR_MESSAGE)
            return result.replace(cnvr=empty_cnvr(names))
        first = np.array([b for _, b, _ in blocks], dtype=np.int64)[seg["block"][keep]]
        rows_start = first + seg["start"][keep] - 1
        rows_end = first + seg["end"][keep] - 1
        chrom = np.array([n for n, _, _ in blocks], dtype=object)[seg["block"][keep]]
        cnvr = cnvr_frame(chrom, gr["start"].to_numpy()[rows_start], gr["end"].to_numpy()[rows_end], names)
        return result.replace(cnvr=cnvr)
    if len(result.cnvs) == 0:
        log.info(NO_CNVS_MESSAGE)
        return result.replace(cnvr=empty_cnvr(names))
    return result.replace(cnvr=_reduce_ranges(result.cnvs, result.gr, names))


def _reduce_ranges(ranges: pd.DataFrame, gr: pd.DataFrame, sample_names: list[str]) -> pd.DataFrame:
    """GenomicRanges::reduce: per chromosome (gr's order), ranges overlapping or touching (next start <=
    running end + 1) merged; sorted by chromosome and start."""
    order_chrom = pd.Index(pd.unique(gr["seqnames"].astype(str)))
    chrom = ranges["seqnames"].astype(str).to_numpy()
    rank = order_chrom.get_indexer(chrom)
    extra = np.flatnonzero(rank < 0)  # not in gr (should not happen): after, in order of appearance
    if extra.size:
        rank[extra] = len(order_chrom) + pd.Index(pd.unique(chrom[extra])).get_indexer(chrom[extra])
    start = ranges["start"].to_numpy(np.int64)
    end = ranges["end"].to_numpy(np.int64)
    order = np.lexsort((end, start, rank))
    rank, start, end, chrom = rank[order], start[order], end[order], chrom[order]
    out_c, out_s, out_e = [], [], []
    for r in pd.unique(rank):
        sel = rank == r
        s, e = start[sel], end[sel]
        run_end = np.maximum.accumulate(e)
        new = np.ones(s.size, dtype=bool)
        new[1:] = s[1:] > run_end[:-1] + 1
        idx = np.flatnonzero(new)
        out_s.append(s[idx])
        out_e.append(np.maximum.reduceat(e, idx))
        out_c.append(np.full(idx.size, chrom[sel][0], dtype=object))
    return cnvr_frame(np.concatenate(out_c), np.concatenate(out_s), np.concatenate(out_e), sample_names)


# ------------------------------------------------------------------------------- calcFractionalCopyNumbers
def calc_fractional_copy_numbers(result: CNVDetectionResult, seg_stat: str = "mean") -> CNVDetectionResult:
    """Fractional copy numbers of a referencecn.mops result (cn.mops's ``calcFractionalCopyNumbers``).

    CNV regions: for each region, the regions of ``gr`` overlapping it (without the first and last when
    there are 3 or more) give per sample the mean (``seg_stat="median"``: median) of ``normalized_data``
    and lambda = the same statistic of the CN2 lambda (``params["L"][:, mainClass]``); the one-step
    reference model on them gives each sample's sINI, and the label is "CN" + round(mainCN * 2**sINI, 1)
    with one decimal (mainCN = 2 * I[mainClass]). Segments and CNVs: "CN" + round(mainCN * 2**stat, 1)
    of their own mean (median). Returns a new result with ``cnvr``, ``cnvs`` and ``segmentation`` labelled.

    Errors: no CNVs or CNV regions ("No CNV regions in result object..."); a result of another method
    ("Only possible for referencecn.mops!"); ``seg_stat`` not "mean" or "median".
    """
    if seg_stat not in ("mean", "median"):
        raise InputError('"segStat" (seg_stat) must be "mean" or "median"!')
    log.info(EXPERIMENTAL_MESSAGE)
    if len(result.cnvr) == 0 or len(result.cnvs) == 0:
        raise InputError(NO_CNVR_MESSAGE)
    p = result.params
    if p.get("method") != "referencecn.mops":
        raise InputError(ONLY_REFERENCE_MESSAGE)
    from .integer import overlapping_rows  # regions of gr overlapping each range, trimmed as cn.mops does
    from ..model.onestep import REFERENCE_FLOOR, OneStepSpec, fit_onestep

    classes = list(p["classes"])
    folds = np.asarray(p["folds"], dtype=np.float64)
    main = p["mainClass"]
    mi = classes.index(main)
    main_cn = 2.0 * folds[mi]

    cnvr = result.cnvr.reset_index(drop=True)
    lo, hi = overlapping_rows(result.gr, cnvr)
    x = np.asarray(result.normalized_data, dtype=np.float64)
    lam_main = np.asarray(p["L"], dtype=np.float64)[:, mi]
    stat = r_mean if seg_stat == "mean" else r_median  # R's mean() / median(), to the last bit
    k = len(cnvr)
    xx = np.empty((k, x.shape[1]), order="F")
    ll = np.empty(k)
    for j in range(k):
        xx[j] = [stat(x[lo[j]:hi[j], c]) for c in range(x.shape[1])]
        ll[j] = stat(lam_main[lo[j]:hi[j]])
    spec = OneStepSpec.build(folds, classes, p["priorImpact"], REFERENCE_FLOOR, p["minReadCount"])
    cov = np.asarray(p.get("cov", np.ones(x.shape[1])), dtype=np.float64)
    sini = fit_onestep(xx, cov, ll, spec).sini
    labels = _labels(main_cn * np.exp2(sini))
    out_cnvr = pd.concat([cnvr[["seqnames", "start", "end"]],
                          pd.DataFrame(labels, columns=list(result.sample_names), dtype=object)], axis=1)
    col = "mean" if seg_stat == "mean" else "median"
    seg = result.segmentation.reset_index(drop=True)
    seg = seg.assign(CN=_labels(np.exp2(seg[col].to_numpy(dtype=np.float64)) * main_cn))
    cnvs = result.cnvs.reset_index(drop=True)
    cnvs = cnvs.assign(CN=_labels(np.exp2(cnvs[col].to_numpy(dtype=np.float64)) * main_cn))
    return result.replace(cnvr=out_cnvr, cnvs=cnvs, segmentation=seg)


def _labels(values: np.ndarray) -> np.ndarray:
    """"CN" + the value rounded to one decimal, written with one decimal ("CN2.0", "CN10.5")."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    out = np.array([f"CN{round(float(v), 1) + 0.0:.1f}" for v in flat], dtype=object)
    return out.reshape(np.shape(values))


__all__ = ["make_robust_cnvr", "calc_fractional_copy_numbers"]
