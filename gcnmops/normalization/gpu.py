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
CPU's own code. Scaling is one IEEE multiply per value. The kernels and their launches: device_kernels.py (one
launch each for the sums and checks, the ratios and the scaling, whatever the number of chromosomes).

Two entry points: ``normalize_chromosomes_gpu`` (host matrix in, host matrix out) and ``normalize_on_device``
(the device-resident pipeline's stage: normalizes the device copy of the counts in place, nothing comes back).
Stage seconds and the path taken go into the caller's ``timings`` dict.
"""
from __future__ import annotations

import time

import numpy as np

from ..cuda.runtime import Landing, device_copy, device_module
from . import device_kernels
from .checks import check_norm_args, check_ploidy, chromosome_rows, count_matrix
from .cpu import normalize_chromosomes
from .factors import divided_by_mode, means_of_exact_sums, ratios_mode, scaling_factors

try:
    from numba import cuda
except Exception:  # noqa: BLE001 - numba without its CUDA target
    cuda = None

#: column sums of |counts| below this keep every partial sum exact in float64
EXACT_SUM_LIMIT = 2.0 ** 52


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
                        timings: dict | None = None, colsums: np.ndarray | None = None) -> np.ndarray | None:
    """Normalize the device copy ``Y`` of the counts ``X`` in place (the device-resident pipeline's stage).

    ``X``: validated counts (m, N) float64 column-major (CountData.counts); ``Y``: the same values on the device
    (cupy; numpy in the simulator), column-major; ``blocks``: (name, first_row, end_row) of each chromosome
    (CountData.blocks()); ``timings``: the caller's dict for the stage seconds and ``normalize_path``. Returns
    None when Y was normalized on the GPU; otherwise (arguments or data the GPU version leaves to the CPU) the
    CPU's normalized matrix, whose values Y then holds too. Identical to
    ``cpu.normalize_chromosomes(X, chromosome names, colsums=colsums)`` either way: ``colsums`` (N,), the samples'
    totals over the whole genome when ``X`` is some of its chromosomes, matter only where a sample has no read in
    ``X``, which the GPU leaves to the CPU code ("zero column").
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
    res = normalize_chromosomes(X, chrom, colsums=colsums, **args)
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
    contiguous row slice) per chromosome, covering rows 0..m-1 in order. Raises Fallback, leaving Y unmodified, for
    what the CPU code decides (non-finite or non-whole counts, zero columns, chromosomes with at most one non-silent
    row, zero/NaN size factors, non-finite factors). Three kernel launches (device_kernels.py); the host waits
    twice: for the sums and, with normType "poisson", for the variance-to-mean ratios. Stage seconds go into ``t``:
    norm_checks (the sums and the checks), norm_reduce (size and scaling factors), norm_mode (poisson: the ratios
    and their modes), norm_scale (the scaling launched; the device has not necessarily finished it)."""
    xp = device_module()
    m = Y.shape[0]
    firsts, ends = _block_rows(blocks, m)
    t0 = time.perf_counter()
    silent = xp.empty(m, dtype=np.uint8)
    sums = device_kernels.block_sums(Y, firsts, ends, silent)
    _check_counts(sums)
    t["norm_checks"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    chosen, F = _block_factors(sums, [name for name, _ in blocks], norm_type)
    sel = device_kernels.selected(firsts[chosen], ends[chosen])
    t["norm_reduce"] = time.perf_counter() - t0
    if norm_type == "poisson" and chosen.size:
        t0 = time.perf_counter()
        F = _divided_by_modes(device_kernels.ratios(Y, sel, F, silent), sel.host_offs, F)
        t["norm_mode"] = time.perf_counter() - t0
    for b, f in zip(chosen, F):
        if not np.isfinite(f).all():
            raise Fallback(f"chromosome {blocks[b][0]}: non-finite factors")
    t0 = time.perf_counter()
    device_kernels.scale(Y, sel, F, silent)
    t["norm_scale"] = time.perf_counter() - t0


def _block_rows(blocks, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(firsts, ends) int64 of the blocks' row slices; ValueError unless they cover rows 0..m-1 in order."""
    firsts = np.array([rows.start for _, rows in blocks], dtype=np.int64)
    ends = np.array([rows.stop for _, rows in blocks], dtype=np.int64)
    if not blocks or firsts[0] != 0 or ends[-1] != m or (firsts[1:] != ends[:-1]).any() or (ends < firsts).any():
        raise ValueError("the chromosome blocks must cover the matrix's rows in order")
    return firsts, ends


def _check_counts(sums: device_kernels.BlockSums) -> None:
    """The data the GPU version covers (finite whole numbers, column sums of |counts| below 2^52, no zero column),
    in the CPU's order of checks; Fallback otherwise. Sums of the blocks' exact sums are exact (whole numbers below
    2^52), and reach 2^52 whenever the exact sums do."""
    if sums.nonfinite:
        raise Fallback("non-finite counts")  # the CPU code raises its InputError
    if sums.fractional or float(sums.abs_sums.sum(axis=0).max()) >= EXACT_SUM_LIMIT:
        raise Fallback("counts not whole numbers below 2^52")
    if (sums.sums.sum(axis=0) == 0).any():
        raise Fallback("zero column")  # the CPU code raises its InputError


def _block_factors(sums: device_kernels.BlockSums, names: list[str], norm_type: str) -> tuple[np.ndarray,
                                                                                                np.ndarray]:
    """(chosen, F): the blocks with a non-zero count (int64 indices, ascending) and their scaling factors (nsel, N)
    from the column sums of their kept rows (for "poisson", before the division by the mode). Fallback for a block
    with at most one kept row or a size factor 0 or NaN (the first such block)."""
    chosen = np.flatnonzero(sums.nonzero)
    F = np.empty((chosen.size, sums.sums.shape[1]))
    for j, b in enumerate(chosen):
        n_keep = int(sums.kept_rows[b])
        if n_keep <= 1:
            raise Fallback(f"chromosome {names[b]}: at most one non-silent row")
        sf = means_of_exact_sums(sums.kept_sums[b], n_keep)
        if (sf == 0).any() or np.isnan(sf).any():
            raise Fallback("size factor 0 or NaN")
        F[j] = scaling_factors(sf, norm_type)
    return chosen, F


def _divided_by_modes(d_ratios, offs: np.ndarray, F: np.ndarray) -> np.ndarray:
    """normType "poisson": each selected block's factors divided by the density mode of its rows' ratios (the
    device array ``d_ratios``, block j's at offs[j]:offs[j + 1], NaN for silent rows: ratios_mode drops them, as
    it drops NaN ratios). The modes run on the host, in parallel over chromosomes (numpy and the exact/ kernels
    release the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    v = d_ratios if device_module() is np else d_ratios.get()
    parts = [v[offs[j]:offs[j + 1]] for j in range(F.shape[0])]
    with ThreadPoolExecutor(max_workers=min(16, len(parts))) as ex:
        modes = list(ex.map(ratios_mode, parts))
    with np.errstate(divide="ignore", invalid="ignore"):  # a mode 0: Fallback, and the CPU code warns
        return np.array([divided_by_mode(f, mode) for f, mode in zip(F, modes)]).reshape(F.shape)


__all__ = ["normalize_chromosomes_gpu", "normalize_on_device", "normalize_device", "supported", "Fallback",
           "EXACT_SUM_LIMIT"]
