"""Is there a usable CUDA GPU, and which backend a call runs on (``Backend``: resolved once from "cpu", "gpu" or
"auto" at the entry points); the CUDA driver and the devices' primary contexts started on a background thread while a
command imports and reads (``warm_up_gpu``)."""
from __future__ import annotations

import ctypes
import functools
import logging
import sys
import threading
from collections.abc import Sequence
from enum import StrEnum

from ..errors import InputError

log = logging.getLogger("gcnmops")

_PROBE_LOCK = threading.Lock()
_PROBED: list[bool] = []
#: the CUDA driver library by its soname (every NVIDIA driver install on Linux provides it on the loader path)
_LINUX_DRIVER = "libcuda.so.1"


def gpu_available() -> bool:
    """True when a real CUDA device can run the model here (numba-cuda and a driver); never raises.

    Probed once per process, under a lock: numba-cuda's driver initialization is not thread-safe, and
    several task threads of one Dask worker asking at once saw no GPU."""
    with _PROBE_LOCK:
        if not _PROBED:
            _PROBED.append(_probe_gpu())
        return _PROBED[0]


def _probe_gpu() -> bool:
    return gpu_count() > 0


def simulating() -> bool:
    """cuda.runtime.simulating, imported when asked (this module is imported by ``--help``, which loads no numba)."""
    from .runtime import simulating

    return simulating()


def gpu_count() -> int:
    """How many CUDA devices this process sees (0 without numba-cuda, a driver, or in the simulator)."""
    try:
        if simulating() or not driver_library_loads() or why_not_numba_cuda():
            return 0
        from numba import cuda

        return len(cuda.gpus) if cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - any failure means "no usable GPU"
        return 0


@functools.cache
def why_not_numba_cuda() -> str | None:
    """Why ``numba.cuda`` is not numba-cuda's CUDA target where numba-cuda is installed (None when it is, or when
    numba-cuda is not installed at all). numba-cuda takes over ``numba.cuda`` by an import redirect that a ``.pth``
    file of its site-packages installs; where that folder is only on the path (PYTHONPATH, a bare path in another
    environment's .pth), the redirect never runs and numba's own retired CUDA target answers instead."""
    import importlib.metadata
    import importlib.util

    try:
        importlib.metadata.version("numba-cuda")
    except importlib.metadata.PackageNotFoundError:
        return None
    try:
        if importlib.util.find_spec("numba.cuda.core") is not None:
            return None
    except Exception:  # noqa: BLE001 - numba.cuda itself failed to import: not numba-cuda's target either
        pass
    return ("numba-cuda is installed but not active: numba.cuda is numba's own retired CUDA target, because "
            "numba-cuda's import redirect (its .pth file) did not run. Install numba-cuda into this environment's "
            "site-packages (pip install 'gcnmops[cuda13]' or 'gcnmops[cuda12]'), or add the folder that holds it "
            "with site.addsitedir rather than PYTHONPATH.")


@functools.cache
def driver_library_loads() -> bool:
    """False where the CUDA driver library certainly cannot be loaded (Linux without ``libcuda.so.1``): then no
    GPU is usable, and the probe answers at once instead of importing numba-cuda (a noticeable part of a CPU run
    with ``--backend auto``). True elsewhere (other systems: numba-cuda's own search decides)."""
    if not sys.platform.startswith("linux"):
        return True
    try:
        ctypes.CDLL(_LINUX_DRIVER)
    except OSError:
        return False
    return True


class Backend(StrEnum):
    """Where a run's stages execute, resolved once at the entry (``resolve_backend``) and passed down as this
    value; every stage package's entry dispatches on it (``backend is Backend.GPU``)."""

    CPU = "cpu"
    GPU = "gpu"


#: the names a user may give (``auto``: the GPU when one is usable, else the CPU)
BACKENDS = ("auto", *(b.value for b in Backend))


@functools.cache
def _log_cpu_fallback() -> None:
    log.info("No usable CUDA GPU found: running the model on the CPU backend.")


def resolve_backend(backend: str | Backend) -> Backend:
    """The Backend a user's name (or an already resolved Backend) means: "auto" is the GPU when one is usable, else
    the CPU (one log line per process); InputError for another name or for "gpu" without a usable GPU."""
    if isinstance(backend, Backend):
        return backend
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}.")
    if backend == "auto":
        if gpu_available():
            return Backend.GPU
        _log_cpu_fallback()
        return Backend.CPU
    if Backend(backend) is Backend.GPU and not gpu_available():
        why = why_not_numba_cuda() if driver_library_loads() else None
        raise InputError("backend='gpu' was requested but no usable CUDA GPU (numba-cuda + cupy) was found"
                         + (f": {why}" if why else "; use backend='cpu' or 'auto'."))
    return Backend(backend)


def may_use_gpu(backend: str | Backend) -> bool:
    """Whether a user's backend name, before it is resolved, may run on a GPU ("auto" or "gpu")."""
    return backend in ("auto", Backend.GPU)


def as_backend(backend: str | Backend) -> Backend:
    """A resolved backend as the typed value (a stage entry's argument may come as its name "cpu"/"gpu");
    ValueError for "auto" or anything else: the entry points resolve it first (``resolve_backend``)."""
    try:
        return Backend(backend)
    except ValueError:
        raise ValueError(f"a stage runs on a resolved backend ('cpu' or 'gpu'), got {backend!r}; resolve it first "
                         "(cuda.probe.resolve_backend)") from None


class GpuWarmup:
    """The thread of ``warm_up_gpu``; ``wait()`` before the run's first GPU work."""

    def __init__(self, thread: threading.Thread):
        self.thread = thread

    def wait(self) -> None:
        self.thread.join()


def warm_up_gpu(devices: int | Sequence[int] | str | None = None) -> GpuWarmup | None:
    """Start the CUDA driver (cuInit) and create the primary context of each of ``devices`` (None: device 0;
    "all"; an id or a list of ids, as the model's ``devices``) on a background thread, and return it; None where no
    GPU can be there (no driver library, the CUDA simulator) or cuda-python's driver binding is missing.

    This is the costly part of the run's first GPU use (the probe and the first context), moved
    to overlap with the imports and the input read of a command. Safe by construction:

    - the thread makes raw driver calls only (cuda-python's ``cuda.bindings.driver``, which releases the GIL): it
      creates no numba-cuda or cupy object, so numba-cuda's own start (the probe, its Device and Context objects)
      runs on the caller's threads exactly as without the warm-up, and finds the driver started and the contexts
      made (the driver counts the thread's retain: the contexts stay until the process ends);
    - it imports nothing: the binding, the driver library and its entry points are loaded here (the first driver
      call loads them all), on the calling thread, before it starts (imports racing on two threads can deadlock);
    - the CUDA driver API is thread-safe, and callers ``wait()`` before their first GPU work anyway;
    - a failure is logged (debug) and dropped: the run's own first use meets it again and reports it as before
      (no GPU for ``--backend auto``, the InputError of ``--backend gpu``, a context that cannot be created).
    """
    if not driver_library_loads() or simulating():
        return None
    try:
        from cuda.bindings import driver

        _driver_call(driver, "cuDriverGetVersion")  # loads the driver library and its entry points here
    except Exception as err:  # noqa: BLE001 - no binding, or a driver it cannot use: the run's probe decides
        log.debug("GPU warm-up not started: %s", err)
        return None
    thread = threading.Thread(target=_start_driver, args=(driver, devices), name="gcnmops-gpu-warmup", daemon=True)
    thread.start()
    return GpuWarmup(thread)


def warm_up_for(backend: str | Backend, devices: int | Sequence[int] | str | None = None) -> GpuWarmup | None:
    """``warm_up_gpu(devices)`` for a command whose ``backend`` (a user's name, not yet resolved) may run on a
    GPU; None for the CPU backend."""
    return warm_up_gpu(devices) if may_use_gpu(backend) else None


def _start_driver(driver, devices) -> None:
    """The thread of ``warm_up_gpu``: cuInit, then cuDevicePrimaryCtxRetain for each device named that exists."""
    try:
        _driver_call(driver, "cuInit", 0)
        n = _driver_call(driver, "cuDeviceGetCount")
        for d in _device_ids(devices, n):
            _driver_call(driver, "cuDevicePrimaryCtxRetain", _driver_call(driver, "cuDeviceGet", d))
    except Exception as err:  # noqa: BLE001 - the run's own first use meets it again and reports it
        log.debug("GPU warm-up stopped: %s", err)


def _driver_call(driver, name: str, *args):
    """``driver.<name>(*args)`` of cuda-python (which returns (CUresult, value...)): the value, or None; a
    RuntimeError naming the call and the CUresult when it failed."""
    err, *values = getattr(driver, name)(*args)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{name}: {err!r}")
    return values[0] if values else None


def device_ids(devices: int | Sequence[int] | str | None) -> list[int]:
    """The GPU ids ``devices`` names (None: device 0; "all": every GPU this process sees; an id or a list of
    ids), each once, in order; InputError naming one that does not exist."""
    n = gpu_count()
    if isinstance(devices, str) and devices != "all":
        raise InputError(f"devices must be 'all', a device id or a list of ids; got {devices!r}.")
    ids = list(range(n)) if devices == "all" else _device_ids(devices, 1 << 30)
    missing = [d for d in ids if not 0 <= d < n]
    if missing:
        raise InputError(f"GPU device(s) {', '.join(map(str, missing))} not found: this machine has {n} GPU(s) "
                         f"(ids 0..{n - 1}).")
    return ids


def device_names(devices: int | Sequence[int] | str | None = None) -> list[str]:
    """"<id>: <name>" of each GPU ``devices`` names (as ``device_ids``), for a result's provenance."""
    from numba import cuda

    names = []
    for i in device_ids(devices):
        name = cuda.gpus[i].name
        names.append(f"{i}: {name.decode() if isinstance(name, bytes) else name}")
    return names


def _device_ids(devices, n: int) -> list[int]:
    """The ids of the ``n`` devices that ``devices`` names (None: 0; "all"; an id; a list), each once, in order;
    ids that do not exist are left to the run to refuse."""
    if devices is None:
        ids = [0]
    elif isinstance(devices, str):
        ids = list(range(n)) if devices == "all" else []
    elif isinstance(devices, int):
        ids = [devices]
    else:
        ids = [int(d) for d in devices]
    return [d for d in dict.fromkeys(ids) if 0 <= d < n]
