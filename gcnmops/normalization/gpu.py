"""cn.mops's ``normalizeChromosomes`` with the heavy reductions on a CUDA GPU; bit-identical to normalization/cpu.py.

Covered (the pipeline's defaults and their neighbours): ``size_factor="mean"`` with ``norm_type`` "poisson" or
"mean", one ploidy, chromosomes in contiguous row blocks, whole-number read counts whose column sums of
absolute values stay below 2^52. Anything else, and every rare path of normalization/cpu.py (a chromosome with at most
one non-silent row, zero or non-finite factors: warnings and errors), runs the CPU code itself, so results,
warnings and errors are the CPU's.

Why identical: per chromosome block the GPU finds the silent rows (every count < 1) and sums the kept rows of
each column; for whole numbers below 2^52 every partial sum is exact, so the sums equal the CPU's
double-double sums and the host divides them with the CPU's ``ld_div``. The poisson mode's
variance-to-mean ratios run in a kernel with the CPU's operation order and no FMA contraction (IEEE-identical);
their 95% quantile and the density mode are computed on the host by exact/density.py as on the CPU. Scaling is one
IEEE multiply per value.

Two entry points: ``normalize_chromosomes_gpu`` (host matrix in, host matrix out) and ``normalize_on_device``
(the device-resident pipeline's stage: normalizes the device copy of the counts in place, nothing comes back).
"""
from __future__ import annotations

import math
import threading
import time

import numpy as np

from ..exact.density import density_mode, quantiles7
from .cpu import (NORM_TYPES, SIZE_FACTORS, _SILENT_BELOW, _check_choice, _check_prob, _check_ploidy, _chromosome_rows, _count_matrix, normalize_chromosomes)
from ..cuda.runtime import device_module, pinned_empty, simulating
from ..exact.rstats import ld_div, ld_mean

try:  # module level: the kernel's ``cuda`` must be a global (the CUDA simulator swaps module globals)
    from numba import cuda
except Exception:  # noqa: BLE001
    cuda = None

#: column sums of |counts| below this keep every partial sum exact in float64
EXACT_SUM_LIMIT = 2.0 ** 52

_KERNEL = None
_LOCK = threading.Lock()
#: the last call's stage seconds and path ("gpu", or "cpu (why)"); for benchmarks
LAST_STATS: dict = {}


def _kernel():
    global _KERNEL
    with _LOCK:
        if _KERNEL is None:
            from ..cuda.nofma import jit_nofma

            def _nofma_var_to_mean(Y, rows, f, out):
                """normalize._variance_to_mean, one thread per row (same operation order, no FMA)."""
                g = Y.shape[1]
                start = cuda.grid(1)
                stride = cuda.gridsize(1)
                for j in range(start, rows.shape[0], stride):
                    i = rows[j]
                    s = 0.0
                    for k in range(g):
                        s += Y[i, k] * f[k]
                    mean = s / g
                    corr = 0.0
                    for k in range(g):
                        corr += Y[i, k] * f[k] - mean
                    mean += corr / g
                    ss = 0.0
                    for k in range(g):
                        d = Y[i, k] * f[k] - mean
                        ss += d * d
                    out[j] = (ss / (g - 1)) / mean

            _KERNEL = jit_nofma(_nofma_var_to_mean)
        return _KERNEL


def supported(X, chr=None, norm_type="poisson", size_factor="mean", ploidy=None) -> bool:
    """Whether ``normalize_chromosomes_gpu`` runs these arguments on the GPU (else it runs the CPU code)."""
    if size_factor != "mean" or norm_type not in ("poisson", "mean") or ploidy is not None:
        return False
    return cuda is not None


def _mode_of_ratios(v: np.ndarray) -> float:
    """normalize._poisson_mode after its ratios: NaNs dropped, R's density mode from 0 to the 95% quantile."""
    v = v[~np.isnan(v)]
    if v.size < 2:
        return math.nan
    (u,) = quantiles7(v, (0.95,))
    return density_mode(v, 0.0, u, u * 100.0)


class _Fallback(Exception):
    """A path the GPU version leaves to the CPU code."""


def normalize_chromosomes_gpu(X, chr=None, norm_type: str = "poisson", size_factor: str = "mean", qu: float = 0.25,
                              qu_size_factor: float = 0.75, ploidy=None, timings: dict | None = None) -> np.ndarray:
    """``normalize.normalize_chromosomes`` with its reductions on the GPU; the same (m, N) float64 matrix
    (column-major, in pinned memory when normalized on the GPU). Host arrays in and out; the device-resident
    pipeline uses ``normalize_on_device``."""
    LAST_STATS.clear()
    t = LAST_STATS if timings is None else timings
    args = _checked_args(norm_type, size_factor, qu, qu_size_factor, ploidy)
    if not supported(X, chr, args["norm_type"], args["size_factor"], ploidy):
        t["normalize_path"] = "cpu"
        return normalize_chromosomes(X, chr, **args)
    t0 = time.perf_counter()
    arr = np.asarray(X)
    if arr.dtype == np.float64 and arr.ndim == 2 and arr.size and arr.flags.f_contiguous:
        out = arr  # validated on the device (finite values); never modified
    else:
        out = _count_matrix(X)
    blocks = _chromosome_rows(chr, out.shape[0])
    _check_ploidy(ploidy, out.shape[1])
    t["norm_validate"] = time.perf_counter() - t0
    if out.shape[1] == 1 or any(not isinstance(rows, slice) for _, rows in blocks):
        t["normalize_path"] = "cpu"
        return normalize_chromosomes(out, chr, **args)
    xp = device_module()
    t0 = time.perf_counter()
    Y = np.array(out, order="F", copy=True) if xp is np else xp.asarray(out, order="F")
    t["norm_h2d"] = time.perf_counter() - t0
    try:
        normalize_device(Y, blocks, args["norm_type"], t)
    except _Fallback as why:
        t["normalize_path"] = f"cpu ({why})"
        return normalize_chromosomes(out, chr, **args)
    t["normalize_path"] = "gpu"
    if xp is np:
        return Y
    t0 = time.perf_counter()
    res = pinned_empty(Y.shape)
    Y.get(out=res)
    t["norm_d2h"] = time.perf_counter() - t0
    return res


def normalize_on_device(Y, X: np.ndarray, blocks: list[tuple[str, int, int]], norm_type: str = "poisson",
                        size_factor: str = "mean", qu: float = 0.25, qu_size_factor: float = 0.75,
                        timings: dict | None = None) -> np.ndarray | None:
    """Normalize the device copy ``Y`` of the counts ``X`` in place (the device-resident pipeline's stage).

    ``X``: validated counts (m, N) float64 column-major (CountData.counts); ``Y``: the same values on the device
    (cupy; numpy in the simulator), column-major; ``blocks``: (name, first_row, end_row) of each chromosome
    (CountData.blocks()). Returns None when Y was normalized on the GPU; otherwise (arguments or data the GPU
    version leaves to the CPU) the CPU's normalized matrix, whose values Y then holds too. Identical to
    ``normalize.normalize_chromosomes(X, chromosome names)`` either way.
    """
    LAST_STATS.clear()
    t = LAST_STATS if timings is None else timings
    args = _checked_args(norm_type, size_factor, qu, qu_size_factor, None)
    names = [name for name, _, _ in blocks]
    rows = [(name, slice(b, e)) for name, b, e in blocks]
    why = None
    if not supported(X, None, args["norm_type"], args["size_factor"]) or X.shape[1] == 1:
        why = "arguments"
    elif len(set(names)) != len(names):
        why = "chromosome rows not contiguous"
    else:
        try:
            normalize_device(Y, rows, args["norm_type"], t)
            t["normalize_path"] = "gpu"
            return None
        except _Fallback as exc:
            why = str(exc)
    t["normalize_path"] = f"cpu ({why})"
    chrom = np.repeat(np.array(names, dtype=object), [e - b for _, b, e in blocks])
    res = normalize_chromosomes(X, chrom, **args)
    Y[...] = device_module().asarray(res)
    return res


def _checked_args(norm_type, size_factor, qu, qu_size_factor, ploidy) -> dict:
    """normalize_chromosomes's argument checks (its errors); the checked arguments as its keywords."""
    return dict(norm_type=_check_choice(norm_type, NORM_TYPES, "normType"),
                size_factor=_check_choice(size_factor, SIZE_FACTORS, "sizeFactor"),
                qu=_check_prob(qu, "qu (normQu)"), qu_size_factor=_check_prob(qu_size_factor, "quSizeFactor"),
                ploidy=ploidy)


def normalize_device(Y, blocks: list[tuple[str, slice]], norm_type: str, t: dict) -> None:
    """The GPU normalization of the device matrix Y (m, N) float64 column-major, in place; ``blocks``: (name,
    contiguous row slice) per chromosome. Raises _Fallback, leaving Y unmodified, for what the CPU code decides
    (non-finite or non-whole counts, zero columns, chromosomes with at most one non-silent row, zero/NaN size
    factors, non-finite factors). Stage seconds go into ``t``."""
    xp = device_module()
    kern = _kernel()
    t0 = time.perf_counter()
    if not bool(xp.isfinite(Y).all()):
        raise _Fallback("non-finite counts")  # the CPU code raises its InputError
    colsum_abs = xp.abs(Y).sum(axis=0)
    whole = bool(xp.all(Y == xp.floor(Y)))
    if not whole or float(colsum_abs.max()) >= EXACT_SUM_LIMIT:
        raise _Fallback("counts not whole numbers below 2^52")
    if bool((Y.sum(axis=0) == 0).any()):
        raise _Fallback("zero column")  # the CPU code raises its InputError
    silent_all = Y.max(axis=1) < _SILENT_BELOW
    t["norm_checks"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    factors = []
    pending = []
    for chrom, rows in blocks:
        r0, r1 = rows.start, rows.stop
        Yb = Y[r0:r1]
        if not bool((Yb != 0).any()):
            continue
        silent = silent_all[r0:r1]
        keep_idx = xp.flatnonzero(~silent)
        n_keep = int(keep_idx.size)
        if n_keep <= 1:
            raise _Fallback(f"chromosome {chrom}: at most one non-silent row")
        sums = xp.asarray(Yb[keep_idx].sum(axis=0))
        sums = sums.get() if xp is not np else np.asarray(sums)
        sf = np.array([ld_div(float(s), 0.0, float(n_keep))[0] for s in sums])
        if (sf == 0).any() or np.isnan(sf).any():
            raise _Fallback("size factor 0 or NaN")
        f = ld_mean(sf, sf.size) / sf
        if norm_type == "poisson":
            rows_abs = (keep_idx + r0).astype(xp.int64)
            d_f = xp.asarray(f)
            v = xp.empty(n_keep, dtype=xp.float64)
            tpb = 32 if simulating() else 256
            kern[max(1, min(4096, (n_keep + tpb - 1) // tpb)), tpb](Y, rows_abs, d_f, v)
            pending.append((chrom, r0, r1, f, v))
        else:
            factors.append((chrom, r0, r1, f))
    t["norm_reduce"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if pending:
        # the density modes on the host, in parallel over chromosomes (numpy releases the GIL)
        from concurrent.futures import ThreadPoolExecutor

        ratios = [(c, r0, r1, f, v.get() if xp is not np else v) for c, r0, r1, f, v in pending]
        with ThreadPoolExecutor(max_workers=min(16, len(ratios))) as ex:
            modes = list(ex.map(lambda item: _mode_of_ratios(item[4]), ratios))
        for (c, r0, r1, f, _), mode in zip(ratios, modes):
            if math.isfinite(mode):
                f = f / mode
            factors.append((c, r0, r1, f))
    for chrom, _, _, f in factors:
        if not np.isfinite(f).all():
            raise _Fallback(f"chromosome {chrom}: non-finite factors")
    t["norm_mode"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _, r0, r1, f in factors:
        Yb = Y[r0:r1]
        Yb *= xp.asarray(f)[None, :]
        Yb[silent_all[r0:r1]] = 0.0
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()
    t["norm_scale"] = time.perf_counter() - t0


__all__ = ["normalize_chromosomes_gpu", "normalize_on_device", "supported", "LAST_STATS"]
