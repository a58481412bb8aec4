"""Robust spreads of a sample's per-window values, compiled (numba): the scaled MAD, the IQR and the root of the
biweight midvariance of a column's finite values (``column_spreads``: every column of a matrix, in parallel over
the columns), and each window's median over the samples (``row_medians``, in parallel over the windows).

The definitions are calls/qc.py's; here is their arithmetic. Medians and quantiles are order statistics of the
finite values (a radix selection, not a sort: the same doubles numpy's median and "linear" percentile give); the
biweight's sums run in the values' order, one pass each. Scratch: a few copies of one column per thread.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange

from ..exact.rstats import select_kth

#: scales the median absolute deviation to a normal distribution's standard deviation
MAD_SCALE = 1.4826


#: the radix selection's digit: 16 bits of a double's order key (sign, exponent, mantissa), from the top
_DIGIT_BITS = 16
_DIGITS = 1 << _DIGIT_BITS
#: at most this many values left, the selection picks among them directly (quickselect)
_DIRECT = 4096
_SIGN = np.uint64(1 << 63)


@njit(cache=True, nogil=True, inline="always")
def _digit(bits, shift):
    """Bits shift..shift+15 of the order key of a double's bits: unsigned keys in the doubles' order (negatives
    flipped whole, positives with the sign bit set)."""
    flip = (np.uint64(0) - (bits >> np.uint64(63))) | _SIGN  # all ones for a negative, the sign bit otherwise
    return int(((bits ^ flip) >> np.uint64(shift)) & np.uint64(_DIGITS - 1))


@njit(cache=True, nogil=True)
def _min_from(a, k):
    """The smallest of a[k:] (after ``select_kth(a, n, k - 1)``: the k-th order statistic)."""
    v = a[k]
    for i in range(k + 1, a.size):
        if a[i] < v:
            v = a[i]
    return v


@njit(cache=True, nogil=True)
def _kth_pair(a, k):
    """(the k-th smallest of ``a``, the (k+1)-th; the k-th twice where k + 1 = n), 0-based, n >= 1; ``a`` is
    reordered and overwritten. A radix selection: a pass counts each 16-bit digit of the values' order keys from
    the top, the values of the digits holding ranks k and k + 1 are moved to the front (a forward pass, in place)
    and the search goes on among them, until few are left for a quickselect: two linear passes a level instead of
    a quickselect's many, the same doubles (an order statistic is one of the values)."""
    n = a.size
    last = k + 1 >= n
    if n > _DIRECT:
        shift = 64 - _DIGIT_BITS
        hist = np.zeros(_DIGITS, np.int64)
        while n > _DIRECT and shift >= 0:
            bits = a[:n].view(np.uint64)
            hist[:] = 0
            for i in range(n):
                hist[_digit(bits[i], shift)] += 1
            b = 0
            below = 0
            while below + hist[b] <= k:
                below += hist[b]
                b += 1
            e = b
            if not last and below + hist[b] <= k + 1:  # rank k + 1 is the smallest of the next digit held
                e = b + 1
                while hist[e] == 0:
                    e += 1
            if hist[b] + (hist[e] if e != b else 0) < n:  # else every value is in these digits: none to move
                j = 0
                for i in range(n):
                    d = _digit(bits[i], shift)
                    if b <= d <= e:
                        a[j] = a[i]  # j <= i: the values still to read are not overwritten
                        j += 1
                n = j
                k -= below
            if e != b:  # the ranks straddle two digits: select among their values
                break
            shift -= _DIGIT_BITS
        if shift < 0:  # every digit of the values left is the same: they are one value
            return a[0], a[0]
    a = a[:n]
    lo = select_kth(a, n, k)
    return lo, lo if last else _min_from(a, k + 1)


@njit(cache=True, nogil=True)
def _median(a):
    """numpy's median of the finite values ``a`` (n >= 1; reordered and overwritten): the middle one, or the mean
    of the middle two."""
    n = a.size
    if n % 2:
        return _kth_pair(a, n // 2)[0]
    lo, hi = _kth_pair(a, n // 2 - 1)
    return (lo + hi) / 2.0


@njit(cache=True, nogil=True)
def _quantile(a, q):
    """numpy's "linear" percentile 100 q of the finite values ``a`` (n >= 1; reordered and overwritten)."""
    below, above = _kth_pair(a, int(math.floor(q * (a.size - 1))))
    return _lerp_quantile(a.size, q, below, above)


@njit(cache=True, nogil=True)
def _lerp_quantile(n, q, below, above):
    """numpy's "linear" percentile 100 q of n values from its two order statistics at floor(q (n - 1)) and the next
    (the latter unused where there is none)."""
    index = q * (n - 1)
    lo = int(math.floor(index))
    t = index - lo
    if lo + 1 >= n:
        return below
    diff = above - below
    if t >= 0.5:  # numpy's _lerp: exact at both ends
        return above - diff * (1.0 - t)
    return below + diff * t


@njit(cache=True, nogil=True)
def _quartiles_median_copies(a, scratch):
    """``_quartiles_median`` as three selections, each on a copy of ``a`` in ``scratch``."""
    scratch[:] = a
    q1 = _quantile(scratch, 0.25)
    scratch[:] = a
    q3 = _quantile(scratch, 0.75)
    scratch[:] = a
    return q1, q3, _median(scratch)


@njit(cache=True, nogil=True)
def _quartiles_median(a, scratch):
    """(``_quantile(a, 0.25)``, ``_quantile(a, 0.75)``, ``_median(a)``) of the finite values ``a`` (n >= 1; ``a``
    kept, ``scratch`` as long as ``a`` overwritten) from one pass: the 16-bit top digits of the order keys counted,
    the values of the digits holding the six ranks wanted moved to ``scratch`` and selected there; where those are
    over a quarter of the values (few distinct top digits), each statistic on a copy of ``a`` as before."""
    n = a.size
    if n <= _DIRECT:
        return _quartiles_median_copies(a, scratch)
    ranks = np.empty(6, np.int64)  # the pairs (k, k + 1) of the first quartile, the third and the median
    ranks[0] = int(math.floor(0.25 * (n - 1)))
    ranks[2] = int(math.floor(0.75 * (n - 1)))
    ranks[4] = n // 2 - 1 if n % 2 == 0 else n // 2
    for r in range(0, 6, 2):
        ranks[r + 1] = min(ranks[r] + 1, n - 1)
    shift = 64 - _DIGIT_BITS
    bits = a.view(np.uint64)
    hist = np.zeros(_DIGITS, np.int64)
    for i in range(n):
        hist[_digit(bits[i], shift)] += 1
    wanted = np.zeros(_DIGITS, np.bool_)
    bins = np.empty(6, np.int64)
    for r in range(6):  # the digit holding each rank
        b = 0
        below = 0
        while below + hist[b] <= ranks[r]:
            below += hist[b]
            b += 1
        bins[r] = b
        wanted[b] = True
    taken = 0
    for b in range(_DIGITS):
        if wanted[b]:
            taken += hist[b]
    if taken > n // 4:
        return _quartiles_median_copies(a, scratch)
    j = 0
    for i in range(n):
        if wanted[_digit(bits[i], shift)]:
            scratch[j] = a[i]
            j += 1
    values = np.empty(6)
    for r in range(6):  # a rank among the values moved: less the values below its digit that were not moved
        left_out = 0
        for b in range(bins[r]):
            if not wanted[b]:
                left_out += hist[b]
        values[r] = select_kth(scratch, j, ranks[r] - left_out)
    median = values[4] if n % 2 else (values[4] + values[5]) / 2.0
    return _lerp_quantile(n, 0.25, values[0], values[1]), _lerp_quantile(n, 0.75, values[2], values[3]), median


@njit(cache=True, nogil=True)
def _abs_dev_median(a, centre, scratch):
    """The median of |a - centre| (``scratch``: as long as ``a``)."""
    for i in range(a.size):
        scratch[i] = abs(a[i] - centre)
    return _median(scratch)


@njit(cache=True, nogil=True)
def biweight_location(a, scratch, centre, spread, c=6.0, epsilon=1e-3, max_iter=5):
    """Tukey's biweight location of the finite values ``a``, started at their median ``centre``, whose median
    absolute deviation is ``spread`` (``scratch``: as long as ``a``)."""
    loc = centre
    for step_no in range(max_iter):
        dev = spread if step_no == 0 else _abs_dev_median(a, loc, scratch)
        scale = max(c * dev, epsilon)
        total = 0.0
        moment = 0.0
        for i in range(a.size):
            d = a[i] - loc
            u = d / scale
            if abs(u) < 1.0:
                w = (1.0 - u * u) ** 2
                total += w
                moment += d * w
        if total == 0.0:
            return loc
        step = moment / total
        loc += step
        if abs(step) <= epsilon:
            break
    return loc


@njit(cache=True, nogil=True)
def biweight_midvariance(a, scratch, centre, spread, c=9.0, epsilon=1e-3):
    """The square root of the biweight midvariance of the finite values ``a`` (median ``centre``, median absolute
    deviation ``spread``) around their biweight location; the scaled MAD where no value has weight
    (``scratch``: as long as ``a``)."""
    loc = biweight_location(a, scratch, centre, spread)
    mad = _abs_dev_median(a, loc, scratch)
    scale = max(c * mad, epsilon)
    inside = 0
    u_sum = 0.0
    num = 0.0
    den = 0.0
    for i in range(a.size):
        d = a[i] - loc
        u = d / scale
        if abs(u) < 1.0:
            inside += 1
            u_sum += u
            u2 = u * u
            w = (1.0 - u2) * (1.0 - u2)
            num += d * d * (w * w)
            den += (1.0 - u2) * (1.0 - 5.0 * u2)
    if u_sum == 0.0:
        return mad * MAD_SCALE
    return math.sqrt(inside * num / (den * den))


@njit(cache=True, nogil=True)
def centre_and_spread(a, scratch):
    """(median, median absolute deviation from it) of the finite values ``a`` (n >= 1; ``scratch``: as long as
    ``a``, overwritten)."""
    scratch[:] = a
    centre = _median(scratch)
    return centre, _abs_dev_median(a, centre, scratch)


@njit(cache=True, nogil=True)
def _spread_into(x, out, a, scratch):
    """(scaled MAD, IQR, biweight midvariance's root) of the finite values of the column ``x`` into ``out`` (3,);
    NaN where there are none (``a``, ``scratch``: as long as ``x``)."""
    n = 0
    for v in x:
        if math.isfinite(v):
            a[n] = v + 0.0  # -0.0 as 0.0: equal values, equal bits (the GPU's sort orders by bits)
            n += 1
    if n == 0:
        out[:] = np.nan
        return
    a = a[:n]
    scratch = scratch[:n]
    q1, q3, centre = _quartiles_median(a, scratch)
    spread = _abs_dev_median(a, centre, scratch)
    out[0] = spread * MAD_SCALE
    out[1] = q3 - q1
    out[2] = biweight_midvariance(a, scratch, centre, spread)


def _flat(values: np.ndarray) -> tuple[np.ndarray, int, int]:
    """(the values of ``values`` (m, N) one column after the other, 1-D float64; m; N): the kernels take columns
    from this, so that one compiled variant serves every layout (numba types a matrix with one column as C-ordered,
    another variant)."""
    v = np.asarray(values, dtype=np.float64)
    return v.ravel(order="F"), v.shape[0], v.shape[1]


@njit(parallel=True, cache=True, nogil=True)
def _column_spreads(first, second, m, n1, total, out, workers):
    for w in prange(workers):  # each worker its own scratch (fresh pages cost more than the statistics)
        a = np.empty(m)
        scratch = np.empty(m)
        for j in range(w, total, workers):
            if j < n1:
                _spread_into(first[j * m:(j + 1) * m], out[j], a, scratch)
            else:
                _spread_into(second[(j - n1) * m:(j - n1 + 1) * m], out[j], a, scratch)


def column_spreads(values: np.ndarray, more: np.ndarray | None = None) -> np.ndarray:
    """(N, 3) float64: the scaled MAD, IQR and biweight midvariance's root of each column's finite values of
    ``values`` (m, N) (NaN where a column has none); (N, 6) with those of ``more`` (m, N) after them, every
    column of both in parallel."""
    first, m, n1 = _flat(values)
    second, m2, n2 = _flat(np.zeros((m, 0)) if more is None else more)
    if (m2, n2) != (m, n1) and more is not None:
        raise ValueError(f"column_spreads: shapes {(m, n1)} and {(m2, n2)} differ")
    out = np.empty((n1 + n2, 3))
    if out.shape[0]:
        _column_spreads(first, second, m, n1, n1 + n2, out, min(out.shape[0], numba.get_num_threads()))
    return out if more is None else np.hstack([out[:n1], out[n1:]])


#: counts below this one are tallied (``column_counts``; a streamed run's ``tally_counts``): a median count
#: that lies below comes from the tally
TALLY_BINS = 4096


@njit(inline="always")
def _tally(v, hist):  # pragma: no cover - numba
    """Count the count ``v`` (not NaN) into ``hist`` where it is a whole count below TALLY_BINS; False where a
    tally cannot stand for it (negative, fractional, infinite or from 2^52; whole counts from TALLY_BINS lie above
    every bin)."""
    if 0.0 <= v < TALLY_BINS and v == math.floor(v):
        hist[int(v)] += 1
        return True
    return TALLY_BINS <= v < 2.0 ** 52 and v == math.floor(v)


@njit(cache=True, nogil=True)
def _tally_median(hist, m):  # pragma: no cover - numba
    """numpy's median of m >= 1 counts from their tally ``hist``: the middle count, or the mean of the middle two;
    -1.0 where a middle count lies beyond the tally."""
    lo_rank = (m - 1) // 2
    hi_rank = m // 2
    lo = -1.0
    seen = 0
    for b in range(hist.size):
        seen += hist[b]
        if lo < 0 and seen > lo_rank:
            lo = float(b)
        if seen > hi_rank:
            return lo if lo_rank == hi_rank else (lo + float(b)) / 2.0
    return -1.0


@njit(parallel=True, cache=True, nogil=True)
def _column_counts(x, m, N, totals, medians, zeros, workers):
    for w in prange(workers):
        hist = np.empty(TALLY_BINS, np.int64)
        a = np.empty(0)
        for j in range(w, N, workers):
            total = 0.0
            nan = False
            whole = True  # every value a count the tally holds or lies below
            empty = 0
            hist[:] = 0
            for i in range(m):
                v = x[j * m + i]
                if math.isnan(v):
                    nan = True
                    continue
                total += v
                if v == 0.0:
                    empty += 1
                if not _tally(v, hist):
                    whole = False
            totals[j] = total
            zeros[j] = empty
            if nan or m == 0:
                medians[j] = np.nan
                continue
            # the middle counts from the tally where they lie in it (a linear pass, no copy), else by selection
            median = _tally_median(hist, m) if whole else -1.0
            if median >= 0:
                medians[j] = median
            else:
                if a.size < m:
                    a = np.empty(m)
                for i in range(m):
                    a[i] = x[j * m + i]
                medians[j] = _median(a[:m])


def column_counts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(totals, medians, zeros), each (N,), of the columns of the read counts ``values`` (m, N): the sum of the
    values that are not NaN, numpy's median (NaN where a column holds a NaN, or has no value) and the number of
    zeros; the columns in parallel. Whole counts are tallied as they are summed: a median among the counts below
    TALLY_BINS comes from the tally, others by selection over a copy of the column."""
    x, m, N = _flat(values)
    totals, medians, zeros = np.empty(N), np.empty(N), np.empty(N, np.int64)
    if N:
        _column_counts(x, m, N, totals, medians, zeros, min(N, numba.get_num_threads()))
    return totals, medians, zeros


@njit(cache=True, nogil=True)
def _tally_counts(x, m, N, hist, totals, zeros, flags):
    for j in range(N):
        total = 0.0
        row = hist[j]
        for i in range(m):
            v = x[j * m + i]
            if math.isnan(v):
                flags[j, 0] = True
                continue
            total += v
            if v == 0.0:
                zeros[j] += 1
            if not _tally(v, row):
                flags[j, 1] = True  # negative, fractional, infinite or huge: the tally cannot stand for the column
        totals[j] = total


def tally_counts(values: np.ndarray, hist: np.ndarray, zeros: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Add the read counts ``values`` (m, N) (rows of a cohort) to the tally of each column: ``hist`` (N,
    TALLY_BINS) int32 the number of each whole count below TALLY_BINS (the larger ones are all above it),
    ``zeros`` (N,) int64 of zeros, ``flags`` (N, 2) bool: a NaN seen, a count the tally cannot hold seen
    (negative, fractional, infinite or from 2^52). Returns (N,) the columns' sums of their values that are not NaN,
    in row order. One thread (a streamed run's read-ahead thread: numba's workqueue threading layer takes one
    parallel call at a time, and the compute thread makes them)."""
    x, m, N = _flat(values)
    totals = np.zeros(N)
    if N and m:
        _tally_counts(x, m, N, hist, totals, zeros, flags)
    return totals


def tally_medians(hist: np.ndarray, nan: np.ndarray, m: int) -> np.ndarray | None:
    """(N,) numpy's median of each column of m counts from its tally (``tally_counts``; NaN where ``nan``): the
    middle count, or the mean of the middle two; None where a middle count of a column lies beyond the tally."""
    out = np.full(hist.shape[0], np.nan)
    for j in np.flatnonzero(~np.asarray(nan, dtype=bool)) if m else ():
        out[j] = _tally_median(hist[j], m)
        if out[j] < 0:
            return None
    return out


@njit(parallel=True, cache=True, nogil=True)
def _row_medians(x, m, N, out):
    for i in prange(m):
        row = np.empty(N)
        n = 0
        for j in range(N):
            v = x[j * m + i]
            if math.isfinite(v):
                row[n] = v
                n += 1
        out[i] = _median(row[:n]) if n else np.nan


def row_medians(values: np.ndarray) -> np.ndarray:
    """(m,) each row's median over its finite values of ``values`` (m, N) (NaN where none is finite); the rows
    in parallel."""
    x, m, N = _flat(values)
    out = np.empty(m)
    if m:
        _row_medians(x, m, N, out)
    return out


__all__ = ["column_spreads", "column_counts", "row_medians", "tally_counts", "tally_medians", "TALLY_BINS",
           "centre_and_spread", "biweight_location", "biweight_midvariance", "MAD_SCALE"]
