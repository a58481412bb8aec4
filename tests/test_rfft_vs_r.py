"""gcnmops.exact.rfft and density() against R itself (through rpy2), bit for bit: ``fft(z)`` and ``fft(z,
inverse = TRUE)`` on random complex and real vectors of every power-of-two length 2^0..2^21, and ``density(v,
na.rm = TRUE, from = 0, to = u, n = u * 100)`` (its values and the location of its first maximum, cn.mops's
mode) on random and adversarial vectors (ties, a few distinct values, heavy tails, twin peaks of equal height,
NaN and Inf) with u giving R's working grids of 512..2^16 points. Skipped cleanly without R or rpy2.
"""
from __future__ import annotations

import numpy as np
import pytest
from rdiff import assert_same_bits, from_r, r_or_skip, to_r

from gcnmops.exact import density as D
from gcnmops.exact.rfft import r_fft

pytestmark = pytest.mark.r


@pytest.fixture(scope="module")
def R():
    return r_or_skip()


def _fft_inputs(rng: np.random.Generator, n: int, kind: int) -> tuple[np.ndarray, np.ndarray]:
    """(complex vector, real vector) of length n: normal, wide magnitudes with signed zeros, or density-like
    (binned masses with a zero upper half and a symmetric Gaussian kernel)."""
    if kind == 0:
        return rng.normal(size=n) + 1j * rng.normal(size=n) * 10.0 ** rng.uniform(-3, 3), rng.normal(size=n)
    if kind == 1:
        mag = rng.choice([-1.0, 1.0], (2, n)) * 10.0 ** rng.uniform(-30, 30, (2, n))
        mag[:, rng.random(n) < 0.2] = rng.choice([0.0, -0.0])
        return mag[0] + 1j * mag[1], mag[1]
    y = np.zeros(n)
    y[: max(1, n // 2)] = rng.poisson(3.0, max(1, n // 2)) / (3.0 * n)
    t = np.minimum(np.arange(n), n - np.arange(n)) * rng.uniform(1e-3, 1.0)
    return y + 1j * np.exp(-0.5 * t * t), y


def test_fft_matches_r(R) -> None:
    """Forward and inverse (unnormalized), complex and real input, every length 2^0..2^21."""
    rng = np.random.default_rng(3001)
    run = R("""function(re, im, x) {
        z <- complex(real = re, imaginary = im)
        a <- fft(z); b <- fft(z, inverse = TRUE); c <- fft(x); d <- fft(x, inverse = TRUE)
        c(Re(a), Im(a), Re(b), Im(b), Re(c), Im(c), Re(d), Im(d))
    }""")
    for p in range(22):
        n = 2 ** p
        for rep in range(3 if p <= 14 else 1):
            z, x = _fft_inputs(rng, n, (p + rep) % 3)
            parts = [r_fft(z), r_fft(z, inverse=True), r_fft(x), r_fft(x, inverse=True)]
            ours = np.concatenate([np.r_[f.real, f.imag] for f in parts])
            assert_same_bits(ours, from_r(run(to_r(R, z.real), to_r(R, z.imag), to_r(R, x))), f"fft, n = 2^{p}")


def test_fft_refuses_other_lengths() -> None:
    for n in (0, 3, 6, 12, 1000):
        with pytest.raises(ValueError, match="power of two"):
            r_fft(np.ones(n))


def _density_vectors(rng: np.random.Generator, u: float) -> list[np.ndarray]:
    """Vectors for density on [0, u]: random, a few distinct values, one value nearly everywhere, heavy tails,
    twin peaks of equal height (their maxima tie to rounding), negative values, NaN and Inf."""
    m = int(rng.integers(20, 1500))
    a = rng.uniform(0, u)
    return [
        rng.gamma(rng.uniform(0.5, 8), u / 6, m),
        rng.choice(rng.uniform(0, u, int(rng.integers(1, 5))), m),
        np.r_[np.full(m, a), rng.uniform(0, u, int(rng.integers(1, 4)))],
        np.abs(rng.standard_cauchy(m)) * u * rng.uniform(0.01, 0.3),
        (rng.pareto(rng.uniform(0.5, 3), m) + 1) * u * rng.uniform(0.01, 0.2),
        np.r_[np.full(m, a), np.full(m, u - a)],
        np.r_[np.full(m, u / 3), np.full(m, 2 * u / 3)],
        np.r_[rng.normal(u / 2, u / 4, m), np.nan, np.inf, -np.inf][rng.permutation(m + 3)],
    ]


def _near_tie(y: np.ndarray) -> bool:
    """y's maximum reached, within 1e-14 of it, again far from its first location: where an FFT rounding other
    than R's can move the mode."""
    i = int(np.argmax(y))
    far = np.abs(np.arange(y.size) - i) > y.size // 20
    return bool(y[i] > 0 and (y[far] >= y[i] * (1 - 1e-14)).any())


def test_density_values_and_mode_match_r(R) -> None:
    """density()$x, $y and x[which.max(y)] bit for bit for working grids of 2^9..2^16 points."""
    rng = np.random.default_rng(3002)
    run = R("""function(v, u) {
        d <- density(v, na.rm = TRUE, from = 0, to = u, n = u * 100)
        c(d$x[which.max(d$y)], d$x, d$y)
    }""")
    ties = 0
    for p in range(9, 17):
        for u in (2 ** p / 100 * rng.uniform(0.51, 1.0), 2 ** p / 100):
            for v in _density_vectors(rng, u):
                r = from_r(run(to_r(R, v), u))
                grid, dens = D.r_density(v, n=u * 100, from_=0.0, to=u)
                k = grid.size
                assert r.size == 1 + 2 * k
                what = f"density(n = {u * 100!r}) of {v.size} values"
                assert_same_bits(grid, r[1:k + 1], what + ": x")
                assert_same_bits(dens, r[k + 1:], what + ": y")
                assert_same_bits(D.density_mode(v, 0.0, u, u * 100), r[0], what + ": mode")
                ties += _near_tie(dens)
    assert ties >= 8  # the twin peaks did tie within rounding
