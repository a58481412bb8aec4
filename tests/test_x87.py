"""R's long double in the x87 unit (exact/x87.py) against the double-double emulation (exact/rstats.py).

On an x86-64 CPU numba's CPU target runs rstats' long double functions in the x87 unit; numba.cuda and plain
Python run the emulation. Both must give the same bits for every input within the double range (R's own
results are checked in test_exact_vs_r.py, test_normalization_vs_r.py and the golden tests)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit

from gcnmops.exact import rstats, x87

pytestmark = pytest.mark.skipif(not x87.AVAILABLE, reason="no x87 unit (not an x86-64 CPU)")


def _vectors(rng: np.random.Generator, count: int):
    """Vectors whose long double sums round often and tie now and then: mixed magnitudes, near-cancelling
    values, halves of the 64-bit significand's last bit, repeated values, integers."""
    for k in range(count):
        n = int(rng.integers(1, 60))
        kind = k % 6
        if kind == 0:
            v = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 9, n)
        elif kind == 1:
            v = 1.0 + rng.integers(-3, 4, n) * 2.0 ** -52
            v = np.where(rng.random(n) < 0.5, v, rng.integers(-3, 4, n) * 2.0 ** -64)
        elif kind == 2:
            v = np.repeat(rng.standard_normal(1) * 1e5, n) + rng.standard_normal(n) * 1e-9
        elif kind == 3:
            v = rng.integers(0, 10_000, n).astype(float)
        elif kind == 4:
            v = np.log(rng.random(n) + 1e-300) * rng.choice([-1.0, 1.0], n)
        else:
            v = rng.standard_normal(n)
            v[1::2] = -v[0::2][: v[1::2].size] * (1.0 + 2.0 ** -52)
        yield np.ascontiguousarray(v, dtype=np.float64)


def _emulated(v):
    """Every long double function on v: the emulation in plain Python; ``_compiled`` (numba's CPU target) runs
    the x87 forms."""
    n = v.shape[0]
    out = np.empty(12)
    out[0], out[1] = rstats.ld_sum(v, n)
    out[2] = rstats.ld_mean(v, n)
    out[3] = rstats.r_var(v, n)
    out[4] = rstats.mean_of_two(float(v[0]), float(v[n - 1]))
    out[5], out[6] = rstats.ld_div(out[0], out[1], float(n))
    out[7], out[8] = rstats.ld_square(out[5], out[6])
    out[9], out[10] = rstats.squared_deviation_add(out[7], out[8], float(v[0]), out[2])
    t_hi, t_lo = 0.0, 0.0
    for k in range(n):
        t_hi, t_lo = rstats.mean_deviation_add(t_hi, t_lo, float(v[k]), out[5], out[6])
    out[11] = rstats.mean_finish(out[5], out[6], t_hi, t_lo, n)
    return out


_compiled = njit(cache=False)(_emulated)


def test_x87_forms_equal_the_emulation_bit_for_bit():
    rng = np.random.default_rng(20261124)
    differ = []
    checked = 0
    for v in _vectors(rng, 1200):
        a = _compiled(v)
        b = _emulated(v)
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        if not same.all():
            differ.append((v, a, b))
        checked += 1
    assert checked == 1200 and not differ, f"{len(differ)} vectors differ, first: {differ[:1]}"


def test_ld_add_and_ld_add_ld_equal_the_emulation():
    rng = np.random.default_rng(7)

    @njit(cache=False)
    def both(hi, lo, v, bhi, blo):
        return rstats.ld_add(hi, lo, v), rstats.ld_add_ld(hi, lo, bhi, blo)

    for _ in range(3000):
        hi = float(rng.standard_normal() * 10.0 ** rng.integers(-6, 7))
        lo = float(rstats.ld_add(hi, 0.0, float(rng.standard_normal()) * abs(hi) * 2.0 ** -58)[1])
        hi2, lo2 = rstats.ld_add(hi, 0.0, float(rng.standard_normal()) * abs(hi) * 2.0 ** -58)
        v = float(rng.standard_normal() * 10.0 ** rng.integers(-6, 7))
        b = rstats.ld_add(float(rng.standard_normal()), 0.0, float(rng.standard_normal()) * 2.0 ** -60)
        got = both(hi2, lo2, v, b[0], b[1])
        want = (rstats.ld_add(hi2, lo2, v), rstats.ld_add_ld(hi2, lo2, b[0], b[1]))
        assert got == want, (hi2, lo2, v, b, got, want)
        assert lo == lo  # the pair's low part is a finite double


def test_every_cpu_form_is_the_one_compiled():
    """A CPU form that failed to compile would leave the emulation in place without a word: each wrapper's
    code must contain its x87 form."""
    v = np.linspace(-1.0, 2.0, 7)
    wrappers = {
        rstats.ld_add: (njit(lambda a, b, c: rstats.ld_add(a, b, c)), (1.0, 0.0, 2.0)),
        rstats.ld_add_ld: (njit(lambda a, b, c, d: rstats.ld_add_ld(a, b, c, d)), (1.0, 0.0, 2.0, 0.0)),
        rstats.mean_deviation_add: (njit(lambda a, b, c, d, e: rstats.mean_deviation_add(a, b, c, d, e)),
                                    (0.0, 0.0, 1.0, 0.5, 0.0)),
        rstats.mean_finish: (njit(lambda a, b, c, d, n: rstats.mean_finish(a, b, c, d, n)), (1.0, 0.0, 0.0, 0.0, 3)),
        rstats.ld_sum: (njit(lambda x: rstats.ld_sum(x, x.shape[0])), (v,)),
        rstats.ld_mean: (njit(lambda x: rstats.ld_mean(x, x.shape[0])), (v,)),
        rstats.mean_of_two: (njit(lambda a, b: rstats.mean_of_two(a, b)), (1.0, 2.0)),
        rstats.ld_square: (njit(lambda a, b: rstats.ld_square(a, b)), (3.0, 0.0)),
        rstats.squared_deviation_add: (njit(lambda a, b, c, d: rstats.squared_deviation_add(a, b, c, d)),
                                       (0.0, 0.0, 1.0, 0.5)),
        rstats.r_var: (njit(lambda x: rstats.r_var(x, x.shape[0])), (v,)),
        rstats.ld_div: (njit(lambda a, b, n: rstats.ld_div(a, b, n)), (1.0, 0.0, 3.0)),
    }
    assert set(wrappers) == set(rstats.X87_FORMS)
    for emulated, (fn, args) in wrappers.items():
        fn(*args)
        llvm = "".join(fn.inspect_llvm().values())
        assert rstats.X87_FORMS[emulated].__name__ in llvm, emulated.__name__


def test_x87_keeps_sums_beyond_the_double_range_as_r_does():
    """R's long double does not overflow where a double does: mean(c(1e308, 1e308)) is 1e308 in R."""
    v = np.array([1e308, 1e308, 1e308])
    assert rstats.r_mean(v) == 1e308
    assert rstats.r_variance(v) == 0.0
    assert math.isinf(rstats.r_mean(np.full(3, np.inf)))  # inf in, inf out


def test_compiled_means_and_quotients_equal_the_emulation():
    """What normalization's per-chromosome factors call from Python (``r_mean``, ``ld_quotients``: compiled, x87
    where the CPU has it) equals the pure-Python emulation, bit for bit."""
    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 15, 400):
        v = rng.gamma(2.0, 50.0, n) * 10.0 ** rng.integers(-3, 4)
        assert rstats.r_mean(v) == rstats.ld_mean(v, n)  # register_jitable: called from Python, the emulation
        sums = np.floor(rng.uniform(0, 2.0 ** 52, n))
        m = float(rng.integers(1, 10**7))
        assert np.array_equal(rstats.ld_quotients(sums, m), [rstats.ld_div(float(s), 0.0, m)[0] for s in sums])
    assert math.isnan(rstats.r_mean(np.zeros(0))) and rstats.ld_quotients(np.zeros(0), 3.0).size == 0
