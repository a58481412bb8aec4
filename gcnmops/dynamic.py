"""Dynamic scheduling of numba parallel loops: items taken one at a time from a shared counter.

numba's OpenMP and workqueue layers split a ``prange`` into one equal run of iterations per thread (only TBB
balances), so items of unequal cost (chromosome vectors of different lengths, blocks of regions with and without
modelling) leave threads idle at the loop's end. A kernel instead runs ``prange(nworkers)`` (``workers(n)``,
handed in: numba's thread count read inside a kernel would keep it out of the cache) and, in each worker, takes
items with ``take(counter, n)`` (or ``take_from(counter, items)``) until it returns -1: every thread stays busy
until the items run out, whatever their costs. ``counter``: a one-element int64 array, 0 at the start of the loop.

``run_queue`` runs such a kernel in a thread of its own while the calling thread reports progress from the counter
and watches for Ctrl-C / SIGTERM (whose Python handlers run in the main thread only): one call over all the items,
no rounds that wait for their slowest item.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
from numba import get_num_threads, types
from numba.core import cgutils
from numba.extending import intrinsic, register_jitable

from .compat import keep_numba_threads


@intrinsic
def _fetch_add(typingctx, counter, value):
    """counter[0] += value atomically; returns the value before (sequentially consistent)."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64 and isinstance(value, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, signature.args[0], ary, [context.get_constant(types.intp, 0)])
        add = context.cast(builder, args[1], signature.args[1], types.int64)
        return builder.atomic_rmw("add", ptr, add, "seq_cst")

    return types.int64(counter, value), codegen


@register_jitable
def take(counter, n):
    """The next of items 0..n-1 (in order of asking, each given once) from ``counter``; -1 once they run out."""
    i = _fetch_add(counter, 1)
    return i if i < n else -1


@register_jitable
def take_from(counter, items):
    """The next of ``items`` (1-D, in their order, each given once) from ``counter``; -1 once they run out."""
    i = _fetch_add(counter, 1)
    return items[i] if i < items.shape[0] else -1


def workers(n: int) -> int:
    """How many workers to run over ``n`` items: one per thread of the calling thread's numba count, at most n."""
    return max(1, min(get_num_threads(), n))


def counter() -> np.ndarray:
    """A fresh counter (one int64, 0)."""
    return np.zeros(1, dtype=np.int64)


#: seconds between two progress reports of ``run_queue``
POLL = 0.2


def run_queue(kernel, args: tuple, counter: np.ndarray, n: int, *, stop: np.ndarray | None = None,
              progress: Callable[[int], None] | None = None) -> None:
    """``kernel(*args)`` (compiled ``nogil``, taking its ``n`` items from ``counter``) in a thread of its own, with
    the calling thread's numba thread count, while the calling thread calls ``progress(items taken)`` every
    ``POLL`` seconds. An exception raised in the calling thread meanwhile (KeyboardInterrupt, the CLI's SIGTERM)
    ends the queue (no item is taken after it; ``stop[0]`` set for a kernel that also checks it within an item),
    waits for the kernel to return and goes on; the kernel's own exception is re-raised here."""
    failed: list[BaseException] = []
    same_threads = keep_numba_threads()

    def target() -> None:
        try:
            same_threads()
            kernel(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            failed.append(exc)

    worker = threading.Thread(target=target, name="gcnmops-queue", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(POLL)
            if progress is not None:
                progress(min(int(counter[0]), n))
    except BaseException:
        counter[0] = n
        if stop is not None:
            stop[0] = 1
        worker.join()
        raise
    if failed:
        raise failed[0]


__all__ = ["counter", "run_queue", "take", "take_from", "workers"]
