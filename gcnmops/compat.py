"""Gaps between the libraries we run on, closed once at import (before numba-cuda is loaded), and the lazy
exports of the packages whose public names pull in heavy libraries.

- numba-cuda 0.30 registers an overload of ``np.row_stack`` when its numpy support loads; NumPy 2.5 removed
  ``row_stack`` (deprecated alias of ``vstack`` since 2.0), so loading numba.cuda fails there with an
  AttributeError. The alias is restored when missing; numpy's own ``vstack`` is what it always meant.
- glibc gives each new thread of a process its own malloc arena (up to 8 per core), and memory freed in one
  arena serves no other: a run's writer threads (one per file) left a wide cohort's run holding about 3 KB per
  sample of freed memory. ``limit_malloc_arenas`` (the command, at start) caps them at one per core.
- ``lazy_exports``: a package's public names imported from their modules on first use (PEP 562), so that
  ``import gcnmops`` (and ``python -m gcnmops --help``) does not load pandas, numba or numba-cuda up front.
"""
from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future

import numpy as np


def patch_numpy_for_numba_cuda() -> None:
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack


def limit_malloc_arenas() -> None:
    """glibc's arenas capped at one per core (``mallopt(M_ARENA_MAX)``); nothing where the C library is not
    glibc, or where ``MALLOC_ARENA_MAX`` is set (the user's choice)."""
    import ctypes
    import os

    if "MALLOC_ARENA_MAX" in os.environ:
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-8, max(2, len(os.sched_getaffinity(0))))  # M_ARENA_MAX
    except (OSError, AttributeError):  # not glibc (macOS, Windows, musl)
        pass


def keep_numba_threads() -> Callable[[], None]:
    """A function giving the thread it runs in the numba thread count of the thread calling this one: numba's
    count is per thread, and a new thread (the model's, a writer's) starts with every core, whatever
    ``--threads``, R's ``parallel`` or a Dask worker's share set. Nothing where numba is not loaded yet."""
    import sys

    numba = sys.modules.get("numba")
    if numba is None:
        return lambda: None
    n = numba.get_num_threads()
    return lambda: numba.set_num_threads(n)


def threadsafe_parallel() -> bool:
    """Whether numba's threading layer runs parallel regions from several host threads at once (OpenMP and TBB
    do; the workqueue layer, numba's fallback where neither is installed, aborts the process). Work beside a
    run's own parallel kernels (``pipeline.run``, ``pipeline.selection``) runs only where it does; chooses the
    layer where no parallel region has run yet."""
    global _THREADSAFE
    if _THREADSAFE is None:
        try:
            import numba
            from numba.np.ufunc.parallel import _launch_threads

            _launch_threads()
            _THREADSAFE = numba.threading_layer() != "workqueue"
        except Exception:  # noqa: BLE001 - a numba without these: one parallel region at a time
            _THREADSAFE = False
    return _THREADSAFE


_THREADSAFE: bool | None = None


_ONE_REGION = threading.Lock()


def parallel_region():
    """A context for a parallel kernel that threads of a run call at once (the call files' qualities): held
    one at a time where the threading layer is not thread-safe (``threadsafe_parallel``), else nothing."""
    return contextlib.nullcontext() if threadsafe_parallel() else _ONE_REGION


class InThisThread:
    """An executor that runs each call at once on the calling thread (``submit`` returns its done Future):
    where work cannot go beside the run's own (``threadsafe_parallel``)."""

    def submit(self, fn, *args, **kwargs) -> Future:
        done: Future = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as err:  # noqa: BLE001 - handed to the Future's reader, as a pool's would be
            done.set_exception(err)
        return done

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def run_threads() -> int:
    """The calling thread's numba thread count (the run's ``--threads``); 1 where numba is not loaded."""
    import sys

    numba = sys.modules.get("numba")
    return numba.get_num_threads() if numba is not None else 1


def in_bands(fn: Callable[[int, int], object], n: int) -> None:
    """``fn(a, b)`` on consecutive bands a:b covering range(n), as many as the calling thread's numba threads
    (the run's ``--threads``; one where numba is not loaded), each band on its own thread: for numpy calls that
    release the GIL (elementwise arithmetic, logs) on the run's cores."""
    parts = max(1, min(n, run_threads()))
    cuts = [n * k // parts for k in range(parts + 1)]
    if parts == 1:
        fn(0, n)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(parts) as pool:
        for done in [pool.submit(fn, a, b) for a, b in zip(cuts, cuts[1:])]:
            done.result()


def lazy_exports(namespace: dict, exports: Mapping[str, str], submodules: bool = False
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """(``__getattr__``, ``__dir__``) for the package whose ``globals()`` is ``namespace``: ``exports`` maps each
    public name to the module (relative to the package, e.g. ``".io.readers"``) that defines it; a name is
    imported on first access and then kept in the package's namespace. ``submodules``: other public names are
    the package's submodules (``gcnmops.io`` after a bare ``import gcnmops``), imported on first access as well."""
    package = namespace["__name__"]

    def __getattr__(name: str):
        where = exports.get(name)
        if where is not None:
            value = getattr(importlib.import_module(where, package), name)
            namespace[name] = value
            return value
        if submodules and not name.startswith("_"):
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as err:
                if err.name != f"{package}.{name}":  # the submodule exists but one of its imports is missing
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
