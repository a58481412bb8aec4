"""Python results -> R: a CNVDetectionResult becomes the R ``CNVDetectionResult`` S4 object, and ``.rds``.

:func:`to_r` fills an R environment with the result's matrices (each copied once, into memory allocated
by R), its parameters and its tables (as plain integer/double vectors) and has the R package gcn.mops
build the object from it (``.build_result``, the very builder ``gcn.mops()`` uses in R, so both
directions give the same object, of the class cn.mops and gcn.mops share by name). :func:`write_rds` saves
it (the ``rds`` output format). The engine side of the R package (``gcnmops.rbridge``) fills its bridge
environments with the same :func:`result_into_env` / :func:`tables_into_env`. The way back (R object ->
Python result) is :mod:`gcnmops.outputs.rresult`.

Python users whose R code (run through rpy2) then calls gcn.mops functions on the object register the
engine once with ``gcnmops.rbridge.attach()``.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from ..io.rsession import double_vector, int_vector, r_array, r_session, string_vector

_R_HELPERS = r"""
local({
  alloc <- function(type, dims, dn) {
    x <- vector(type, prod(dims))
    if (length(dims) > 1L) dim(x) <- dims   # a plain vector for one dimension
    if (!is.null(dn)) dimnames(x) <- dn
    x
  }
  build_result <- function(env) {
    if (!requireNamespace("gcn.mops", quietly = TRUE))
      stop("the R package gcn.mops is not installed: R CMD INSTALL r_package/gcn.mops")
    getNamespace("gcn.mops")$.build_result(env)
  }
  list(alloc = alloc, build_result = build_result, new_env = function() new.env(parent = emptyenv()))
})
"""


@lru_cache(maxsize=1)
def _helpers() -> dict:
    """The R functions above (alloc, build_result, new_env), made once."""
    session = r_session()
    with session.conversion():
        helpers = session.ro.r(_R_HELPERS)
    return {name: helpers.rx2(name) for name in ("alloc", "build_result", "new_env")}


def _codes(values, levels) -> np.ndarray:
    """1-based positions of ``values`` in ``levels`` (int32)."""
    idx = pd.Index(list(levels)).get_indexer(pd.Index(np.asarray(values, dtype=object)))
    if (idx < 0).any():
        raise RuntimeError("internal: a value is not among the known levels")
    return (idx + 1).astype(np.int32)


def label_codes(values, classes) -> np.ndarray | None:
    """0-based class indices of labels (None when no label is set, -1 never)."""
    vals = pd.Series(values, dtype=object)
    if vals.isna().all():
        return None
    idx = pd.Index(list(classes)).get_indexer(vals.fillna("\0"))
    return np.where(idx < 0, np.iinfo(np.int32).min, idx).astype(np.int32)


def _segments_into_env(env, prefix: str, frame: pd.DataFrame, chr_levels, samples, classes) -> None:
    env[prefix + "chr"] = int_vector(_codes(frame["seqnames"].astype(str), chr_levels))
    env[prefix + "start"] = int_vector(frame["start"].to_numpy())
    env[prefix + "end"] = int_vector(frame["end"].to_numpy())
    env[prefix + "sample"] = int_vector(_codes(frame["sampleName"].astype(str), samples))
    env[prefix + "median"] = double_vector(frame["median"].to_numpy(dtype=np.float64))
    env[prefix + "mean"] = double_vector(frame["mean"].to_numpy(dtype=np.float64))
    cn = label_codes(frame["CN"].to_numpy(dtype=object), classes)
    if cn is not None:
        env[prefix + "CN"] = int_vector(cn)


def tables_into_env(env, result, chr_levels, samples) -> None:
    """segmentation, cnvs (prefix seg_/cnv_) and cnvr (cnvr_) as plain vectors in ``env``."""
    classes = result.classes
    for prefix, frame in (("seg_", result.segmentation), ("cnv_", result.cnvs)):
        env[prefix + "n"] = int_vector([len(frame)])
        if len(frame):
            _segments_into_env(env, prefix, frame, chr_levels, samples, classes)
    cnvr = result.cnvr
    if "sampleName" in cnvr.columns:  # singlecn.mops: the CNV regions are the CNVs themselves
        env["cnvr_kind"] = string_vector(["segments"])
        env["cnvr_n"] = int_vector([len(cnvr)])
        if len(cnvr):
            _segments_into_env(env, "cnvr_", cnvr, chr_levels, samples, classes)
        return
    env["cnvr_columns"] = string_vector([c for c in cnvr.columns if c not in ("seqnames", "start", "end")])
    env["cnvr_n"] = int_vector([len(cnvr)])
    if len(cnvr):
        env["cnvr_chr"] = int_vector(_codes(cnvr["seqnames"].astype(str), chr_levels))
        env["cnvr_start"] = int_vector(cnvr["start"].to_numpy())
        env["cnvr_end"] = int_vector(cnvr["end"].to_numpy())
        cols = [c for c in cnvr.columns if c not in ("seqnames", "start", "end")]
        codes = [label_codes(cnvr[c].to_numpy(dtype=object), classes) for c in cols]
        if any(c is not None for c in codes):
            na = np.full(len(cnvr), np.iinfo(np.int32).min, dtype=np.int32)
            env["cnvr_CN"] = int_vector(np.concatenate([na if c is None else c for c in codes]))


def _alloc(rtype: str, dims, dimnames=None):
    session = r_session()
    ri, ro = session.ri, session.ro
    with session.conversion():
        dn = ri.NULL if dimnames is None else ro.vectors.ListVector.from_length(len(dimnames))
        if dimnames is not None:
            for i, d in enumerate(dimnames):
                dn[i] = ri.NULL if d is None else string_vector(d)
        return _helpers()["alloc"](rtype, int_vector(list(dims)), dn)


def _r_copy(array: np.ndarray, rtype: str = "double", dimnames=None):
    """A new R vector/matrix/array holding ``array`` (one copy, into memory allocated by R)."""
    array = np.asarray(array)
    r = _alloc(rtype, array.shape if array.ndim else (1,), dimnames)
    view = r_array(r)
    view[...] = array.reshape(view.shape, order="F") if array.shape != view.shape else array
    return r


def _params_to_r(params: dict, sample_names: list[str], region_names, norm2: bool):
    """The params list with cn.mops's names and types (cov, L, A as R vectors/matrices)."""
    session = r_session()
    ri, ro = session.ri, session.ro
    items = []
    for k, v in params.items():
        if k in ("L", "A"):
            items.append((k, _r_copy(np.asarray(v, dtype=np.float64),
                                     dimnames=(region_names or None, list(params["classes"])))))
        elif k == "cov":
            r = _r_copy(np.asarray(v, dtype=np.float64))
            if norm2:
                r.names = string_vector(sample_names)
            items.append((k, r))
        elif k == "SegmentationParams":
            vals = list(v.values()) if isinstance(v, dict) else list(v or [])
            items.append((k, string_vector([str(x) for x in vals])))
        elif isinstance(v, bool) or isinstance(v, np.bool_):
            items.append((k, ri.BoolSexpVector([bool(v)])))
        elif isinstance(v, str):
            items.append((k, string_vector([v])))
        elif isinstance(v, (list, tuple, np.ndarray)):
            vals = list(v)
            if vals and all(isinstance(x, str) for x in vals):
                items.append((k, string_vector(vals)))
            else:
                items.append((k, double_vector(np.asarray(vals, dtype=np.float64))))
        elif v is None:
            items.append((k, ri.NULL))
        else:
            items.append((k, double_vector([float(v)])))
    with session.conversion():
        lst = ro.vectors.ListVector.from_length(len(items))
        for i, (_, v) in enumerate(items):
            lst[i] = v
        lst.names = string_vector([k for k, _ in items])
    return lst


def result_into_env(env, result) -> None:
    """Fill a bridge environment from a Python result (a CNVDetectionResult; the layout ``.build_result``
    reads)."""
    ri = r_session().ri
    gr = result.gr
    m, n_samples = result.local_assessments.shape
    samples = list(result.sample_names)
    chrom = gr["seqnames"].astype(str).to_numpy(dtype=object)
    levels = list(pd.unique(chrom))
    matrix_input = not result.region_names
    rn = None if matrix_input else list(result.region_names)
    env["input_type"] = string_vector(["DataMatrix" if matrix_input else "GRanges"])
    env["chr_levels"] = string_vector(levels)
    env["chr_index"] = int_vector(_codes(chrom, levels))
    env["start"] = int_vector(gr["start"].to_numpy())
    env["end"] = int_vector(gr["end"].to_numpy())
    env["sampleNames"] = string_vector(samples)
    env["rownames"] = ri.NULL if rn is None else string_vector(rn)
    env["normalizedData"] = _r_copy(result.normalized_data, dimnames=(rn, samples))
    env["localAssessments"] = _r_copy(result.local_assessments, dimnames=(rn, samples))
    env["individualCall"] = _r_copy(result.individual_call, dimnames=(None, samples))
    ini = _r_copy(np.asarray(result.ini_call, dtype=np.float64))
    if rn is not None:
        ini.names = string_vector(rn)
    env["iniCall"] = ini
    cn = _alloc("raw", (m, n_samples))
    r_array(cn)[...] = np.asarray(result.cn_index, dtype=np.int8).view(np.uint8)
    env["cn"] = cn
    if result.posterior_probs is not None:
        env["posteriorProbs"] = _r_copy(result.posterior_probs, dimnames=(None, result.classes, samples))
    params = dict(result.params)
    method = str(params.get("method", "cn.mops"))
    norm2 = bool(np.asarray(params.get("cov", [1.0])).size and not np.all(np.asarray(params["cov"]) == 1.0)
                 and method == "cn.mops")
    env["params"] = _params_to_r(params, samples, rn, norm2)
    env["segmented"] = ri.BoolSexpVector([m > 5])
    tables_into_env(env, result, levels, samples)


def to_r(result):
    """The R ``CNVDetectionResult`` S4 object (an rpy2 object) of a Python result (a CNVDetectionResult).

    Built by the R package gcn.mops's builder, so it is the very object ``gcn.mops()`` returns in R
    (its class by name only: it loads and validates with cn.mops or gcn.mops). Each matrix is copied once,
    into memory allocated by R. Needs R, rpy2 and the installed R package (``R CMD INSTALL r_package/gcn.mops``).
    """
    fns = _helpers()
    with r_session().conversion():
        env = fns["new_env"]()
        result_into_env(env, result)
        return fns["build_result"](env)


def write_rds(result, path) -> Path:
    """Save the R ``CNVDetectionResult`` of ``result`` with ``saveRDS`` (for the CLI's rds format)."""
    session = r_session()
    obj = to_r(result)
    with session.conversion():
        session.ro.r["saveRDS"](obj, str(Path(path)))
    return Path(path)


__all__ = ["to_r", "write_rds", "result_into_env", "tables_into_env", "label_codes"]
