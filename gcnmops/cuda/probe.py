"""Is there a usable CUDA GPU, and which backend a call runs on ("cpu", "gpu", or "auto"); the CUDA driver and the
devices' contexts started on a background thread while a command reads its input (``warm_up_gpu``)."""
from __future__ import annotations

import ctypes
import functools
import logging
import sys
import threading
from collections.abc import Sequence

from ..errors import InputError
from .runtime import simulating

log = logging.getLogger("gcnmops")

_PROBE_LOCK = threading.Lock()
_PROBED: list[bool] = []
#: the CUDA driver library by its soname (every NVIDIA driver install on Linux provides it on the loader path)
_LINUX_DRIVER = "libcuda.so.1"


def gpu_available() -> bool:
    """True when a real CUDA device can run the model here (numba-cuda and a driver); never raises.

    Probed once per process, under a lock: numba-cuda's driver initialization is not thread-safe, and
    several task threads of one Dask worker asking at once saw no GPU (seen on an H100 with 8 threads).
    While ``warm_up_gpu``'s thread holds the lock (the probe, then the devices' contexts), this waits for it."""
    with _PROBE_LOCK:
        return _probed()


def _probed() -> bool:
    """The probe's answer, probing once; the caller holds _PROBE_LOCK."""
    if not _PROBED:
        _PROBED.append(_probe_gpu())
    return _PROBED[0]


def _probe_gpu() -> bool:
    return gpu_count() > 0


def gpu_count() -> int:
    """How many CUDA devices this process sees (0 without numba-cuda, a driver, or in the simulator)."""
    try:
        if simulating() or not driver_library_loads():
            return 0
        from numba import cuda

        return len(cuda.gpus) if cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - any failure means "no usable GPU"
        return 0


@functools.cache
def driver_library_loads() -> bool:
    """False where the CUDA driver library certainly cannot be loaded (Linux without ``libcuda.so.1``): then no
    GPU is usable, and the probe answers at once instead of importing numba-cuda (~0.25-0.4 s of a CPU run with
    ``--backend auto``). True elsewhere (other systems: numba-cuda's own search decides)."""
    if not sys.platform.startswith("linux"):
        return True
    try:
        ctypes.CDLL(_LINUX_DRIVER)
    except OSError:
        return False
    return True


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


class GpuWarmup:
    """The thread of ``warm_up_gpu``; ``wait()`` before the run's first GPU work."""

    def __init__(self, thread: threading.Thread):
        self.thread = thread

    def wait(self) -> None:
        self.thread.join()


def warm_up_gpu(devices: int | Sequence[int] | str | None = None) -> GpuWarmup | None:
    """Start the GPU probe (cuInit, the device list) and the primary contexts of ``devices`` (None: device 0;
    "all"; an id or a list of ids, as the model's ``devices``) on a background thread, and return it; None where
    no GPU can be there (no driver library, the CUDA simulator), or the probe has already answered.

    What the thread does is what the run's first GPU use does anyway (``resolve_backend``, then the first context
    on each device: ~0.5 s on an H100), moved to overlap with the imports and the input read of a command; the
    driver calls release the GIL. Safe by construction:

    - numba-cuda is imported here, on the calling thread, before the thread starts: the thread imports nothing
      that the caller might be importing at the same time (imports racing on two threads can deadlock);
    - the probe's lock is taken here and released by the thread after the last context, so ``gpu_available``
      (which every backend resolution, hence every GPU path, goes through) waits for it: no CUDA call runs on two
      threads at once during the driver's start. Callers also ``wait()`` before their first GPU work;
    - a failure to open a context is logged (debug) and dropped: the contexts are retained by numba-cuda only
      when opened, so the run's own first use opens it again and raises its error where it did before.
    """
    if simulating() or not driver_library_loads() or not _PROBE_LOCK.acquire(blocking=False):
        return None
    thread = None  # the lock passes to the thread, which releases it when done: nothing probes in between
    try:
        if not _PROBED:  # else probed before: the run's contexts may be in use already
            from numba import cuda  # noqa: F401 - see above: imported before the thread starts
            thread = threading.Thread(target=_warm_up, args=(devices,), name="gcnmops-gpu-warmup", daemon=True)
            thread.start()
    except Exception:  # noqa: BLE001 - numba without its CUDA target, or no thread to be had
        thread = None
    if thread is None:
        _PROBE_LOCK.release()
        return None
    return GpuWarmup(thread)


def _warm_up(devices) -> None:
    """The thread of ``warm_up_gpu``: it starts holding _PROBE_LOCK and releases it when done."""
    try:
        if _probed():
            _open_contexts(devices)
    except Exception as err:  # noqa: BLE001 - the run's own first use raises it where it did before
        log.debug("GPU warm-up: a device context could not be opened (%s); the run opens it itself", err)
    finally:
        _PROBE_LOCK.release()


def _open_contexts(devices) -> None:
    """Retain (create) the primary context of each device named by ``devices`` that exists (not made current on
    this thread: numba-cuda and cupy make it current on the run's threads as they use it)."""
    from numba import cuda

    n = len(cuda.gpus)
    if devices is None:
        ids = [0]
    elif isinstance(devices, str):
        ids = list(range(n)) if devices == "all" else []
    elif isinstance(devices, int):
        ids = [devices]
    else:
        ids = [int(d) for d in devices]
    for d in dict.fromkeys(ids):
        if 0 <= d < n:
            cuda.gpus[d].get_primary_context()
