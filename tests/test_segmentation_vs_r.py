"""The fast segmentation against an R reference, bit for bit: cn.mops's ``segment()`` written in R from the spec
(docs: /work/shared/spec/20-segmentation-and-calls.md, part 1) with R's own primitives (``pt``, ``quantile``,
``sd``, ``median``, ``mean``, IRanges' ``reduce``/``setdiff``), on vectors drawn over the parameter space and
built to tie: plateaus of a few repeated values, as sINI of median-normalized cohorts (useMedian) are, make many
positions' windows mathematically equal, so their statistics tie with each other and with the breakpoint
threshold, and only R's bits of ``pt()`` decide ``stat > threshold``.

Compared: the statistic p_i of every position (before local maxima) bit for bit, and the segment table exactly
(equal values: R's median() of +0 and -0 may keep either sign).
A quick slice runs by default, a longer one is marked slow.
"""
from __future__ import annotations

import numpy as np
import pytest

from gcnmops.exact import tdist
from gcnmops.segmentation.cpu import segment
from gcnmops.segmentation.host import vector_constants
from gcnmops.segmentation.kernels import (is_candidate, prefix_sums, scan_position, window_count, window_constants,
                                          window_t)
from rdiff import assert_same_bits, from_r, r_or_skip, to_r

pytestmark = pytest.mark.r

R_SEGMENT = r"""
ref_stat <- function(x, eps, delta, maxInt, minSeg, cyberWeight) {
  # segment.cpp's per-position statistic (pValue, before the local maxima), in its operation order
  if (cyberWeight < 0.01) cyberWeight <- 0.01
  n <- length(x)
  S <- numeric(n); Q <- numeric(n); S[1] <- x[1]; Q[1] <- x[1] * x[1]
  for (i in seq_len(n)[-1]) { S[i] <- S[i - 1] + x[i]; Q[i] <- Q[i - 1] + x[i] * x[i] }  # doubles, not cumsum's
  mu <- 0; M2 <- 0
  for (i in seq_len(n)) { d <- x[i] - mu; mu <- mu + d / i; M2 <- M2 + d * (x[i] - mu) }
  V <- M2 / (n - 1); if (V < 1e-15) V <- 1e-15
  p <- numeric(n)
  for (i in 0:(n - 2)) {
    if (abs(x[i + 2] - x[i + 1]) > eps && i > minSeg && i < n - minSeg - 1) {
      j <- minSeg; d <- 0; best <- 0; prev <- 0
      while (d <= delta && j <= maxInt && i + j + 1 < n && i - j - 1 >= 0) {
        nn <- j + cyberWeight - 1
        mL <- (S[i + 1] - S[i - j]) / (j + 1)
        vL <- (Q[i + 1] - Q[i - j]) - (j + 1) * mL * mL
        vL <- (vL + cyberWeight * V) / nn
        mR <- (S[i + j + 2] - S[i + 1]) / (j + 1)
        vR <- (Q[i + j + 2] - Q[i + 1]) - (j + 1) * mR * mR
        vR <- (vR + cyberWeight * V) / nn
        tt <- abs(mL - mR) / sqrt(vL / (nn + 1) + vR / (nn + 1) + 1e-15)
        a <- vL / (nn + 1); b <- vR / (nn + 1)
        dof <- (a + b) * (a + b) / ((a * a) / nn + (b * b) / nn)
        q <- -pt(tt, dof, lower.tail = FALSE, log.p = TRUE)
        if (q > best) best <- q
        if (q > prev) d <- 0 else d <- d + 1
        prev <- q
        j <- j + 1
      }
      p[i + 1] <- best
    }
  }
  p
}
ref_segment <- function(x, alpha, minSeg, eps, delta, maxInt, cyberWeight) {
  # segment.R with the statistic above (segMedianT = NULL: +-2 sd(x); eps = NA: not passed)
  segMedianT <- c(2 * sd(x), -2 * sd(x))
  if (minSeg < 2) minSeg <- 2
  if (maxInt < minSeg + 5) maxInt <- minSeg + 5
  if (cyberWeight < 0) cyberWeight <- 0
  m <- length(x)
  if (is.na(eps)) eps <- quantile(abs(diff(x)), probs = 0.75)
  p <- ref_stat(x, eps, as.integer(delta), as.integer(maxInt), as.integer(minSeg), cyberWeight)
  stat <- p
  if (minSeg > 2) {
    ll <- floor(minSeg / 2)
    for (i in 0:(m - 1)) {
      if (i - ll > 0 && i + ll < m) {
        for (j in 1:ll) if (p[i - j + 1] > stat[i + 1] || p[i + j + 1] > stat[i + 1]) stat[i + 1] <- 0
      }
    }
  }
  if (alpha >= 1) {
    brk <- sort(order(stat, decreasing = TRUE)[1:as.integer(alpha)])
  } else {
    brk <- which(stat > quantile(stat, probs = 1 - alpha))
  }
  b <- c(0, brk, m)
  df <- data.frame(start = c(1, brk + 1), end = c(brk, m),
                   median = sapply(2:length(b), function(i) median(x[(b[i - 1] + 1):b[i]])))
  amp <- IRanges::reduce(IRanges::IRanges(df$start[df$median > segMedianT[1]], df$end[df$median > segMedianT[1]]))
  loss <- IRanges::reduce(IRanges::IRanges(df$start[df$median < segMedianT[2]], df$end[df$median < segMedianT[2]]))
  ir <- BiocGenerics::sort(c(amp, loss))
  ir <- ir[IRanges::width(ir) >= minSeg]
  fin <- as.data.frame(BiocGenerics::sort(c(ir, IRanges::setdiff(IRanges::IRanges(1, m), ir))))
  bi <- c(0, fin$end)
  avg <- sapply(2:length(bi), function(i) { v <- x[(bi[i - 1] + 1):bi[i]]; c(mean(v), median(v)) })
  list(p = p, start = as.numeric(fin$start), end = as.numeric(fin$end), mean = avg[1, ], median = avg[2, ])
}
"""


@pytest.fixture(scope="module")
def R():
    r = r_or_skip()
    try:
        r(R_SEGMENT)
        r("invisible(IRanges::IRanges(1, 2))")
    except Exception as e:  # noqa: BLE001 - rpy2 raises its own error class
        pytest.skip(f"R reference needs IRanges: {e}")
    return r


def _tied_vector(rng, m: int) -> np.ndarray:
    """Plateaus of a few repeated values (as median-normalized sINI): equal windows at many positions."""
    levels = rng.choice([0.0, 0.0, 0.0, 0.5, -1.0, 0.25, -3.0, 1.0], size=m // 8 + 2)
    lengths = rng.integers(1, 30, size=levels.size)
    x = np.repeat(levels, lengths)
    while x.size < m:
        x = np.concatenate([x, x])
    x = x[:m].copy()
    noise = rng.random(m) < rng.uniform(0.05, 0.4)
    x[noise] = rng.choice([-0.5, 0.5, 0.0, 0.125, -2.0], noise.sum())
    return x


def _vector(rng, m: int) -> np.ndarray:
    kind = rng.integers(3)
    if kind == 0:
        return _tied_vector(rng, m)
    if kind == 1:  # log-ratio-like values on a coarse grid: ties, but not only plateaus
        return np.round(rng.normal(0, 0.4, m) + np.repeat(rng.choice([0, 0, -1, 0.6], m // 50 + 1), 50)[:m], 2)
    return rng.normal(0, 0.3, m) + np.repeat(rng.choice([0.0, 0.0, -1.2, 0.8], m // 40 + 1), 40)[:m]


def _params(rng) -> dict:
    return dict(alpha=float(rng.choice([0.05, 0.05, 0.1, 0.2, 12.0])), min_seg=int(rng.choice([2, 3, 3, 4, 5, 7])),
                eps=None if rng.random() < 0.7 else float(rng.choice([0.0, 0.1])),
                delta=int(rng.choice([20, 20, 5, 0])), max_int=int(rng.choice([40, 40, 25, 10])),
                cyber_weight=float(rng.choice([50.0, 50.0, 10.0, 1.0, 0.0, 200.0])))


def _our_stat(x: np.ndarray, kw: dict) -> np.ndarray:
    """p_i of every position as the CPU segmentation computes it (screened; scan_position)."""
    min_seg = max(kw["min_seg"], 2)
    max_int = max(kw["max_int"], min_seg + 5)
    w = max(kw["cyber_weight"], 0.01)
    eps, _, _, V = vector_constants(x, kw["eps"] is not None, kw["eps"] or 0.0, True, 0.0, 0.0, np.empty(x.size))
    S = np.empty(x.size)
    Q = np.empty(x.size)
    prefix_sums(x, S, Q)
    nwin = window_count(min_seg, max_int)
    jinv, jnn, jc = np.empty(nwin), np.empty(nwin), np.empty(nwin)
    window_constants(min_seg, nwin, w, jinv, jnn, jc)
    ybuf, ebuf, qbuf = np.empty(nwin), np.empty(nwin), np.empty(nwin)
    p = np.zeros(x.size)
    for i in range(x.size - 1):
        if is_candidate(x, i, min_seg, eps):
            p[i] = scan_position(S, Q, i, x.size, min_seg, kw["delta"], max_int, w, V, jinv, jnn, jc, ybuf, ebuf,
                                 qbuf)[0]
    return p


def _compare(R, rng, m: int, with_stat: bool) -> None:
    x = _vector(rng, m)
    kw = _params(rng)
    ref = R["ref_segment"](to_r(R, x), kw["alpha"], kw["min_seg"], np.nan if kw["eps"] is None else kw["eps"],
                          kw["delta"], kw["max_int"], kw["cyber_weight"])
    ref = dict(zip(ref.names, ref))
    what = f"m={m} {kw}"
    if with_stat:
        assert_same_bits(_our_stat(x, kw), from_r(ref["p"]), f"statistic, {what}")
    ours = segment(x, **kw)
    np.testing.assert_array_equal(ours["start"].to_numpy(), from_r(ref["start"]), err_msg=what)
    np.testing.assert_array_equal(ours["end"].to_numpy(), from_r(ref["end"]), err_msg=what)
    # equal values (a median of signed zeros may be 0 in one and -0 in the other: the same number in every table)
    np.testing.assert_array_equal(ours["mean"].to_numpy(), from_r(ref["mean"]), err_msg=what)
    np.testing.assert_array_equal(ours["median"].to_numpy(), from_r(ref["median"]), err_msg=what)


def test_segmentation_matches_r_reference_quick(R) -> None:
    rng = np.random.default_rng(2024)
    for _ in range(12):
        _compare(R, rng, int(rng.integers(60, 700)), with_stat=True)


@pytest.mark.slow
def test_segmentation_matches_r_reference_long(R) -> None:
    rng = np.random.default_rng(77)
    for k in range(150):
        _compare(R, rng, int(rng.integers(40, 3000)), with_stat=k % 3 == 0)


def test_window_t_rounds_as_cn_mops() -> None:
    """sL = sum of squares - (j+1)*mean*mean, left to right as cn.mops's C: ((j+1) mean) mean, which differs from
    (j+1) (mean mean) in the last bit for many windows (this one among them)."""
    x = np.array([0.1, 0.7, 0.3, 0.9, 0.2, 1.3, 0.4, 0.6, 1.1, 0.8, 0.5, 0.3, 0.2, 0.9, 1.7, 0.35])
    S = np.empty(x.size)
    Q = np.empty(x.size)
    prefix_sums(x, S, Q)
    i, j, w, V = 7, 3, 50.0, 0.17
    n1 = j + 1.0
    ml = (S[i] - S[i - j - 1]) / n1
    mr = (S[i + j + 1] - S[i]) / n1
    nn = j + w - 1.0
    a = (((Q[i] - Q[i - j - 1]) - n1 * ml * ml) + w * V) / nn / (nn + 1.0)
    b = (((Q[i + j + 1] - Q[i]) - n1 * mr * mr) + w * V) / nn / (nn + 1.0)
    t, dof = window_t(S, Q, i, j, w, V)
    assert t == abs(ml - mr) / np.sqrt(a + b + 1e-15)
    assert dof == (a + b) * (a + b) / ((a * a) / nn + (b * b) / nn)


def test_tie_at_the_threshold_is_decided_by_r_bits(R) -> None:
    """Two windows equal in exact arithmetic whose (t, dof) differ in the last bits: R's pt() gives them the same
    statistic (a tie, so no breakpoint at the threshold) or not, and ours must agree bit for bit; the continued
    fraction this replaced was within 3e-14 of R but not equal to it."""
    rng = np.random.default_rng(5)
    t = 41.0 + rng.random(4000) * 1e-3
    dof = 60.0 + rng.random(4000)
    t2 = np.nextafter(t, np.inf)
    r_pt = R("function(t, d) -pt(t, d, lower.tail = FALSE, log.p = TRUE)")
    ours = np.array([tdist.t_neglog_upper(a, d) for a, d in zip(np.r_[t, t2], np.r_[dof, dof])])
    ref = from_r(r_pt(to_r(R, np.r_[t, t2]), to_r(R, np.r_[dof, dof])))
    assert_same_bits(ours, ref, "pt near ties")
    # R maps some neighbouring t to the same tail (a tie) and some not: both kinds are covered
    same = ref[: t.size] == ref[t.size:]
    assert same.any() and (~same).any()
