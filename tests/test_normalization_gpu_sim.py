"""The GPU normalization's kernels (normalization/device_kernels.py) and its driver (normalization/gpu.py) without a
GPU: numba's CUDA simulator runs them in the session's simulator child (cudasim.py), numpy standing in for cupy.

The sums kernel against numpy (several tiles per chromosome, the last partial, chromosomes shorter than a tile, more
columns than one reduction round, silent rows of zeros and of negative counts, an all-zero and an all-silent
chromosome, each flag); the normalization against the CPU's, bit for bit, through normalize_device and both entry
points; and each reason to leave the work to the CPU code: the reason, the device matrix left unmodified, and the
CPU's result or error and warnings either way.
"""
from __future__ import annotations

import pytest

import cudasim

CHILD = r'''
    import json, sys, warnings
    import numpy as np
    from gcnmops.errors import InputError
    from gcnmops.normalization import device_kernels as dk
    from gcnmops.normalization.cpu import normalize_chromosomes
    from gcnmops.normalization.gpu import Fallback, normalize_chromosomes_gpu, normalize_device, normalize_on_device

    out = {"tile_rows": dk.TILE_ROWS, "cols_per_round": dk.COLS_PER_ROUND}
    rng = np.random.default_rng(11)


    def counts(m, n, level=30.0):
        """Read counts (m, n), column-major (so that normalize_chromosomes_gpu takes them to the device as they are)."""
        mu = rng.gamma(4.0, level / 4.0, size=(m, 1)) * rng.uniform(0.7, 1.3, size=(1, n))
        return np.asfortranarray(rng.poisson(mu).astype(float))


    def mode_zero_block(rows):
        """Rows whose variance-to-mean ratios are 0 for four fifths of them (equal counts in the 4 columns, whose kept
        sums are equal: factors exactly 1) and one larger value for the rest: the density mode of the ratios is 0."""
        z = np.empty((rows, 4))
        k = rows * 4 // 5
        z[:k] = rng.integers(5, 50, size=(k, 1))
        for j in range(k, rows):
            z[j] = np.roll([2.0, 10.0, 30.0, 50.0], j)
        return z


    def layout(lengths):
        names = [f"chr{i + 1}" for i in range(len(lengths))]
        ends = np.cumsum(lengths)
        blocks = [(nm, slice(int(e - n), int(e))) for nm, n, e in zip(names, lengths, ends)]
        return names, np.repeat(names, lengths), blocks


    def on_cpu(x, chrom, **kw):
        """(result or None, InputError message or None, warnings) of the CPU normalization."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return normalize_chromosomes(x, chrom, **kw), None, [str(w.message) for w in caught]
            except InputError as exc:
                return None, str(exc), [str(w.message) for w in caught]


    def compare(x, lengths, norm_type):
        """normalize_device on a copy of x (the reason if it falls back, whether Y stayed unmodified then), and both
        entry points (host and device-resident) against the CPU: same matrix, or the same error and warnings."""
        names, chrom, blocks = layout(lengths)
        Y = x.copy(order="F")
        reason = None
        try:
            normalize_device(Y, blocks, norm_type, {})
        except Fallback as exc:
            reason = str(exc)
        ref, err, warned = on_cpu(x, chrom, norm_type=norm_type)
        res = {"reason": reason, "unmodified": bool(np.array_equal(Y, x, equal_nan=True)) if reason else None,
               "device_identical": bool(ref is not None and np.array_equal(Y, ref)) if reason is None else None,
               "cpu_error": err, "cpu_warnings": warned}
        t = {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                got = normalize_chromosomes_gpu(x, chrom, norm_type=norm_type, timings=t)
                res["host_entry_identical"] = bool(ref is not None and np.array_equal(got, ref))
            except InputError as exc:
                res["host_entry_identical"] = str(exc) == err
        res["host_entry_warnings_same"] = [str(w.message) for w in caught] == warned
        res["host_entry_path"] = t.get("normalize_path")
        if err is None:  # the device-resident entry: Y normalized in place, or the CPU's result returned and copied in
            d, t = x.copy(order="F"), {}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                back = normalize_on_device(d, np.asfortranarray(x), [(nm, s.start, s.stop) for nm, s in blocks],
                                           norm_type=norm_type, timings=t)
            res["resident_identical"] = bool(np.array_equal(d, ref) and (back is None or np.array_equal(back, ref)))
            res["resident_path"] = t["normalize_path"]
        return res


    # the sums kernel against numpy: several tiles per block (the last one partial), blocks shorter than a tile, more
    # columns than one round of the reduction, silent rows (zeros, and negatives below 1), negative counts in kept rows
    lengths = [3 * dk.TILE_ROWS - 37, 5, 1, dk.TILE_ROWS, 40]
    m, n = sum(lengths), dk.COLS_PER_ROUND + 3
    x = counts(m, n)
    x[rng.random(m) < 0.2] = 0.0
    x[rng.random((m, n)) < 0.1] = 0.0
    x[10, :] = -2.0  # silent, non-zero
    x[20, 3] = -5.0  # kept row with a negative count
    x[m - 40:] = 0.0  # the last block: all zero
    x[m - 41 - dk.TILE_ROWS:m - 40] = np.where(x[m - 41 - dk.TILE_ROWS:m - 40] > 0, 0.0, -1.0)  # block 4: all silent
    names, _, blocks = layout(lengths)
    firsts = np.array([s.start for _, s in blocks], dtype=np.int64)
    ends = np.array([s.stop for _, s in blocks], dtype=np.int64)
    Y = x.copy(order="F")
    silent = np.zeros(m, dtype=np.uint8)
    s = dk.block_sums(Y, firsts, ends, silent)
    ref_silent = (x < 1).all(axis=1)
    kept = ~ref_silent
    spans = list(zip(firsts, ends))
    out["sums_kernel"] = {
        "silent": bool(np.array_equal(silent.astype(bool), ref_silent)),
        "kept_rows": bool(np.array_equal(s.kept_rows, [int(kept[a:b].sum()) for a, b in spans])),
        "nonzero": s.nonzero.tolist(),
        "kept_sums": bool(np.array_equal(s.kept_sums, [(x[a:b] * kept[a:b, None]).sum(axis=0) for a, b in spans])),
        "sums": bool(np.array_equal(s.sums, [x[a:b].sum(axis=0) for a, b in spans])),
        "abs_sums": bool(np.array_equal(s.abs_sums, [np.abs(x[a:b]).sum(axis=0) for a, b in spans])),
        "flags": [s.nonfinite, s.fractional], "Y_untouched": bool(np.array_equal(Y, x)),
        "kept_rows_per_block": s.kept_rows.tolist(),
    }
    # each flag, on one tile (the simulator runs a GPU thread as a Python thread: a tile takes a fraction of a second)
    one = np.array([dk.TILE_ROWS], dtype=np.int64)
    flags = {"flag_inf": (5, 1, np.inf), "flag_nan": (one[0] - 1, n - 1, np.nan), "flag_fraction": (200, 9, 2.5),
             "flag_negative_fraction": (0, 0, -0.5)}
    for name, (i, k, v) in flags.items():
        z = x[:one[0]].copy(order="F")
        z[i, k] = v
        r = dk.block_sums(z, one - one, one, np.zeros(one[0], dtype=np.uint8))
        out[name] = [r.nonfinite, r.fractional]

    # normalization against the CPU: many chromosomes, silent rows, an all-zero chromosome; poisson and mean
    lengths = [dk.TILE_ROWS + 60, 120, 3, 90, 60]
    x = counts(sum(lengths), 6)
    x[rng.random(x.shape[0]) < 0.15] = 0.0
    x[dk.TILE_ROWS + 60:dk.TILE_ROWS + 180] = 0.0  # chr2 all zero: left as it is
    x[dk.TILE_ROWS + 182, :] = 0.0  # chr3: 2 of its 3 rows kept
    for norm_type in ("poisson", "mean"):
        out[f"identical_{norm_type}"] = compare(x, lengths, norm_type)

    # each reason to leave the normalization to the CPU
    def variant(edit, lengths=(200, 150, 100), n=5, level=30.0):
        z = counts(sum(lengths), n, level)
        edit(z)
        return z, list(lengths)


    def setv(z, i, k, v):
        z[i, k] = v


    cases = {
        "inf": variant(lambda z: setv(z, 7, 2, np.inf)),
        "nan": variant(lambda z: setv(z, 300, 4, np.nan)),
        "fraction": variant(lambda z: setv(z, 420, 0, 12.25)),
        "sum_2_52": variant(lambda z: (setv(z, 3, 1, 2.0 ** 51), setv(z, 4, 1, 2.0 ** 51))),
        "abs_sum_2_52": variant(lambda z: (setv(z, 3, 1, 2.0 ** 51), setv(z, 4, 1, -2.0 ** 51))),
        "zero_column": variant(lambda z: setv(z, slice(None), 3, 0.0)),
        "signed_zero_column": variant(lambda z: (setv(z, slice(None), 3, 0.0), setv(z, 5, 3, 4.0),
                                                 setv(z, 9, 3, -4.0))),
        "one_kept_row": variant(lambda z: (setv(z, slice(350, 450), slice(None), 0.0), setv(z, 400, 2, 1.0))),
        "negative_silent_block": variant(lambda z: setv(z, slice(350, 450), slice(None), -1.0)),
        "zero_size_factor": variant(lambda z: setv(z, slice(200, 350), 1, 0.0)),
    }
    cases["mode_zero"] = (np.asfortranarray(np.vstack([counts(200, 4), mode_zero_block(100)])), [200, 100])
    for name, (z, lengths) in cases.items():
        out[f"fallback_{name}"] = compare(z, lengths, "poisson")
    json.dump(out, open(f"{sys.argv[1]}/result.json", "w"), indent=1)
'''
SCENARIO = cudasim.register(__name__, CHILD)

#: normalize_device's Fallback reason per case (None: normalized on the device)
REASONS = {
    "fallback_inf": "non-finite counts",
    "fallback_nan": "non-finite counts",
    "fallback_fraction": "counts not whole numbers below 2^52",
    "fallback_sum_2_52": "counts not whole numbers below 2^52",
    "fallback_abs_sum_2_52": "counts not whole numbers below 2^52",
    "fallback_zero_column": "zero column",
    "fallback_signed_zero_column": "zero column",
    "fallback_one_kept_row": "chromosome chr3: at most one non-silent row",
    "fallback_negative_silent_block": "chromosome chr3: at most one non-silent row",
    "fallback_zero_size_factor": "size factor 0 or NaN",
    "fallback_mode_zero": "chromosome chr2: non-finite factors",
    "identical_poisson": None,
    "identical_mean": None,
}


@pytest.fixture(scope="module")
def sim(cuda_simulator):
    return cuda_simulator.result(SCENARIO)


def test_sums_kernel_against_numpy(sim):
    r = sim["sums_kernel"]
    assert all(r[k] for k in ("silent", "kept_rows", "kept_sums", "sums", "abs_sums", "Y_untouched")), r
    assert r["flags"] == [False, False], r
    # block 1 spans several tiles, block 3 (one row) and the all-zero block 5 keep none, block 4 is all silent
    assert r["nonzero"] == [True, True, True, True, False], r
    assert r["kept_rows_per_block"][0] > sim["tile_rows"] and r["kept_rows_per_block"][2:] == [0, 0, 0], r


@pytest.mark.parametrize("name,flags", [("flag_inf", [True, False]), ("flag_nan", [True, False]),
                                        ("flag_fraction", [False, True]), ("flag_negative_fraction", [False, True])])
def test_sums_kernel_flags(sim, name, flags):
    assert sim[name] == flags


@pytest.mark.parametrize("name", sorted(REASONS))
def test_same_as_cpu(sim, name):
    """The device's reason to fall back (or none), the device matrix unmodified when it does, and the CPU's
    normalized matrix, or its error and warnings, from normalize_device and both entry points."""
    r = sim[name]
    assert r["reason"] == REASONS[name], r
    if r["reason"] is None:
        assert r["device_identical"] and not r["cpu_warnings"], r
    else:
        assert r["unmodified"], r
    assert r["host_entry_identical"] and r["host_entry_warnings_same"], r
    assert r["host_entry_path"] == ("gpu" if r["reason"] is None else f"cpu ({r['reason']})"), r
    if r["cpu_error"] is None:
        assert r["resident_identical"] and r["resident_path"] == r["host_entry_path"], r


def test_fallbacks_cover_cpu_errors_and_warnings(sim):
    """The cases reach the CPU code's errors (non-finite counts, zero columns, zero size factors) and warnings (too
    few regions, non-finite factors), so the comparisons above compare them."""
    errors = {name for name in REASONS if sim[name]["cpu_error"]}
    warned = {name for name in REASONS if sim[name]["cpu_warnings"]}
    assert errors == {"fallback_inf", "fallback_nan", "fallback_zero_column", "fallback_signed_zero_column",
                      "fallback_zero_size_factor"}
    assert warned == {"fallback_one_kept_row", "fallback_negative_silent_block", "fallback_mode_zero"}
