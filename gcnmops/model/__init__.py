"""The per-region Poisson-mixture model: one EM source (em.py), a CPU and a GPU driver.

``fit`` picks the backend: "cpu", "gpu", or "auto" (the GPU when one is usable, else the CPU).
"""
from __future__ import annotations

import numpy as np

from ..cuda.probe import resolve_backend
from .cpu import fit_cpu
from .spec import ModelOutput, ModelSpec

def fit(x: np.ndarray, cov: np.ndarray, spec: ModelSpec, keep_post: bool = False, backend: str = "auto",
        out: ModelOutput | None = None, **gpu_options) -> ModelOutput:
    """Fit every region of ``x`` (m, N) float64 order F with coverages ``cov`` (N,)."""
    x = np.asarray(x, dtype=np.float64, order="F")
    if resolve_backend(backend) == "gpu":
        from .gpu import fit_gpu

        return fit_gpu(x, cov, spec, keep_post=keep_post, out=out, **gpu_options)
    return fit_cpu(x, cov, spec, keep_post=keep_post, out=out)


__all__ = ["fit", "fit_cpu", "ModelOutput", "ModelSpec"]
