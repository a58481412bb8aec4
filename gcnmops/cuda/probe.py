"""Is there a usable CUDA GPU, and which backend a call runs on ("cpu", "gpu", or "auto")."""
from __future__ import annotations

import functools
import logging
import threading

from ..errors import InputError
from .runtime import simulating

log = logging.getLogger("gcnmops")

_PROBE_LOCK = threading.Lock()
_PROBED: list[bool] = []


def gpu_available() -> bool:
    """True when a real CUDA device can run the model here (numba-cuda and a driver); never raises.

    Probed once per process, under a lock: numba-cuda's driver initialization is not thread-safe, and
    several task threads of one Dask worker asking at once saw no GPU (seen on an H100 with 8 threads)."""
    with _PROBE_LOCK:
        if not _PROBED:
            _PROBED.append(_probe_gpu())
        return _PROBED[0]


def _probe_gpu() -> bool:
    return gpu_count() > 0


def gpu_count() -> int:
    """How many CUDA devices this process sees (0 without numba-cuda, a driver, or in the simulator)."""
    try:
        if simulating():
            return 0
        from numba import cuda

        return len(cuda.gpus) if cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - any failure means "no usable GPU"
        return 0


BACKENDS = ("auto", "cpu", "gpu")


@functools.cache
def _log_cpu_fallback() -> None:
    log.info("No usable CUDA GPU found: running the model on the CPU backend.")


def resolve_backend(backend: str) -> str:
    """Map "auto" to "gpu" or "cpu" (one log line per process when falling back); validate the name."""
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}.")
    if backend == "auto":
        if gpu_available():
            return "gpu"
        _log_cpu_fallback()
        return "cpu"
    if backend == "gpu" and not gpu_available():
        raise InputError("backend='gpu' was requested but no usable CUDA GPU (numba-cuda + cupy) was found; "
                         "use backend='cpu' or 'auto'.")
    return backend
