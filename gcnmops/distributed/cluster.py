"""The Dask side: which scheduler runs the tasks, how many numba threads a worker uses, sizes from the workers'
memory.

A stage of the distributed run is a list of calls of a plain function (this package's task functions), each
a ``dask.delayed`` call computed at once; their results are small (statistics, call tables), the matrices go into
the run's store. With a ``distributed.Client`` the tasks run on its workers (processes of a LocalCluster,
dask-jobqueue or dask-kubernetes jobs, dask-cuda workers with one GPU each; a scheduler address makes them any
cluster's), the larger ones first; without one (``client=None`` and no current client) they run one after
another in this process.
"""
from __future__ import annotations

import logging
import os
import threading
import warnings
from concurrent.futures import CancelledError
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compat import threadsafe_parallel
from ..errors import InputError

log = logging.getLogger("gcnmops")

#: environment variable a worker plugin sets: numba threads per task on that worker
THREADS_ENV = "GCNMOPS_NUMBA_THREADS"
#: process memory of an idle worker with gcnmops loaded (Python, numpy, pandas, numba, dask), bytes
WORKER_BASELINE = 350 << 20
#: the working set of a task is about this many times its counts (normalized data, sINI, individual calls,
#: the model's and the segmentation's scratch)
TASK_FACTOR = 8
MIN_CHUNK = 4 << 20
MAX_CHUNK = 64 << 20
#: the largest block of counts on GPU workers: a block pays each stage's fixed costs on the device once
MAX_GPU_CHUNK = 512 << 20

_lock = threading.Lock()


def resolve_client(client):
    """``client``; None: the current distributed client, else None (tasks run in this process); False:
    None (run in this process even when a client exists)."""
    if client is False:
        return None
    if client is not None:
        return client
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError):
        log.info("No dask.distributed client: running the distributed pipeline's tasks in this process.")
        return None


class Runner:
    """Runs lists of delayed tasks on a client's workers (or here) and returns their results in order."""

    def __init__(self, client) -> None:
        self.client = client

    def place(self, obj):
        """A numpy array or a table of this process sent to the workers once (a future the tasks take as an
        argument, rather than data in the task graph); anything else as it is."""
        if self.client is None or not isinstance(obj, (np.ndarray, pd.DataFrame)):
            return obj
        return self.client.scatter(obj, hash=False)

    def run(self, fn, calls: list[tuple], priorities: list[int] | None = None) -> list:
        """``fn(*args)`` for each ``args`` of ``calls`` (Dask arrays and futures among them computed first, as
        the task's input), the results in the order of ``calls``; on a client's workers each call with its
        priority (``priorities``: higher first)."""
        import dask

        if not calls:
            return []
        if self.client is None:  # one after another, in order: warnings and errors come as in one process
            return [fn(*(a.compute(scheduler="sync") if dask.is_dask_collection(a) else a for a in args))
                    for args in calls]
        priorities = priorities or [0] * len(calls)
        futures = [self.client.compute(dask.delayed(on_worker, pure=False)(fn, *args), priority=p)
                   for args, p in zip(calls, priorities)]
        try:
            outcomes = self.client.gather(futures)
        except CancelledError as err:  # a scattered input or a task forgotten: its worker died
            raise InputError(
                f"the cluster lost a task of the run ({err}): a worker died or was restarted (above its memory "
                "limit?) and took data only it held. Give the workers more memory, fewer threads each or smaller "
                "blocks (chunk_bytes), then run again.") from err
        finally:
            del futures
        return [outcome.replay() for outcome in outcomes]

    def worker_memory(self) -> tuple[int | None, int]:
        """(smallest memory limit of a worker in bytes or None if unlimited/unknown, most threads of a worker)."""
        if self.client is None:
            return None, 1
        workers = self.client.scheduler_info().get("workers", {})
        limits = [w.get("memory_limit") for w in workers.values() if w.get("memory_limit")]
        threads = max([w.get("nthreads", 1) for w in workers.values()] or [1])
        return (min(limits) if limits else None), threads

    def all_on_gpu(self, backend: str) -> bool:
        """Whether every worker runs ``backend`` ("cpu", "gpu", "auto": resolved on each worker) on a GPU."""
        if self.client is None:
            return _gpu_here(backend)
        found = self.client.run(_gpu_here, backend)
        return bool(found) and all(found.values())

    def workers(self) -> int:
        """Workers (1 without a client)."""
        if self.client is None:
            return 1
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def total_threads(self) -> int:
        """Task threads of all workers together (1 without a client)."""
        if self.client is None:
            return 1
        workers = self.client.scheduler_info().get("workers", {})
        return max(1, sum(w.get("nthreads", 1) for w in workers.values()))

    def set_numba_threads(self, numba_threads) -> None:
        """Numba threads per task on each worker: ``"auto"`` splits each host's cores among its workers'
        task threads (a LocalCluster of n workers on c cores: c // n each); an int sets it; None leaves it."""
        if self.client is None or numba_threads is None:
            return
        workers = self.client.scheduler_info().get("workers", {})
        if numba_threads == "auto":
            cores = self.client.run(os.cpu_count)
            per_host: dict = {}
            for addr, w in workers.items():
                per_host[w.get("host")] = per_host.get(w.get("host"), 0) + w.get("nthreads", 1)
            setting = {addr: max(1, (cores.get(addr) or 1) // per_host[w.get("host")]) for addr, w in workers.items()}
        else:
            setting = {addr: int(numba_threads) for addr in workers}
        for addr, n in setting.items():
            self.client.run(_set_threads_env, n, workers=[addr])


@dataclass
class Outcome:
    """What a task on a worker gives back: its ``value``, or the InputError it raised (``error``), and the
    ``warnings`` it raised, as (category, message)."""

    value: object
    warnings: list
    error: Exception | None = None

    def replay(self):
        """In the client: the task's warnings raised again, then its error raised or its value returned (in the
        order of the tasks, so the first block's error is the run's, after the warnings of the blocks before it,
        as in one process)."""
        for category, message in self.warnings:
            warnings.warn(message, category, stacklevel=4)
        if self.error is not None:
            raise self.error
        return self.value


_collector = threading.local()
#: warnings.showwarning as it was before ``on_worker`` first ran in this process
_hooked: list = []
_hook_lock = threading.Lock()


def _show(message, category, filename, lineno, file=None, line=None):
    sink = getattr(_collector, "sink", None)
    if sink is None:
        return _hooked[0](message, category, filename, lineno, file, line)
    sink.append((category, str(message)))


def on_worker(fn, *args) -> Outcome:
    """``fn(*args)`` in a worker's task thread, its warnings collected for the client (a thread's own list: a
    worker runs several tasks at once, and warnings.catch_warnings is not thread-safe) and an InputError returned
    rather than raised (the client raises the first one in the order of the tasks)."""
    with _hook_lock:
        if not _hooked:  # once per worker process; gcnmops's warnings all reach the client, whose filters decide
            _hooked.append(warnings.showwarning)
            warnings.showwarning = _show
            warnings.filterwarnings("always", module=r"gcnmops(\.|$)")
    _collector.sink = sink = []
    try:
        return Outcome(fn(*args), sink)
    except InputError as err:
        return Outcome(None, sink, err)
    finally:
        _collector.sink = None


def _gpu_here(backend: str) -> bool:
    """Whether ``backend`` resolves to the GPU in this process ("auto": where it has a usable GPU)."""
    from ..cuda.probe import Backend, resolve_backend

    return resolve_backend(backend) is Backend.GPU


def _set_threads_env(n: int) -> None:
    os.environ[THREADS_ENV] = str(n)


@contextmanager
def task_threads():
    """Inside a task: numba's parallel loops use the worker's share of the cores (see set_numba_threads);
    where the threading layer is not thread-safe (the workqueue layer: ``compat.threadsafe_parallel``) one task of
    the process at a time."""
    import numba

    n = os.environ.get(THREADS_ENV)
    if n:
        numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    if threadsafe_parallel():
        yield
    else:
        with _lock:
            yield


def chunk_bytes_for(memory_limit: int | None, threads: int, gpu: bool = False) -> int:
    """Bytes of counts per task where chromosomes are merged into blocks (and per column group of the first pass):
    the worker's memory above its baseline, shared by its task threads, over a task's working set factor; within
    [4 MiB, 64 MiB] (``gpu``: workers that run the blocks on their GPUs, 512 MiB). A chromosome larger than that
    is still one task."""
    most = MAX_GPU_CHUNK if gpu else MAX_CHUNK
    if not memory_limit:
        return most
    free = max(0, int(memory_limit) - WORKER_BASELINE)
    return int(min(most, max(MIN_CHUNK, free // (max(1, threads) * TASK_FACTOR))))


__all__ = ["Runner", "Outcome", "on_worker", "resolve_client", "task_threads", "chunk_bytes_for"]
