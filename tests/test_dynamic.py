"""Dynamic scheduling of the CPU kernels (gcnmops.dynamic): every item taken exactly once, whatever the threads and
the items' costs; the queue's runner reports progress, ends the queue on Ctrl-C and hands on the kernel's error."""
from __future__ import annotations

import threading
import time

import numba
import numpy as np
import pytest
from numba import njit, prange

from gcnmops import dynamic
from gcnmops.dynamic import counter, run_queue, take, take_from, workers


@njit(parallel=True, cache=False)
def _visit(n, next_item, nworkers, seen, cost):
    for _ in prange(nworkers):
        i = take(next_item, n)
        while i >= 0:
            acc = 0.0
            for k in range(cost[i]):  # unequal work per item
                acc += np.sqrt(k + 1.0)
            seen[i] += 1 if acc >= 0 else 2
            i = take(next_item, n)


@njit(parallel=True, cache=False)
def _visit_in_order(items, next_item, nworkers, seen, when):
    for _ in prange(nworkers):
        taken = 0
        item = take_from(next_item, items)
        while item >= 0:
            taken += 1
            seen[item] += 1
            when[item] = taken
            item = take_from(next_item, items)


@pytest.mark.parametrize("threads", [1, 2])
def test_every_item_is_taken_exactly_once(threads):
    old = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        n = 20_000
        cost = np.random.default_rng(3).integers(0, 2_000, size=n)
        seen = np.zeros(n, dtype=np.int64)
        next_item = counter()
        _visit(n, next_item, workers(n), seen, cost)
    finally:
        numba.set_num_threads(old)
    assert (seen == 1).all()
    assert n <= next_item[0] <= n + threads  # each worker asked once past the end


def test_items_are_taken_in_their_order():
    """``take_from``: each of the listed items once, the first listed taken first (a largest-first order holds)."""
    items = np.array([7, 3, 9, 0, 5], dtype=np.int64)
    seen, when = np.zeros(10, dtype=np.int64), np.zeros(10, dtype=np.int64)
    _visit_in_order(items, counter(), 1, seen, when)
    assert seen.tolist() == [1, 0, 0, 1, 0, 1, 0, 1, 0, 1]
    assert when[items].tolist() == [1, 2, 3, 4, 5]


def test_one_worker_per_thread_and_at_most_one_per_item():
    assert workers(0) == 1 and workers(1) == 1 and workers(10**9) == numba.get_num_threads()


def test_the_runner_reports_the_items_taken(monkeypatch):
    monkeypatch.setattr(dynamic, "POLL", 0.01)
    n, next_item, reports = 30, counter(), []

    def kernel():
        while next_item[0] < n:
            next_item[0] += 1
            time.sleep(0.002)

    run_queue(kernel, (), next_item, n, progress=reports.append)
    assert reports and reports == sorted(reports) and reports[-1] == n


def test_an_interrupt_ends_the_queue_and_goes_on(monkeypatch):
    """KeyboardInterrupt in the waiting thread (raised here by the progress report): no item is taken after it,
    the stop flag is set, the kernel's thread has returned when the exception arrives."""
    monkeypatch.setattr(dynamic, "POLL", 0.01)
    n, next_item, stop, taken = 10**6, counter(), np.zeros(1, np.int64), []

    def kernel():
        while next_item[0] < n:
            taken.append(int(next_item[0]))
            next_item[0] += 1
            time.sleep(0.001)

    def interrupt(done):
        if done > 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_queue(kernel, (), next_item, n, stop=stop, progress=interrupt)
    assert stop[0] == 1 and len(taken) < 1000
    assert not [t for t in threading.enumerate() if t.name == "gcnmops-queue"]


def test_the_kernels_error_is_raised_in_the_caller():
    def kernel():
        raise ValueError("bad block")

    with pytest.raises(ValueError, match="bad block"):
        run_queue(kernel, (), counter(), 1)
