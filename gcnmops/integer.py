"""calcIntegerCopyNumbers: one integer copy number per CNV, per sample and per CNV region.

Each CNV segment's regions (trimmed by one at each end when there are 3 or more) are averaged per
sample and refitted with the run's model in one batched call (every CNV is one "region" of the
batch); the label of the CNV's own sample is its copy number.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .data import chromosome_blocks
from .errors import InputError
from .model import fit
from .model.spec import ModelSpec
from .result import CNVDetectionResult

NO_CNVR_MESSAGE = "No CNV regions in result object. Rerun cn.mops with different parameters!"


def calc_integer_copy_numbers(result: CNVDetectionResult, backend: str = "cpu") -> CNVDetectionResult:
    """A new result whose segmentation, cnvs and cnvr carry integer copy-number labels."""
    if len(result.cnvr) == 0 or len(result.cnvs) == 0:
        raise InputError(NO_CNVR_MESSAGE)
    p = result.params
    if p["method"] == "referencecn.mops":
        raise InputError("Integer copy numbers of referencecn.mops results are not supported yet.")
    classes = np.asarray(p["classes"], dtype=object)
    main = p["mainClass"]
    mi = list(classes).index(main)
    stat_col = "median" if p.get("useMedian", False) else "mean"

    seg = result.segmentation.reset_index(drop=True)
    key = ["seqnames", "start", "end", "sampleName"]
    seg_pos = pd.Series(np.arange(len(seg)), index=pd.MultiIndex.from_frame(seg[key]))
    cnv_seg = seg_pos.reindex(pd.MultiIndex.from_frame(result.cnvs[key])).to_numpy()
    if np.isnan(cnv_seg.astype(float)).any():
        raise InputError("Some CNVs have no segment of the same sample and coordinates in the segmentation.")
    cnv_seg = cnv_seg.astype(np.int64)

    means = _segment_means(result, seg.iloc[cnv_seg])
    spec = ModelSpec.build(p["folds"], classes, main, p["priorImpact"], p["cyc"], p["minReadCount"])
    cov = np.ones(len(result.sample_names)) if p["method"] == "haplocn.mops" else np.asarray(p["cov"], float)
    refit = fit(means, cov, spec, backend=backend)
    sample_idx = pd.Index(result.sample_names).get_indexer(seg["sampleName"].iloc[cnv_seg])

    seg_cn = np.full(len(seg), main, dtype=object)
    seg_cn[cnv_seg] = classes[refit.cn[np.arange(cnv_seg.size), sample_idx]]
    seg_cn = _threshold_fallback(seg_cn, seg[stat_col].to_numpy(float), p, classes, mi)
    segmentation = seg.assign(CN=seg_cn)
    cnvs = result.cnvs.reset_index(drop=True).assign(CN=seg_cn[cnv_seg])
    return result.replace(segmentation=segmentation, cnvs=cnvs, cnvr=_cnvr_labels(result.cnvr, cnvs, main,
                                                                                  result.sample_names))


def _threshold_fallback(cn, stat, p, classes, mi):
    """Segments still at the main class but beyond a threshold get the neighbouring class."""
    cn = cn.copy()
    at_main = cn == classes[mi]
    if mi + 1 < len(classes):
        cn[at_main & (stat > p["upperThreshold"])] = classes[mi + 1]
    if mi > 0:
        cn[at_main & (stat < p["lowerThreshold"])] = classes[mi - 1]
    return cn


def _segment_means(result: CNVDetectionResult, segs: pd.DataFrame) -> np.ndarray:
    """(k, N) order F: per-sample mean of normalizedData over each segment's overlapping regions,
    dropping the first and last region when there are 3 or more."""
    x = result.normalized_data
    gr = result.gr
    out = np.empty((len(segs), x.shape[1]), order="F")
    blocks = {name: (b, e) for name, b, e in chromosome_blocks(gr["seqnames"].to_numpy(dtype=object))}
    starts = gr["start"].to_numpy()
    ends = gr["end"].to_numpy()
    for j, (chrom, s, e) in enumerate(zip(segs["seqnames"], segs["start"], segs["end"])):
        b0, b1 = blocks[str(chrom)]
        rows = b0 + np.flatnonzero((starts[b0:b1] <= e) & (ends[b0:b1] >= s))
        if rows.size >= 3:
            rows = rows[1:-1]
        out[j] = x[rows].mean(axis=0)
    return out


def _cnvr_labels(cnvr: pd.DataFrame, cnvs: pd.DataFrame, main: str, sample_names: list[str]) -> pd.DataFrame:
    """Per CNV region and sample: the CN of that sample's first overlapping CNV, else the main class."""
    out = cnvr[["seqnames", "start", "end"]].reset_index(drop=True).copy()
    labels = np.full((len(out), len(sample_names)), main, dtype=object)
    col = pd.Index(sample_names).get_indexer(cnvs["sampleName"])
    for r, (chrom, s, e) in enumerate(zip(out["seqnames"], out["start"], out["end"])):
        hit = np.flatnonzero((cnvs["seqnames"].to_numpy() == chrom) & (cnvs["start"].to_numpy() <= e)
                             & (cnvs["end"].to_numpy() >= s))
        # the first CNV of each sample wins
        _, first = np.unique(col[hit], return_index=True)
        labels[r, col[hit][first]] = cnvs["CN"].to_numpy()[hit][first]
    for k, s in enumerate(sample_names):
        out[s] = labels[:, k]
    return out
