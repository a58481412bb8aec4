"""The segmentation's breakpoints computed on the statistic's support (host.segment_ends_sparse: local maxima,
threshold and ties over the positive positions only, the zeros elsewhere implicit) against the definition
written densely over every position (spec/20-segmentation-and-calls.md, part 1, steps 3-4)."""
import math

import numpy as np
import pytest

from gcnmops.segmentation.host import kth_pair_with_zeros, positive_support, segment_ends_sparse


def _dense_breakpoints(p: np.ndarray, h: int, alpha: float) -> np.ndarray:
    """Positions where an initial segment ends (the last position included), from every position's statistic."""
    m = p.size
    stat = p.copy()
    for i in range(m):
        if h > 0 and i - h > 0 and i + h < m and p[i] > 0 and (p[i - h:i + h + 1] > p[i]).any():
            stat[i] = 0.0
    if alpha < 1:
        s = np.sort(stat)
        index = 1.0 + (m - 1) * (1.0 - alpha)
        lo = int(math.floor(index)) - 1
        frac = index - (lo + 1)
        thr = s[lo]
        if frac > 0 and lo + 1 < m and s[lo + 1] != thr:
            thr = (1.0 - frac) * thr + frac * s[lo + 1]
        ends = stat > thr
    else:
        k = min(int(math.floor(alpha)), m)
        ends = np.zeros(m, dtype=bool)
        if k > 0:
            kth = np.sort(stat)[::-1][k - 1]
            ends = stat > kth
            ties = k - int(ends.sum())
            for i in np.flatnonzero(stat == kth)[:ties]:  # ties taken by position
                ends[i] = True
    ends[m - 1] = True
    return np.flatnonzero(ends)


def _sparse_breakpoints(p: np.ndarray, h: int, alpha: float) -> np.ndarray:
    m = p.size
    pos = np.empty(m, dtype=np.int64)
    pv = np.empty(m)
    n = positive_support(p, pos, pv)
    flags = np.zeros(m, dtype=np.int8)
    count = segment_ends_sparse(np.zeros(m), pos, pv, n, flags, h, alpha, True, 0.0, 0.0, 3, np.empty(m),
                                np.empty(m))
    assert count == int((flags == 1).sum())
    return np.flatnonzero(flags == 1)


@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.9, 1.0, 3.0, 7.9, 50.0])
@pytest.mark.parametrize("h", [0, 1, 2])
def test_sparse_breakpoints_equal_the_dense_definition(alpha, h):
    rng = np.random.default_rng([int(alpha * 10), h])
    for trial in range(150):
        m = int(rng.integers(1, 120))
        p = np.zeros(m)
        support = rng.random(m) < rng.choice([0.0, 0.02, 0.25, 0.9])
        # few distinct values: ties between neighbours, with the threshold and with the k-th largest
        p[support] = rng.choice([0.5, 1.0, 1.0, 2.5, 7.0], size=int(support.sum()))
        np.testing.assert_array_equal(_sparse_breakpoints(p, h, alpha), _dense_breakpoints(p, h, alpha),
                                      err_msg=f"m={m} trial={trial} p={p}")


def test_kth_pair_with_zeros_is_the_order_statistic_of_the_whole_multiset():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(0, 30))
        zeros = int(rng.integers(0, 30))
        if n + zeros == 0:
            continue
        vals = rng.choice([0.0, 0.25, 1.0, 3.0], size=n)
        whole = np.sort(np.concatenate([vals, np.zeros(zeros)]))
        k = int(rng.integers(0, n + zeros))
        a, b = kth_pair_with_zeros(vals.copy(), n, zeros, k)
        assert a == whole[k]
        if k + 1 < whole.size:
            assert b == whole[k + 1]
        else:
            assert math.isnan(b)
