"""numba's thread count is per thread: the threads gcnmops starts (the model's fit, the writers) run their
kernels with the count of the thread that started them (``--threads``, R's ``parallel``, a Dask worker's share),
not with every core."""
from __future__ import annotations

import numba
import numpy as np
import pytest


@pytest.fixture
def one_thread():
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(old)


def test_the_fit_runs_with_the_callers_thread_count(one_thread):
    from gcnmops.model.cpu import run_interruptibly

    seen = []
    run_interruptibly(lambda: seen.append(numba.get_num_threads()), np.zeros(1, np.int64))
    assert seen == [1]


def test_the_writers_run_with_the_callers_thread_count(one_thread, tmp_path):
    from gcnmops.outputs.writers import _Batch

    batch = _Batch(tmp_path, workers=2, progress=False)
    try:
        seen = [f.result() for f in [batch.submit(numba.get_num_threads) for _ in range(4)]]
    finally:
        batch.abort()
    assert seen == [1, 1, 1, 1]
