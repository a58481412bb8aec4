"""The sample QC's spreads on the GPU (calls/spreads_gpu.py) without a GPU: numba's CUDA simulator runs the kernel
in the session's simulator child (cudasim.py), numpy standing in for cupy.

Against the CPU's (calls/spreads.py), bit for bit: columns of normal, heavy-tailed and tiny values, log2 ratios,
ties of whole numbers, -0.0 mixed with 0.0, NaN and infinities left out, columns of no, one and two finite values
a constant one and a symmetric one (odd and even counts of finite values), two matrices in one call, groups of columns split over
several launches; the streamed QC (pipeline.streamqc.qc_by_columns) on the GPU equal to the CPU's table.
"""
from __future__ import annotations

import numpy as np
import pytest

import cudasim

CHILD = r'''
    import json, sys
    import numpy as np
    import pandas as pd
    from gcnmops.calls import spreads_gpu
    from gcnmops.calls.qc import column_spreads, coverage_qc, window_medians
    from gcnmops.cuda.probe import Backend
    from gcnmops.pipeline.streamqc import qc_by_columns

    rng = np.random.default_rng(3)
    m = 61


    def col(kind):
        if kind == 0: return rng.normal(size=m)
        if kind == 1:
            x = rng.normal(size=m); x[rng.random(m) < 0.2] = np.nan; x[3] = np.inf; x[4] = -np.inf; return x
        if kind == 2: return rng.integers(-3, 4, size=m).astype(float)
        if kind == 3:
            x = np.zeros(m); x[::2] = -0.0; x[::7] = 1.0; x[::5] = -1.0; return x
        if kind == 4: return np.full(m, np.nan)
        if kind == 5: x = np.full(m, np.nan); x[7] = 2.0; return x
        if kind == 6: x = np.full(m, np.nan); x[5:7] = [1.0, 3.0]; return x
        if kind == 7: return np.full(m, 5.0)
        if kind == 8: return rng.standard_cauchy(size=m)
        if kind == 9: return np.log2((rng.poisson(30, m) + 1) / 31)
        if kind == 10: return rng.normal(size=m) * 1e-5
        if kind == 11:
            x = rng.normal(size=m); x[-1] = np.nan; return x  # an even count of finite values
        v = rng.integers(1, 9, size=m // 2) / 4.0  # symmetric about 0: sums that nearly cancel
        return np.concatenate([v, [0.0], -v[::-1]])


    def same(a, b):
        return bool(a.shape == b.shape and ((a == b) | (np.isnan(a) & np.isnan(b))).all())


    out = {}
    X = np.column_stack([col(k) for k in range(13)])
    Y = np.column_stack([col(k) for k in (9, 8, 2, 1, 0, 3, 10, 7, 6, 5, 4, 11, 12)])
    cpu = column_spreads(X, Y)
    out["one_launch"] = same(column_spreads(X, Y, Backend.GPU), cpu)
    out["signed_zero_iqr_positive"] = not bool(np.signbit(cpu[3, 1]))
    out["single_matrix"] = same(column_spreads(X[:, :3], None, Backend.GPU), cpu[:3, :3])
    out["finite_nonnan_columns"] = int(np.isfinite(cpu).all(axis=1).sum())
    out["constant_takes_mad"] = bool(cpu[7, 2] == cpu[7, 0] == 0.0)
    width = spreads_gpu._group_width
    spreads_gpu._group_width = lambda m, total, fraction: 3  # groups straddling the two matrices
    try:
        out["groups"] = same(spreads_gpu.column_spreads_gpu(X[:, 4:8], Y[:, 4:8]), cpu[4:8])
    finally:
        spreads_gpu._group_width = width

    class OutOfMemoryError(Exception):  # as cupy names its own
        pass

    real, tried = spreads_gpu._group_spreads, []

    def short_of_memory(matrices, c0, c1):  # room for two columns at a time, and never for column 5
        tried.append((c0, c1))
        if c1 - c0 > 2 or c0 <= 5 < c1:
            raise OutOfMemoryError("out of memory allocating 1,234 bytes")
        return real(matrices, c0, c1)

    spreads_gpu._group_spreads = short_of_memory
    spreads_gpu._group_width = lambda m, total, fraction: 8
    try:
        out["out_of_memory"] = same(spreads_gpu.column_spreads_gpu(X[:, :5], Y[:, :5]), cpu[:5])
    finally:
        spreads_gpu._group_spreads, spreads_gpu._group_width = real, width
    out["out_of_memory_tries"] = tried

    class Result:  # what sample_qc reads of a result
        sample_names = [f"s{j}" for j in range(6)]
        cnvs = pd.DataFrame({"sampleName": ["s1"], "start": [1], "end": [100]})
        params = {}

    counts = rng.poisson(20, size=(m, 6)).astype(float)
    norm = counts * 1.01
    sini = rng.normal(size=(m, 6))
    medians = window_medians(norm)
    tables = [qc_by_columns(Result(), Result.sample_names, 4, medians, lambda a, b: counts[:, a:b],
                            lambda a, b: norm[:, a:b], lambda a, b: sini[:, a:b], backend)
              for backend in (Backend.CPU, Backend.GPU)]
    out["streamed_table"] = bool(tables[0].equals(tables[1]))
    out["streamed_rows"] = len(tables[1])
    json.dump(out, open(f"{sys.argv[1]}/result.json", "w"), indent=1)
'''
SCENARIO = cudasim.register(__name__, CHILD)


@pytest.fixture(scope="module")
def sim(cuda_simulator):
    return cuda_simulator.result(SCENARIO)


def test_spreads_equal_the_cpu_bit_for_bit(sim):
    assert sim["one_launch"] and sim["single_matrix"], sim
    # every kind but the columns of no finite value (one in each matrix, in rows 4 and 10) has all three statistics
    assert sim["finite_nonnan_columns"] == 11, sim
    # the constant column's sum of u is 0: its midvariance is the scaled MAD (that branch taken)
    assert sim["constant_takes_mad"], sim


def test_groups_of_columns_over_both_matrices(sim):
    assert sim["groups"], sim


def test_a_group_without_device_memory_is_split_then_left_to_the_cpu(sim):
    """Out of device memory, a group of columns is halved and tried again; a column that still does not fit is
    summarized on the CPU: the same values."""
    assert sim["out_of_memory"], sim
    tries = [tuple(t) for t in sim["out_of_memory_tries"]]
    assert tries[:3] == [(0, 8), (0, 4), (0, 2)] and (5, 6) in tries, tries


def test_signed_zeros_give_a_positive_iqr(sim):
    assert sim["signed_zero_iqr_positive"], sim


def test_streamed_qc_on_the_gpu_equals_the_cpu_table(sim):
    assert sim["streamed_table"] and sim["streamed_rows"] == 6, sim


def test_cpu_takes_negative_zero_as_zero():
    """-0.0 among the values gives the statistics of 0.0 in its place, bit for bit (no -0.0 IQR: q3 - q1)."""
    from gcnmops.calls.qc import column_spreads

    x = np.array([-0.0] * 10 + [0.0] * 10 + [1.0, -1.0, 2.5])
    got = column_spreads(x.reshape(-1, 1))[0]
    assert got[1] == 0.0 and not np.signbit(got[1]), got
    assert np.array_equal(got, column_spreads((x + 0.0).reshape(-1, 1))[0])
