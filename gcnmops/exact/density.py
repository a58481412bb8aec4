"""Port of R's ``density()`` (stats 4.2, Gaussian kernel, ``bw = "nrd0"``) and of its mode.

cn.mops's poisson normalization takes the location of the maximum of
``density(v, na.rm=TRUE, from=0, to=u, n=u*100)``; :func:`density_mode` reproduces it. The
steps follow R 4.2 (before R 4.4's ``old.coords`` change): linear binning of the data on the
working grid, FFT convolution with a kernel sampled on a slightly different grid, clipping at
0 and linear interpolation onto the user's grid. Float64 throughout. The grids are R's bit for
bit; R and numpy use different FFT algorithms, so density values agree to rounding (about 1e-16
of the peak), which leaves the location of the maximum (the mode) the same.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .rstats import quantile7_low_index, quantile7_sorted

__all__ = ["bw_nrd0", "quantiles7", "r_seq_length_out", "r_density", "density_mode"]

_M_1_SQRT_2PI = 0.398942280401432677939946059934
#: R's dnorm returns 0 beyond sqrt(-2*log(2)*(DBL_MIN_EXP + 1 - DBL_MANT_DIG))
_DNORM_ZERO_BEYOND = math.sqrt(-2.0 * math.log(2.0) * (-1021 + 1 - 53))


def quantiles7(x: np.ndarray, probs) -> list[float]:
    """R's ``quantile(x, probs, type=7)`` of a NaN-free 1-D array, by one partial sort (no full sort)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    n = x.size
    if n == 0:
        return [math.nan for _ in probs]
    kth = set()
    for p in probs:
        lo = quantile7_low_index(n, p)
        kth.update((lo, min(lo + 1, n - 1)))
    part = np.partition(x, sorted(kth))
    return [float(quantile7_sorted(part, n, p)) for p in probs]


def _r_var(x: np.ndarray) -> float:
    """Sample variance (denominator n - 1) with R's two-pass, mean-corrected centring."""
    n = x.size
    mean = float(np.sum(x)) / n
    d = x - mean
    mean += float(np.sum(d)) / n
    d = x - mean
    return float(np.dot(d, d)) / (n - 1)


def bw_nrd0(x: np.ndarray) -> float:
    """R's ``bw.nrd0``: 0.9 * min(sd, IQR/1.34) * n^(-1/5), with R's fall-backs for a zero spread."""
    x = np.asarray(x, dtype=np.float64).ravel()
    if x.size < 2:
        raise ValueError("need at least 2 data points")
    hi = math.sqrt(_r_var(x))
    q25, q75 = quantiles7(x, (0.25, 0.75))
    lo = min(hi, (q75 - q25) / 1.34)
    if not lo:
        lo = hi or abs(float(x[0])) or 1.0
    return 0.9 * lo * float(x.size) ** (-0.2)


def r_seq_length_out(start: float, stop: float, length_out: float) -> np.ndarray:
    """R 4.2's ``seq.int(from, to, length.out=)``: from + i*by, the last point exactly ``to``."""
    n = int(math.ceil(length_out))
    if n <= 0:
        return np.empty(0, dtype=np.float64)
    if n == 1:
        return np.array([start], dtype=np.float64)
    by = (stop - start) / float(n - 1)
    out = start + np.arange(n, dtype=np.float64) * by
    out[n - 1] = stop
    return out


def _dnorm(x: np.ndarray, sd: float) -> np.ndarray:
    """R's ``dnorm(x, 0, sd)`` (dnorm4), including its split evaluation for |x/sd| >= 5."""
    z = np.abs(x / sd)
    out = np.zeros_like(z)
    small = z < 5.0
    out[small] = _M_1_SQRT_2PI * np.exp(-0.5 * z[small] * z[small]) / sd
    mid = ~small & (z <= _DNORM_ZERO_BEYOND)
    zm = z[mid]
    x1 = np.ldexp(np.rint(np.ldexp(zm, 16)), -16)
    x2 = zm - x1
    out[mid] = _M_1_SQRT_2PI / sd * (np.exp(-0.5 * x1 * x1) * np.exp((-0.5 * x2 - x1) * x2))
    return out


@njit(cache=True)
def _bin_dist(x, weight, lo, up, n):
    """R's C ``BinDist``: linear binning of x (each of mass ``weight``) into 2n slots, nodes lo..up."""
    y = np.zeros(2 * n)
    ixmin = 0
    ixmax = n - 2
    delta = (up - lo) / (n - 1)
    for i in range(x.shape[0]):
        xi = x[i]
        if not math.isfinite(xi):
            continue
        xpos = (xi - lo) / delta
        fl = math.floor(xpos)
        if fl < -2.0 or fl > n + 1.0:  # far outside: contributes nothing (and avoids int overflow)
            continue
        ix = int(fl)
        fx = xpos - ix
        if ixmin <= ix <= ixmax:
            y[ix] += weight * (1.0 - fx)
            y[ix + 1] += weight * fx
        elif ix == -1:
            y[0] += weight * fx
        elif ix == ixmax + 1:
            y[ix] += weight * (1.0 - fx)
    return y


@njit(cache=True)
def _approx_linear(xs, ys, v):
    """R's ``approx(xs, ys, v)$y`` (method linear, rule 1: NaN outside) for increasing xs."""
    n = xs.shape[0]
    out = np.empty(v.shape[0])
    for k in range(v.shape[0]):
        t = v[k]
        if n == 0 or t < xs[0] or t > xs[n - 1] or math.isnan(t):
            out[k] = np.nan
            continue
        i = 0
        j = n - 1
        while i < j - 1:
            ij = (i + j) // 2
            if t < xs[ij]:
                j = ij
            else:
                i = ij
        if t == xs[j]:
            out[k] = ys[j]
        elif t == xs[i]:
            out[k] = ys[i]
        else:
            out[k] = ys[i] + (ys[j] - ys[i]) * ((t - xs[i]) / (xs[j] - xs[i]))
    return out


def r_density(x: np.ndarray, n: float = 512, from_: float | None = None, to: float | None = None,
              bw: float | None = None, cut: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    """R's ``density(x, n=n, from=from_, to=to, na.rm=TRUE)`` with the Gaussian kernel.

    ``x``: 1-D values (NaN dropped, +-Inf excluded from the estimate but counted in its mass, as
    in R). ``n`` may be fractional (R's grid then has ceiling(n) points). Returns the grid
    (ceiling(n),) and the density values on it, float64.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    x = x[~np.isnan(x)]
    n_all = x.size
    finite = np.isfinite(x)
    if not finite.all():
        x = x[finite]
    nx = x.size
    if bw is None:
        if nx < 2:
            raise ValueError("need at least 2 points to select a bandwidth automatically")
        bw = bw_nrd0(x)
    if not math.isfinite(bw) or bw <= 0:
        raise ValueError(f"bandwidth must be positive and finite, got {bw!r}")
    n_user = n
    n_w = max(n, 512)
    if n_w > 512:
        n_w = 2 ** int(math.ceil(math.log2(n_w)))
    n_w = int(n_w)
    if from_ is None:
        from_ = float(x.min()) - cut * bw
    if to is None:
        to = float(x.max()) + cut * bw
    if not (math.isfinite(from_) and math.isfinite(to)):
        raise ValueError("non-finite 'from' or 'to'")
    lo = from_ - 4.0 * bw
    up = to + 4.0 * bw
    y = _bin_dist(x, 1.0 / nx, lo, up, n_w)
    if nx != n_all:
        y = y * (nx / n_all)
    kords = r_seq_length_out(0.0, 2.0 * (up - lo), 2 * n_w)
    kords[n_w + 1:] = -kords[n_w - 1:0:-1]
    kern = _dnorm(kords, bw)
    # R: fft(fft(y) * Conj(fft(kern)), inverse=TRUE) / (2 n_w); numpy's ifft divides by the same
    # power of two, exactly
    conv = np.fft.ifft(np.fft.fft(y) * np.conj(np.fft.fft(kern)))
    dens = np.maximum(0.0, conv.real[:n_w])
    xords = r_seq_length_out(lo, up, n_w)
    grid = r_seq_length_out(from_, to, n_user)
    return grid, _approx_linear(xords, dens, grid)


def density_mode(x: np.ndarray, from_: float, to: float, n: float) -> float:
    """Location of the (first) maximum of ``density(x, na.rm=TRUE, from=from_, to=to, n=n)``.

    NaN when the grid is empty (n <= 0) or the density is undefined everywhere.
    """
    grid, dens = r_density(x, n=n, from_=from_, to=to)
    if grid.size == 0 or np.isnan(dens).all():
        return math.nan
    return float(grid[int(np.nanargmax(dens))])
