"""The GPU driver's host finishing (segmentation/finish.py) against the CPU segmentation, on tie-prone vectors (as
tests/test_segmentation_vs_r.py draws them: plateaus of repeated values, coarse grids) and random ones, with CPU
statistics standing in for the GPU's: exact, perturbed within TAU/100 as a function of the value (as the GPU's
statistic is a function of the window's (t, dof): equal tails stay equal), and perturbed position by position.
"""
from __future__ import annotations

import numpy as np
import pytest

from gcnmops.segmentation import gpu as sgg
from gcnmops.segmentation.cpu import segment_columns_arrays

SCALE = sgg.TAU * 1e-2


def _statistic(kind: str, seed: int, counts: dict):
    """A stand-in for gpu_statistic: the CPU's (p, jstar), ``kind`` "exact", "by_value" (a perturbation that is a
    function of p's bits) or "by_position" (random per position); ``counts`` receives the candidate count."""
    def stat(xt, offs, coffs, e, V, ms, dl, mi, w, timings=None):
        p, js = sgg.cpu_statistic(xt, offs, coffs, e, V, ms, dl, mi, w)
        counts["candidates"] = p.size
        if kind == "by_value":
            u = (p.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(11)
            return p * (1.0 + SCALE * (u / 2.0 ** 53 * 2.0 - 1.0)), js
        if kind == "by_position":
            return p * (1.0 + SCALE * np.random.default_rng(seed).uniform(-1.0, 1.0, p.size)), js
        return p, js

    return stat


def _matrix(rng, m: int, n: int) -> np.ndarray:
    cols = []
    for _ in range(n):
        kind = rng.integers(3)
        if kind == 0:  # plateaus of a few repeated values
            levels = rng.choice([0.0, 0.0, 0.0, 0.5, -1.0, 0.25, -3.0, 1.0], size=m // 8 + 2)
            x = np.repeat(levels, rng.integers(1, 30, size=levels.size))
            x = np.resize(x, m)
            noise = rng.random(m) < rng.uniform(0.05, 0.4)
            x[noise] = rng.choice([-0.5, 0.5, 0.0, 0.125, -2.0], noise.sum())
        elif kind == 1:  # a coarse grid: ties, not only plateaus
            x = np.round(rng.normal(0, 0.4, m) + np.repeat(rng.choice([0, 0, -1, 0.6], m // 50 + 1), 50)[:m], 2)
        else:  # sINI-like: near zero, one-region spikes, segments
            x = rng.normal(0, 0.05, m)
            x[rng.random(m) < 0.3] = 0.0
            spikes = rng.random(m) < 0.02
            x[spikes] = rng.choice([-1.0, 1.0, 0.58], spikes.sum())
            for _ in range(m // 300 + 1):
                s = rng.integers(0, m - 40)
                x[s:s + rng.integers(5, 40)] += rng.choice([-1.0, 0.58])
        cols.append(x)
    return np.asfortranarray(np.column_stack(cols))


PARAMS = [{}, {"alpha": 0.2, "min_seg": 5}, {"alpha": 12}, {"min_seg": 2, "delta": 5}, {"min_seg": 7},
          {"seg_median_t": (0, 0)}, {"cyber_weight": 1.0, "max_int": 25}, {"eps": 0.0}]


@pytest.mark.parametrize("seed", range(len(PARAMS)))
def test_finish_equals_cpu_segmentation_on_tie_prone_vectors(seed):
    rng = np.random.default_rng(100 + seed)
    m, n = 2400, 4
    x = _matrix(rng, m, n)
    blocks = [(0, 900), (900, 905), (905, m)]
    kw = PARAMS[seed]
    ref = segment_columns_arrays(x, blocks, **kw)
    for kind in ("exact", "by_value", "by_position"):
        counts: dict = {}
        got = sgg.segment_columns_arrays_gpu(x, blocks, statistic=_statistic(kind, seed, counts), **kw)
        for k in ref:
            assert np.array_equal(ref[k], got[k]), (k, kind, kw)
        assert counts["candidates"] > 0


def test_tied_neighbours_are_not_recomputed():
    """Neighbours whose best windows have the same (t, dof) tie in the exact statistic as in the GPU's: they are
    decided without recomputing them (full_recompute, which trusts no GPU window, recomputes them), with the same
    segments."""
    rng = np.random.default_rng(7)
    x = _matrix(rng, 6000, 3)
    x[:, 0] = np.resize(np.repeat([0.0, 0.0, 1.0, 0.0, -1.0, 0.0, 0.0], [40, 3, 1, 25, 1, 2, 30]), 6000)
    blocks = [(0, 6000)]
    ref = segment_columns_arrays(x, blocks)
    t_ties: dict = {}
    got = sgg.segment_columns_arrays_gpu(x, blocks, statistic=_statistic("by_value", 0, {}), timings=t_ties)
    t_full: dict = {}
    full = sgg.segment_columns_arrays_gpu(x, blocks, statistic=_statistic("by_value", 0, {}), timings=t_full,
                                          full_recompute=True)
    for k in ref:
        assert np.array_equal(ref[k], got[k]) and np.array_equal(ref[k], full[k]), k
    assert t_ties["seg_recomputed"] * 2 < t_full["seg_recomputed"], (t_ties, t_full)


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(3))
def test_gpu_statistic_on_tie_prone_vectors_gives_the_cpu_segments(seed):
    """On a real GPU: the statistic from the kernels, finished on the host, equals the CPU segmentation on
    tie-prone vectors; the tie rule recomputes fewer positions than trusting no GPU window does."""
    from gcnmops.cuda.probe import gpu_available

    if not gpu_available():
        pytest.skip("no usable CUDA GPU")
    rng = np.random.default_rng(300 + seed)
    x = _matrix(rng, 200_000, 6)
    blocks = [(0, 120_000), (120_000, 120_050), (120_050, 200_000)]
    kw = PARAMS[seed]
    ref = segment_columns_arrays(x, blocks, **kw)
    t: dict = {}
    got = sgg.segment_columns_arrays_gpu(x, blocks, timings=t, **kw)
    t_full: dict = {}
    full = sgg.segment_columns_arrays_gpu(x, blocks, timings=t_full, full_recompute=True, **kw)
    for k in ref:
        assert np.array_equal(ref[k], got[k]) and np.array_equal(ref[k], full[k]), (k, kw)
    assert t["seg_recomputed"] <= t_full["seg_recomputed"], (t, t_full)
