"""The per-region Poisson-mixture model: one EM source (em.py), a CPU and a GPU driver.

``fit`` picks the backend: "cpu", "gpu", or "auto" (the GPU when one is usable, else the CPU).
"""
from __future__ import annotations

import functools
import logging

import numpy as np

from ..errors import InputError
from .cpu import fit_cpu
from .spec import ModelOutput, ModelSpec

log = logging.getLogger("gcnmops")

BACKENDS = ("auto", "cpu", "gpu")


def gpu_usable() -> bool:
    """True when numba.cuda and cupy can drive a CUDA device here (never raises)."""
    try:
        from .gpu import gpu_available
    except Exception:  # noqa: BLE001 - any import problem means "no GPU backend"
        return False
    return gpu_available()


@functools.cache
def _log_cpu_fallback() -> None:
    log.info("No usable CUDA GPU found: running the model on the CPU backend.")


def resolve_backend(backend: str) -> str:
    """Map "auto" to "gpu" or "cpu" (one log line per process when falling back); validate the name."""
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}.")
    if backend == "auto":
        if gpu_usable():
            return "gpu"
        _log_cpu_fallback()
        return "cpu"
    if backend == "gpu" and not gpu_usable():
        raise InputError("backend='gpu' was requested but no usable CUDA GPU (numba-cuda + cupy) was found; "
                         "use backend='cpu' or 'auto'.")
    return backend


def fit(x: np.ndarray, cov: np.ndarray, spec: ModelSpec, keep_post: bool = False, backend: str = "auto",
        out: ModelOutput | None = None, **gpu_options) -> ModelOutput:
    """Fit every region of ``x`` (m, N) float64 order F with coverages ``cov`` (N,)."""
    x = np.asarray(x, dtype=np.float64, order="F")
    if resolve_backend(backend) == "gpu":
        from .gpu import fit_gpu

        return fit_gpu(x, cov, spec, keep_post=keep_post, out=out, **gpu_options)
    return fit_cpu(x, cov, spec, keep_post=keep_post, out=out)


__all__ = ["fit", "fit_cpu", "resolve_backend", "gpu_usable", "ModelOutput", "ModelSpec"]
