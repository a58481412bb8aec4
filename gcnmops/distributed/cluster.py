"""The Dask side: which scheduler runs the tasks, how many numba threads a worker uses, chunk sizes from
the workers' memory.

Every stage of the pipeline is a list of ``dask.delayed`` calls of plain functions (this package's task
functions) computed at once; their results are small (statistics, segment tables), the matrices go through
the working Zarr store. With a ``distributed.Client`` the tasks run on its workers (processes of a
LocalCluster, dask-jobqueue jobs, dask-cuda workers with one GPU each); without one (``client=None`` and no
current client) they run one after another in this process.
"""
from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager

log = logging.getLogger("gcnmops")

#: environment variable a worker plugin sets: numba threads per task on that worker
THREADS_ENV = "GCNMOPS_NUMBA_THREADS"
#: process memory of an idle worker with gcnmops loaded (Python, numpy, pandas, numba, dask), bytes
WORKER_BASELINE = 350 << 20
#: the working set of a task is about this many times its chunk
TASK_FACTOR = 8
MIN_CHUNK = 4 << 20
MAX_CHUNK = 64 << 20

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

    def scatter(self, obj):
        """``obj`` sent once to the workers (a future the tasks take as an argument)."""
        if self.client is None:
            return obj
        return self.client.scatter(obj, broadcast=True, hash=False)

    def compute(self, tasks: list) -> list:
        if not tasks:
            return []
        if self.client is None:
            import dask

            return list(dask.compute(*tasks, scheduler="sync"))
        futures = self.client.compute(tasks)
        try:
            return self.client.gather(futures)
        finally:
            del futures

    def worker_memory(self) -> tuple[int | None, int]:
        """(smallest memory limit of a worker in bytes or None if unlimited/unknown, most threads of a worker)."""
        if self.client is None:
            return None, 1
        workers = self.client.scheduler_info().get("workers", {})
        limits = [w.get("memory_limit") for w in workers.values() if w.get("memory_limit")]
        threads = max([w.get("nthreads", 1) for w in workers.values()] or [1])
        return (min(limits) if limits else None), threads

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


def _set_threads_env(n: int) -> None:
    os.environ[THREADS_ENV] = str(n)


@contextmanager
def task_threads():
    """Inside a task: numba's parallel loops use the worker's share of the cores (see set_numba_threads);
    with the workqueue threading layer (not thread-safe) one task of the process at a time."""
    import numba

    n = os.environ.get(THREADS_ENV)
    if n:
        numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel loop has run in this process yet
        layer = None
    if layer in (None, "workqueue"):
        with _lock:
            yield
    else:
        yield


def chunk_bytes_for(memory_limit: int | None, threads: int) -> int:
    """Bytes of input per task: the worker's memory above its baseline, shared by its task threads, over
    a task's working set factor; within [4 MiB, 64 MiB]."""
    if not memory_limit:
        return MAX_CHUNK
    free = max(0, int(memory_limit) - WORKER_BASELINE)
    return int(min(MAX_CHUNK, max(MIN_CHUNK, free // (max(1, threads) * TASK_FACTOR))))


__all__ = ["Runner", "resolve_client", "task_threads", "chunk_bytes_for"]
