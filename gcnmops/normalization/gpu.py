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
their 95% quantile and the density mode, and every scaling factor, are computed on the host by factors.py, the
CPU's own code. Scaling is one IEEE multiply per value.

Two entry points: ``normalize_chromosomes_gpu`` (host matrix in, host matrix out) and ``normalize_on_device``
(the device-resident pipeline's stage: normalizes the device copy of the counts in place, nothing comes back).
Stage seconds and the path taken go into the caller's ``timings`` dict.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from ..cuda.runtime import Landing, device_copy, device_module, simulating
from .checks import check_norm_args, check_ploidy, chromosome_rows, count_matrix
from .cpu import normalize_chromosomes
from .factors import divided_by_mode, means_of_exact_sums, ratios_mode, scaling_factors
from .kernels import SILENT_BELOW

try:  # module level: the kernel's ``cuda`` must be a global (the CUDA simulator swaps module globals)
    from numba import cuda
except Exception:  # noqa: BLE001
    cuda = None

#: column sums of |counts| below this keep every partial sum exact in float64
EXACT_SUM_LIMIT = 2.0 ** 52

_KERNEL = None
_LOCK = threading.Lock()


def variance_kernel():
    """The CUDA kernel ``(Y, rows, f, out)``: out[j] = the variance-to-mean ratio of row rows[j] of Y scaled by
    f, as kernels.variance_to_mean computes it (same operation order, no FMA); one thread per row."""
    global _KERNEL
    with _LOCK:
        if _KERNEL is None:
            from ..cuda.nofma import jit_nofma
            from .kernels import row_variance_to_mean

            def _nofma_var_to_mean(Y, rows, f, out):
                """kernels.row_variance_to_mean of each row, one thread per row (no FMA)."""
                start = cuda.grid(1)
                stride = cuda.gridsize(1)
                for j in range(start, rows.shape[0], stride):
                    out[j] = row_variance_to_mean(Y, rows[j], f)

            _KERNEL = jit_nofma(_nofma_var_to_mean)
        return _KERNEL


def supported(X, chr=None, norm_type="poisson", size_factor="mean", ploidy=None) -> bool:
    """Whether ``normalize_chromosomes_gpu`` runs these arguments on the GPU (else it runs the CPU code)."""
    if size_factor != "mean" or norm_type not in ("poisson", "mean") or ploidy is not None:
        return False
    return cuda is not None


class Fallback(Exception):
    """A path the GPU version leaves to the CPU code (``normalize_device`` raises it, the matrix unmodified)."""


def normalize_chromosomes_gpu(X, chr=None, norm_type: str = "poisson", size_factor: str = "mean", qu: float = 0.25,
                              qu_size_factor: float = 0.75, ploidy=None, timings: dict | None = None) -> np.ndarray:
    """``cpu.normalize_chromosomes`` with its reductions on the GPU; the same (m, N) float64 matrix
    (column-major, in pinned memory when normalized on the GPU). Host arrays in and out; the device-resident
    pipeline uses ``normalize_on_device``. ``timings``: the caller's dict for the stage seconds (norm_*) and
    the path taken (``normalize_path``: "gpu", or "cpu" / "cpu (why)")."""
    t = {} if timings is None else timings
    args = _checked_args(norm_type, size_factor, qu, qu_size_factor, ploidy)
    if not supported(X, chr, args["norm_type"], args["size_factor"], ploidy):
        t["normalize_path"] = "cpu"
        return normalize_chromosomes(X, chr, **args)
    t0 = time.perf_counter()
    arr = np.asarray(X)
    if arr.dtype == np.float64 and arr.ndim == 2 and arr.size and arr.flags.f_contiguous:
        out = arr  # validated on the device (finite values); never modified
    else:
        out = count_matrix(X)
    blocks = chromosome_rows(chr, out.shape[0])
    check_ploidy(ploidy, out.shape[1])
    t["norm_validate"] = time.perf_counter() - t0
    if out.shape[1] == 1 or any(not isinstance(rows, slice) for _, rows in blocks):
        t["normalize_path"] = "cpu"
        return normalize_chromosomes(out, chr, **args)
    xp = device_module()
    t0 = time.perf_counter()
    Y = device_copy(out)
    t["norm_h2d"] = time.perf_counter() - t0
    try:
        normalize_device(Y, blocks, args["norm_type"], t)
    except Fallback as why:
        t["normalize_path"] = f"cpu ({why})"
        return normalize_chromosomes(out, chr, **args)
    t["normalize_path"] = "gpu"
    if xp is np:
        return Y
    t0 = time.perf_counter()
    with Landing() as landing:
        res = landing.empty(Y.shape)
        Y.get(out=res)
    t["norm_d2h"] = time.perf_counter() - t0
    return res


def normalize_on_device(Y, X: np.ndarray, blocks: list[tuple[str, int, int]], norm_type: str = "poisson",
                        size_factor: str = "mean", qu: float = 0.25, qu_size_factor: float = 0.75,
                        timings: dict | None = None) -> np.ndarray | None:
    """Normalize the device copy ``Y`` of the counts ``X`` in place (the device-resident pipeline's stage).

    ``X``: validated counts (m, N) float64 column-major (CountData.counts); ``Y``: the same values on the device
    (cupy; numpy in the simulator), column-major; ``blocks``: (name, first_row, end_row) of each chromosome
    (CountData.blocks()); ``timings``: the caller's dict for the stage seconds and ``normalize_path``. Returns
    None when Y was normalized on the GPU; otherwise (arguments or data the GPU version leaves to the CPU) the
    CPU's normalized matrix, whose values Y then holds too. Identical to
    ``cpu.normalize_chromosomes(X, chromosome names)`` either way.
    """
    t = {} if timings is None else timings
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
        except Fallback as exc:
            why = str(exc)
    t["normalize_path"] = f"cpu ({why})"
    chrom = np.repeat(np.array(names, dtype=object), [e - b for _, b, e in blocks])
    res = normalize_chromosomes(X, chrom, **args)
    Y[...] = device_module().asarray(res)
    return res


def _checked_args(norm_type, size_factor, qu, qu_size_factor, ploidy) -> dict:
    """normalize_chromosomes's argument checks (its errors); the checked arguments as its keywords."""
    norm_type, size_factor, qu, qu_size_factor = check_norm_args(norm_type, size_factor, qu, qu_size_factor)
    return dict(norm_type=norm_type, size_factor=size_factor, qu=qu, qu_size_factor=qu_size_factor, ploidy=ploidy)


# --------------------------------------------------------------------------------------------------------------
# the GPU normalization, step by step


def normalize_device(Y, blocks: list[tuple[str, slice]], norm_type: str, t: dict) -> None:
    """The GPU normalization of the device matrix Y (m, N) float64 column-major, in place; ``blocks``: (name,
    contiguous row slice) per chromosome. Raises Fallback, leaving Y unmodified, for what the CPU code decides
    (non-finite or non-whole counts, zero columns, chromosomes with at most one non-silent row, zero/NaN size
    factors, non-finite factors). Stage seconds go into ``t``."""
    xp = device_module()
    variance_kernel()  # compiled (first call) before the timed stages
    t0 = time.perf_counter()
    silent_all = _checked_silent_rows(xp, Y)
    t["norm_checks"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    factors, pending = _reduce_blocks(xp, Y, blocks, silent_all, norm_type)
    t["norm_reduce"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    factors += _poisson_factors(xp, pending)
    for chrom, _, _, f in factors:
        if not np.isfinite(f).all():
            raise Fallback(f"chromosome {chrom}: non-finite factors")
    t["norm_mode"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    _scale_device(xp, Y, factors, silent_all)
    t["norm_scale"] = time.perf_counter() - t0


def _checked_silent_rows(xp, Y):
    """The rows of Y whose every count is below 1 ((m,) bool, on the device), after the checks of the data
    the GPU version covers (finite whole numbers, column sums of |counts| below 2^52, no zero column)."""
    if not bool(xp.isfinite(Y).all()):
        raise Fallback("non-finite counts")  # the CPU code raises its InputError
    colsum_abs = xp.abs(Y).sum(axis=0)
    whole = bool(xp.all(Y == xp.floor(Y)))
    if not whole or float(colsum_abs.max()) >= EXACT_SUM_LIMIT:
        raise Fallback("counts not whole numbers below 2^52")
    if bool((Y.sum(axis=0) == 0).any()):
        raise Fallback("zero column")  # the CPU code raises its InputError
    return Y.max(axis=1) < SILENT_BELOW


def _reduce_blocks(xp, Y, blocks, silent_all, norm_type) -> tuple[list, list]:
    """Per chromosome block with a non-zero count: the size factors from the column sums of its kept rows and
    the scaling factors from them. Returns (factors [(chrom, r0, r1, f)] of normType "mean", pending
    [(chrom, r0, r1, f, ratios on the device)] of "poisson": the ratios' kernel launched, its mode to come)."""
    factors, pending = [], []
    for chrom, rows in blocks:
        r0, r1 = rows.start, rows.stop
        Yb = Y[r0:r1]
        if not bool((Yb != 0).any()):
            continue
        keep_idx = xp.flatnonzero(~silent_all[r0:r1])
        n_keep = int(keep_idx.size)
        if n_keep <= 1:
            raise Fallback(f"chromosome {chrom}: at most one non-silent row")
        sums = xp.asarray(Yb[keep_idx].sum(axis=0))
        sf = means_of_exact_sums(sums.get() if xp is not np else np.asarray(sums), n_keep)
        if (sf == 0).any() or np.isnan(sf).any():
            raise Fallback("size factor 0 or NaN")
        f = scaling_factors(sf, norm_type)
        if norm_type == "poisson":
            pending.append((chrom, r0, r1, f, _launch_ratios(xp, Y, (keep_idx + r0).astype(xp.int64), f)))
        else:
            factors.append((chrom, r0, r1, f))
    return factors, pending


def _launch_ratios(xp, Y, rows, f):
    """The variance-to-mean ratios of rows ``rows`` of Y scaled by f: a device array, filled asynchronously."""
    v = xp.empty(int(rows.size), dtype=xp.float64)
    tpb = 32 if simulating() else 256
    variance_kernel()[max(1, min(4096, (v.size + tpb - 1) // tpb)), tpb](Y, rows, xp.asarray(f), v)
    return v


def _poisson_factors(xp, pending: list) -> list:
    """The pending poisson blocks' factors divided by the density modes of their ratios: [(chrom, r0, r1, f)].
    The modes run on the host, in parallel over chromosomes (numpy releases the GIL)."""
    if not pending:
        return []
    from concurrent.futures import ThreadPoolExecutor

    ratios = [(c, r0, r1, f, v.get() if xp is not np else v) for c, r0, r1, f, v in pending]
    with ThreadPoolExecutor(max_workers=min(16, len(ratios))) as ex:
        modes = list(ex.map(lambda item: ratios_mode(item[4]), ratios))
    return [(c, r0, r1, divided_by_mode(f, mode)) for (c, r0, r1, f, _), mode in zip(ratios, modes)]


def _scale_device(xp, Y, factors: list, silent_all) -> None:
    """In place: each block's columns times its factors, its silent rows 0; waits for the device."""
    for _, r0, r1, f in factors:
        Yb = Y[r0:r1]
        Yb *= xp.asarray(f)[None, :]
        Yb[silent_all[r0:r1]] = 0.0
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()


__all__ = ["normalize_chromosomes_gpu", "normalize_on_device", "normalize_device", "supported", "Fallback",
           "variance_kernel", "EXACT_SUM_LIMIT"]
