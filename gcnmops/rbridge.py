"""The engine side of the R package gcn.mops: the entry points R calls, and :func:`attach`.

reticulate only starts Python in the R process and runs ``attach(force=True)``: rpy2 attaches to the
running R and registers an R function (an rpy2 callback, :func:`_host_dispatch`) through which every
later call goes; no data crosses reticulate (reticulate 1.28 would also finalize its objects without
Python's lock, which rpy2 releases while R runs). R prepares a *bridge environment* - the count matrix,
the regions, the parameters, and every numeric result matrix already allocated by R with its final
dimnames (R vectors from the package's custom allocator: not zero-filled, as the engine writes every
element, and outside R's vector-heap count) - registers it under a key and calls e.g. :func:`run_from_r`
with that key. The engine views the input matrix in place (:func:`gcnmops.io.rsession.r_array`: a numpy
array over R's memory, no copy) and writes lambda, alpha, sINI, INI, the expected-class indices (a raw
matrix) and the posteriors straight into the R-allocated matrices (``run_mops(out=...)`` ->
``model.fit(out=...)``; on a GPU the device-to-host copies land in R memory). The tables (segments, CNVs,
CNV regions) go back into the environment as integer/double vectors; R builds the GRanges and the
copy-number label matrices itself, ``classes[idx + 1L]`` (the m x N one in C). When Python hosts R
(rpy2), :func:`attach` registers the same callback.

Copies that remain, by design: integer read counts are converted to double once, in R (R's integers
are 32-bit; the model reads doubles); the normalized matrix and the individual calls are computed by
the engine into its own arrays and copied once into the R matrices (``norm=0`` needs no copy: the
slot is the input matrix itself); the family's other entry points (haplo, reference, single) have no
preallocated-output path yet, so their outputs are copied once into R memory.

Python <-> R conversion of results lives in :mod:`gcnmops.outputs.robject` (``to_r``, ``write_rds``) and
:mod:`gcnmops.outputs.rresult` (``from_r``, ``read_rds_result``); rpy2 is started by
:mod:`gcnmops.io.rsession`, lazily: the rest of gcnmops works without R.
"""
from __future__ import annotations

import logging
import re
import time
import warnings
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from .data import CountData, make_count_data
from .errors import InputError
from .io.rsession import (as_scalar, as_strings, double_vector, element, int_vector, is_null, r_address, r_array,
                          r_session, string_vector)
from .outputs.robject import label_codes, result_into_env, tables_into_env
from .outputs.rresult import from_r
from .params import BY_R_NAME, PARAMETERS, VERSION, CnMopsParams, Parameter
from .result import CNVDetectionResult

log = logging.getLogger("gcnmops")


#: cn.mops segment()'s argument names -> ours
_SEGMENT_ARGS = {"alpha": "alpha", "segMedianT": "seg_median_t", "minSeg": "min_seg", "eps": "eps",
                 "delta": "delta", "maxInt": "max_int", "cyberWeight": "cyber_weight"}

_R_BRIDGE_ENV = 'function(key) get(key, envir = getNamespace("gcn.mops")$.bridge, inherits = FALSE)'


@lru_cache(maxsize=1)
def _bridge_env_fn():
    session = r_session()
    with session.conversion():
        return session.ro.r(_R_BRIDGE_ENV)


# --------------------------------------------------------------------------------------------
# R -> engine: the entry points the R package calls through reticulate
# --------------------------------------------------------------------------------------------
def bridge_env(key: str):
    """The bridge environment the R package registered under ``key``."""
    with r_session().conversion():
        return _bridge_env_fn()(key)


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
    """The validated parameters of a run from the R list ``plist`` (cn.mops's names)."""
    params, segment_args, _ = _r_arguments(plist)
    return CnMopsParams(method=method, segment_args=segment_args, **params).validated()


def _r_arguments(plist) -> tuple[dict, dict, dict]:
    """cn.mops's arguments in the R list ``plist`` (R's names; NULL: not given) as three dicts of the Python API's
    keywords: cn.mops's parameters (named through params.BY_R_NAME), the segmentation's arguments (``segment_args``:
    cn.mops's fast-segmentation names mapped; others -- DNAcopy's nperm, undo.splits, ..., and the seed R draws for
    DNAcopy -- passed on: the pipeline checks them against the segmentation used) and ``verbose``/``parallel``."""
    params, segment_args, other = {}, {}, {}
    if plist is None or is_null(plist) or not len(plist):
        return params, segment_args, other
    for rname, value in zip(list(plist.names), plist):
        if is_null(value):
            continue
        if rname == "segment_args":
            for sname, svalue in zip(list(value.names) if len(value) else [], value):
                segment_args[_SEGMENT_ARGS.get(sname, sname)] = as_scalar(svalue)
        elif rname in BY_R_NAME:
            p = BY_R_NAME[rname]
            params[p.name] = _r_value(p, value)
        elif rname in ("verbose", "parallel"):
            other[rname] = as_scalar(value)
    return params, segment_args, other


def _r_value(p: Parameter, value):
    """The R value of cn.mops's parameter ``p`` as the Python API takes it, by the row's kind: a vector of numbers
    (of strings as they are: the checks refuse them) or of labels, else a scalar (a whole-number double as an int
    where the parameter is one)."""
    if p.kind == "floats":
        if value.typeof == r_session().ri.RTYPES.STRSXP:
            return list(as_strings(value))
        return tuple(float(x) for x in r_array(value))
    if p.kind == "strings":
        return tuple(as_strings(value))
    v = as_scalar(value)
    if p.kind == "int" and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _count_data_from_env(env) -> CountData:
    x = r_array(element(env, "X"))
    if x.dtype != np.float64:
        raise InputError("internal: the bridge's count matrix must be double")
    names = as_strings(element(env, "sampleNames"))
    ranges = None
    codes = element(env, "chr_index")
    if codes is not None:
        levels = np.asarray(as_strings(element(env, "chr_levels")), dtype=object)
        ranges = pd.DataFrame({"seqnames": levels[r_array(codes) - 1],
                               "start": r_array(element(env, "start")).astype(np.int64),
                               "end": r_array(element(env, "end")).astype(np.int64)})
    min_samples = int(as_scalar(element(env, "min_samples")) or 2)
    return make_count_data(x, names, ranges, min_samples=min_samples)


def _model_output_from_env(env, keep_post: bool):
    from .model.spec import ModelOutput

    post = element(env, "posteriorProbs") if keep_post else None
    return ModelOutput(lam=r_array(element(env, "L")), alpha=r_array(element(env, "A")),
                       sini=r_array(element(env, "localAssessments")), cn=r_array(element(env, "cn")).view(np.int8),
                       ini=r_array(element(env, "iniCall")), post=None if post is None else r_array(post))


def _put_into(dest: np.ndarray, src: np.ndarray | None) -> bool:
    """Copy ``src`` into the R-allocated ``dest`` unless it already is that memory; True if copied."""
    if src is None:
        return False
    src = np.asarray(src)
    if src.ctypes.data == dest.ctypes.data and src.shape == dest.shape:
        return False
    np.copyto(dest, src.reshape(dest.shape, order="F") if src.shape != dest.shape else src)
    return True


def _r_names(message: str) -> str:
    """An engine message with cn.mops's argument names (size_factor -> sizeFactor, ...) for R users."""
    for rname, pyname in {**{p.r_name: p.name for p in PARAMETERS.values()}, **_SEGMENT_ARGS}.items():
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
    plist = element(env, "args")
    params = _params_from_r(plist, method)
    data = _count_data_from_env(env)
    backend = str(as_scalar(element(env, "backend")) or "auto")
    devices = element(env, "devices")
    fit_options = {} if devices is None else {"devices": [int(d) for d in r_array(devices)]}
    parallel = as_scalar(element(plist, "parallel")) or 0
    out = _model_output_from_env(env, params.return_posterior)
    t1 = time.perf_counter()
    with _threads(parallel), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Normalization might not be applicable")  # R warns itself
        result = run_mops(data, params, backend=backend, out=out, **fit_options)
    t2 = time.perf_counter()
    copied = []
    for name, dest, src in (("L", out.lam, result.params["L"]), ("A", out.alpha, result.params["A"]),
                            ("localAssessments", out.sini, result.local_assessments),
                            ("iniCall", out.ini, result.ini_call), ("cn", out.cn, result.cn_index),
                            ("posteriorProbs", out.post, result.posterior_probs)):
        if dest is not None and _put_into(dest, src):
            copied.append(name)
    nd = element(env, "normalizedData")
    if nd is not None and _put_into(r_array(nd), result.normalized_data):
        copied.append("normalizedData")
    if _put_into(r_array(element(env, "individualCall")), result.individual_call):
        copied.append("individualCall")
    env["cov"] = double_vector(np.asarray(result.params["cov"], dtype=np.float64))
    chr_levels = as_strings(element(env, "chr_levels"))
    tables_into_env(env, result, chr_levels, data.sample_names)
    addresses = {
        "X": hex(r_address(element(env, "X"))), "X_engine": hex(data.counts.ctypes.data),
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
    v = element(bridge_env(key), name)
    return {"address": hex(r_address(v)) if v is not None else ""}


def normalize_from_r(key: str) -> dict:
    """Engine side of the R ``normalizeChromosomes()`` / ``normalizeGenome()``: ``X`` (double matrix,
    viewed in place), ``chr`` (character; NULL: normalizeGenome), ``normType``, ``sizeFactor``, ``qu``, ``quSizeFactor``,
    ``ploidy`` (or NULL) -> the normalized matrix written into R's ``out`` (same shape)."""
    from .normalization import normalize_chromosomes, normalize_genome

    try:
        with _collect_messages() as (messages, warned):
            env = bridge_env(key)
            x = r_array(element(env, "X"))
            chrom = element(env, "chr")
            ploidy = element(env, "ploidy")
            kw = dict(norm_type=str(as_scalar(element(env, "normType"))),
                      size_factor=str(as_scalar(element(env, "sizeFactor"))), qu=float(as_scalar(element(env, "qu"))),
                      qu_size_factor=float(as_scalar(element(env, "quSizeFactor"))),
                      ploidy=None if ploidy is None else np.asarray(r_array(ploidy), dtype=np.float64))
            if chrom is None:
                res = normalize_genome(x, **kw)
            else:
                res = normalize_chromosomes(x, np.asarray(as_strings(chrom), dtype=object), **kw)
            _put_into(r_array(element(env, "out")), res)
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
            result = from_r(element(env, "object"))
            res = calc_integer_copy_numbers(result, backend=backend)
            classes = res.classes
            env["seg_CN"] = int_vector(label_codes(res.segmentation["CN"].to_numpy(dtype=object), classes))
            env["cnv_CN"] = int_vector(label_codes(res.cnvs["CN"].to_numpy(dtype=object), classes))
            cols = [res.cnvr[s].to_numpy(dtype=object) for s in res.sample_names]
            env["cnvr_CN"] = int_vector(np.concatenate([label_codes(c, classes) for c in cols]))
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
            kw = _family_kwargs(element(env, "args"))
            parallel = kw.pop("parallel", 0) or 0
            kw["backend"] = str(as_scalar(element(env, "backend")) or "auto")
            data = _count_data_from_env(env)
            controls = element(env, "controls")
            with _threads(parallel):
                if controls is not None:
                    result = fn(data, _count_data_from_env(controls), **kw)
                else:
                    result = fn(data, **kw)
            result_into_env(env, result)
        return {"messages": messages, "warnings": warned,
                "timings": {k: float(v) for k, v in result.timings.items()}}
    except InputError as e:
        return {"error": _r_names(str(e))}


def _engine_call(fn):
    """An engine entry point: Python warnings and log lines collected for R, InputError -> {"error": msg}."""
    from functools import wraps

    @wraps(fn)
    def wrapper(key: str, *args) -> dict:
        try:
            with _collect_messages() as (messages, warned):
                out = fn(bridge_env(key), *args) or {}
            out.update(messages=messages, warnings=warned)
            return out
        except InputError as e:
            return {"error": _r_names(str(e))}
    return wrapper


def _opt(env, name, convert=None):
    v = element(env, name)
    if v is None:
        return None
    v = as_scalar(v)
    return v if convert is None or v is None or isinstance(v, list) else convert(v)


@_engine_call
def segment_from_r(env) -> dict:
    """Engine side of the R ``segment()``: ``x`` (double vector, viewed in place) and cn.mops's arguments
    (``eps`` absent: not passed) -> the segments' ``start``, ``end``, ``mean``, ``median`` in the environment."""
    from .segmentation import segment

    seg_t = element(env, "segMedianT")
    kw = dict(alpha=_opt(env, "alpha", float), min_seg=_opt(env, "minSeg", float), delta=_opt(env, "delta", float),
              max_int=_opt(env, "maxInt", float), cyber_weight=_opt(env, "cyberWeight", float),
              seg_median_t=None if seg_t is None else [float(v) for v in r_array(seg_t)],
              eps=_opt(env, "eps", float))
    for name in ("min_seg", "max_int", "delta"):
        if kw[name] is not None and float(kw[name]).is_integer():
            kw[name] = int(kw[name])
    if kw["seg_median_t"] is not None and len(kw["seg_median_t"]) == 1:
        kw["seg_median_t"] = kw["seg_median_t"][0]
    seg = segment(r_array(element(env, "x")), **kw)
    env["start"] = int_vector(seg["start"].to_numpy())
    env["end"] = int_vector(seg["end"].to_numpy())
    env["mean"] = double_vector(seg["mean"].to_numpy())
    env["median"] = double_vector(seg["median"].to_numpy())
    return {}


@_engine_call
def robust_from_r(env) -> dict:
    """Engine side of the R ``makeRobustCNVR()``: the result ``object``, ``robust``, ``minWidth`` -> the new
    CNV regions (``cnvr_seqnames``, ``cnvr_start``, ``cnvr_end``) in the environment."""
    from .calls.robust import make_robust_cnvr

    result = from_r(element(env, "object"))
    min_width = _opt(env, "minWidth", float)
    res = make_robust_cnvr(result, robust=_opt(env, "robust", float),
                           min_width=int(min_width) if float(min_width).is_integer() else min_width)
    cnvr = res.cnvr
    env["cnvr_seqnames"] = string_vector(cnvr["seqnames"].astype(str).tolist())
    env["cnvr_start"] = int_vector(cnvr["start"].to_numpy())
    env["cnvr_end"] = int_vector(cnvr["end"].to_numpy())
    return {}


@_engine_call
def fractional_from_r(env) -> dict:
    """Engine side of the R ``calcFractionalCopyNumbers()``: the result ``object`` and ``segStat`` -> the labels
    of the CNV regions (``cnvr_CN``, regions x samples, column-major), CNVs (``cnv_CN``) and segments
    (``seg_CN``), in the objects' order."""
    from .calls.robust import calc_fractional_copy_numbers

    result = from_r(element(env, "object"))
    res = calc_fractional_copy_numbers(result, seg_stat=str(_opt(env, "segStat")))
    env["cnvr_CN"] = string_vector(np.concatenate([res.cnvr[s].to_numpy(dtype=object) for s in res.sample_names]))
    env["cnv_CN"] = string_vector(res.cnvs["CN"].to_numpy(dtype=object))
    env["seg_CN"] = string_vector(res.segmentation["CN"].to_numpy(dtype=object))
    return {}


@_engine_call
def count_from_r(env) -> dict:
    """Engine side of the R ``getReadCountsFromBAM()`` / ``getSegmentReadCountsFromBAM()``: ``files``,
    ``sampleNames`` (or NULL), ``refSeqNames`` (or NULL), ``WL``, ``regions`` (a list seqnames/start/end, or
    NULL: windows), ``threads`` -> ``counts`` (integer, regions x files, column-major), the regions
    (``seqnames``, ``start``, ``end``) and the header's references (``ref_names``, ``ref_lengths``)."""
    from .alignments.bam import read_bam_header
    from .alignments.counting import count_reads

    files = as_strings(element(env, "files"))
    names = element(env, "sampleNames")
    refs = element(env, "refSeqNames")
    regions = element(env, "regions")
    if regions is not None:
        regions = pd.DataFrame({"seqnames": as_strings(element(regions, "seqnames")),
                                "start": r_array(element(regions, "start")).astype(np.int64),
                                "end": r_array(element(regions, "end")).astype(np.int64)})
    threads = _opt(env, "threads", int)
    window = _opt(env, "WL", float)
    data = count_reads(files, sample_names=None if names is None else as_strings(names),
                       ref_seq_names=None if refs is None else as_strings(refs),
                       window=int(window) if window is not None and float(window).is_integer() else window,
                       regions=regions, threads=threads or None, progress=False)
    header = read_bam_header(files[0])
    env["counts"] = int_vector(np.asarray(data.counts).ravel(order="F"))
    env["seqnames"] = string_vector(data.ranges["seqnames"].astype(str).tolist())
    env["start"] = int_vector(data.ranges["start"].to_numpy())
    env["end"] = int_vector(data.ranges["end"].to_numpy())
    env["sampleNames"] = string_vector(list(data.sample_names))
    env["ref_names"] = string_vector(list(header.references))
    env["ref_lengths"] = int_vector(np.asarray(header.lengths, dtype=np.int64))
    return {}


# --------------------------------------------------------------------------------------------
# Case mode from R: buildReference(), saveReference(), loadReference(), gcn.mops(reference = ...)
# --------------------------------------------------------------------------------------------
#: references built or loaded in this session, by handle (the R object CNVReference holds the handle)
_references: dict = {}


def _family_kwargs(plist) -> dict:
    """cn.mops's arguments in the R list ``plist`` -> the Python API's keywords (:func:`_r_arguments`'s three
    dicts in one)."""
    params, segment_args, other = _r_arguments(plist)
    return {**params, **segment_args, **other}


def _reference_summary(handle: str, ref, path) -> dict:
    return {"handle": handle, "path": "" if path is None else str(path), "method": ref.method,
            "n_regions": int(ref.n_regions), "sample_names": list(ref.sample_names),
            "has_counts": ref.counts is not None, "sex_aware": bool(ref.sex_aware), "genome": ref.genome or "",
            "classes": list(ref.params.classes), "ranged": ref.ranges is not None}


def _register_reference(ref) -> str:
    handle = f"ref{len(_references) + 1}"
    while handle in _references:
        handle += "_"
    _references[handle] = ref
    return handle


def _reference_of(env):
    """The reference a CNVReference names: its handle in this session, else the store at its path."""
    from .casemode import load_reference

    handle = _opt(env, "handle", str)
    if handle and handle in _references:
        return _references[handle]
    path = _opt(env, "path", str)
    if path:
        ref = load_reference(path)
        if handle:
            _references[handle] = ref
        return ref
    raise InputError("This reference was built in another R session (or the engine was restarted) and not saved: "
                     "build it again, or save it with saveReference(ref, path) to use it across sessions.")


def _r_reference_names(fn):
    """The case-mode entry points' messages in R's words (keepCounts = TRUE, mode = "frozen", sexAware, ...)."""
    from functools import wraps

    words = ((r"keep_counts=(True|False)", lambda m: f"keepCounts = {m.group(1).upper()}"),
             (r"\bkeep_counts\b", lambda m: "keepCounts"), (r"\bsex_aware=True\b", lambda m: "sexAware = TRUE"),
             (r"\bsex_aware\b", lambda m: "sexAware"), (r"mode='(\w+)'", lambda m: f'mode = "{m.group(1)}"'),
             (r"\bgcnmops\.build_reference\b", lambda m: "buildReference()"),
             (r"call_samples\(\.\.\., integer=True\)", lambda m: "gcn.mops(..., reference = ref, integer = TRUE)"),
             (r"\bsex=", lambda m: "sex = "))

    @wraps(fn)
    def wrapper(env):
        try:
            return fn(env)
        except InputError as e:
            msg = str(e)
            for pattern, repl in words:
                msg = re.sub(pattern, repl, msg)
            raise InputError(msg) from None
    return wrapper


@_engine_call
@_r_reference_names
def reference_build_from_r(env) -> dict:
    """Engine side of the R ``buildReference()``: the cohort (``X``, viewed in place and copied when its counts
    are kept: the reference outlives the R matrix), ``method``, ``args`` (cn.mops's names), ``keepCounts``,
    ``sexAware``, ``sex``, ``genome``, ``backend``, ``path`` (or NULL) -> the reference registered under a handle
    (and saved at ``path``); returns its summary."""
    from .casemode import build_reference

    data = _count_data_from_env(env)
    keep = bool(_opt(env, "keepCounts"))
    if keep:
        data = CountData(np.array(data.counts, dtype=np.float64, order="F", copy=True), list(data.sample_names),
                         data.ranges)
    kw = _family_kwargs(element(env, "args"))
    parallel = kw.pop("parallel", 0) or 0
    kw.pop("verbose", None)
    sex = element(env, "sex")
    genome = _opt(env, "genome", str)
    with _threads(parallel):
        ref = build_reference(data, str(_opt(env, "method") or "cn.mops"), keep_counts=keep,
                              sex_aware=bool(_opt(env, "sexAware")), sex=None if sex is None else as_strings(sex),
                              genome=None if genome in (None, "", "none") else genome,
                              backend=str(_opt(env, "backend") or "auto"), **kw)
    path = _opt(env, "path", str)
    if path:
        path = ref.save(path)
    return _reference_summary(_register_reference(ref), ref, path)


@_engine_call
@_r_reference_names
def reference_save_from_r(env) -> dict:
    """Engine side of the R ``saveReference()``: the reference (``handle``/``path``) written to ``to``."""
    ref = _reference_of(env)
    path = ref.save(str(_opt(env, "to")))
    handle = _opt(env, "handle", str)
    if not handle or _references.get(handle) is not ref:
        handle = _register_reference(ref)
    return _reference_summary(handle, ref, path)


@_engine_call
@_r_reference_names
def reference_load_from_r(env) -> dict:
    """Engine side of the R ``loadReference()``: the store at ``path`` read and registered; its summary."""
    from .casemode import load_reference

    path = str(_opt(env, "path"))
    ref = load_reference(path)
    return _reference_summary(_register_reference(ref), ref, path)


@_engine_call
@_r_reference_names
def reference_call_from_r(env) -> dict:
    """Engine side of ``gcn.mops(newSamples, reference = ref, mode = ...)``: the new samples (``X``, viewed in place)
    called against the reference (``handle``/``path``) by :func:`gcnmops.call_samples` (``mode``, ``sex``,
    ``integer``, ``backend``); the result into the environment as for the family (``caseMode``: how they were
    called, a list R adds to the result's params)."""
    from .casemode import call_samples

    ref = _reference_of(env)
    data = _count_data_from_env(env)
    sex = element(env, "sex")
    parallel = _opt(env, "parallel") or 0
    with _threads(parallel):
        result = call_samples(data, ref, mode=str(_opt(env, "mode") or "frozen"),
                              sex=None if sex is None else as_strings(sex), integer=bool(_opt(env, "integer")),
                              backend=str(_opt(env, "backend") or "auto"))
    params = dict(result.params)
    extra = {k: params.pop(k) for k in ("caseMode", "sex") if k in params}
    result_into_env(env, result.replace(params=params))
    return {"caseMode": extra.get("caseMode"), "sex": [s["sex"] for s in extra["sex"]] if "sex" in extra else None,
            "timings": {k: float(v) for k, v in result.timings.items()}}


# --------------------------------------------------------------------------------------------
# Result folders and streamed counts: readResult(), gcn.mops() on DelayedArray counts
# --------------------------------------------------------------------------------------------
def _result_folder_into_env(env, folder) -> None:
    """The result written under ``folder`` (``gcnmops run``, a streamed run: its matrices loaded) into the
    environment, as :func:`result_into_env` lays it out for the R builder."""
    from .outputs.results import read_result

    result = read_result(folder)
    result_into_env(env, result if isinstance(result, CNVDetectionResult) else result.compute())


@_engine_call
def read_result_from_r(env) -> dict:
    """Engine side of the R ``readResult()``: the folder ``path`` (Parquet or TSV matrices, read by this Python)
    -> the result in the environment; returns the folder's params.json as text (``paramsJson``)."""
    folder = str(_opt(env, "path"))
    _result_folder_into_env(env, folder)
    return {"paramsJson": (Path(folder) / "params.json").read_text()}


@_engine_call
def stream_from_r(env) -> dict:
    """Engine side of ``gcn.mops()`` on counts R holds out of memory (a DelayedArray): R's ``read_block(i)`` gives
    the counts of row block ``i`` (1 .. ``n_blocks``; rows ``block_start[i]`` .. ``block_end[i]``), written one
    block at a time into the count store ``store``; :func:`gcnmops.pipeline.streaming.run_streaming` (cn.mops's
    arguments in ``args``, ``backend``) writes its result under ``outdir``, which is read into the environment."""
    from .io.store import write_count_store
    from .pipeline.streaming import run_streaming

    names = as_strings(element(env, "sampleNames"))
    levels = np.asarray(as_strings(element(env, "chr_levels")), dtype=object)
    chrom = levels[r_array(element(env, "chr_index")) - 1]
    start, end = r_array(element(env, "start")), r_array(element(env, "end"))
    read_block = element(env, "read_block")
    bounds = zip(r_array(element(env, "block_start")), r_array(element(env, "block_end")))

    def parts():
        for i, (a, b) in enumerate(bounds):
            with r_session().conversion():
                block = read_block(i + 1)
            ranges = pd.DataFrame({"seqnames": chrom[a - 1:b], "start": start[a - 1:b].astype(np.int64),
                                   "end": end[a - 1:b].astype(np.int64)})
            yield make_count_data(r_array(block), names, ranges, min_samples=1)

    store = write_count_store(parts(), str(_opt(env, "store")), names, m_hint=len(chrom))
    kw = _family_kwargs(element(env, "args"))
    parallel = kw.pop("parallel", 0) or 0
    kw.pop("verbose", None)
    outdir = str(_opt(env, "outdir"))
    with _threads(parallel):
        stored = run_streaming(store, outdir, integer=False, formats=["seg"], backend=str(_opt(env, "backend")),
                               **kw)
    _result_folder_into_env(env, outdir)
    return {"timings": {k: float(v) for k, v in stored.timings.items()}}


_ENGINE_CALLS = ("run_from_r", "normalize_from_r", "integer_from_r", "run_family_from_r", "address_in_env",
                 "engine_info", "segment_from_r", "robust_from_r", "fractional_from_r", "count_from_r",
                 "reference_build_from_r", "reference_save_from_r", "reference_load_from_r", "reference_call_from_r",
                 "read_result_from_r", "stream_from_r")
#: the traceback of the last engine failure (R: gcn.mops:::.state$last_traceback)
last_traceback = ""


def _to_r_value(value):
    """A plain Python value (dict, list, str, number, bool, None) -> R (named list, vectors, NULL)."""
    session = r_session()
    ri, ro = session.ri, session.ro
    if value is None:
        return ri.NULL
    if isinstance(value, dict):
        with session.conversion():
            lst = ro.vectors.ListVector.from_length(len(value))
            for i, v in enumerate(value.values()):
                lst[i] = _to_r_value(v)
            if value:
                lst.names = string_vector([str(k) for k in value])
        return lst
    if isinstance(value, (bool, np.bool_)):
        return ri.BoolSexpVector([bool(value)])
    if isinstance(value, str):
        return string_vector([value])
    if isinstance(value, (int, float, np.integer, np.floating)):
        return double_vector([float(value)])
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, str) for v in value):
            return string_vector(list(value))
        return _to_r_value({str(i): v for i, v in enumerate(value)})
    raise TypeError(f"no R value for {type(value).__name__}")


def _host_dispatch(fun, key, *args):
    """R's way into the engine: the R package calls this (an rpy2 callback) for every engine call."""
    name = str(fun[0])
    if name not in _ENGINE_CALLS:
        return _to_r_value({"error": f"unknown engine call {name}"})
    try:
        py_args = [as_scalar(a) for a in args]
        out = globals()[name](str(key[0]), *py_args)
    except Exception as e:  # noqa: BLE001 - a bug, not bad input: an R error (no traceback; kept for R)
        import traceback

        global last_traceback
        last_traceback = "".join(traceback.format_exception(e))
        out = {"error": f"gcnmops engine failure in {name}: {type(e).__name__}: {_r_names(str(e))}",
               "traceback": last_traceback}
    return _to_r_value(out)


_hook = None


def attach(force: bool = False) -> None:
    """Register the engine callback in the R package gcn.mops (the way R calls the engine).

    Python users whose R code (run through rpy2) calls gcn.mops need this once (e.g. before calling
    gcn.mops functions on an object made by :func:`gcnmops.outputs.robject.to_r`). ``force``: register even when
    R was not started by this Python (what the R package does after starting Python with reticulate).
    """
    global _hook
    session = r_session()
    ri, ro = session.ri, session.ro
    with session.conversion():
        if not force and not bool(ro.r("function() gcn.mops:::.python_host()")()[0]):
            return
        if _hook is None:
            _hook = ri.rternalize(_host_dispatch)
        ro.r('function(f) assign("host_hook", f, envir = getNamespace("gcn.mops")$.state)')(_hook)


def to_r(result):
    """``result`` as the R ``CNVDetectionResult`` (:func:`gcnmops.outputs.robject.to_r`), with the engine callback
    registered (:func:`attach`) so that gcn.mops's R functions (calcIntegerCopyNumbers, ...) work on it."""
    from .outputs.robject import to_r as result_to_r

    attach()
    return result_to_r(result)


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


__all__ = ["run_from_r", "normalize_from_r", "integer_from_r", "run_family_from_r", "address_in_env", "engine_info",
           "segment_from_r", "robust_from_r", "fractional_from_r", "count_from_r", "reference_build_from_r",
           "reference_save_from_r", "reference_load_from_r", "reference_call_from_r", "read_result_from_r",
           "stream_from_r", "attach", "bridge_env", "to_r"]
