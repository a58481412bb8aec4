"""libm.exp_glibc: the C library's exp reproduced bit for bit (compiled by numba and as plain Python)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from gcnmops.libm import HEAD, TAIL, exp_glibc, fma


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
