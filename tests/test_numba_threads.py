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
    from gcnmops.dynamic import counter, run_queue

    seen = []
    run_queue(lambda: seen.append(numba.get_num_threads()), (), counter(), 0)
    assert seen == [1]


def test_the_writers_run_with_the_callers_thread_count(one_thread, tmp_path):
    from gcnmops.outputs.writers import _Batch

    batch = _Batch(tmp_path, workers=2, progress=False)
    try:
        seen = [f.result() for f in [batch.submit(numba.get_num_threads) for _ in range(4)]]
    finally:
        batch.abort()
    assert seen == [1, 1, 1, 1]


def test_a_run_on_the_workqueue_threading_layer_takes_one_parallel_region_at_a_time(tmp_path):
    """numba's workqueue layer (its fallback without OpenMP or TBB, e.g. macOS without libomp) aborts the process
    when two threads run parallel kernels at once: a run there does its beside-work in turn and still writes
    every file (the same calls as with the default layer)."""
    import subprocess
    import sys
    from pathlib import Path

    from background import python_env

    repo = Path(__file__).resolve().parents[1]
    outs = {}
    for layer in ("workqueue", None):
        env = python_env(NUMBA_NUM_THREADS="2", **({"NUMBA_THREADING_LAYER": layer} if layer else {}))
        out = tmp_path / (layer or "default")
        run = subprocess.run([sys.executable, "-m", "gcnmops", "run", "--example", "--backend", "cpu", "-o", str(out)],
                             cwd=repo, env=env, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        assert "Concurrent access" not in run.stderr
        outs[layer] = out
    for name in ("cnvs.tsv", "cnvr.tsv", "segmentation.tsv", "cnvs.bed", "sample_qc.tsv"):
        assert (outs["workqueue"] / name).read_bytes() == (outs[None] / name).read_bytes(), name
