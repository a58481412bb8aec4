"""segAlgorithm "DNAcopy": circular binary segmentation of sINI through R's DNAcopy (rpy2), as cn.mops does.

cn.mops adds Gaussian jitter (sd 1e-5) to every sample's sINI, segments it per chromosome with DNAcopy's
CBS (``min.width = min(minWidth, 5)``, boundary ``getbdry(eta=0.05, nperm=10000, tol=0.01,
max.ones=101)``), keeps DNAcopy's segment means (of the jittered values, rounded to 4 decimals by
DNAcopy) and takes each segment's median from the un-jittered values. The CNV calls that follow
(``calls.cnvs.call_cnvs_dnacopy``) are the fast path's (``min(minWidth, 5)`` is also the CNV width filter, as in cn.mops). Not bit-reproducible
against R (the jitter is random); ``seed`` makes our runs reproducible: it seeds numpy's Generator for
the jitter and R's RNG (DNAcopy's permutation p-values).

rpy2, R and DNAcopy are optional: they are loaded on first use (rpy2 and R through
:func:`gcnmops.io.rsession.r_session`), and their absence raises an InputError that says how to install them.
"""
from __future__ import annotations

import logging
from functools import lru_cache

import numpy as np
import pandas as pd

from ..errors import InputError
from ..exact.rstats import r_median
from ..io.rsession import r_session

log = logging.getLogger("gcnmops")

#: the R package we need (a module attribute so that tests can simulate its absence)
R_PACKAGE = "DNAcopy"
JITTER_SD = 1e-5
#: cn.mops's getbdry arguments (eta, nperm, alpha -> tol; max.ones = floor(nperm * alpha) + 1)
BDRY_ETA, BDRY_NPERM, BDRY_ALPHA = 0.05, 10000, 0.01
MAX_MIN_WIDTH = 5
_INSTALL_DNACOPY = ("`apt-get install r-bioc-dnacopy` (Debian/Ubuntu) or, in R, "
                    "`install.packages('BiocManager'); BiocManager::install('DNAcopy')`. "
                    "Or use seg_algorithm='fast' (cn.mops's default), which needs neither.")
INSTALL_HINT = (
    "segAlgorithm 'DNAcopy' runs R's Bioconductor package DNAcopy through rpy2. Install both: "
    "`pip install 'rpy2>=3.5,<3.6'` (or `pip install gcnmops[r]`), and R with DNAcopy: " + _INSTALL_DNACOPY
)
#: what to add when rpy2/R itself is missing (the session's error says how to install those)
R_PACKAGE_HINT = "segAlgorithm 'DNAcopy' also needs R's Bioconductor package DNAcopy: " + _INSTALL_DNACOPY
#: DNAcopy::segment arguments a caller may pass (Python spellings -> R names)
SEGMENT_ARGS = {
    "alpha": "alpha", "nperm": "nperm", "p_method": "p.method", "p.method": "p.method", "kmax": "kmax",
    "nmin": "nmin", "eta": "eta", "trim": "trim", "undo_splits": "undo.splits", "undo.splits": "undo.splits",
    "undo_prune": "undo.prune", "undo.prune": "undo.prune", "undo_SD": "undo.SD", "undo_sd": "undo.SD",
    "undo.SD": "undo.SD", "verbose": "verbose",
}

_R_SEGMENT = """
function(x, chrom, maploc, min_width, sbdry, seed, args) {
    if (!is.na(seed)) set.seed(seed)
    ids <- paste0("s", seq_len(ncol(x)))
    cna <- DNAcopy::CNA(x, chrom = chrom, maploc = maploc, data.type = "logratio", sampleid = ids)
    seg <- do.call(DNAcopy::segment, c(list(cna, min.width = min_width, sbdry = sbdry), args))
    o <- seg$output
    list(sample = match(o$ID, ids), chrom = as.integer(o$chrom), start = as.integer(o$loc.start),
         end = as.integer(o$loc.end), mean = as.double(o$seg.mean))
}
"""


@lru_cache(maxsize=1)
def _r_session():
    """(robjects, numpy converter, segment function) or InputError naming what is missing."""
    try:
        session = r_session()
    except InputError as err:  # rpy2 or R missing
        raise InputError(f"{err} {R_PACKAGE_HINT}") from None
    ro = session.ro
    try:
        found = bool(ro.r("requireNamespace")(R_PACKAGE, quietly=True)[0])
    except Exception as err:  # R errors while loading the namespace
        raise InputError(f"The R package {R_PACKAGE} could not be loaded in the R that rpy2 uses "
                         f"({type(err).__name__}: {err}). " + INSTALL_HINT) from err
    if not found:
        raise InputError(f"The R package {R_PACKAGE} is not installed in the R that rpy2 uses. " + INSTALL_HINT)
    return ro, session.converter(numpy=True), session.localconverter, ro.r(_R_SEGMENT)


def dnacopy_available() -> bool:
    """True when rpy2, R and DNAcopy can be loaded."""
    try:
        _r_session()
    except InputError:
        return False
    return True


@lru_cache(maxsize=4)
def _boundary(eta: float, nperm: int, alpha: float) -> np.ndarray:
    """DNAcopy::getbdry(eta, nperm, max.ones = floor(nperm * alpha) + 1, tol = alpha), as cn.mops calls it.

    For cn.mops's values (0.05, 10000, 0.01) that is DNAcopy's stored ``default.DNAcopy.bdry`` (identical;
    tests/test_segmentation_dnacopy.py checks it), loaded instead of recomputed (getbdry takes ~2.5 s)."""
    ro, converter, localconverter, _ = _r_session()
    if (eta, nperm, alpha) == (BDRY_ETA, BDRY_NPERM, BDRY_ALPHA):
        out = ro.r('local({ e <- new.env(); utils::data("default.DNAcopy.bdry", package = "DNAcopy", envir = e); '
                   'e$default.DNAcopy.bdry })')
    else:
        out = ro.r("DNAcopy::getbdry")(eta=eta, nperm=nperm, tol=alpha,
                                       **{"max.ones": int(np.floor(nperm * alpha)) + 1})
    return _copy(out, np.int32)


def _getbdry(eta: float, nperm: int, alpha: float) -> np.ndarray:
    """DNAcopy::getbdry computed (for the test of the stored boundary)."""
    ro = _r_session()[0]
    return _copy(ro.r("DNAcopy::getbdry")(eta=eta, nperm=nperm, tol=alpha,
                                          **{"max.ones": int(np.floor(nperm * alpha)) + 1}), np.int32)


def _copy(r_vector, dtype) -> np.ndarray:
    """A numpy copy of an R vector. np.asarray would view R's memory (rpy2 vectors export buffers), which R's
    garbage collector may reuse once the R object is unreferenced: NA boundaries in later DNAcopy calls."""
    return np.array(r_vector, dtype=dtype, copy=True)


def segment_args_for_r(segment_args: dict) -> dict:
    """``DNAcopy::segment``'s extra arguments (R names, ``verbose = 0`` unless given) of ``segment_args``;
    InputError naming the accepted ones for an unknown name."""
    out = {"verbose": 0}
    unknown = sorted(set(segment_args) - set(SEGMENT_ARGS))
    if unknown:
        raise InputError(f"Unknown DNAcopy segmentation argument(s) {unknown}; DNAcopy::segment takes "
                         f"{sorted(set(SEGMENT_ARGS.values()))}.")
    for k, v in segment_args.items():
        out[SEGMENT_ARGS[k]] = v
    return out


def dnacopy_segments(sini: np.ndarray, blocks: list[tuple[str, int, int]], min_width: int,
                     seed: int | None = None, segment_args: dict | None = None) -> pd.DataFrame:
    """DNAcopy CBS of every sample's jittered sINI, per chromosome, as cn.mops's ``.segmentation``.

    Returns the fast segmentation's table (``segment_columns`` layout): block, sample, start, end
    (1-based rows relative to the block), mean (DNAcopy's seg.mean of the jittered values), median (of
    the un-jittered values), ordered by block, sample, start.
    """
    ro, converter, localconverter, r_segment = _r_session()
    sini = np.asarray(sini, dtype=np.float64)
    m, n_samples = sini.shape
    rng = np.random.Generator(np.random.PCG64(seed))
    # one column of jitter per sample, in column order, as cn.mops's apply(sINI, 2, .segmentation)
    jitter = rng.normal(0.0, JITTER_SD, size=(n_samples, m)).T
    r_seed = int(rng.integers(1, 2**31 - 1)) if seed is not None else None
    x = np.asfortranarray(sini + jitter)
    chrom = np.empty(m, dtype=np.int32)
    maploc = np.empty(m, dtype=np.int32)
    for k, (_, b, e) in enumerate(blocks):
        chrom[b:e] = k + 1  # integer codes sort in block order inside DNAcopy::CNA
        maploc[b:e] = np.arange(1, e - b + 1, dtype=np.int32)
    args = segment_args_for_r(dict(segment_args or {}))
    # the boundary of the alpha, nperm and eta given: cn.mops passes that of the defaults whatever they are, and
    # DNAcopy then reads beyond it (a segmentation fault, R's session lost) for any larger alpha
    bdry = _boundary(float(args.get("eta", BDRY_ETA)), int(args.get("nperm", BDRY_NPERM)),
                     float(args.get("alpha", BDRY_ALPHA)))
    with localconverter(converter):
        res = r_segment(x, chrom, maploc, int(min_width), bdry,
                        ro.NA_Integer if r_seed is None else r_seed, ro.ListVector(args))
        cols = {name: _copy(res[name], np.float64 if name == "mean" else np.int64)
                for name in ("sample", "chrom", "start", "end", "mean")}
    block = cols["chrom"].astype(np.int64) - 1
    sample = cols["sample"].astype(np.int64) - 1
    start = cols["start"].astype(np.int64)
    end = cols["end"].astype(np.int64)
    first = np.array([b for _, b, _ in blocks], dtype=np.int64)[block]
    median = np.array([r_median(sini[f + s - 1:f + e, k]) for f, s, e, k in zip(first, start, end, sample)],
                      dtype=np.float64)
    seg = pd.DataFrame({"block": block, "sample": sample, "start": start, "end": end,
                        "mean": cols["mean"].astype(np.float64), "median": median})
    order = np.lexsort((seg["start"].to_numpy(), seg["sample"].to_numpy(), seg["block"].to_numpy()))
    return seg.iloc[order].reset_index(drop=True)


__all__ = ["dnacopy_segments", "dnacopy_available", "segment_args_for_r"]
