"""Host result arrays page-locked in place (cuda.runtime.Landing) and the GPU segmentation's statistic in parts, on
a real CUDA GPU (`pytest -m gpu`).

- A Landing array is page-locked while open (copies into it are asynchronous) and an ordinary array after
  ``close``; a model fit leaves none of its outputs locked, also when it fails half-way.
- The segmentation's statistic computed and copied in 4 parts while the host finishes each part gives the segments
  of the CPU segmentation, bit for bit, on a cohort large enough for the parts to overlap.
"""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def _gpu():
    from gcnmops.cuda.probe import gpu_available

    if not gpu_available():
        pytest.skip("no usable CUDA GPU")
    import cupy

    return cupy


def _unlocked_all() -> None:
    """Wait for the unlocker thread (Landing.close hands its arrays there)."""
    from gcnmops.cuda import runtime

    runtime._UNLOCKER.drain()


def _locked(cupy, a: np.ndarray) -> bool:
    try:
        attrs = cupy.cuda.runtime.pointerGetAttributes(a.ctypes.data)
    except cupy.cuda.runtime.CUDARuntimeError:
        return False
    return getattr(attrs, "type", 0) == 1  # cudaMemoryTypeHost


def test_landing_locks_while_open_and_releases():
    cupy = _gpu()
    from gcnmops.cuda.runtime import Landing

    d = cupy.arange(3_000_000, dtype=cupy.float64)
    with Landing() as landing:
        a = landing.empty((1_000_000, 3))
        assert _locked(cupy, a)
        d.reshape((1_000_000, 3), order="F").get(out=a, blocking=False)
        cupy.cuda.Device().synchronize()
    _unlocked_all()
    assert not _locked(cupy, a)
    assert np.array_equal(a.ravel(order="F"), np.arange(3_000_000, dtype=np.float64))


def test_an_array_still_being_unlocked_is_locked_again():
    """A result handed back to the GPU before the unlocker thread reached it (the same pages registered twice)
    is locked again: the pending unlocks are waited for, then it is registered."""
    cupy = _gpu()
    from gcnmops.cuda import runtime

    for _ in range(5):
        with runtime.Landing() as first:
            a = first.empty((2_000_000, 4))
        with runtime.Landing() as again:
            assert again.lock(a) is a and _locked(cupy, a)
            assert again._registered == [a]
    _unlocked_all()
    assert not _locked(cupy, a)


def test_model_outputs_are_unlocked_after_the_fit_and_after_a_failure(monkeypatch):
    cupy = _gpu()
    from gcnmops.model import gpu as mg
    from gcnmops.model.spec import ModelSpec

    rng = np.random.default_rng(3)
    x = rng.poisson(80.0, size=(50_000, 8)).astype(np.float64)
    from gcnmops.params import CnMopsParams

    prm = CnMopsParams()
    spec = ModelSpec.build(prm.I, prm.classes, prm.main_class, prm.prior_impact, prm.cyc, prm.min_read_count)
    out = mg.fit_gpu(x, np.ones(8), spec)
    _unlocked_all()
    assert not any(_locked(cupy, getattr(out, f)) for f in ("lam", "alpha", "sini", "cn", "ini"))
    made = []
    from gcnmops.cuda import runtime

    real_empty = runtime.Landing.empty

    def recording(self, shape, dtype=np.float64):
        a = real_empty(self, shape, dtype)
        made.append(a)
        return a

    def failing(self, *args, **kwargs):
        raise RuntimeError("copy failed")

    # the host outputs are made (and locked) while the kernels run; the first copy into them fails
    monkeypatch.setattr(runtime.Landing, "empty", recording)
    monkeypatch.setattr(runtime.CupyBackend, "copy_rows_to_host", failing)
    with pytest.raises(RuntimeError, match="copy failed"):
        mg.fit_gpu_device(cupy.asarray(np.asfortranarray(x)), np.ones(8), spec)
    _unlocked_all()
    assert made and not any(_locked(cupy, a) for a in made)


def test_statistic_in_parts_gives_the_cpu_segments():
    _gpu()
    from gcnmops.segmentation import cpu as sg
    from gcnmops.segmentation import gpu as sgg

    rng = np.random.default_rng(11)
    m, n = 1_000_000, 6
    x = np.round(rng.normal(size=(m, n)) * 0.2, 3)
    for _ in range(60):
        s, k = int(rng.integers(0, m - 200)), int(rng.integers(0, n))
        x[s:s + int(rng.integers(5, 150)), k] += rng.choice([-1.0, 1.0])
    x[rng.random((m, n)) < 0.25] = 0.0
    blocks = [(0, 350_000), (350_000, 620_000), (620_000, m)]
    ref = sg.segment_columns_arrays(x, blocks)
    t: dict = {}
    got = sgg.segment_columns_arrays_gpu(x, blocks, timings=t)
    assert t["seg_candidates"] >= sgg.GROUPED_MIN_CANDIDATES  # the statistic came back in parts
    for key in ref:
        assert np.array_equal(ref[key], got[key]), key
