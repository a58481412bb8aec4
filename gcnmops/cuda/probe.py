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
    try:
        if simulating():
            return False
        from numba import cuda

        return bool(cuda.is_available()) and len(cuda.gpus) > 0
    except Exception:  # noqa: BLE001 - any failure means "no usable GPU"
        return False


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
