"""Stage 1, normalization: cn.mops's normalizeChromosomes / normalizeGenome on the CPU (cpu) and on the
device (gpu), both from the same host arithmetic: numba kernels (kernels), the formulas that combine their
results (factors) and the input checks (checks).

``normalize`` is the stage's entry for every path: it dispatches on the resolved backend.
"""
from __future__ import annotations

import numpy as np

from ..cuda.probe import Backend, as_backend
from .cpu import normalize_chromosomes, normalize_genome, sample_coverage


def normalize(X: np.ndarray, chr=None, *, norm_type: str = "poisson", size_factor: str = "mean", qu: float = 0.25,
              qu_size_factor: float = 0.75, backend: Backend = Backend.CPU, colsums: np.ndarray | None = None,
              timings: dict | None = None) -> np.ndarray:
    """``normalize_chromosomes`` of ``X`` (m, N) on ``backend``: the same (m, N) float64 column-major matrix.

    ``colsums`` (N,): the samples' totals over the whole genome when ``X`` is only some of its chromosomes (a
    streamed run); the GPU then takes ``X`` only where its answer cannot depend on them (arguments it covers,
    every sample with reads in ``X``), else the CPU code runs with them. ``timings``: the GPU's sub-stage
    seconds and the path taken (normalization.gpu)."""
    args = dict(norm_type=norm_type, size_factor=size_factor, qu=qu, qu_size_factor=qu_size_factor)
    if as_backend(backend) is Backend.GPU:
        from .gpu import normalize_chromosomes_gpu, supported

        if colsums is None or (supported(X, None, norm_type, size_factor) and bool((X.sum(axis=0) != 0).all())):
            return normalize_chromosomes_gpu(X, chr, timings=timings, **args)
    return normalize_chromosomes(X, chr, colsums=colsums, **args)


def normalize_in_place_on_device(Y, X: np.ndarray, blocks: list[tuple[str, int, int]], **args) -> np.ndarray | None:
    """Normalize the device copy ``Y`` of the counts ``X`` (m, N) in place on the GPU (normalization.gpu's
    ``normalize_on_device``: None when normalized there, else the host's normalized matrix, Y unmodified)."""
    from .gpu import normalize_on_device

    return normalize_on_device(Y, X, blocks, **args)


__all__ = ["normalize", "normalize_in_place_on_device", "normalize_chromosomes", "normalize_genome", "sample_coverage"]
