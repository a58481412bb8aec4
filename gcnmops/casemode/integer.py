"""Integer copy numbers against fitted per-region parameters (frozen calls, and sex-aware runs).

cn.mops's calcIntegerCopyNumbers refits the EM over the cohort on each CNV's mean counts; a frozen call has no
cohort, and in a sex-aware run each sex has its own normal class. Here, per CNV of sample k: its regions (trimmed
by one at each end from 3 on, as cn.mops), x = R's mean of the sample's normalized counts there, lambda_i and
alpha_i = R's means of the fitted parameters of those regions (the part of the model the sample's sex uses for
the CNV's first region), and one E-step (model/estep.py) gives the class of highest posterior; a CNV left at the
normal class beyond a threshold gets the neighbouring class (cn.mops's fall-back). Segments without a CNV (at
their middle region), and samples without a CNV in a CNV region, get the copy number expected there (the normal class of that part: CN1 for
a male's chrX and chrY, CN0 for a female's chrY).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..calls.integer import cnvr_labels, overlapping_rows, threshold_fallback
from ..exact.rstats import ld_mean
from ..model.estep import estep_cpu
from ..params import CnMopsParams
from ..result import CNVDetectionResult
from .parts import PartFit


class _PartIndex:
    """Per sex: the part (index into fits) holding each row, and the row's position in that part."""

    def __init__(self, fits: list[PartFit], m: int):
        self.fits = fits
        self.m = m
        self._maps: dict = {}

    def lookup(self, sex: str | None) -> tuple[np.ndarray, np.ndarray]:
        if sex not in self._maps:
            part_of = np.full(self.m, -1, dtype=np.int64)
            local = np.zeros(self.m, dtype=np.int64)
            for j, pf in enumerate(self.fits):
                if not pf.part.takes(sex):
                    continue
                rows = np.arange(self.m) if pf.part.rows is None else pf.part.rows
                free = part_of[rows] < 0
                part_of[rows[free]] = j
                local[rows[free]] = np.flatnonzero(free)
            self._maps[sex] = (part_of, local)
        return self._maps[sex]

    def expected(self, rows: np.ndarray, sexes: list, classes) -> np.ndarray:
        """The expected label (the part's normal class, or its fixed one) at ``rows`` for samples of ``sexes``."""
        out = np.empty(len(rows), dtype=object)
        for i, (r, s) in enumerate(zip(rows, sexes)):
            part = self.fits[self.lookup(s)[0][r]].part
            out[i] = part.fixed or part.main_class
        return out


def integer_copy_numbers(result: CNVDetectionResult, fits: list[PartFit], params: CnMopsParams,
                         sexes: list[str] | None) -> CNVDetectionResult:
    """``result`` with integer copy-number labels in segmentation, cnvs and cnvr (module docstring); ``fits``
    the parameters its samples were called with, ``sexes`` per sample (None: one part)."""
    if len(result.cnvs) == 0:
        return result
    classes = np.asarray(params.classes, dtype=object)
    names = list(result.sample_names)
    sex_of = dict(zip(names, sexes)) if sexes is not None else {}
    index = _PartIndex(fits, result.gr.shape[0])
    stat_col = "median" if params.use_median else "mean"
    cov = np.asarray(result.params["cov"], dtype=np.float64)

    seg = result.segmentation.reset_index(drop=True)
    seg_lo, seg_hi = overlapping_rows(result.gr, seg)
    seg_sex = [sex_of.get(s) for s in seg["sampleName"]]
    seg_cn = index.expected((seg_lo + seg_hi) // 2, seg_sex, classes)  # a segment's middle region decides
    key = ["seqnames", "start", "end", "sampleName"]
    seg_pos = pd.Series(np.arange(len(seg)), index=pd.MultiIndex.from_frame(seg[key]))
    cnv_seg = seg_pos.reindex(pd.MultiIndex.from_frame(result.cnvs[key])).to_numpy().astype(np.int64)
    lo, hi = overlapping_rows(result.gr, seg.iloc[cnv_seg])
    sample_idx = pd.Index(names).get_indexer(seg["sampleName"].iloc[cnv_seg])
    for j in range(cnv_seg.size):
        k = sample_idx[j]
        part_of, local = index.lookup(sex_of.get(names[k]))
        pf = fits[part_of[lo[j]]]
        if pf.lam is None:  # a fixed part (female chrY): its label stands
            continue
        rows = np.arange(lo[j], hi[j])
        rows = rows[part_of[rows] == part_of[lo[j]]]
        x = np.array([[ld_mean(np.ascontiguousarray(result.normalized_data[rows, k]), rows.size)]])
        lam = _means(pf.lam, local[rows])
        alpha = _means(pf.alpha, local[rows])
        spec = pf.part.spec(params)
        o = estep_cpu(x, cov[k:k + 1], lam, alpha, spec)
        label = classes[o.cn[0, 0]]
        label = threshold_fallback(np.array([label], dtype=object), np.array([seg[stat_col].iat[cnv_seg[j]]]),
                                   result.params, classes, spec.main_idx)[0]
        seg_cn[cnv_seg[j]] = label
    segmentation = seg.assign(CN=seg_cn)
    cnvs = result.cnvs.reset_index(drop=True).assign(CN=seg_cn[cnv_seg])
    cnvr = cnvr_labels(result.cnvr, cnvs, params.main_class, names)
    if sexes is not None:
        cnvr = _expected_non_carriers(cnvr, cnvs, names, sexes, index, result.gr, classes)
    return result.replace(segmentation=segmentation, cnvs=cnvs, cnvr=cnvr)


def _means(a: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(1, n) order F: R's mean() of each column of ``a`` over ``rows``."""
    return np.asfortranarray([[ld_mean(np.ascontiguousarray(a[rows, i]), rows.size) for i in range(a.shape[1])]])


def _expected_non_carriers(cnvr, cnvs, names, sexes, index: _PartIndex, gr, classes) -> pd.DataFrame:
    """cnvr with each non-carrier's label the copy number expected for its sex (not CN2 on a male's chrX)."""
    lo, _ = overlapping_rows(gr, cnvr)
    carriers = set(zip(cnvs["seqnames"].astype(str), cnvs["sampleName"]))
    out = cnvr.copy()
    for s, sex in zip(names, sexes):
        exp = index.expected(lo, [sex] * len(lo), classes)
        col = out[s].to_numpy(dtype=object).copy()
        for i in range(len(col)):
            chrom = str(out["seqnames"].iat[i])
            if (chrom, s) not in carriers or not _carries(cnvs, s, chrom, out["start"].iat[i], out["end"].iat[i]):
                col[i] = exp[i]
        out[s] = col
    return out


def _carries(cnvs, sample, chrom, start, end) -> bool:
    sel = (cnvs["sampleName"] == sample) & (cnvs["seqnames"].astype(str) == chrom)
    return bool(((cnvs["start"][sel] <= end) & (cnvs["end"][sel] >= start)).any())


__all__ = ["integer_copy_numbers"]
