"""The R bridge: R objects <-> zero-copy numpy views, and the engine side of the R package gcn.mops.

Two directions, one module:

* **R calls the engine** (the R package ``gcn.mops``). reticulate only starts Python in the R process
  and runs ``attach(force=True)``: rpy2 attaches to the running R and registers an R function (an rpy2
  callback, :func:`_host_dispatch`) through which every later call goes; no data crosses reticulate
  (reticulate 1.28 would also finalize its objects without Python's lock, which rpy2 releases while R
  runs). R prepares a *bridge environment* - the count matrix, the regions, the parameters, and every
  numeric result matrix already allocated by R with its final dimnames (R vectors from the package's custom
  allocator: not zero-filled, as the engine writes every element, and outside R's vector-heap count) -
  registers it under a key and calls e.g. :func:`run_from_r` with that key. The engine views the input
  matrix in place (:func:`r_array`: a numpy array over R's memory, no copy) and writes lambda, alpha, sINI,
  INI, the expected-class indices (a raw matrix) and the posteriors straight into the R-allocated matrices
  (``run_mops(out=...)`` -> ``model.fit(out=...)``; on a GPU the device-to-host copies land in R memory).
  The tables (segments, CNVs, CNV regions) go back into the environment as integer/double vectors; R
  builds the GRanges and the copy-number label matrices itself, ``classes[idx + 1L]`` (the m x N one in C).
  When Python hosts R (rpy2), :func:`attach` registers the same callback.
* **Python calls R** (:func:`to_r`, :func:`from_r`, :func:`write_rds`, :func:`read_rds_result`):
  a :class:`~gcnmops.result.CNVDetectionResult` becomes the R ``CNVDetectionResult`` S4 object
  (built by the R package's own builder, so both directions give the same object), and an R result
  (ours or cn.mops's) becomes a Python result whose numeric matrices are views of R's memory.

Copies that remain, by design: integer read counts are converted to double once, in R (R's integers
are 32-bit; the model reads doubles); the normalized matrix and the individual calls are computed by
the engine into its own arrays and copied once into the R matrices (``norm=0`` needs no copy: the
slot is the input matrix itself); the family's other entry points (haplo, reference, single) have no
preallocated-output path yet, so their outputs are copied once into R memory. rpy2 is imported
lazily; the rest of gcnmops works without R.
"""
from __future__ import annotations

import inspect
import logging
import os
import re
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .data import CountData, make_count_data
from .errors import InputError
from .params import VERSION, CnMopsParams
from .result import SEGMENT_COLUMNS, CNVDetectionResult

log = logging.getLogger("gcnmops")

#: cn.mops's argument names -> CnMopsParams fields
_R_ARGS = {
    "I": "I", "classes": "classes", "priorImpact": "prior_impact", "cyc": "cyc", "norm": "norm",
    "normType": "norm_type", "sizeFactor": "size_factor", "normQu": "norm_qu", "quSizeFactor": "qu_size_factor",
    "upperThreshold": "upper_threshold", "lowerThreshold": "lower_threshold", "minWidth": "min_width",
    "segAlgorithm": "seg_algorithm", "minReadCount": "min_read_count", "useMedian": "use_median",
    "returnPosterior": "return_posterior",
}
#: cn.mops segment()'s argument names -> ours
_SEGMENT_ARGS = {"alpha": "alpha", "segMedianT": "seg_median_t", "minSeg": "min_seg", "eps": "eps",
                 "delta": "delta", "maxInt": "max_int", "cyberWeight": "cyber_weight"}

_rt = None  # (rinterface, robjects, openrlib, helper closures), set on first use


# --------------------------------------------------------------------------------------------
# rpy2 access
# --------------------------------------------------------------------------------------------
_R_HELPERS = r"""
local({
  alloc <- function(type, dims, dn) {
    x <- vector(type, prod(dims))
    if (length(dims) > 1L) dim(x) <- dims   # a plain vector for one dimension
    if (!is.null(dn)) dimnames(x) <- dn
    x
  }
  bridge_env <- function(key) get(key, envir = getNamespace("gcn.mops")$.bridge, inherits = FALSE)
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
  build_result <- function(env) {
    if (!requireNamespace("gcn.mops", quietly = TRUE))
      stop("the R package gcn.mops is not installed: R CMD INSTALL r_package/gcn.mops")
    getNamespace("gcn.mops")$.build_result(env)
  }
  list(alloc = alloc, bridge_env = bridge_env, describe_result = describe_result, build_result = build_result,
       new_env = function() new.env(parent = emptyenv()))
})
"""


def _r():
    """(rinterface, robjects, openrlib, helpers); InputError when rpy2 or R is missing."""
    global _rt
    if _rt is not None:
        return _rt
    rpy2_log = logging.getLogger("rpy2.rinterface_lib.embedded")
    old_level = rpy2_log.level
    try:
        with warnings.catch_warnings():
            # inside an R session (R -> reticulate -> Python) rpy2 attaches to the running R and says so,
            # as a warning and as a log line: expected here, not news for the user
            warnings.filterwarnings("ignore", message="R was initialized outside of rpy2")
            rpy2_log.setLevel(logging.ERROR)
            import rpy2.rinterface as ri
            import rpy2.robjects as ro
            from rpy2.rinterface_lib import openrlib
            from rpy2.robjects.conversion import localconverter
    except Exception as e:  # ImportError, or R itself not found / failing to start
        raise InputError(f"The R bridge needs R and the Python package rpy2 3.5.x (pip install 'gcnmops[r]'): "
                         f"{type(e).__name__}: {e}") from None
    finally:
        rpy2_log.setLevel(old_level)
    with localconverter(ro.default_converter):
        helpers = ro.r(_R_HELPERS)
    fns = {name: helpers.rx2(name) for name in ("alloc", "bridge_env", "describe_result", "build_result", "new_env")}
    _rt = (ri, ro, openrlib, fns)
    return _rt


@contextmanager
def _converter():
    _, ro, _, _ = _r()
    from rpy2.robjects.conversion import localconverter

    with localconverter(ro.default_converter):
        yield


def _is_null(x) -> bool:
    ri = _r()[0]
    return x is None or x is ri.NULL or getattr(x, "typeof", None) == ri.RTYPES.NILSXP


# --------------------------------------------------------------------------------------------
# zero-copy views of R vectors
# --------------------------------------------------------------------------------------------
class _RMemory:
    """Owner of an R vector's data for numpy: keeps the rpy2 proxy (and so the R object) alive as
    long as any numpy view of it exists (numpy's ``base`` chain ends here)."""

    def __init__(self, sexp, address: int, shape: tuple, typestr: str, itemsize: int):
        self.sexp = sexp
        strides, step = [], itemsize
        for d in shape:  # column-major, as R stores arrays
            strides.append(step)
            step *= max(d, 1)
        self.__array_interface__ = {"shape": tuple(shape), "typestr": typestr, "strides": tuple(strides),
                                    "data": (address, False), "version": 3}


def _r_type_info(sexp):
    ri, _, openrlib, _ = _r()
    t = sexp.typeof
    rt = ri.RTYPES
    if t == rt.REALSXP:
        return openrlib.rlib.REAL, "<f8", 8
    if t == rt.INTSXP:
        return openrlib.rlib.INTEGER, "<i4", 4
    if t == rt.LGLSXP:
        return openrlib.rlib.LOGICAL, "<i4", 4
    if t == rt.RAWSXP:
        return openrlib.rlib.RAW, "|u1", 1
    raise TypeError(f"no numeric view of an R vector of type {t}")


def _r_shape(sexp) -> tuple:
    dims = sexp.do_slot("dim") if "dim" in list(sexp.list_attrs()) else None
    if dims is None:
        return (len(sexp),)
    return tuple(int(d) for d in dims)


def r_address(sexp) -> int:
    """Address of the first element of an R numeric/integer/logical/raw vector (its DATAPTR)."""
    _, _, openrlib, _ = _r()
    getptr, _, _ = _r_type_info(sexp)
    if len(sexp) == 0:
        return 0
    return int(openrlib.ffi.cast("uintptr_t", getptr(sexp.__sexp__._cdata)))


def r_array(sexp) -> np.ndarray:
    """A writable numpy view of an R double/integer/logical/raw vector, matrix or array: no copy.

    Shape and column-major (``order="F"``) layout follow R's ``dim``; dtype float64 / int32 / int32
    (logical) / uint8. Writing to the view writes R's memory, which R sees at once. The view keeps
    the R object alive. Integer NA is INT_MIN, as in R.
    """
    _, typestr, itemsize = _r_type_info(sexp)
    shape = _r_shape(sexp)
    if len(sexp) == 0:
        return np.empty(shape, dtype=np.dtype(typestr), order="F")
    return np.asarray(_RMemory(sexp, r_address(sexp), shape, typestr, itemsize))


def _strings(sexp) -> list[str] | None:
    if _is_null(sexp):
        return None
    return [None if s is _r()[0].NA_Character else str(s) for s in sexp]


def _scalar(sexp):
    """An R length-1 vector -> Python scalar (NA -> None); longer vectors -> list."""
    ri = _r()[0]
    if _is_null(sexp):
        return None
    vals = list(sexp)
    out = []
    for v in vals:
        if v is ri.NA_Character or v is ri.NA_Logical or v is ri.NA_Integer or v is ri.NA_Real:
            out.append(None)
        elif isinstance(v, (bool, np.bool_)):
            out.append(bool(v))
        else:
            out.append(v)
    return out[0] if len(out) == 1 else out


def _get(env_or_list, name):
    """Element ``name`` of an R environment or named list (None when absent or NULL)."""
    ri = _r()[0]
    if env_or_list.typeof == ri.RTYPES.ENVSXP:
        try:
            v = env_or_list.find(name, wantfun=False)
        except KeyError:
            return None
        # find() also searches enclosing environments; bridge environments have the empty env as parent
    else:
        names = list(env_or_list.names) if not _is_null(env_or_list.names) else []
        if name not in names:
            return None
        v = env_or_list[names.index(name)]
    return None if _is_null(v) else v


def _int_vec(a) -> Any:
    ri = _r()[0]
    a = np.ascontiguousarray(a, dtype=np.int32)
    return ri.IntSexpVector.from_memoryview(memoryview(a)) if a.size else ri.IntSexpVector([])


def _dbl_vec(a) -> Any:
    ri = _r()[0]
    a = np.ascontiguousarray(a, dtype=np.float64)
    return ri.FloatSexpVector.from_memoryview(memoryview(a)) if a.size else ri.FloatSexpVector([])


def _str_vec(values) -> Any:
    ri = _r()[0]
    return ri.StrSexpVector([ri.NA_Character if v is None else str(v) for v in values])


# --------------------------------------------------------------------------------------------
# R -> engine: the entry points the R package calls through reticulate
# --------------------------------------------------------------------------------------------
def bridge_env(key: str):
    """The bridge environment the R package registered under ``key``."""
    with _converter():
        return _r()[3]["bridge_env"](key)


@contextmanager
def _collect_messages():
    """Python warnings and gcnmops log lines of one call, to be re-raised in R as warning()/message()."""
    messages: list[str] = []
    warned: list[str] = []

    class _Handler(logging.Handler):
        def emit(self, record):
            text = record.getMessage()
            if text not in messages:  # once per call (stages may log the same fallback line)
                messages.append(text)

    handler = _Handler(level=logging.INFO)
    old_level = log.level
    log.addHandler(handler)
    if log.getEffectiveLevel() > logging.INFO:
        log.setLevel(logging.INFO)
    old_propagate = log.propagate
    log.propagate = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield messages, warned
        for w in caught:
            # the engine's own warnings (cn.mops's: RuntimeWarning/UserWarning), not libraries' deprecations
            if not issubclass(w.category, (RuntimeWarning, UserWarning)) or "rpy2" in str(w.filename):
                continue
            text = str(w.message)
            if text not in warned:
                warned.append(text)
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
        log.propagate = old_propagate


@contextmanager
def _threads(parallel):
    """cn.mops's ``parallel`` (cores; 0 = default) -> numba's thread count for the call."""
    if not parallel or parallel <= 0:
        yield
        return
    import numba

    old = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(parallel), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(old)


def _params_from_r(plist, method: str = "cn.mops") -> CnMopsParams:
    kw = {}
    for rname, pyname in _R_ARGS.items():
        v = _get(plist, rname)
        if v is None:
            continue
        if rname in ("I",):
            kw[pyname] = tuple(float(x) for x in r_array(v)) if v.typeof != _r()[0].RTYPES.STRSXP else list(v)
        elif rname == "classes":
            kw[pyname] = tuple(_strings(v))
        else:
            kw[pyname] = _scalar(v)
    seg = {}
    seg_list = _get(plist, "segment_args")
    if seg_list is not None and len(seg_list):
        for name, value in zip(list(seg_list.names), seg_list):
            if name not in _SEGMENT_ARGS:
                raise InputError(f"Unknown argument '{name}' for the segmentation (known: "
                                 f"{', '.join(_SEGMENT_ARGS)}).")
            seg[_SEGMENT_ARGS[name]] = _scalar(value)
    if isinstance(kw.get("norm"), bool):
        kw["norm"] = int(kw["norm"])
    for name in ("cyc", "norm", "min_width"):
        if isinstance(kw.get(name), float) and float(kw[name]).is_integer():
            kw[name] = int(kw[name])
    return CnMopsParams(method=method, segment_args=seg, **kw).validated()


def _count_data_from_env(env) -> CountData:
    x = r_array(_get(env, "X"))
    if x.dtype != np.float64:
        raise InputError("internal: the bridge's count matrix must be double")
    names = _strings(_get(env, "sampleNames"))
    ranges = None
    codes = _get(env, "chr_index")
    if codes is not None:
        levels = np.asarray(_strings(_get(env, "chr_levels")), dtype=object)
        ranges = pd.DataFrame({"seqnames": levels[r_array(codes) - 1],
                               "start": r_array(_get(env, "start")).astype(np.int64),
                               "end": r_array(_get(env, "end")).astype(np.int64)})
    min_samples = int(_scalar(_get(env, "min_samples")) or 2)
    return make_count_data(x, names, ranges, min_samples=min_samples)


def _model_output_from_env(env, keep_post: bool):
    from .model.spec import ModelOutput

    post = _get(env, "posteriorProbs") if keep_post else None
    return ModelOutput(lam=r_array(_get(env, "L")), alpha=r_array(_get(env, "A")),
                       sini=r_array(_get(env, "localAssessments")), cn=r_array(_get(env, "cn")).view(np.int8),
                       ini=r_array(_get(env, "iniCall")), post=None if post is None else r_array(post))


def _run_mops_accepts_out() -> bool:
    from .pipeline.cnmops import run_mops

    return "out" in inspect.signature(run_mops).parameters


def _put_into(dest: np.ndarray, src: np.ndarray | None) -> bool:
    """Copy ``src`` into the R-allocated ``dest`` unless it already is that memory; True if copied."""
    if src is None:
        return False
    src = np.asarray(src)
    if src.ctypes.data == dest.ctypes.data and src.shape == dest.shape:
        return False
    np.copyto(dest, src.reshape(dest.shape, order="F") if src.shape != dest.shape else src)
    return True


def _codes(values, levels) -> np.ndarray:
    """1-based positions of ``values`` in ``levels`` (int32)."""
    idx = pd.Index(list(levels)).get_indexer(pd.Index(np.asarray(values, dtype=object)))
    if (idx < 0).any():
        raise RuntimeError("internal: a value is not among the known levels")
    return (idx + 1).astype(np.int32)


def _label_codes(values, classes) -> np.ndarray | None:
    """0-based class indices of labels (None when no label is set, -1 never)."""
    vals = pd.Series(values, dtype=object)
    if vals.isna().all():
        return None
    idx = pd.Index(list(classes)).get_indexer(vals.fillna("\0"))
    return np.where(idx < 0, np.iinfo(np.int32).min, idx).astype(np.int32)


def _segments_into_env(env, prefix: str, frame: pd.DataFrame, chr_levels, samples, classes) -> None:
    env[prefix + "chr"] = _int_vec(_codes(frame["seqnames"].astype(str), chr_levels))
    env[prefix + "start"] = _int_vec(frame["start"].to_numpy())
    env[prefix + "end"] = _int_vec(frame["end"].to_numpy())
    env[prefix + "sample"] = _int_vec(_codes(frame["sampleName"].astype(str), samples))
    env[prefix + "median"] = _dbl_vec(frame["median"].to_numpy(dtype=np.float64))
    env[prefix + "mean"] = _dbl_vec(frame["mean"].to_numpy(dtype=np.float64))
    cn = _label_codes(frame["CN"].to_numpy(dtype=object), classes)
    if cn is not None:
        env[prefix + "CN"] = _int_vec(cn)


def _tables_into_env(env, result: CNVDetectionResult, chr_levels, samples) -> None:
    """segmentation, cnvs (prefix seg_/cnv_) and cnvr (cnvr_) as plain vectors in ``env``."""
    classes = result.classes
    for prefix, frame in (("seg_", result.segmentation), ("cnv_", result.cnvs)):
        env[prefix + "n"] = _int_vec([len(frame)])
        if len(frame):
            _segments_into_env(env, prefix, frame, chr_levels, samples, classes)
    cnvr = result.cnvr
    if "sampleName" in cnvr.columns:  # singlecn.mops: the CNV regions are the CNVs themselves
        env["cnvr_kind"] = _str_vec(["segments"])
        env["cnvr_n"] = _int_vec([len(cnvr)])
        if len(cnvr):
            _segments_into_env(env, "cnvr_", cnvr, chr_levels, samples, classes)
        return
    env["cnvr_columns"] = _str_vec([c for c in cnvr.columns if c not in ("seqnames", "start", "end")])
    env["cnvr_n"] = _int_vec([len(cnvr)])
    if len(cnvr):
        env["cnvr_chr"] = _int_vec(_codes(cnvr["seqnames"].astype(str), chr_levels))
        env["cnvr_start"] = _int_vec(cnvr["start"].to_numpy())
        env["cnvr_end"] = _int_vec(cnvr["end"].to_numpy())
        cols = [c for c in cnvr.columns if c not in ("seqnames", "start", "end")]
        codes = [_label_codes(cnvr[c].to_numpy(dtype=object), classes) for c in cols]
        if any(c is not None for c in codes):
            na = np.full(len(cnvr), np.iinfo(np.int32).min, dtype=np.int32)
            env["cnvr_CN"] = _int_vec(np.concatenate([na if c is None else c for c in codes]))


def _r_names(message: str) -> str:
    """An engine message with cn.mops's argument names (size_factor -> sizeFactor, ...) for R users."""
    for rname, pyname in {**_R_ARGS, **_SEGMENT_ARGS}.items():
        if "_" in pyname:
            message = re.sub(rf"\b{pyname}\b", rname, message)
    return message


def run_from_r(key: str, method: str = "cn.mops") -> dict:
    """Engine side of ``gcn.mops()`` / ``exomegcn.mops()``: run on the bridge environment ``key``.

    Reads ``X`` (double matrix, viewed in place), the regions and the parameters; writes the model's
    outputs into the R-allocated ``L``, ``A``, ``localAssessments``, ``iniCall``, ``cn`` (raw: class
    index per region and sample), ``posteriorProbs``; copies the normalized data and the individual
    calls into ``normalizedData`` / ``individualCall``; puts ``cov`` and the segment tables into the
    environment. Returns ``{"error": msg}`` for bad input, else timings, messages, warnings and the
    data addresses the engine used (hex strings, for the zero-copy test).
    """
    try:
        with _collect_messages() as (messages, warned):
            out = _run_from_r(key, method)
        out.update(messages=messages, warnings=warned)
        return out
    except InputError as e:
        return {"error": _r_names(str(e))}


def _run_from_r(key: str, method: str) -> dict:
    from .pipeline.cnmops import run_mops

    t0 = time.perf_counter()
    env = bridge_env(key)
    plist = _get(env, "args")
    params = _params_from_r(plist, method)
    data = _count_data_from_env(env)
    backend = str(_scalar(_get(env, "backend")) or "auto")
    devices = _get(env, "devices")
    fit_options = {} if devices is None else {"devices": [int(d) for d in r_array(devices)]}
    parallel = _scalar(_get(plist, "parallel")) or 0
    out = _model_output_from_env(env, params.return_posterior)
    zero_copy = _run_mops_accepts_out()
    t1 = time.perf_counter()
    with _threads(parallel), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Normalization might not be applicable")  # R warns itself
        if zero_copy:
            result = run_mops(data, params, backend=backend, out=out, **fit_options)
        else:  # an engine without the out= hook: same results, one copy of each output into R memory
            result = run_mops(data, params, backend=backend)
    t2 = time.perf_counter()
    copied = []
    for name, dest, src in (("L", out.lam, result.params["L"]), ("A", out.alpha, result.params["A"]),
                            ("localAssessments", out.sini, result.local_assessments),
                            ("iniCall", out.ini, result.ini_call), ("cn", out.cn, result.cn_index),
                            ("posteriorProbs", out.post, result.posterior_probs)):
        if dest is not None and _put_into(dest, src):
            copied.append(name)
    nd = _get(env, "normalizedData")
    if nd is not None and _put_into(r_array(nd), result.normalized_data):
        copied.append("normalizedData")
    if _put_into(r_array(_get(env, "individualCall")), result.individual_call):
        copied.append("individualCall")
    env["cov"] = _dbl_vec(np.asarray(result.params["cov"], dtype=np.float64))
    chr_levels = _strings(_get(env, "chr_levels"))
    _tables_into_env(env, result, chr_levels, data.sample_names)
    addresses = {
        "X": hex(r_address(_get(env, "X"))), "X_engine": hex(data.counts.ctypes.data),
        "L": hex(result.params["L"].ctypes.data), "A": hex(result.params["A"].ctypes.data),
        "localAssessments": hex(result.local_assessments.ctypes.data),
        "iniCall": hex(result.ini_call.ctypes.data), "cn": hex(result.cn_index.ctypes.data),
    }
    if result.posterior_probs is not None:
        addresses["posteriorProbs"] = hex(result.posterior_probs.ctypes.data)
    t3 = time.perf_counter()
    bridge = {"bridge_in": t1 - t0, "pipeline": t2 - t1, "bridge_out": t3 - t2}
    return {"timings": {k: float(v) for k, v in result.timings.items()}, "bridge": bridge,
            "addresses": addresses, "copied": copied, "version": VERSION}


def address_in_env(key: str, name: str) -> dict:
    """Hex data address of ``name`` in the bridge environment ``key`` (for the R zero-copy test)."""
    v = _get(bridge_env(key), name)
    return {"address": hex(r_address(v)) if v is not None else ""}


def normalize_from_r(key: str) -> dict:
    """Engine side of the R ``normalizeChromosomes()`` / ``normalizeGenome()``: ``X`` (double matrix,
    viewed in place), ``chr`` (character; NULL: normalizeGenome), ``normType``, ``sizeFactor``, ``qu``, ``quSizeFactor``,
    ``ploidy`` (or NULL) -> the normalized matrix written into R's ``out`` (same shape)."""
    from .normalization.cpu import normalize_chromosomes, normalize_genome

    try:
        with _collect_messages() as (messages, warned):
            env = bridge_env(key)
            x = r_array(_get(env, "X"))
            chrom = _get(env, "chr")
            ploidy = _get(env, "ploidy")
            kw = dict(norm_type=str(_scalar(_get(env, "normType"))),
                      size_factor=str(_scalar(_get(env, "sizeFactor"))), qu=float(_scalar(_get(env, "qu"))),
                      qu_size_factor=float(_scalar(_get(env, "quSizeFactor"))),
                      ploidy=None if ploidy is None else np.asarray(r_array(ploidy), dtype=np.float64))
            if chrom is None:
                res = normalize_genome(x, **kw)
            else:
                res = normalize_chromosomes(x, np.asarray(_strings(chrom), dtype=object), **kw)
            _put_into(r_array(_get(env, "out")), res)
        return {"messages": messages, "warnings": warned}
    except InputError as e:
        return {"error": _r_names(str(e))}


def integer_from_r(key: str, backend: str = "cpu") -> dict:
    """Engine side of the R ``calcIntegerCopyNumbers()``: the result object ``object`` in the bridge
    environment (viewed through :func:`from_r`) -> class indices of the segments' (``seg_CN``), the
    CNVs' (``cnv_CN``) and the CNV regions' (``cnvr_CN``, regions x samples) integer copy numbers."""
    from .calls.integer import calc_integer_copy_numbers

    try:
        with _collect_messages() as (messages, warned):
            env = bridge_env(key)
            result = from_r(_get(env, "object"))
            res = calc_integer_copy_numbers(result, backend=backend)
            classes = res.classes
            env["seg_CN"] = _int_vec(_label_codes(res.segmentation["CN"].to_numpy(dtype=object), classes))
            env["cnv_CN"] = _int_vec(_label_codes(res.cnvs["CN"].to_numpy(dtype=object), classes))
            cols = [res.cnvr[s].to_numpy(dtype=object) for s in res.sample_names]
            env["cnvr_CN"] = _int_vec(np.concatenate([_label_codes(c, classes) for c in cols]))
        return {"messages": messages, "warnings": warned}
    except InputError as e:
        return {"error": _r_names(str(e))}


def run_family_from_r(key: str, function: str) -> dict:
    """Engine side of the R wrappers of the family's other entry points (``haplo_cn_mops``,
    ``reference_cn_mops``, ``single_cn_mops``): runs ``gcnmops.<function>`` on a zero-copy view of ``X``
    (``controls``: a second bridge environment for referencecn.mops) with the arguments in ``args``
    (cn.mops's names) and hands the result to R through :func:`_result_into_env` (each output copied
    once, into an R-allocated array; these entry points have no preallocated-output path yet)."""
    import gcnmops

    try:
        with _collect_messages() as (messages, warned):
            env = bridge_env(key)
            fn = getattr(gcnmops, function, None)
            if fn is None or not function.endswith("cn_mops"):
                raise InputError(f"This gcnmops engine has no {function}(); update the Python package gcnmops.")
            plist = _get(env, "args")
            kw = {}
            for rname, value in zip(list(plist.names), plist):
                if _is_null(value):
                    continue
                if rname == "segment_args":
                    for sname, svalue in zip(list(value.names) if len(value) else [], value):
                        if sname not in _SEGMENT_ARGS:
                            raise InputError(f"Unknown argument '{sname}' for the segmentation (known: "
                                             f"{', '.join(_SEGMENT_ARGS)}).")
                        kw[_SEGMENT_ARGS[sname]] = _scalar(svalue)
                elif rname in ("I",):
                    kw["I"] = tuple(float(v) for v in r_array(value))
                elif rname == "classes":
                    kw["classes"] = tuple(_strings(value))
                elif rname in _R_ARGS:
                    kw[_R_ARGS[rname]] = _scalar(value)
                elif rname == "verbose":
                    kw["verbose"] = _scalar(value)
            parallel = kw.pop("parallel", 0) or 0
            if isinstance(kw.get("norm"), bool):
                kw["norm"] = int(kw["norm"])
            kw["backend"] = str(_scalar(_get(env, "backend")) or "auto")
            data = _count_data_from_env(env)
            controls = _get(env, "controls")
            with _threads(parallel):
                if controls is not None:
                    result = fn(data, _count_data_from_env(controls), **kw)
                else:
                    result = fn(data, **kw)
            _result_into_env(env, result)
        return {"messages": messages, "warnings": warned,
                "timings": {k: float(v) for k, v in result.timings.items()}}
    except InputError as e:
        return {"error": _r_names(str(e))}


_ENGINE_CALLS = ("run_from_r", "normalize_from_r", "integer_from_r", "run_family_from_r", "address_in_env",
                 "engine_info")


def _to_r_value(value):
    """A plain Python value (dict, list, str, number, bool, None) -> R (named list, vectors, NULL)."""
    ri, ro, _, _ = _r()
    if value is None:
        return ri.NULL
    if isinstance(value, dict):
        with _converter():
            lst = ro.vectors.ListVector.from_length(len(value))
            for i, v in enumerate(value.values()):
                lst[i] = _to_r_value(v)
            if value:
                lst.names = _str_vec([str(k) for k in value])
        return lst
    if isinstance(value, (bool, np.bool_)):
        return ri.BoolSexpVector([bool(value)])
    if isinstance(value, str):
        return _str_vec([value])
    if isinstance(value, (int, float, np.integer, np.floating)):
        return _dbl_vec([float(value)])
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, str) for v in value):
            return _str_vec(list(value))
        return _to_r_value({str(i): v for i, v in enumerate(value)})
    raise TypeError(f"no R value for {type(value).__name__}")


def _host_dispatch(fun, key, *args):
    """R's way into the engine: the R package calls this (an rpy2 callback) for every engine call."""
    name = str(fun[0])
    if name not in _ENGINE_CALLS:
        return _to_r_value({"error": f"unknown engine call {name}"})
    try:
        py_args = [_scalar(a) for a in args]
        out = globals()[name](str(key[0]), *py_args)
    except Exception as e:  # noqa: BLE001 - a bug, not bad input: R gets the error with where it happened
        import traceback

        where = "".join(traceback.format_exception(e)[-3:]).strip()
        out = {"error": f"gcnmops engine failure in {name}: {type(e).__name__}: {e}\n{where}"}
    return _to_r_value(out)


_hook = None


def attach(force: bool = False) -> None:
    """Register the engine callback in the R package gcn.mops (the way R calls the engine).

    Python users whose R code (run through rpy2) calls gcn.mops need this once; :func:`to_r` and
    :func:`from_r` call it. ``force``: register even when R was not started by this Python (what the R
    package does after starting Python with reticulate).
    """
    global _hook
    ri, ro, _, _ = _r()
    with _converter():
        if not force and not bool(ro.r("function() gcn.mops:::.python_host()")()[0]):
            return
        if _hook is None:
            _hook = ri.rternalize(_host_dispatch)
        ro.r('function(f) assign("host_hook", f, envir = getNamespace("gcn.mops")$.state)')(_hook)


def engine_info(key: str) -> dict:
    """Versions and capabilities of the engine (for the R ``gcnmopsEngine()``)."""
    import sys

    import numba

    import gcnmops
    from .cuda.probe import gpu_available

    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet
        layer = ""
    return {"python": sys.executable, "gcnmops": gcnmops.__version__, "numpy": np.__version__,
            "numba": numba.__version__, "threads": numba.get_num_threads(), "threading_layer": layer,
            "gpu": bool(gpu_available())}


# --------------------------------------------------------------------------------------------
# Python -> R
# --------------------------------------------------------------------------------------------
def _alloc(rtype: str, dims, dimnames=None):
    ri, ro, _, fns = _r()
    with _converter():
        dn = ri.NULL if dimnames is None else ro.vectors.ListVector.from_length(len(dimnames))
        if dimnames is not None:
            for i, d in enumerate(dimnames):
                dn[i] = ri.NULL if d is None else _str_vec(d)
        return fns["alloc"](rtype, _int_vec(list(dims)), dn)


def _r_copy(array: np.ndarray, rtype: str = "double", dimnames=None):
    """A new R vector/matrix/array holding ``array`` (one copy, into memory allocated by R)."""
    array = np.asarray(array)
    r = _alloc(rtype, array.shape if array.ndim else (1,), dimnames)
    view = r_array(r)
    view[...] = array.reshape(view.shape, order="F") if array.shape != view.shape else array
    return r


def _params_to_r(params: dict, sample_names: list[str], region_names, norm2: bool):
    """The params list with cn.mops's names and types (cov, L, A as R vectors/matrices)."""
    ri, ro, _, _ = _r()
    items = []
    for k, v in params.items():
        if k in ("L", "A"):
            items.append((k, _r_copy(np.asarray(v, dtype=np.float64),
                                     dimnames=(region_names or None, list(params["classes"])))))
        elif k == "cov":
            r = _r_copy(np.asarray(v, dtype=np.float64))
            if norm2:
                r.names = _str_vec(sample_names)
            items.append((k, r))
        elif k == "SegmentationParams":
            vals = list(v.values()) if isinstance(v, dict) else list(v or [])
            items.append((k, _str_vec([str(x) for x in vals])))
        elif isinstance(v, bool) or isinstance(v, np.bool_):
            items.append((k, ri.BoolSexpVector([bool(v)])))
        elif isinstance(v, str):
            items.append((k, _str_vec([v])))
        elif isinstance(v, (list, tuple, np.ndarray)):
            vals = list(v)
            if vals and all(isinstance(x, str) for x in vals):
                items.append((k, _str_vec(vals)))
            else:
                items.append((k, _dbl_vec(np.asarray(vals, dtype=np.float64))))
        elif v is None:
            items.append((k, ri.NULL))
        else:
            items.append((k, _dbl_vec([float(v)])))
    with _converter():
        lst = ro.vectors.ListVector.from_length(len(items))
        for i, (_, v) in enumerate(items):
            lst[i] = v
        lst.names = _str_vec([k for k, _ in items])
    return lst


def _result_into_env(env, result: CNVDetectionResult) -> None:
    """Fill a bridge environment from a Python result (the layout ``.build_result`` reads)."""
    ri = _r()[0]
    gr = result.gr
    m, n_samples = result.local_assessments.shape
    samples = list(result.sample_names)
    chrom = gr["seqnames"].astype(str).to_numpy(dtype=object)
    levels = list(pd.unique(chrom))
    matrix_input = not result.region_names
    rn = None if matrix_input else list(result.region_names)
    env["input_type"] = _str_vec(["DataMatrix" if matrix_input else "GRanges"])
    env["chr_levels"] = _str_vec(levels)
    env["chr_index"] = _int_vec(_codes(chrom, levels))
    env["start"] = _int_vec(gr["start"].to_numpy())
    env["end"] = _int_vec(gr["end"].to_numpy())
    env["sampleNames"] = _str_vec(samples)
    env["rownames"] = ri.NULL if rn is None else _str_vec(rn)
    env["normalizedData"] = _r_copy(result.normalized_data, dimnames=(rn, samples))
    env["localAssessments"] = _r_copy(result.local_assessments, dimnames=(rn, samples))
    env["individualCall"] = _r_copy(result.individual_call, dimnames=(None, samples))
    ini = _r_copy(np.asarray(result.ini_call, dtype=np.float64))
    if rn is not None:
        ini.names = _str_vec(rn)
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
    _tables_into_env(env, result, levels, samples)


def to_r(result: CNVDetectionResult):
    """The R ``CNVDetectionResult`` S4 object (an rpy2 object) of a Python result.

    Built by the R package gcn.mops's builder, so it is the very object ``gcn.mops()`` returns in R
    (cn.mops's class when cn.mops is installed). Each matrix is copied once, into memory allocated by
    R. Needs R, rpy2 and the installed R package (``R CMD INSTALL r_package/gcn.mops``).
    """
    _, _, _, fns = _r()
    _attach_quietly()
    with _converter():
        env = fns["new_env"]()
        _result_into_env(env, result)
        return fns["build_result"](env)


def _attach_quietly() -> None:
    try:
        attach()
    except Exception:  # noqa: BLE001 - the R package may be missing: to_r says so itself, from_r does not need it
        pass


def _table_from_r(t, samples=None) -> pd.DataFrame | None:
    if t is None:
        return None
    seq = np.repeat(np.asarray(_strings(_get(t, "seq_values")), dtype=object),
                    r_array(_get(t, "seq_lengths")).astype(np.int64))
    return pd.DataFrame({"seqnames": seq, "start": r_array(_get(t, "start")).astype(np.int64),
                         "end": r_array(_get(t, "end")).astype(np.int64)})


def _segments_from_r(t, classes) -> pd.DataFrame:
    from .result import empty_segments

    frame = _table_from_r(t)
    if frame is None:
        return empty_segments()
    frame["sampleName"] = np.asarray(_strings(_get(t, "sampleName")), dtype=object)
    frame["median"] = np.array(r_array(_get(t, "median")), dtype=np.float64)
    frame["mean"] = np.array(r_array(_get(t, "mean")), dtype=np.float64)
    cn = _get(t, "CN")
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
    _, _, _, fns = _r()
    _attach_quietly()
    with _converter():
        d = fns["describe_result"](obj)
        p = _get(d, "params")
        classes = _strings(_get(p, "classes"))
        samples = _strings(_get(d, "sampleNames"))
        params = {}
        for name, v in zip(list(p.names), p):
            if _is_null(v):
                params[name] = None
            elif name in ("L", "A", "cov"):
                params[name] = r_array(v)
            elif name in ("folds",):
                params[name] = [float(x) for x in r_array(v)]
            elif name in ("classes", "SegmentationParams"):
                params[name] = _strings(v)
            else:
                params[name] = _scalar(v)
        if isinstance(params.get("SegmentationParams"), list) and not params["SegmentationParams"]:
            params["SegmentationParams"] = {}
        gr = _table_from_r(d)
        cn = r_array(_get(d, "cn"))
        if (cn == np.iinfo(np.int32).min).any():
            raise InputError("integerCopyNumber holds labels that are not among params$classes.")
        post = _get(d, "posteriorProbs")
        m = len(gr)
        matrix_input = bool((gr["seqnames"] == "undef").all() and (gr["start"].to_numpy() == np.arange(1, m + 1)).all())
        cnvr_t = _get(d, "cnvr")
        cnvr = _table_from_r(cnvr_t)
        if cnvr is None:
            from .result import empty_cnvr

            cnvr = empty_cnvr(samples)
        elif _scalar(_get(cnvr_t, "kind")) == "segments":
            cnvr = _segments_from_r(cnvr_t, classes)
        else:
            cols = _strings(_get(cnvr_t, "columns")) or list(samples)
            codes = _get(cnvr_t, "CN")
            lab = None if codes is None else r_array(codes)
            for k, s in enumerate(cols):
                cnvr[s] = None if lab is None else _labels(lab[:, k], classes)
        ini = r_array(_get(d, "iniCall"))
        return CNVDetectionResult(
            gr=gr, normalized_data=r_array(_get(d, "normalizedData")),
            local_assessments=r_array(_get(d, "localAssessments")),
            individual_call=r_array(_get(d, "individualCall")), ini_call=ini,
            cn_index=cn.astype(np.int8, order="F"), posterior_probs=None if post is None else r_array(post),
            params=params, segmentation=_segments_from_r(_get(d, "segmentation"), classes),
            cnvs=_segments_from_r(_get(d, "cnvs"), classes), cnvr=cnvr, sample_names=list(samples),
            ranged=not matrix_input,
        )


def write_rds(result: CNVDetectionResult, path) -> Path:
    """Save the R ``CNVDetectionResult`` of ``result`` with ``saveRDS`` (for the CLI's rds format)."""
    _, ro, _, _ = _r()
    obj = to_r(result)
    with _converter():
        ro.r["saveRDS"](obj, str(Path(path)))
    return Path(path)


def read_rds_result(path) -> CNVDetectionResult:
    """Read an ``.rds`` holding an R ``CNVDetectionResult`` (gcn.mops's or cn.mops's)."""
    _, ro, _, _ = _r()
    p = Path(path)
    if not p.exists():
        raise InputError(f"File not found: {p}")
    with _converter():
        obj = ro.r["readRDS"](str(p.expanduser().resolve()))
    return from_r(obj)


__all__ = ["r_array", "r_address", "to_r", "from_r", "attach", "write_rds", "read_rds_result", "run_from_r",
           "normalize_from_r", "integer_from_r", "run_family_from_r"]
