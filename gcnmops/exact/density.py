"""Port of R's ``density()`` (stats 4.2, Gaussian kernel, ``bw = "nrd0"``) and of its mode.

cn.mops's poisson normalization takes the location of the maximum of
``density(v, na.rm=TRUE, from=0, to=u, n=u*100)``; :func:`density_mode` reproduces it. The
steps follow R 4.2 (before R 4.4's ``old.coords`` change): linear binning of the data on the
working grid, FFT convolution with a kernel sampled on a slightly different grid, clipping at
0 and linear interpolation onto the user's grid. Float64 throughout. Every step is R's operation
for operation, the FFTs included (R's own algorithm, :mod:`.rfft`, not numpy's, whose rounding
differs: about 1e-16 of the peak, enough to move the first maximum where two grid points tie to
rounding): density values, and so the mode, are R's bit for bit (tests/test_rfft_vs_r.py).

The grid has ``n = u * 100`` points, ``u`` growing with the scale of the counts: one huge count makes R allocate
2 * 2^ceiling(log2(n)) doubles and FFTs of that length (R stops above 2^30 working points, "invalid 'n'
argument", or runs out of memory first). Above :data:`DENSE_GRID_LIMIT` working points :func:`density_mode` does
not materialize the grids: it evaluates the same binned estimate (R's bins, R's kernel grid) by direct
summation only where its maximum can lie (a coarse pass at a quarter of the bandwidth over the nodes near the
data, then the exact node maxima of the best peaks, then the interpolated user grid points beside them).
Memory and time then grow with the number of values, not with n; the values there agree with R's FFT's to
rounding only (not bit for bit), so the mode is R's unless two grid points' estimates tie to rounding.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .libm import exp_glibc
from .rfft import fft_inplace, fft_passes, unscramble
from .rstats import quantile7_low_index, quantile7_sorted, r_variance

__all__ = ["bw_nrd0", "quantiles7", "r_seq_length_out", "r_density", "density_mode", "DENSE_GRID_LIMIT"]

_M_1_SQRT_2PI = 0.398942280401432677939946059934
#: R's dnorm returns 0 beyond sqrt(-2*log(2)*(DBL_MIN_EXP + 1 - DBL_MANT_DIG))
_DNORM_ZERO_BEYOND = math.sqrt(-2.0 * math.log(2.0) * (-1021 + 1 - 53))
#: working grids (R's n_w) up to this many points are computed as R does (binning, FFTs of length 2 n_w); beyond
#: it density_mode takes the bounded path (module docstring)
DENSE_GRID_LIMIT = 2 ** 20


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


def bw_nrd0(x: np.ndarray) -> float:
    """R's ``bw.nrd0``: 0.9 * min(sd, IQR/1.34) * n^(-1/5), with R's fall-backs for a zero spread."""
    x = np.asarray(x, dtype=np.float64).ravel()
    if x.size < 2:
        raise ValueError("need at least 2 data points")
    hi = math.sqrt(r_variance(x))  # R's sd()
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


@njit(cache=True, nogil=True)
def _exp(x):
    """glibc's exp, as R calls it (exp_glibc covers |x| < 512; beyond, the C library's own)."""
    return exp_glibc(x) if abs(x) < 512.0 else math.exp(x)


@njit(cache=True, nogil=True)
def _dnorm1(x, sd):
    """R's ``dnorm(x, 0, sd)`` (dnorm4), including its split evaluation for |x/sd| >= 5 (x1: x/sd rounded to a
    multiple of 2^-16, halves to even as R_forceint)."""
    z = abs(x / sd)
    if z < 5.0:
        return _M_1_SQRT_2PI * _exp(-0.5 * z * z) / sd
    if z <= _DNORM_ZERO_BEYOND:
        t = z * 65536.0
        r = math.floor(t + 0.5)
        if r - t == 0.5 and r * 0.5 != math.floor(r * 0.5):
            r -= 1.0
        x1 = r / 65536.0
        x2 = z - x1
        return _M_1_SQRT_2PI / sd * (_exp(-0.5 * x1 * x1) * _exp((-0.5 * x2 - x1) * x2))
    return 0.0


@njit(cache=True, nogil=True)
def _dnorm(x, sd):
    """_dnorm1 of every value of x."""
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = _dnorm1(x[i], sd)
    return out


@njit(cache=True, nogil=True)
def _bin_dist(x, weight, lo, up, n):
    """R's C ``BinDist``: linear binning of x (each of mass ``weight``) into 2n slots, nodes lo..up (the additions of
    ``_bin_entries``, in their order)."""
    y = np.zeros(2 * n)
    idx, val = _bin_entries(x, weight, lo, up, n)
    for c in range(idx.shape[0]):
        y[idx[c]] += val[c]
    return y


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def _fft_convolution(y, kern):
    """R's ``Re(fft(fft(y) * Conj(fft(kern)), inverse = TRUE))[1:n] / (2 n)`` for y and kern of length 2 n (a
    power of two): R's FFT (exact.rfft) and C99's complex product (a c - b d, a d + b c), operation for operation.
    The product is taken in the forward passes' digit-reversed order (the same for both), then unscrambled."""
    m = y.shape[0]
    yr = y.copy()
    yi = np.zeros(m)
    kr = kern.copy()
    ki = np.zeros(m)
    fft_passes(yr, yi, False)
    fft_passes(kr, ki, False)
    for k in range(m):
        a = yr[k]
        b = yi[k]
        c = kr[k]
        d = -ki[k]
        yr[k] = a * c - b * d
        yi[k] = a * d + b * c
    unscramble(yr, yi)
    fft_inplace(yr, yi, True)
    out = np.empty(m // 2)
    for i in range(m // 2):
        out[i] = yr[i] / float(m)
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
    n_w = _working_points(n)
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
    dens = np.maximum(0.0, _fft_convolution(y, kern))
    xords = r_seq_length_out(lo, up, n_w)
    grid = r_seq_length_out(from_, to, n_user)
    return grid, _approx_linear(xords, dens, grid)


def density_mode(x: np.ndarray, from_: float, to: float, n: float) -> float:
    """Location of the (first) maximum of ``density(x, na.rm=TRUE, from=from_, to=to, n=n)``.

    NaN when the grid is empty (n <= 0) or the density is undefined everywhere.
    """
    if math.isfinite(n) and n > 0 and _working_points(n) > DENSE_GRID_LIMIT:
        return _bounded_density_mode(x, from_, to, n)
    grid, dens = r_density(x, n=n, from_=from_, to=to)
    if grid.size == 0 or np.isnan(dens).all():
        return math.nan
    return float(grid[int(np.nanargmax(dens))])


def _working_points(n: float) -> int:
    """R's working grid size of density(n=): max(n, 512), rounded up to a power of two above 512."""
    n_w = max(n, 512)
    if n_w > 512:
        n_w = 2 ** int(math.ceil(math.log2(n_w)))
    return int(n_w)


# --------------------------------------------------------------------------------------------
# the bounded path: R's binned estimate evaluated by direct summation where its maximum can lie
# --------------------------------------------------------------------------------------------
#: coarse local maxima refined to exact node maxima (the best ones, within _PEAK_SHARE of the best)
_PEAKS = 8
_PEAK_SHARE = 0.9
#: grids of more points than this (far beyond R's 2^30) are taken with this many: node numbers stay exact floats
_MAX_POINTS = 2.0 ** 52
#: nodes scanned on each side of a peak for grid points that may tie with the maximum
_SCAN = 4096


@njit(cache=True, nogil=True)
def _bin_entries(x, weight, lo, up, n):
    """R's C ``BinDist`` as its additions (slot, mass), in its order: x[i]'s mass split linearly between the two
    nodes around it; nodes -1 and n-1+1 keep only their share inside; far outside or non-finite: nothing."""
    idx = np.empty(2 * x.shape[0], dtype=np.int64)
    val = np.empty(2 * x.shape[0])
    c = 0
    ixmax = n - 2
    delta = (up - lo) / (n - 1)
    for i in range(x.shape[0]):
        xi = x[i]
        if not math.isfinite(xi):
            continue
        xpos = (xi - lo) / delta
        fl = math.floor(xpos)
        if fl < -2.0 or fl > n + 1.0:
            continue
        ix = np.int64(fl)
        fx = xpos - ix
        if 0 <= ix <= ixmax:
            idx[c] = ix
            val[c] = weight * (1.0 - fx)
            idx[c + 1] = ix + 1
            val[c + 1] = weight * fx
            c += 2
        elif ix == -1:
            idx[c] = 0
            val[c] = weight * fx
            c += 1
        elif ix == ixmax + 1:
            idx[c] = ix
            val[c] = weight * (1.0 - fx)
            c += 1
    return idx[:c], val[:c]


@njit(cache=True, nogil=True)
def _accumulate(idx, val):
    """(distinct slots ascending, their masses summed in the given order) of slot-sorted additions."""
    J = np.empty(idx.shape[0], dtype=np.int64)
    W = np.empty(idx.shape[0])
    c = -1
    for i in range(idx.shape[0]):
        if c < 0 or idx[i] != J[c]:
            c += 1
            J[c] = idx[i]
            W[c] = 0.0
        W[c] += val[i]
    return J[:c + 1], W[:c + 1]


@njit(cache=True, nogil=True)
def _node_density(J, W, k, by_k, sd, R):
    """max(0, the estimate at node k): the slots within R of k (the others add exactly 0)."""
    q = np.searchsorted(J, k - R)
    s = 0.0
    while q < J.shape[0] and J[q] <= k + R:
        s += W[q] * _dnorm1(abs(J[q] - k) * by_k, sd)
        q += 1
    return max(0.0, s)


@njit(cache=True, nogil=True)
def _density_at(nodes, J, W, by_k, sd, R):
    out = np.empty(nodes.shape[0])
    for a in range(nodes.shape[0]):
        out[a] = _node_density(J, W, nodes[a], by_k, sd, R)
    return out


@njit(cache=True, nogil=True)
def _push_peak(pk, pv, k, v):
    """Keep the best peaks (value descending, the earlier node first on ties) in pk/pv."""
    K = pk.shape[0]
    if v <= pv[K - 1]:
        return
    i = K - 1
    while i > 0 and pv[i - 1] < v:
        pk[i] = pk[i - 1]
        pv[i] = pv[i - 1]
        i -= 1
    pk[i] = k
    pv[i] = v


@njit(cache=True, nogil=True)
def _coarse_peaks(J, W, by_k, sd, R, s, kf, kt, K):
    """The K best local maxima (node, value; value descending) of the estimate on the coarse nodes: kf, the
    multiples of s and kt, within [kf, kt]. Only nodes within R of a slot are evaluated (the others are 0)."""
    pk = np.full(K, -1, dtype=np.int64)
    pv = np.full(K, -1.0)
    have_prev = False
    prev_k = kf
    prev_v = 0.0
    left_v = 0.0
    nJ = J.shape[0]
    j = 0
    while j < nJ:
        a = max(kf, J[j] - R)
        b = min(kt, J[j] + R)
        j += 1
        while j < nJ and J[j] - R <= b + 1:
            b = min(kt, J[j] + R)
            j += 1
        if a > b:
            continue
        c = (a + s - 1) // s * s  # the first multiple of s >= a
        k = kf if a == kf else c
        while True:
            if k > b:
                if b == kt and (not have_prev or prev_k < kt):
                    k = kt
                else:
                    break
            v = _node_density(J, W, k, by_k, sd, R)
            if have_prev:
                adjacent = prev_k >= k - s  # no coarse node in between (those would be 0)
                right = v if adjacent else 0.0
                if left_v <= prev_v and prev_v >= right and prev_v > 0.0:
                    _push_peak(pk, pv, prev_k, prev_v)
                left_v = prev_v if adjacent else 0.0
            have_prev = True
            prev_k = k
            prev_v = v
            if k == kt:
                break
            k = c if k < c else k + s
    if have_prev and left_v <= prev_v and prev_v > 0.0:
        _push_peak(pk, pv, prev_k, prev_v)
    return pk, pv


@njit(cache=True, nogil=True)
def _first_node_max(J, W, by_k, sd, R, a, b):
    """The first node of [a, b] at which the estimate stops rising (its maximum there if it rises, then
    falls)."""
    lo = a
    hi = b
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if _node_density(J, W, mid, by_k, sd, R) >= _node_density(J, W, mid + 1, by_k, sd, R):
            hi = mid
        else:
            lo = mid + 1
    return lo


class _Grids:
    """R's two grids without their points: seq(lo, up, length.out=n_w) (nodes) and seq(from, to,
    length.out=n_u) (the user's), point by point as r_seq_length_out computes them."""

    def __init__(self, lo, up, n_w, from_, to, n_u):
        self.lo, self.up, self.n_w = lo, up, n_w
        self.from_, self.to, self.n_u = from_, to, n_u
        self.by_x = (up - lo) / float(n_w - 1)
        self.by_u = (to - from_) / float(n_u - 1)

    def node(self, k: int) -> float:
        return self.up if k == self.n_w - 1 else self.lo + float(k) * self.by_x

    def point(self, i: int) -> float:
        return self.to if i == self.n_u - 1 else self.from_ + float(i) * self.by_u

    def bracket(self, t: float) -> int:
        """_approx_linear's i: the last node <= t, at most n_w - 2."""
        k = min(max(int(math.floor((t - self.lo) / self.by_x)), 0), self.n_w - 2)
        while k > 0 and self.node(k) > t:
            k -= 1
        while k < self.n_w - 2 and self.node(k + 1) <= t:
            k += 1
        return k

    def first_point_at_or_after(self, x: float) -> int:
        """The first user index whose point is >= x (n_u if none)."""
        i = min(max(int(math.ceil((x - self.from_) / self.by_u)), 0), self.n_u)
        while i > 0 and self.point(i - 1) >= x:
            i -= 1
        while i < self.n_u and self.point(i) < x:
            i += 1
        return i


def _bounded_density_mode(x: np.ndarray, from_: float, to: float, n: float) -> float:
    """density_mode without R's grids (module docstring); the same definition, values to rounding."""
    x = np.asarray(x, dtype=np.float64).ravel()
    x = x[~np.isnan(x)]
    n_all = x.size
    x = x[np.isfinite(x)]
    nx = x.size
    if nx < 2:
        raise ValueError("need at least 2 points to select a bandwidth automatically")
    bw = bw_nrd0(x)
    if not math.isfinite(bw) or bw <= 0:
        raise ValueError(f"bandwidth must be positive and finite, got {bw!r}")
    if not (math.isfinite(from_) and math.isfinite(to)):
        raise ValueError("non-finite 'from' or 'to'")
    n = min(n, _MAX_POINTS)
    n_w = _working_points(n)
    n_u = int(math.ceil(n))
    lo = from_ - 4.0 * bw
    up = to + 4.0 * bw
    idx, val = _bin_entries(x, 1.0 / nx, lo, up, n_w)
    order = np.argsort(idx, kind="stable")
    J, W = _accumulate(idx[order], val[order])
    if nx != n_all:
        W = W * (nx / n_all)
    g = _Grids(lo, up, n_w, from_, to, n_u)
    by_k = (2.0 * (up - lo)) / float(2 * n_w - 1)  # the kernel's grid: seq(0, 2 (up - lo), length.out=2 n_w)
    R = int(math.floor(_DNORM_ZERO_BEYOND * bw / by_k)) + 2  # slots farther away add exactly 0
    kf = max(0, g.bracket(from_) - 1)
    kt = min(n_w - 1, g.bracket(to) + 2)
    step = max(1, int((bw / by_k) // 4))
    pk, pv = _coarse_peaks(J, W, by_k, bw, R, step, kf, kt, _PEAKS)
    if pv[0] <= 0.0:  # zero on every node the user's grid sees: the first point is a maximum
        return float(g.point(0))

    def dens(nodes) -> np.ndarray:
        nodes = np.asarray(nodes, dtype=np.int64)
        return _density_at(nodes, J, W, by_k, bw, R)

    peaks = []
    for k, v in zip(pk, pv):
        if k < 0 or v < _PEAK_SHARE * pv[0]:
            continue
        if step > 1:
            k = _first_node_max(J, W, by_k, bw, R, max(kf, k - step), min(kt, k + step))
        peaks.append(int(k))
    peaks = sorted(set(peaks))
    peak_vals = dens(peaks)
    best = peaks[int(np.argmax(peak_vals))]
    near = min(max(int(round((g.node(best) - from_) / g.by_u)), 0), n_u - 1)
    floor_value = _interpolated(g, [near], dens)[0]
    # segments [k, k + 1] whose interpolated points may reach the maximum: beside nodes >= floor_value
    segments = set()
    for k, v in zip(peaks, peak_vals):
        if v < floor_value:
            continue
        a = b = k
        while a > kf and a > k - _SCAN and dens([a - 1])[0] >= floor_value:
            a -= 1
        while b < kt and b < k + _SCAN and dens([b + 1])[0] >= floor_value:
            b += 1
        segments.update(range(max(a - 1, 0), min(b, n_w - 2) + 1))
    best_value, best_i = -1.0, n_u
    for k in sorted(segments):
        i0 = g.first_point_at_or_after(g.node(k))
        i1 = g.first_point_at_or_after(g.node(k + 1)) - 1
        if k == n_w - 2 and i1 < n_u - 1 and g.point(i1 + 1) == g.node(k + 1):
            i1 += 1
        i0, i1 = max(i0, 0), min(i1, n_u - 1)
        if i0 > i1:
            continue
        f0, f1 = _interpolated(g, [i0, i1], dens)
        if f1 > f0:  # rising: the maximum at the end; its first index (rounding may flatten the top)
            top, lo_i, hi_i = f1, i0 + 1, i1
            while lo_i < hi_i:
                mid = (lo_i + hi_i) // 2
                if _interpolated(g, [mid], dens)[0] >= top:
                    hi_i = mid
                else:
                    lo_i = mid + 1
            value, i = top, lo_i
        else:
            value, i = f0, i0
        if value > best_value or (value == best_value and i < best_i):
            best_value, best_i = value, i
    return float(g.point(best_i))


def _interpolated(g: _Grids, indices, dens) -> list[float]:
    """_approx_linear's values at the user grid points ``indices``."""
    out = []
    for i in indices:
        t = g.point(i)
        k = g.bracket(t)
        xi, xj = g.node(k), g.node(k + 1)
        yi, yj = dens([k, k + 1])
        if t == xj:
            out.append(float(yj))
        elif t == xi:
            out.append(float(yi))
        else:
            out.append(float(yi + (yj - yi) * ((t - xi) / (xj - xi))))
    return out
