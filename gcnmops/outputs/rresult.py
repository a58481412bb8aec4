"""R results -> Python: an R ``CNVDetectionResult`` (gcn.mops's or cn.mops's, live or in an ``.rds``)
becomes a :class:`~gcnmops.result.CNVDetectionResult` whose numeric matrices are views of R's memory.

The way there (Python result -> R object, ``.rds`` output) is :mod:`gcnmops.outputs.robject`; this module is
apart from it because it builds results (it imports :mod:`gcnmops.result`, which the writers must not).
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..io.rsession import as_scalar, as_strings, element, is_null, r_array, r_session
from ..result import SEGMENT_COLUMNS, CNVDetectionResult, empty_cnvr, empty_segments

_R_HELPERS = r"""
local({
  seg_table <- function(g, classes) {
    if (length(g) == 0L) return(NULL)
    mc <- S4Vectors::mcols(g)
    cn <- mc$CN
    sn <- GenomeInfoDb::seqnames(g)
    list(seq_values = as.character(S4Vectors::runValue(sn)), seq_lengths = S4Vectors::runLength(sn),
         start = BiocGenerics::start(g), end = BiocGenerics::end(g),
         sampleName = as.character(mc$sampleName), median = as.double(mc$median), mean = as.double(mc$mean),
         CN = if (is.null(cn) || all(is.na(cn))) NULL else match(as.character(cn), classes) - 1L)
  }
  cnvr_table <- function(g, classes, samples) {
    if (length(g) == 0L) return(NULL)
    if ("sampleName" %in% names(S4Vectors::mcols(g)))  # singlecn.mops: the CNVs themselves
      return(c(seg_table(g, classes), list(kind = "segments")))
    mc <- as.list(S4Vectors::mcols(g))
    sn <- GenomeInfoDb::seqnames(g)
    labelled <- length(mc) > 0L && !all(vapply(mc, function(v) all(is.na(v)), TRUE))
    cn <- NULL
    if (labelled) {
      cn <- vapply(mc, function(v) match(as.character(v), classes) - 1L, integer(length(g)))
      dim(cn) <- c(length(g), length(mc))
    }
    list(seq_values = as.character(S4Vectors::runValue(sn)), seq_lengths = S4Vectors::runLength(sn),
         start = BiocGenerics::start(g), end = BiocGenerics::end(g), columns = names(mc), CN = cn)
  }
  describe_result <- function(obj) {
    suppressPackageStartupMessages(requireNamespace("GenomicRanges", quietly = TRUE))
    p <- obj@params
    classes <- as.character(p$classes)
    gr <- obj@gr
    sn <- GenomeInfoDb::seqnames(gr)
    icn <- obj@integerCopyNumber
    # the R package's C routine when it is loaded (no R-heap temporaries), else match()
    index <- if (isNamespaceLoaded("gcn.mops")) get0(".label_index", getNamespace("gcn.mops"), inherits = FALSE)
    if (is.null(index)) {
      cn <- match(icn, classes) - 1L
      dim(cn) <- dim(icn)
    } else {
      cn <- index(icn, classes)
    }
    post <- obj@posteriorProbs
    if (length(post) <= 1L && all(is.na(post))) post <- NULL
    list(seq_values = as.character(S4Vectors::runValue(sn)), seq_lengths = S4Vectors::runLength(sn),
         start = BiocGenerics::start(gr), end = BiocGenerics::end(gr),
         normalizedData = obj@normalizedData, localAssessments = obj@localAssessments,
         individualCall = obj@individualCall, iniCall = obj@iniCall, cn = cn, posteriorProbs = post,
         params = p, sampleNames = obj@sampleNames,
         segmentation = seg_table(obj@segmentation, classes), cnvs = seg_table(obj@cnvs, classes),
         cnvr = cnvr_table(obj@cnvr, classes, obj@sampleNames),
         class = class(obj), package = attr(class(obj), "package"))
  }
  describe_result
})
"""


@lru_cache(maxsize=1)
def _describe_result():
    """The R function above, made once."""
    session = r_session()
    with session.conversion():
        return session.ro.r(_R_HELPERS)


def _table_from_r(t, samples=None) -> pd.DataFrame | None:
    if t is None:
        return None
    seq = np.repeat(np.asarray(as_strings(element(t, "seq_values")), dtype=object),
                    r_array(element(t, "seq_lengths")).astype(np.int64))
    return pd.DataFrame({"seqnames": seq, "start": r_array(element(t, "start")).astype(np.int64),
                         "end": r_array(element(t, "end")).astype(np.int64)})


def _segments_from_r(t, classes) -> pd.DataFrame:
    frame = _table_from_r(t)
    if frame is None:
        return empty_segments()
    frame["sampleName"] = np.asarray(as_strings(element(t, "sampleName")), dtype=object)
    frame["median"] = np.array(r_array(element(t, "median")), dtype=np.float64)
    frame["mean"] = np.array(r_array(element(t, "mean")), dtype=np.float64)
    cn = element(t, "CN")
    frame["CN"] = None if cn is None else _labels(r_array(cn), classes)
    return frame[SEGMENT_COLUMNS]


def _labels(codes: np.ndarray, classes) -> np.ndarray:
    lab = np.asarray(list(classes) + [None], dtype=object)
    idx = np.where(codes == np.iinfo(np.int32).min, len(classes), codes)
    return lab[idx]


def from_r(obj) -> CNVDetectionResult:
    """A Python :class:`CNVDetectionResult` of an R ``CNVDetectionResult`` (gcn.mops's or cn.mops's).

    ``obj``: an rpy2 object, or a path to an ``.rds`` file holding one. The numeric matrices
    (normalizedData, localAssessments, individualCall, iniCall, posteriorProbs, params L/A/cov) are
    zero-copy views of R's memory that keep the R object alive; the labels become int8 class indices.
    """
    if isinstance(obj, (str, os.PathLike)):
        return read_rds_result(obj)
    describe_result = _describe_result()
    with r_session().conversion():
        d = describe_result(obj)
        p = element(d, "params")
        classes = as_strings(element(p, "classes"))
        samples = as_strings(element(d, "sampleNames"))
        params = {}
        for name, v in zip(list(p.names), p):
            if is_null(v):
                params[name] = None
            elif name in ("L", "A", "cov"):
                params[name] = r_array(v)
            elif name in ("folds",):
                params[name] = [float(x) for x in r_array(v)]
            elif name in ("classes", "SegmentationParams"):
                params[name] = as_strings(v)
            else:
                params[name] = as_scalar(v)
        if isinstance(params.get("SegmentationParams"), list) and not params["SegmentationParams"]:
            params["SegmentationParams"] = {}
        gr = _table_from_r(d)
        cn = r_array(element(d, "cn"))
        if (cn == np.iinfo(np.int32).min).any():
            raise InputError("integerCopyNumber holds labels that are not among params$classes.")
        post = element(d, "posteriorProbs")
        m = len(gr)
        matrix_input = bool((gr["seqnames"] == "undef").all() and (gr["start"].to_numpy() == np.arange(1, m + 1)).all())
        cnvr_t = element(d, "cnvr")
        cnvr = _table_from_r(cnvr_t)
        if cnvr is None:
            cnvr = empty_cnvr(samples)
        elif as_scalar(element(cnvr_t, "kind")) == "segments":
            cnvr = _segments_from_r(cnvr_t, classes)
        else:
            cols = as_strings(element(cnvr_t, "columns")) or list(samples)
            codes = element(cnvr_t, "CN")
            lab = None if codes is None else r_array(codes)
            for k, s in enumerate(cols):
                cnvr[s] = None if lab is None else _labels(lab[:, k], classes)
        ini = r_array(element(d, "iniCall"))
        return CNVDetectionResult(
            gr=gr, normalized_data=r_array(element(d, "normalizedData")),
            local_assessments=r_array(element(d, "localAssessments")),
            individual_call=r_array(element(d, "individualCall")), ini_call=ini,
            cn_index=cn.astype(np.int8, order="F"), posterior_probs=None if post is None else r_array(post),
            params=params, segmentation=_segments_from_r(element(d, "segmentation"), classes),
            cnvs=_segments_from_r(element(d, "cnvs"), classes), cnvr=cnvr, sample_names=list(samples),
            ranged=not matrix_input,
        )


def read_rds_result(path) -> CNVDetectionResult:
    """Read an ``.rds`` holding an R ``CNVDetectionResult`` (gcn.mops's or cn.mops's)."""
    session = r_session()
    p = Path(path)
    if not p.exists():
        raise InputError(f"File not found: {p}")
    with session.conversion():
        obj = session.ro.r["readRDS"](str(p.expanduser().resolve()))
    return from_r(obj)


__all__ = ["from_r", "read_rds_result"]
