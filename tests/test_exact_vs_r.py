"""gcnmops.exact against base R itself (through rpy2), bit for bit, on thousands of random and adversarial vectors
(ties, many zeros, nearly equal values, magnitudes from 1e-290 to 1e290, odd and even lengths): mean, colMeans,
median, var, sd, quantile type 7, bw.nrd0, seq.int, approx, dnorm, density()'s binning, grid, values (through R's
FFT, exact/rfft.py, itself checked in test_rfft_vs_r.py) and mode, lgamma, and the poisson normalization's row
variance-to-mean ratios. The t tail is checked to its documented accuracy. Skipped cleanly without R or rpy2
(scripts/setup.sh installs both).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit
from rdiff import (SQUARE_SAFE, assert_same_bits, from_r, per_vector, r_or_skip, random_vector, random_vectors,
                   to_r)

from gcnmops.exact import density as D
from gcnmops.exact import tdist
from gcnmops.exact.rmath import lgamma_r
from gcnmops.exact.rstats import ld_mean, ld_square, r_median, r_quantile, r_variance
from gcnmops.normalization.kernels import col_means, variance_to_mean

pytestmark = pytest.mark.r

X87 = np.finfo(np.longdouble).nmant == 63


@pytest.fixture(scope="module")
def R():
    return r_or_skip()


@njit(cache=True)
def _means(v):
    """R's mean(v) and colMeans (normalization.kernels.col_means, the size factors "mean") of v as a column."""
    col = np.asfortranarray(v.reshape(v.size, 1))
    return ld_mean(v, v.size), col_means(col, 0, np.ones(v.size, np.bool_), v.size)[0]


def test_mean_colmeans_median_match_r(R) -> None:
    vectors = random_vectors(np.random.default_rng(2001), 2400)
    ours = np.array([_means(v) for v in vectors])
    assert_same_bits(ours[:, 0], per_vector(R, "mean", vectors), "mean", vectors)
    assert_same_bits(ours[:, 1], per_vector(R, "function(x) colMeans(matrix(x))", vectors), "colMeans", vectors)
    assert_same_bits([r_median(v) for v in vectors], per_vector(R, "median", vectors), "median", vectors)


def test_var_sd_match_r(R) -> None:
    vectors = random_vectors(np.random.default_rng(2002), 2400, SQUARE_SAFE)
    ours = np.array([r_variance(v) for v in vectors])
    assert_same_bits(ours, per_vector(R, "var", vectors), "var", vectors)
    assert_same_bits(np.sqrt(ours), per_vector(R, "sd", vectors), "sd", vectors)


def test_quantile7_matches_r(R) -> None:
    rng = np.random.default_rng(2003)
    vectors = random_vectors(rng, 2400)
    p = rng.uniform(0, 1, len(vectors))
    p[::7] = rng.choice([0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0], p[::7].size)
    expected = per_vector(R, "function(x, p) quantile(x, p, names = FALSE, type = 7)", vectors, p)
    assert_same_bits([r_quantile(v, q) for v, q in zip(vectors, p)], expected, "quantile", vectors)
    assert_same_bits([D.quantiles7(v, (q,))[0] for v, q in zip(vectors, p)], expected, "quantiles7", vectors)


def test_bw_nrd0_matches_r(R) -> None:
    rng = np.random.default_rng(2004)
    vectors = random_vectors(rng, 1500, SQUARE_SAFE, min_len=2)
    vectors += [np.full(int(rng.integers(2, 40)), c) for c in (0.0, 3.5, -2.0)]  # zero spread: R's fall-backs
    vectors += [np.r_[np.zeros(30), 1.0, 2.0]]  # zero IQR, sd > 0
    assert_same_bits([D.bw_nrd0(v) for v in vectors], per_vector(R, "bw.nrd0", vectors), "bw.nrd0", vectors)


def test_seq_and_approx_match_r(R) -> None:
    rng = np.random.default_rng(2005)
    seq = R("function(a, b, n) seq.int(a, b, length.out = n)")
    approx = R("function(x, y, v) approx(x, y, v)$y")
    for trial in range(300):
        a = rng.uniform(-10, 10) * 10.0 ** rng.uniform(-3, 3)
        b = a + abs(rng.normal()) * 10.0 ** rng.uniform(-3, 5)
        n = float(rng.integers(1, 3000)) + (rng.uniform(0, 1) if trial % 2 else 0.0)
        ours = D.r_seq_length_out(a, b, n)
        assert_same_bits(ours, from_r(seq(a, b, n)), f"seq.int({a!r}, {b!r}, length.out={n!r})")
        if ours.size > 1:
            y = rng.normal(size=ours.size) * 10.0 ** rng.uniform(-3, 3)
            v = np.r_[rng.uniform(a - 1, b + 1, 50), ours[rng.integers(0, ours.size, 5)]]
            got = D._approx_linear(ours, y, v)
            assert_same_bits(got, from_r(approx(to_r(R, ours), to_r(R, y), to_r(R, v))), "approx")


def test_dnorm_matches_r(R) -> None:
    rng = np.random.default_rng(2006)
    sd = 10.0 ** rng.uniform(-3, 2, 4000)
    z = np.r_[rng.uniform(0, 5, 1500), rng.uniform(5, 39, 2000), rng.integers(5 * 2**16, 38 * 2**16, 500) / 2**16
              + 2.0**-17]  # the split evaluation, with halves of 2^-16 (R_forceint rounds them to even)
    x = z * sd * rng.choice([-1.0, 1.0], z.size)
    ours = np.array([D._dnorm1(a, s) for a, s in zip(x, sd)])
    assert_same_bits(ours, from_r(R("function(x, s) dnorm(x, sd = s)")(to_r(R, x), to_r(R, sd))), "dnorm")


def _ratio_vectors(rng, count) -> list[np.ndarray]:
    """Variance-to-mean ratios of simulated read-count rows (poisson normalization's density input), and others."""
    out = []
    for j in range(count):
        m = int(rng.integers(40, 2500))
        N = int(rng.integers(2, 40))
        Y = rng.poisson(10.0 ** rng.uniform(0, 2) * rng.gamma(8, 0.125, (m, 1)), (m, N)).astype(float)
        Y = Y[Y.max(axis=1) >= 1]
        v = Y.var(axis=1, ddof=1) / Y.mean(axis=1)
        if j % 5 == 0:  # other shapes, scaled to grids of at most a few thousand points
            x = np.abs(random_vector(rng, ("uniform", "counts", "ties")[j % 3], m))
            v = x / x.max() * rng.uniform(0.5, 40) if x.max() > 0 else x
        out.append(v)
    return out


def test_density_matches_r(R) -> None:
    """density(v, from=0, to=quantile(v, .95), n=that*100), as cn.mops calls it: R's grid, binning (BinDist) and
    kernel, values and mode bit for bit."""
    rng = np.random.default_rng(2007)
    run = R("""function(v) {
        u <- quantile(v, 0.95, names = FALSE); d <- density(v, na.rm = TRUE, from = 0, to = u, n = u * 100)
        n <- max(u * 100, 512); if (n > 512) n <- 2^ceiling(log2(n))
        lo <- -4 * d$bw; up <- u + 4 * d$bw
        k <- seq.int(0, 2 * (up - lo), length.out = 2L * n); k[(n + 2):(2 * n)] <- -k[n:2]
        list(x = d$x, y = d$y, mode = d$x[which.max(d$y)], bw = d$bw,
             bins = .Call(stats:::C_BinDist, v, rep.int(1 / length(v), length(v)), lo, up, n),
             kernel = dnorm(k, sd = d$bw))
    }""")
    modes = 0
    for v in _ratio_vectors(rng, 150):
        (u,) = D.quantiles7(v, (0.95,))
        if u <= 0:
            continue
        res = run(to_r(R, v))
        r = {k: from_r(res.rx2(k)) for k in ("x", "y", "mode", "bw", "bins", "kernel")}
        bw = D.bw_nrd0(v)
        assert_same_bits(bw, r["bw"], "bw")
        n_w = D._working_points(u * 100)
        lo, up = -4.0 * bw, u + 4.0 * bw
        assert_same_bits(D._bin_dist(v, 1.0 / v.size, lo, up, n_w), r["bins"], "BinDist")
        kords = D.r_seq_length_out(0.0, 2.0 * (up - lo), 2 * n_w)
        kords[n_w + 1:] = -kords[n_w - 1:0:-1]
        assert_same_bits(D._dnorm(kords, bw), r["kernel"], "density kernel")
        grid, dens = D.r_density(v, n=u * 100, from_=0.0, to=u)
        assert_same_bits(grid, r["x"], "density grid")
        assert_same_bits(dens, r["y"], "density values")
        assert_same_bits(D.density_mode(v, 0.0, u, u * 100), r["mode"], "density mode")
        modes += 1
    assert modes > 120


def test_lgamma_matches_r(R) -> None:
    rng = np.random.default_rng(2008)
    x = np.r_[np.arange(1, 3001), rng.poisson(50, 2000) * rng.uniform(0.3, 3, 2000) + 1,
              10.0 ** rng.uniform(-310, 20, 3000), rng.uniform(9.5, 10.5, 500), rng.uniform(1e6, 1e8, 500)]
    assert_same_bits([lgamma_r(a) for a in x], from_r(R["lgamma"](to_r(R, x))), "lgamma")


@njit(cache=True)
def _pt_all(t, dof):
    out = np.empty(t.size)
    for k in range(t.size):
        out[k] = -tdist.pt_log(t[k], dof[k], False)
    return out


def test_t_tail_is_r_pt_bit_for_bit(R) -> None:
    """-pt(t, dof, lower.tail=FALSE, log.p=TRUE), TOMS 708 step by step: the segmentation's range (t up to 12,
    dof 1..200), wide ranges of both, tiny and huge dof (every bratio branch pt reaches), t beyond 1e50 sqrt(dof)
    (lbeta), negative t, 0 and infinity."""
    rng = np.random.default_rng(2009)
    n = 100_000
    parts = [(rng.uniform(0, 12, n), rng.uniform(1, 200, n)),
             (10.0 ** rng.uniform(-3, 3, n), 10.0 ** rng.uniform(0, 4, n)),
             (10.0 ** rng.uniform(-8, 8, n // 4), 10.0 ** rng.uniform(-3, 7, n // 4)),
             (rng.uniform(-10, 10, n // 4), rng.uniform(0.01, 3, n // 4)),
             (rng.uniform(0, 1, n // 10), 10.0 ** rng.uniform(-17, -14, n // 10)),
             (10.0 ** rng.uniform(40, 200, 2000), 10.0 ** rng.uniform(-2, 4, 2000)),
             (np.r_[0.0, 0.0, 1e-300, 5e-324, np.inf, -np.inf, 1.0, 1.0, 1.0, -1.0],
              np.r_[1.0, 2.0, 1.0, 2.0, 3.0, 3.0, 1e-300, 1e-16, 2e-15, 7.0])]
    t = np.concatenate([p[0] for p in parts])
    dof = np.concatenate([p[1] for p in parts])
    expected = -from_r(R("function(t, d) pt(t, d, lower.tail = FALSE, log.p = TRUE)")(to_r(R, t), to_r(R, dof)))
    assert_same_bits(_pt_all(t, dof), expected, "pt", inputs=np.c_[t, dof])
    assert_same_bits([tdist.t_neglog_upper(a, d) for a, d in zip(t[::500], dof[::500])], expected[::500],
                     "pt (plain Python)")


def test_variance_to_mean_rows_match_r(R) -> None:
    """The poisson normalization's ratios var(z)/mean(z) of z = Y[i, ] * f, bit for bit."""
    rng = np.random.default_rng(2010)
    run = R("function(Y, f) { Z <- t(t(Y) * f); apply(Z, 1, var) / apply(Z, 1, mean) }")
    for trial in range(40):
        m, N = int(rng.integers(50, 400)), int(rng.integers(2, 60))
        Y = rng.poisson(10.0 ** rng.uniform(-0.5, 4), (m, N)).astype(float)
        if trial % 4 == 0:
            Y[:, 0] *= 1e6  # a wide range within rows: deviations need a long double's 64 bits
        Y[Y.max(axis=1) == 0, 0] = 1.0
        f = rng.uniform(0.3, 3, N)
        ours = variance_to_mean(np.asfortranarray(Y), np.arange(m), f)
        expected = from_r(run(R["matrix"](to_r(R, Y.ravel(order="F")), m), to_r(R, f)))
        assert_same_bits(ours, expected, "var/mean of rows")


@njit(cache=True)
def _squares(hi, lo):
    out = np.empty((hi.size, 2))
    for i in range(hi.size):
        out[i, 0], out[i, 1] = ld_square(hi[i], lo[i])
    return out


@pytest.mark.skipif(not X87, reason="needs numpy's 80-bit long double as the oracle")
def test_long_double_square_is_exact() -> None:
    """ld_square against the x87: squares of long doubles (a double plus up to 11 more bits), ties included."""
    rng = np.random.default_rng(2011)
    hi = 10.0 ** rng.uniform(-140, 150, 20000) * rng.choice([-1.0, 1.0], 20000)
    lo = np.ldexp(rng.integers(-1024, 1025, hi.size).astype(float), np.frexp(hi)[1] - 64)
    hi[:2000] = np.round(hi[:2000] * 1e-130 * 2**20) + 0.5  # halves: squares ending in a tie
    lo[:2000] = 0.0
    LD = np.longdouble
    exact = np.array([(LD(h) + LD(l)) * (LD(h) + LD(l)) for h, l in zip(hi, lo)])
    got = _squares(hi, lo)
    assert (got[:, 0].astype(LD) + got[:, 1].astype(LD) == exact).all()
    assert np.array_equal(got[:, 0], exact.astype(np.float64))
    assert not math.isnan(got.sum())
