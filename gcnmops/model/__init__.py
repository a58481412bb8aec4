"""The per-region Poisson-mixture model: one EM source (em.py), a CPU and a GPU driver; the one-step model of
referencecn.mops / singlecn.mops (onestep.py).

``fit`` and ``fit_one_step`` run on the backend they are given, already resolved ("cpu" or "gpu"): the entry
points resolve "auto" once (cuda.probe.resolve_backend) and pass the answer down.
"""
from __future__ import annotations

import numpy as np

from .cpu import fit_cpu
from .onestep import fit_onestep
from .spec import ModelOutput, ModelSpec

#: the backends the model layer takes (resolved; "auto" is the entry points' to resolve)
RESOLVED_BACKENDS = ("cpu", "gpu")


def _check_resolved(backend: str) -> None:
    if backend not in RESOLVED_BACKENDS:
        raise ValueError(f"the model runs on a resolved backend ('cpu' or 'gpu'), got {backend!r}; "
                         "resolve it first (cuda.probe.resolve_backend)")


def fit(x: np.ndarray, cov: np.ndarray, spec: ModelSpec, keep_post: bool = False, backend: str = "cpu",
        out: ModelOutput | None = None, **gpu_options) -> ModelOutput:
    """Fit every region of ``x`` (m, N) float64 order F with coverages ``cov`` (N,) on ``backend``."""
    _check_resolved(backend)
    x = np.asarray(x, dtype=np.float64, order="F")
    if backend == "gpu":
        from .gpu import fit_gpu

        return fit_gpu(x, cov, spec, keep_post=keep_post, out=out, **gpu_options)
    return fit_cpu(x, cov, spec, keep_post=keep_post, out=out)


def fit_one_step(x, cov, lam, spec, keep_post: bool = False, backend: str = "cpu") -> ModelOutput:
    """The one-step model (lambda per region given; onestep.py) on ``backend`` ("cpu" or "gpu")."""
    _check_resolved(backend)
    if backend == "gpu":
        from .onestep_gpu import fit_onestep_gpu

        return fit_onestep_gpu(x, cov, lam, spec, keep_post=keep_post)
    return fit_onestep(x, cov, lam, spec, keep_post=keep_post)


__all__ = ["fit", "fit_one_step", "fit_cpu", "ModelOutput", "ModelSpec", "RESOLVED_BACKENDS"]
