"""The one cache of GPU kernels: every stage's kernels are built here, once per process, and each kernel's first
launch on a device happens under the same lock.

``cached_kernel(builder, *key)`` returns what ``builder(*key)`` builds (a numba-cuda kernel, or a tuple of them),
built by the first thread that asks and shared by all. numba-cuda then compiles a kernel (or reads it from its disk
cache) on its first launch with a signature, and loads the compiled module into a device's context on its first
launch there (``CUDACodeLibrary.get_cufunc``), with no lock of its own around that load: two host threads launching
a kernel not yet loaded both load it, and both register its library handle in the context's module table, where
the second fails with ``AssertionError: key already in dictionary`` (dask-cuda workers running several tasks at
once). So the kernels handed out are ``Kernel``s, whose first launch for each (device, signature) runs under the
lock: compilation, disk-cache load and module load happen once, one kernel at a time; later launches take no lock.
"""
from __future__ import annotations

import threading
from functools import partial
from typing import Any, Callable

#: held while a kernel is built and while a kernel is launched for the first time on a device with a signature
_LOCK = threading.RLock()
#: (builder, key) -> what it built, each kernel wrapped in a Kernel
_BUILT: dict = {}


def cached_kernel(builder: Callable[..., Any], *key) -> Any:
    """What ``builder(*key)`` returns (a numba-cuda kernel or a tuple of kernels, each as a ``Kernel``), built once
    per process under the lock; ``key``: hashable arguments (the kernel's compile-time constants)."""
    built = _BUILT.get((builder, key))
    if built is not None:
        return built
    with _LOCK:
        built = _BUILT.get((builder, key))
        if built is None:
            built = _BUILT[(builder, key)] = _wrapped(builder(*key))
        return built


def _wrapped(built):
    if isinstance(built, tuple):
        kernels = [_wrapped(k) for k in built]
        return type(built)._make(kernels) if hasattr(built, "_make") else tuple(kernels)
    return Kernel(built)


def _device_id() -> int:
    """The device of the calling thread's current CUDA context (the one a launch now would load its module into)."""
    from numba import cuda

    return cuda.current_context().device.id


class Kernel:
    """A numba-cuda kernel (``dispatcher``) launched as numba's are, ``kernel[grid, block(, stream, shared)](*args)``,
    whose first launch for each (device, argument types) runs under the cache's lock. Other attributes are the
    dispatcher's. In the CUDA simulator (no modules to load) launches go straight to the dispatcher."""

    def __init__(self, dispatcher):
        from .runtime import simulating

        self.dispatcher = dispatcher
        self._simulated = simulating()
        #: (device, number of compiled signatures, argument types) launched at least once
        self._ready: set = set()

    def __getattr__(self, name: str):
        if name == "dispatcher":  # not set yet (a half-made object): no recursion
            raise AttributeError(name)
        return getattr(self.dispatcher, name)

    def __getitem__(self, config):
        launch = self.dispatcher[config]
        return launch if self._simulated else partial(self._launch, launch)

    def _launch(self, launch, *args) -> None:
        d = self.dispatcher
        # the number of compiled signatures is part of the key: a new one may take over argument types that an
        # older one served (numba picks the best match), and it is loaded nowhere yet
        key = (_device_id(), len(d.overloads), tuple(d.typeof_pyval(a) for a in args))
        if key in self._ready:
            launch(*args)
            return
        from .runtime import keep_modules_at_exit

        with _LOCK:
            keep_modules_at_exit()
            launch(*args)
            self._ready.add(key)


__all__ = ["cached_kernel", "Kernel"]
