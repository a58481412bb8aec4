"""The per-region Poisson-mixture model: one EM source (em.py), a CPU and a GPU driver; the one-step model of
referencecn.mops / singlecn.mops (onestep.py).

``fit`` and ``fit_one_step`` run on the backend they are given, already resolved (a ``cuda.probe.Backend``): the
entry points resolve "auto" once (cuda.probe.resolve_backend) and pass the answer down.
"""
from __future__ import annotations

import numpy as np

from ..cuda.probe import Backend, as_backend
from .cpu import fit_cpu
from .onestep import fit_onestep
from .spec import ModelOutput, ModelSpec


def fit(x: np.ndarray, cov: np.ndarray, spec: ModelSpec, keep_post: bool = False, backend: Backend = Backend.CPU,
        out: ModelOutput | None = None, **gpu_options) -> ModelOutput:
    """Fit every region of ``x`` (m, N) float64 order F with coverages ``cov`` (N,) on ``backend``."""
    backend = as_backend(backend)
    x = np.asarray(x, dtype=np.float64, order="F")
    if backend is Backend.GPU:
        from .gpu import fit_gpu

        return fit_gpu(x, cov, spec, keep_post=keep_post, out=out, **gpu_options)
    return fit_cpu(x, cov, spec, keep_post=keep_post, out=out)


def fit_one_step(x, cov, lam, spec, keep_post: bool = False, backend: Backend = Backend.CPU) -> ModelOutput:
    """The one-step model (lambda per region given; onestep.py) on ``backend``."""
    backend = as_backend(backend)
    if backend is Backend.GPU:
        from .onestep_gpu import fit_onestep_gpu

        return fit_onestep_gpu(x, cov, lam, spec, keep_post=keep_post)
    return fit_onestep(x, cov, lam, spec, keep_post=keep_post)


def fit_on_device(x, cov: np.ndarray, spec: ModelSpec, keep_post: bool = False, out: ModelOutput | None = None,
                  **options) -> tuple[ModelOutput, ModelOutput]:
    """The EM of a device-resident ``x`` (m, N) float64 column-major on the current GPU, no copy of ``x``: (host
    outputs, device outputs); ``options`` as model.gpu.fit_gpu_device's (chunk_rows, config, stats)."""
    from .gpu import fit_gpu_device

    return fit_gpu_device(x, cov, spec, keep_post=keep_post, out=out, **options)


def run_many(experiments, devices="all", **options) -> list[ModelOutput]:
    """Fit several independent experiments (dicts with x, cov, spec[, keep_post], or such tuples), one per GPU at a
    time (a host thread per device): their ModelOutputs in order (model.gpu.run_many)."""
    from .gpu import run_many as run_on_gpus

    return run_on_gpus(experiments, devices=devices, **options)


__all__ = ["fit", "fit_one_step", "fit_on_device", "run_many", "fit_cpu", "ModelOutput", "ModelSpec"]
