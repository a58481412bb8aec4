"""The fast segmentation (gcnmops.segmentation.cpu) and the Student t tail it rests on (gcnmops.exact.tdist).

Golden case ``segment`` (cn.mops's segment() on five vectors and three parameter sets), the segmentation
tables of every pipeline case recomputed from their golden sINI, the t tail against R's pt() (computed
at test time, marked ``r``), the screening approximation against its error bounds, the fast statistic
against the all-exact reference, the batched entry point against per-vector calls, and input errors.
"""
from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest
from numba import njit

from golden import GOLDEN_DIR, array, assert_close, case_names, manifest, table
from gcnmops.exact import tdist
from gcnmops.errors import InputError
from gcnmops.segmentation.cpu import segment, segment_columns, segment_columns_arrays
from gcnmops.segmentation.kernels import (is_candidate, position_stat, position_stat_plain, prefix_sums,
                                         scan_position, window_constants, window_deviates)

#: parameter sets of the golden case ``segment``: table ``<vector>_<set>`` = segment(vector, **set)
PARAM_SETS = {"default": {}, "minSeg5_eps0": dict(min_seg=5, eps=0), "alpha20": dict(alpha=20)}


def _first(v):
    return v[0] if isinstance(v, list) else v


def _segment_tables():
    if not (GOLDEN_DIR / "segment" / "manifest.json").is_file():
        return [pytest.param(None, id="segment", marks=pytest.mark.skip(
            reason=f"golden case 'segment' not found under {GOLDEN_DIR} (set GCNMOPS_GOLDEN_DIR)"))]
    return [pytest.param(name, id=name) for name in sorted(manifest("segment")["tables"])]


def _assert_segments(got, exp, what):
    assert len(got) == len(exp), f"{what}: {len(got)} segments, cn.mops has {len(exp)}"
    np.testing.assert_array_equal(got["start"].to_numpy(), exp["start"].to_numpy(), err_msg=f"{what}: start")
    np.testing.assert_array_equal(got["end"].to_numpy(), exp["end"].to_numpy(), err_msg=f"{what}: end")
    assert_close(got["mean"].to_numpy(), exp["mean"].to_numpy(), f"{what}: mean")
    assert_close(got["median"].to_numpy(), exp["median"].to_numpy(), f"{what}: median")


@pytest.mark.parametrize("table_name", _segment_tables())
def test_golden_segment(table_name):
    vec, pset = table_name.split("_", 1)
    assert pset in PARAM_SETS, f"unknown parameter set {pset!r} in golden table {table_name}"
    got = segment(array("segment", vec), **PARAM_SETS[pset])
    _assert_segments(got, table("segment", table_name), table_name)


def _pipeline_cases():
    out = []
    for case in case_names():
        m = manifest(case)
        arrays = m["arrays"] if isinstance(m["arrays"], dict) else {}
        tables = m["tables"] if isinstance(m["tables"], dict) else {}
        if ("localAssessments" in arrays and "segmentation" in tables and "gr" in tables
                and _first(m["result_params"].get("segAlgorithm", "fast")) == "fast"):
            out.append(pytest.param(case, id=f"{case}-segmentation"))
    if not out:
        out.append(pytest.param(None, id="segmentation", marks=pytest.mark.skip(
            reason=f"no golden pipeline case under {GOLDEN_DIR} (set GCNMOPS_GOLDEN_DIR)")))
    return out


@pytest.mark.parametrize("case", _pipeline_cases())
def test_golden_segmentation_from_sini(case):
    """cn.mops's segmentation table from its own sINI: per chromosome and sample, minSeg = minWidth."""
    m = manifest(case)
    sini = np.asarray(array(case, "localAssessments"), dtype=np.float64)
    sini = np.asfortranarray(sini.reshape(sini.shape[0], -1))
    gr = table(case, "gr")
    seq = gr["seqnames"].astype(str).to_numpy()
    first = np.flatnonzero(np.r_[True, seq[1:] != seq[:-1]])
    blocks = list(zip(first, np.r_[first[1:], seq.size]))
    seg = segment_columns(sini, blocks, min_seg=int(_first(m["result_params"]["minWidth"])))
    rows0 = first[seg["block"].to_numpy()] + seg["start"].to_numpy() - 1
    rows1 = first[seg["block"].to_numpy()] + seg["end"].to_numpy() - 1
    exp = table(case, "segmentation")
    assert len(seg) == len(exp), f"{case}: {len(seg)} segments, cn.mops has {len(exp)}"
    np.testing.assert_array_equal(seq[rows0], exp["seqnames"].astype(str).to_numpy())
    np.testing.assert_array_equal(gr["start"].to_numpy()[rows0], exp["start"].to_numpy())
    np.testing.assert_array_equal(gr["end"].to_numpy()[rows1], exp["end"].to_numpy())
    names = np.asarray(m["sampleNames"], dtype=str)[seg["sample"].to_numpy()]
    np.testing.assert_array_equal(names, exp["sampleName"].astype(str).to_numpy())
    assert_close(seg["mean"].to_numpy(), exp["mean"].to_numpy(), f"{case}: mean")
    assert_close(seg["median"].to_numpy(), exp["median"].to_numpy(), f"{case}: median")


# --- the t tail ----------------------------------------------------------------------------------------

@njit(error_model="numpy")
def _tail_all(t, dof):
    out = np.empty(t.size)
    for k in range(t.size):
        out[k] = tdist.t_neglog_upper(t[k], dof[k])
    return out


@njit(error_model="numpy")
def _deviates_all(t, dof):
    y = np.empty(t.size)
    e = np.empty(t.size)
    for k in range(t.size):
        y[k] = tdist.t_tail_deviate_approx(t[k], dof[k])
        e[k] = tdist.approx_error_bound(t[k], dof[k])
    return y, e


R_GRID = r"""
set.seed(7)
t <- c(0, 1e-300, 1e-12, 1e-8, 1e-4, 0.01, 0.1, 0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 7, 10, 15, 25, 40, 100, 1e3, 1e4,
       1e5, 1e6, 1e7, 1e8, -0.5, -2, -30, 10^runif(150, -3, 8))
dof <- c(1, 1.001, 1.5, 2, 2.5, 3, 4.5, 7, 10, 12.5, 23.999, 24, 24.001, 30, 49.9, 51, 60.5, 88, 100, 133.3, 178.9,
         200, runif(25, 1, 200))
g <- expand.grid(t = t, dof = dof)
q <- -pt(g$t, g$dof, lower.tail = FALSE, log.p = TRUE)
writeLines(sprintf("%.17g\t%.17g\t%.17g", g$t, g$dof, q))
"""


@pytest.mark.r
def test_t_tail_matches_r():
    rscript = shutil.which("Rscript")
    if rscript is None:
        pytest.skip("Rscript not found")
    out = subprocess.run([rscript, "-e", R_GRID], capture_output=True, text=True, check=True, timeout=120).stdout
    t, dof, q = np.loadtxt(out.splitlines(), delimiter="\t", unpack=True)
    ours = _tail_all(t, dof)
    rel = np.abs(ours - q) / np.abs(q)
    k = int(np.argmax(rel))
    assert rel.max() <= 1e-12, f"t={t[k]!r}, dof={dof[k]!r}: {ours[k]!r} vs R {q[k]!r}"


def test_t_tail_basic_values():
    # the underflowing tail of the brief: -pt(1e6, 30, lower.tail=FALSE, log.p=TRUE) = 366.075...
    assert abs(tdist.t_neglog_upper(1e6, 30.0) - 366.075225) < 1e-5
    assert tdist.t_neglog_upper(0.0, 7.0) == pytest.approx(math.log(2.0), rel=1e-15)
    assert tdist.t_neglog_upper(math.inf, 3.0) == math.inf
    assert math.isnan(tdist.t_neglog_upper(1.0, 0.0))
    # Cauchy (dof 1): P(T > t) = 1/2 - atan(t)/pi
    for t in (0.3, 1.0, 7.0):
        assert tdist.t_neglog_upper(t, 1.0) == pytest.approx(-math.log(0.5 - math.atan(t) / math.pi), rel=1e-13)


def test_t_tail_matches_scipy_where_it_does_not_underflow():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    t = np.concatenate([rng.uniform(0, 8, 3000), rng.uniform(-5, 0, 300)])
    dof = rng.uniform(1, 200, t.size)
    ref = -stats.t.logsf(t, dof)
    assert_close(_tail_all(t, dof), ref, "t tail vs scipy", rtol=1e-11)


def test_screening_approximation_within_bounds():
    """The deviate approximation's measured error stays 10 times below the bounds the screening uses."""
    special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(5)
    n = 200_000
    t1 = rng.uniform(0, tdist.APPROX1_MAX_T, n)
    d1 = np.exp(rng.uniform(math.log(tdist.APPROX1_MIN_DOF), math.log(1e6), n))
    d1[: n // 4] = tdist.APPROX1_MIN_DOF
    t2 = rng.uniform(0, tdist.APPROX2_MAX_T, n)
    d2 = np.exp(rng.uniform(math.log(tdist.APPROX2_MIN_DOF), math.log(1e6), n))
    d2[: n // 4] = tdist.APPROX2_MIN_DOF
    t = np.concatenate([t1, t2, [tdist.APPROX1_MAX_T, tdist.APPROX2_MAX_T]])
    dof = np.concatenate([d1, d2, [tdist.APPROX1_MIN_DOF, tdist.APPROX2_MIN_DOF]])
    exact = -special.ndtri_exp(-_tail_all(t, dof))  # the exact normal deviate
    y, bound = _deviates_all(t, dof)
    assert np.isfinite(bound).all()
    err = np.abs(y - exact)
    k = int(np.argmax(err / bound))
    assert (err <= bound / 10).all(), f"t={t[k]}, dof={dof[k]}: error {err[k]:.3g}, bound {bound[k]:.3g}"
    assert tdist.approx_error_bound(30.0, 1000.0) == math.inf
    assert tdist.approx_error_bound(5.0, 20.0) == math.inf
    r = np.concatenate([np.linspace(0, 22.99, 20001), 10.0 ** np.linspace(-300, 0, 301)])  # the log1p of Hill's
    fast = np.array([tdist.log1p_fast(v) for v in r])
    assert_close(fast, np.log1p(r), "log1p_fast", rtol=1e-13)


def test_small_t_series_within_bounds():
    """The series deviate of small t (near-constant stretches: tails within rounding of log 2) stays 10 times below
    its bound around the deviate of R's own rounded tail, also where R's roundings dominate (t below 1e-14)."""
    special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(12)
    n = 200_000
    t = np.concatenate([10.0 ** rng.uniform(-9, math.log10(tdist.SMALL_T_MAX), n), 10.0 ** rng.uniform(-300, -9, n),
                        [0.0, tdist.SMALL_T_MAX]])
    dof = np.exp(rng.uniform(math.log(tdist.SMALL_MIN_DOF), math.log(1e7), t.size))
    dof[: n // 4] = tdist.SMALL_MIN_DOF + rng.uniform(0, 5, n // 4)
    dof[-1] = tdist.SMALL_MIN_DOF
    q = _tail_all(t, dof)
    # the deviate Y of R's q, P(Z > Y) = exp(-q): q - log 2 is exact (Sterbenz), P = exp(-(q - log 2)) / 2
    exact = -special.ndtri(np.exp(-(q - math.log(2.0))) / 2.0)
    y, bound = _deviates_all(t, dof)
    assert (bound <= tdist.SMALL_REL_ERR * t + tdist.SMALL_ABS_ERR * (1 + 1e-12)).all()
    err = np.abs(y - exact)
    k = int(np.argmax(err / bound))
    assert (err <= bound / 10).all(), f"t={t[k]}, dof={dof[k]}: error {err[k]:.3g}, bound {bound[k]:.3g}"
    assert tdist.approx_error_bound(2 * tdist.SMALL_T_MAX, 100.0) == tdist.APPROX1_ERR
    assert tdist.approx_error_bound(1e-6, 30.0) == tdist.APPROX1_ERR  # dof below the series' range: Hill's


def test_near_zero_vectors_screen_without_exact_tails():
    """On near-zero sINI most candidates' windows tie under Hill's bounds; the series decides most of them, the rest
    are deferred and only those that may reach the threshold get an exact statistic (the result: the equality
    tests below)."""
    from gcnmops.segmentation import cpu
    from gcnmops.segmentation.host import local_half_width, vector_constants, window_scratch

    x = np.ascontiguousarray(_near_zero_sini(6000, 1, 6)[:, 0])
    m = x.size
    S, Q, p, yv, ev, work = (np.empty(m) for _ in range(6))
    code = np.empty(m, dtype=np.int64)
    jinv, jnn, jc, ybuf, ebuf, qbuf = window_scratch(3, 40, 50.0)
    eps, _, _, V = vector_constants(x, False, 0.0, True, 0.0, 0.0, work)
    njit(prefix_sums)(x, S, Q)
    cpu._screen_positions(x, S, Q, eps, 3, 20, 40, 50.0, V, False, jinv, jnn, jc, ybuf, ebuf, qbuf, p, code, yv, ev,
                          0, m)
    deferred = code == cpu.DEFERRED
    decided = code > 0
    assert decided.sum() > 800 and deferred.sum() > 50 and (code == cpu.EXACT).sum() < 0.01 * m
    lower = cpu._exact_lower(0.05, local_half_width(3), code, yv, ev, work)
    assert np.isfinite(lower)
    assert (deferred & (yv + ev < lower)).sum() > 0.5 * deferred.sum()  # most deferred never get an exact tail


# --- the statistic and the batched driver ----------------------------------------------------------------

def _sini_like(m, n, seed, shifts=10):
    """Mostly ~0 with noise sd 0.3 and planted +-1 shifts over 20-200 rows."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 0.3, (m, n))
    for s in range(n):
        for _ in range(shifts):
            length = int(rng.integers(20, 201))
            start = int(rng.integers(0, m - length))
            x[start:start + length, s] += rng.choice([-1.0, 1.0])
    return np.asfortranarray(x)


def _test_matrices():
    rng = np.random.default_rng(21)
    yield "sini", _sini_like(6000, 3, 1)
    yield "ties", np.asfortranarray(np.round(_sini_like(6000, 2, 2) * 3) / 3)
    z = _sini_like(6000, 2, 3)
    z[rng.random(z.shape) < 0.5] = 0.0
    yield "zeros", z
    yield "offset", np.asfortranarray(_sini_like(6000, 2, 4) * 5 + 1e4)
    big = _sini_like(6000, 2, 5) * 0.05
    big[::397] += 3.0
    yield "large_t", big
    yield "near_zero", _near_zero_sini(6000, 2, 6)


def _near_zero_sini(m, n, seed):
    """sINI as cn.mops gives it on a confident cohort: mostly 1e-99..1e-20 (every sample surely in the normal class;
    the windows' tails all lie within rounding of log 2, most tie exactly), some 1e-6..0.1, planted +-1 shifts."""
    rng = np.random.default_rng(seed)
    x = 10.0 ** rng.uniform(-99, -20, (m, n)) * rng.choice([1.0, 1.0, 1.0, -1.0], (m, n))
    some = rng.random((m, n)) < 0.03
    x[some] = 10.0 ** rng.uniform(-6, -1, some.sum())
    for s in range(n):
        for _ in range(4):
            length = int(rng.integers(20, 201))
            start = int(rng.integers(0, m - length))
            x[start:start + length, s] += rng.choice([-1.0, 1.0])
    return np.asfortranarray(x)


FAST_VS_REFERENCE_ARGS = [
    dict(seg_median_t=(0, 0)),
    dict(),
    dict(min_seg=5, eps=0, seg_median_t=(0, 0)),
    dict(alpha=0.2, min_seg=2, seg_median_t=(0, 0)),
    dict(alpha=25, seg_median_t=(0, 0)),
    dict(cyber_weight=5, seg_median_t=(0, 0)),
    dict(cyber_weight=500, delta=3, max_int=60, seg_median_t=(0, 0)),
    dict(delta=-1, seg_median_t=(0, 0)),
]


@pytest.mark.parametrize("kwargs", FAST_VS_REFERENCE_ARGS, ids=lambda k: ",".join(f"{a}={v}" for a, v in k.items())
                         or "default")
def test_screened_statistic_equals_all_exact_reference(kwargs):
    """The screening (approximate tails with bounds, exact tails only where they decide) changes nothing."""
    for name, x in _test_matrices():
        blocks = [(0, 2500), (2500, x.shape[0])]
        fast = segment_columns_arrays(x, blocks, **kwargs)
        ref = segment_columns_arrays(x, blocks, reference=True, **kwargs)
        for key in ("block", "sample", "start", "end", "mean", "median"):
            np.testing.assert_array_equal(fast[key], ref[key], err_msg=f"{name} {kwargs}: {key}")


@njit(cache=False)
def _screened_and_plain(x, min_seg, delta, max_int, w, eps, V):
    """(p_i as screened (scan_position), p_i with every tail exact) of every candidate position of x."""
    m = x.size
    S = np.empty(m)
    Q = np.empty(m)
    prefix_sums(x, S, Q)
    nwin = max_int - min_seg + 1
    jinv, jnn, jc = np.empty(nwin), np.empty(nwin), np.empty(nwin)
    window_constants(min_seg, nwin, w, jinv, jnn, jc)
    ybuf, ebuf, qbuf = np.empty(nwin), np.empty(nwin), np.empty(nwin)
    fast = np.zeros(m)
    plain = np.zeros(m)
    for i in range(m - 1):
        if is_candidate(x, i, min_seg, eps):
            fast[i] = scan_position(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf, qbuf)[0]
            plain[i] = position_stat_plain(S, Q, i, m, min_seg, delta, max_int, w, V)
    return fast, plain


@pytest.mark.parametrize("delta", [20, 5, 0])
def test_screened_statistic_equals_exact_at_every_position(delta):
    """p_i of every candidate position, screened (ties of consecutive windows decide nothing where the windows'
    stop cannot depend on them), equals p_i with every tail exact, bit for bit: sINI-like, rounded to thirds
    (exact ties everywhere), half zeros, thirds plus noise far below the approximation's bounds (near ties)."""
    rng = np.random.default_rng(8)
    near = _sini_like(6000, 2, 6)
    near = np.asfortranarray(np.round(near * 3) / 3 + rng.normal(0.0, 1e-9, near.shape))  # near, inexact ties
    for name, x in [*_test_matrices(), ("near_ties", near)]:
        for s in range(x.shape[1]):
            v = np.ascontiguousarray(x[:, s])
            eps = float(np.quantile(np.abs(np.diff(v)), 0.75))
            fast, plain = _screened_and_plain(v, 3, delta, 40, 50.0, eps, float(np.var(v, ddof=1)))
            assert (plain > 0).sum() > 100
            np.testing.assert_array_equal(fast, plain, err_msg=f"{name}, sample {s}, delta {delta}")


def test_kernels_run_as_plain_python():
    """The register_jitable kernels are plain scalar code: run uncompiled (as the CUDA simulator does)."""
    x = _sini_like(400, 1, 9)[:, 0]
    S = np.cumsum(x)
    Q = np.cumsum(x * x)
    V = float(np.var(x, ddof=1))
    nwin = 38
    ybuf, ebuf, qbuf = np.empty(nwin), np.empty(nwin), np.empty(nwin)
    jinv, jnn, jc = np.empty(nwin), np.empty(nwin), np.empty(nwin)
    window_constants(3, nwin, 50.0, jinv, jnn, jc)
    for i in (45, 150, 151, 300):
        plain = position_stat_plain(S, Q, i, x.size, 3, 20, 40, 50.0, V)
        assert position_stat(S, Q, i, x.size, 3, 20, 40, 50.0, V, ybuf, ebuf, qbuf) == plain
        window_deviates(S, Q, i, 3, nwin, 50.0, V, jinv, jnn, jc, ybuf, ebuf)
        assert np.isfinite(ybuf).all()


@pytest.mark.parametrize("kwargs", [dict(), dict(alpha=10), dict(min_seg=5, eps=0), dict(cyber_weight=10, delta=5),
                                    dict(seg_median_t=0.5), dict(seg_median_t=(0.8, -0.3), max_int=20)],
                         ids=["default", "alpha10", "minseg5_eps0", "cw10_delta5", "segT", "segT_pair"])
def test_segment_columns_equals_per_vector_segment(kwargs):
    x = _sini_like(3000, 4, 11, shifts=6)
    blocks = [(0, 700), (700, 700), (700, 2100), (2100, 3000)]
    got = segment_columns(x, blocks, **kwargs)
    assert list(got.columns) == ["block", "sample", "start", "end", "mean", "median"]
    parts = []
    for b, (lo, hi) in enumerate(blocks):
        for s in range(x.shape[1]):
            one = segment(x[lo:hi, s], **kwargs)
            one.insert(0, "sample", s)
            one.insert(0, "block", b)
            parts.append(one)
    import pandas as pd

    exp = pd.concat(parts, ignore_index=True)
    assert len(got) == len(exp)
    for key in ("block", "sample", "start", "end"):
        np.testing.assert_array_equal(got[key].to_numpy(), exp[key].to_numpy(), err_msg=key)
    np.testing.assert_array_equal(got["mean"].to_numpy(), exp["mean"].to_numpy())
    np.testing.assert_array_equal(got["median"].to_numpy(), exp["median"].to_numpy())


def test_segments_tile_the_vector_with_r_means_and_medians():
    x = _sini_like(5000, 1, 13)[:, 0]
    for kwargs in (dict(), dict(seg_median_t=(0, 0)), dict(alpha=0.3, min_seg=7)):
        seg = segment(x, **kwargs)
        start, end = seg["start"].to_numpy(), seg["end"].to_numpy()
        assert start[0] == 1 and end[-1] == x.size
        np.testing.assert_array_equal(start[1:], end[:-1] + 1)
        assert_close(seg["mean"].to_numpy(), [np.mean(x[s - 1:e]) for s, e in zip(start, end)], "mean", rtol=1e-13)
        np.testing.assert_array_equal(seg["median"].to_numpy(), [np.median(x[s - 1:e]) for s, e in zip(start, end)])


def test_breakpoint_counts():
    x = _sini_like(4000, 1, 17)[:, 0]
    # alpha >= 1: the floor(alpha) strongest positions, then no merging: floor(alpha) + 1 segments
    assert len(segment(x, alpha=7.9, seg_median_t=(0, 0))) == 8
    # alpha < 1: the positions above the (1 - alpha) quantile of the statistic
    assert len(segment(x, alpha=0.01, seg_median_t=(0, 0))) == 41
    # merging only joins segments
    assert len(segment(x)) <= len(segment(x, seg_median_t=(0, 0)))
    # a planted shift is found exactly
    y = np.r_[np.zeros(300), np.full(40, 2.0), np.zeros(300)] + np.random.default_rng(1).normal(0, 0.1, 640)
    seg = segment(y)
    np.testing.assert_array_equal(seg["start"], [1, 301, 341])
    np.testing.assert_array_equal(seg["end"], [300, 340, 640])


def test_small_and_non_finite_inputs():
    assert len(segment([])) == 0
    one = segment([2.5])
    assert one.to_dict("list") == {"start": [1], "end": [1], "mean": [2.5], "median": [2.5]}
    assert segment([0, 0, 0, 0, 0])[["start", "end"]].to_numpy().tolist() == [[1, 5]]
    assert segment(np.full(6, np.nan))["mean"].tolist() == [0.0]
    # +Inf -> largest finite value, -Inf -> smallest, NaN -> 0
    x = np.r_[np.zeros(20), 5.0, np.inf, 6.0, np.full(20, 1.0), -np.inf, np.nan]
    clean = np.r_[np.zeros(20), 5.0, 6.0, 6.0, np.full(20, 1.0), 0.0, 0.0]
    got = segment(x, seg_median_t=(0, 0))
    exp = segment(clean, seg_median_t=(0, 0))
    np.testing.assert_array_equal(got.to_numpy(), exp.to_numpy())
    # integer input, lists and an empty block
    assert segment(list(range(30))).shape == (1, 4)
    assert len(segment_columns(np.zeros((10, 2)), [(0, 0), (0, 10)])) == 2
    assert len(segment_columns(np.zeros((10, 2)), [])) == 0


@pytest.mark.parametrize("kwargs", [
    dict(alpha="0.05"), dict(alpha=None), dict(alpha=0), dict(alpha=-1), dict(alpha=float("nan")), dict(alpha=True),
    dict(min_seg="3"), dict(max_int=None), dict(delta="x"), dict(cyber_weight=[1, 2]), dict(eps="0"),
    dict(seg_median_t=(1, 2, 3)), dict(seg_median_t="a"),
], ids=lambda k: next(iter(k)) + "=" + repr(next(iter(k.values()))))
def test_bad_parameters(kwargs):
    with pytest.raises(InputError):
        segment(np.zeros(50), **kwargs)


def test_bad_inputs():
    with pytest.raises(InputError):
        segment("abc")
    with pytest.raises(InputError):
        segment(["a", "b"])
    with pytest.raises(InputError):
        segment_columns(np.zeros((10, 2)), [(0, 11)])
    with pytest.raises(InputError):
        segment_columns(np.zeros((10, 2)), [(5, 3)])


def test_rows_of_a_larger_matrix_are_prepared_in_place_as_their_copy():
    """The several-GPU path hands the segmentation the rows of a chromosome block of the whole run's sINI
    (``x[b0:b1]``, not contiguous): ``checked_columns(keep_rows=True)`` keeps that view (no copy), and the host
    preparation read from it (a numba variant for strided columns) equals the one read from its copy; C-ordered or
    other dtypes are still converted."""
    from gcnmops.segmentation.gpu import prepare_vectors
    from gcnmops.segmentation.interface import checked_columns, resolve_params

    rng = np.random.default_rng(3)
    whole = np.asfortranarray(rng.normal(size=(900, 4)))
    whole[400:430, 1] += 3.0
    whole[612, 2] = np.inf  # a vector that needs cleaning
    rows = whole[300:800]
    blocks = [(0, 230), (230, 500)]
    kept, firsts, ends = checked_columns(rows, blocks, keep_rows=True)
    assert kept is rows and not kept.flags.f_contiguous
    assert checked_columns(rows, blocks)[0].flags.f_contiguous  # the default copies
    assert checked_columns(np.ascontiguousarray(rows), blocks, keep_rows=True)[0].flags.f_contiguous
    params = resolve_params(0.05, None, 3, None, 20, 40, 50)
    a = prepare_vectors(kept, firsts, ends, params)
    b = prepare_vectors(np.asfortranarray(rows), firsts, ends, params)
    for name in ("xt", "offs", "coffs", "vec_eps", "vec_V", "vec_thi", "vec_tlo", "dirty"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.dirty.any()


@pytest.mark.parametrize("dirty", [False, True])
def test_host_preparation_reads_a_clean_column_major_matrix_in_place(dirty):
    """Blocks tiling a column-major matrix without a value to clean: the host preparation's vectors are the
    matrix itself (no copy), every constant equal to the copying preparation's (from rows of a larger matrix);
    with a value to clean it copies and cleans, the matrix left as it was."""
    from gcnmops.segmentation.gpu import prepare_vectors
    from gcnmops.segmentation.interface import resolve_params

    rng = np.random.default_rng(5)
    whole = np.asfortranarray(rng.normal(size=(700, 5)))
    whole[100:140, 3] -= 2.5
    values = np.asfortranarray(whole[50:650])
    if dirty:
        values[17, 2] = np.nan
    before = values.copy(order="F")
    firsts, ends = np.array([0, 250, 251]), np.array([250, 251, 600])
    params = resolve_params(0.05, None, 3, None, 20, 40, 50)
    got = prepare_vectors(values, firsts, ends, params)
    rows = np.asfortranarray(np.vstack([values, np.zeros((3, 5))]))[:600]  # rows of a larger matrix: copied
    ref = prepare_vectors(rows, firsts, ends, params)
    assert np.shares_memory(got.xt, values) is not dirty
    for name in ("xt", "offs", "coffs", "vec_eps", "vec_V", "vec_thi", "vec_tlo", "dirty"):
        np.testing.assert_array_equal(getattr(got, name), getattr(ref, name), err_msg=name)
    np.testing.assert_array_equal(values, before)
    assert bool(got.dirty.any()) is dirty


@pytest.mark.parametrize("cores", [3, 9])
def test_vectors_split_over_the_cores_equal_one_per_core(cores, monkeypatch):
    """The one vector that does not fill a round of the cores (``cores`` of them, said to the driver), the
    smallest, is segmented with its positions split over the cores (``_final_ends_split``, bands of SPLIT_BAND
    positions): the same segments as one vector per core, also with a vector to clean, several bands and the exact
    tails everywhere (``reference``)."""
    from gcnmops.segmentation import cpu

    rng = np.random.default_rng(11)
    x = np.asfortranarray(rng.normal(size=(2600, 5)))
    x[300:340, 1] += 2.5
    x[1200:1210, 4] -= 3.0
    x[77, 3] = np.inf
    blocks = [(0, 2000), (2000, 2600)]  # 10 vectors
    one = [cpu.segment_columns_arrays(x, blocks, reference=ref) for ref in (False, True)]
    split_calls = []
    real = cpu._final_ends_split
    monkeypatch.setattr(cpu, "SPLIT_BAND", 300)
    monkeypatch.setattr(cpu, "get_num_threads", lambda: cores)
    monkeypatch.setattr(cpu, "_final_ends_split", lambda *a: split_calls.append(a[0].size) or real(*a))
    split = [cpu.segment_columns_arrays(x, blocks, reference=ref) for ref in (False, True)]
    assert split_calls == [600, 600]  # one of block 2's vectors, in each of the two runs
    for a, b in zip(one, split):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert len(one[0]["start"]) > 10


@pytest.mark.parametrize("ntask, cores, split", [(330, 16, 0), (5, 2, 1), (1, 16, 1), (2, 16, 0), (17, 16, 1),
                                                  (20, 16, 0), (8, 1, 0), (16, 16, 0)])
def test_only_a_remainder_that_a_split_ends_sooner_is_split(ntask, cores, split):
    """A split vector still spends SPLIT_SERIAL of its time on one core: the remainder of a round is split only
    where that ends the run sooner than one more round of whole vectors (one vector, on two cores or more)."""
    from gcnmops.segmentation.cpu import _split_count

    assert _split_count(ntask, cores) == split
