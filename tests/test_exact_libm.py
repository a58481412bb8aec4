"""libm.exp_glibc, exp_full, log_glibc and log1p_glibc: the C library's exp, log and log1p reproduced bit for bit
(compiled by numba and as plain Python)."""
from __future__ import annotations

import math
import platform

import numpy as np
from numba import njit

import pytest

from gcnmops.exact.libm import GLIBC_LOG, HEAD, INVC, LOGC, TAIL, exp_full, exp_glibc, fma, log1p_glibc, log_glibc


@njit(cache=True)
def _mismatches(xs):
    bad = 0
    for x in xs:
        if exp_glibc(x) != math.exp(x):
            bad += 1
    return bad


def test_compiled_exp_equals_the_platform_exp_bit_for_bit() -> None:
    rng = np.random.default_rng(11)
    xs = np.concatenate([
        rng.uniform(-240.0, 1.0, 6_000_000),       # the model's range
        rng.uniform(-511.0, 511.0, 1_000_000),
        rng.uniform(-1.0, 1.0, 1_000_000),
        # arguments next to the k ln2/128 rounding boundaries, where the reduction decides
        (rng.integers(-240 * 185, 185, 1_000_000) + 0.5) * (math.log(2) / 128),
        [0.0, -0.0, 1e-300, -1e-300, 1e-17, -1e-17],
    ])
    assert _mismatches(xs) == 0


def test_plain_python_exp_equals_the_platform_exp() -> None:
    rng = np.random.default_rng(12)
    for x in rng.uniform(-240.0, 1.0, 20_000):
        assert exp_glibc(float(x)) == math.exp(x)


def test_table_is_two_to_the_i_over_128() -> None:
    i = np.arange(128)
    np.testing.assert_allclose(HEAD * (1 + TAIL), 2.0 ** (i / 128), rtol=4e-16)  # numpy's pow is within an ulp
    assert HEAD[0] == 1.0 and TAIL[0] == 0.0


def test_python_fma_rounds_once() -> None:
    a = 1.0 + 2.0 ** -30
    # a*a = 1 + 2^-29 + 2^-60: a*a rounds the 2^-60 away, the fused form keeps it
    assert fma(a, a, -1.0) == 2.0 ** -29 + 2.0 ** -60
    assert a * a - 1.0 == 2.0 ** -29
    assert fma(0.1, 0.2, 0.3) == 0.1 * 0.2 + 0.3


@njit(cache=True)
def _log_mismatches(xs, invc, logc):
    bad = 0
    for x in xs:
        a = log_glibc(x, invc, logc)
        b = math.log(x)
        if a != b and not (a != a and b != b):
            bad += 1
    return bad


def _log_arguments(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([
        np.exp(rng.uniform(-745.0, 709.7, 4_000_000)),     # every binade, subnormals included
        1.0 + rng.uniform(-0.0625, 0.0647, 3_000_000),      # the near-1 branch and its edges
        rng.uniform(1e-6, 1e4, 2_000_000),                  # lambdas (log lambda) of the model
        np.arange(1.0, 3_000_001.0),                        # lgamma's products of integers
        [0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
         1.0, np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0), 1.0 - 2.0 ** -4, 1.0 + 0x109 / 4096],
    ])


@pytest.mark.skipif(not GLIBC_LOG, reason="glibc's log table not found in this process's C library")
def test_compiled_log_equals_the_platform_log_bit_for_bit() -> None:
    xs = _log_arguments(21)
    assert _log_mismatches(xs, INVC, LOGC) == 0
    # copies of the tables (what a GPU block keeps in shared memory) give the same values
    assert _log_mismatches(xs[:500_000], INVC.copy(), LOGC.copy()) == 0


@pytest.mark.skipif(not GLIBC_LOG, reason="glibc's log table not found in this process's C library")
def test_plain_python_log_equals_the_platform_log() -> None:
    rng = np.random.default_rng(22)
    for x in np.concatenate([rng.choice(_log_arguments(23)[:-14], 20_000), [5e-324, 1.0, 0.96]]):
        assert log_glibc(float(x)) == math.log(x)


def test_log_table_is_found_on_glibc() -> None:
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not a glibc system")
    assert GLIBC_LOG
    # 1/c and log(c) of subintervals of [0.6875, 1.375): c = 1/invc
    c = 1.0 / INVC
    assert np.all((c > 0.68) & (c < 1.38)) and np.all(np.diff(c) > 0)
    np.testing.assert_allclose(LOGC, np.log(c), rtol=0, atol=1e-15)


@njit(cache=True)
def _mismatches_wide(xs, which):
    """Arguments where exp_full (which 0) or log1p_glibc (1) differs from the C library's function (NaN == NaN)."""
    bad = 0
    for x in xs:
        a = exp_full(x) if which == 0 else log1p_glibc(x)
        b = math.exp(x) if which == 0 else math.log1p(x)
        if a != b and not (a != a and b != b):
            bad += 1
    return bad


@pytest.mark.skipif(not GLIBC_LOG, reason="the C library is not glibc >= 2.28")
def test_exp_full_equals_the_platform_exp_everywhere() -> None:
    """exp_full beyond exp_glibc's |x| < 512: glibc's special cases, subnormal results rounded once, 0 and inf."""
    rng = np.random.default_rng(13)
    xs = np.concatenate([rng.uniform(-760.0, 720.0, 2_000_000), rng.uniform(-746.0, -700.0, 1_000_000),
                         rng.uniform(-1e4, 1e4, 10_000), 10.0 ** rng.uniform(-300, -15, 10_000),
                         [0.0, -0.0, math.inf, -math.inf, math.nan, -745.1332191019411, -745.1332191019412,
                          709.782712893384, 709.7827128933841, -708.0, -512.0, 512.0, 5e-324]])
    assert _mismatches_wide(xs, 0) == 0
    for x in xs[(xs < 709.0) & ~np.isnan(xs)][:: 20_000]:  # Python's math.exp raises on overflow
        assert exp_full(float(x)) == math.exp(x)


@pytest.mark.skipif(not GLIBC_LOG, reason="the C library is not glibc >= 2.28")
def test_log1p_equals_the_platform_log1p_bit_for_bit() -> None:
    """log1p_glibc: fdlibm's log1p with the contractions of glibc's FMA build (every branch: k = 0, the
    correction term, |f| < 2^-20, tiny and huge x, -1 and below)."""
    rng = np.random.default_rng(14)
    xs = np.concatenate([rng.uniform(-1.0, 1.0, 2_000_000), -(10.0 ** rng.uniform(-30, 0, 1_000_000)),
                         10.0 ** rng.uniform(-30, 300, 1_000_000), rng.uniform(-0.3, 0.42, 1_000_000),
                         np.nextafter(1.0, 2.0) * 2.0 ** rng.integers(-1, 40, 10_000) - 1.0,
                         [-1.0, -0.5, 0.0, -0.0, math.inf, math.nan, -2.0, 1e-300, 5e-324, -0.2929, 0.41422]])
    assert _mismatches_wide(xs, 1) == 0
    for x in xs[:: 20_000]:
        assert log1p_glibc(float(x)) == math.log1p(x) or math.isnan(x)
