"""GPU segmentation without a GPU: the kernels of segmentation/gpu.py in numba's CUDA simulator, and the host logic
that turns GPU statistics into CPU-identical segments (with perturbed statistics standing in for the GPU's
last-bit differences).

The simulator must be switched on before numba is imported, so the kernel runs happen in the session's simulator
child (cudasim.py), which compares with the CPU segmentation itself and writes the comparisons as JSON.
"""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import cudasim

CHILD = r'''
    import importlib, json, sys
    import numpy as np
    sg = importlib.import_module("gcnmops.segmentation.cpu")
    sgg = importlib.import_module("gcnmops.segmentation.gpu")

    def cohort(m, n, seed):
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(m, n)) * 0.1
        for _ in range(max(1, m // 40)):
            s, k = rng.integers(0, m - 12), rng.integers(0, n)
            x[s:s + rng.integers(3, 12), k] += rng.choice([-1.0, 1.0])
        x[rng.random((m, n)) < 0.2] = 0.0
        return x

    out = {}
    cases = [
        ("default", cohort(90, 2, 1), [(0, 40), (40, 90)], {}),
        ("alpha_count", cohort(70, 2, 2), [(0, 70)], {"alpha": 4}),
        ("no_merge_minseg5", cohort(80, 1, 3), [(0, 80)], {"seg_median_t": (0, 0), "min_seg": 5}),
        ("short_blocks_nonfinite", cohort(60, 2, 4), [(0, 3), (3, 4), (4, 60)], {"delta": 3, "max_int": 12}),
        ("tie_prone", np.column_stack([np.resize(np.repeat([0.0, 0.0, 1.0, 0.0, -1.0, 0.5, 0.0], [9, 3, 1, 6, 1, 2, 7]),
                                                 110), np.round(cohort(110, 1, 7)[:, 0], 1)]), [(0, 110)], {}),
    ]
    cases[3][1][10, 0] = np.inf
    cases[3][1][20, 1] = np.nan
    for name, x, blocks, kw in cases:
        ref = sg.segment_columns_arrays(x, blocks, **kw)
        t = {}
        got = sgg.segment_columns_arrays_gpu(x, blocks, timings=t, **kw)
        same = all(ref[k].shape == got[k].shape and np.array_equal(ref[k], got[k]) for k in ref)
        out[name] = {"identical": bool(same), "candidates": int(t["seg_candidates"]),
                     "recomputed": int(t["seg_recomputed"])}
    # the kernels' statistic against the CPU's, position by position
    d = sgg.statistic_difference(cohort(120, 2, 5), [(0, 50), (50, 120)])
    out["statistic"] = {"zero_pattern_equal": d["zero_pattern_equal"], "max_rel": d["max_rel_p"],
                        "best_window_equal": d["best_window_equal_fraction"] == 1.0, "candidates": d["candidates"]}
    # the segments' means and medians (one thread / one block per segment) against the host's formulas: odd and
    # even lengths, 1 and 2 values, ties, negative and positive values of every magnitude, signed zeros
    from numba import cuda
    from gcnmops.exact.rstats import ld_mean, median_inplace
    rng = np.random.default_rng(9)
    segs = [rng.normal(0, 1, 7), rng.normal(0, 1, 8), np.array([0.5]), np.array([2.0, -1.0]), np.full(6, 3.25),
            np.array([1e-300, -1e-300, 0.0, 5e300, -5e300, -0.0]), rng.integers(-3, 4, 41).astype(float),
            rng.gamma(2.0, 3.0, 34), -rng.gamma(2.0, 3.0, 33)]
    lens = np.array([v.size for v in segs])
    first = np.concatenate([[0], np.cumsum(lens)[:-1]])
    d_x = cuda.to_device(np.concatenate(segs))
    means, medians = sgg._segment_values_kernels()
    d_mean, d_median = cuda.device_array(len(segs)), cuda.device_array(len(segs))
    means[2, 4](d_x, cuda.to_device(first), cuda.to_device(lens), d_mean)
    medians[4, 8](d_x, sgg._bits(d_x), cuda.to_device(first), cuda.to_device(lens), d_median)
    out["segment_values"] = {
        "means": bool(np.array_equal(d_mean.copy_to_host(), [ld_mean(v, v.size) for v in segs])),
        "medians": bool(np.array_equal(d_median.copy_to_host(), [median_inplace(v.copy(), v.size) for v in segs]))}
    # normalization: the GPU path (numpy standing in for cupy) against the CPU's, bit for bit
    from gcnmops.normalization.cpu import normalize_chromosomes
    from gcnmops.normalization.gpu import normalize_chromosomes_gpu
    rng = np.random.default_rng(8)
    counts = rng.poisson(rng.gamma(5.0, 10.0, size=(900, 1)) * rng.uniform(0.7, 1.3, size=(1, 4))).astype(float)
    counts[100:140] = 0.0
    counts[300, 2] = 0.0
    chrom = np.repeat(["chr1", "chr2", "chr3"], 300)
    for name, kw, x in (("norm_poisson", {}, counts), ("norm_mean", {"norm_type": "mean"}, counts),
                        ("norm_fallback_quant", {"norm_type": "quant"}, counts),
                        ("norm_fallback_nonwhole", {}, counts + 0.5)):
        t = {}
        a = normalize_chromosomes(x, chrom, **kw)
        b = normalize_chromosomes_gpu(x, chrom, timings=t, **kw)
        out[name] = {"identical": bool(np.array_equal(a, b)), "path": t.get("normalize_path")}
    # segmentation reading a device-resident matrix (numpy stands in for cupy): the per-vector constants computed
    # there and the matrix itself as the layout (blocks covering the rows); blocks with a gap: a layout made on the
    # device; a vector to clean: the host's cleaned copy goes to the device instead. Identical in every case.
    x = cohort(90, 2, 6)
    for name, blocks in (("device_values", [(0, 40), (40, 90)]), ("device_values_gap", [(0, 40), (47, 90)]),
                         ("device_values_dirty", [(0, 40), (40, 90)])):
        if name == "device_values_dirty":
            x[7, 1] = np.inf
        t = {}
        got = sgg.segment_columns_arrays_gpu(x, blocks, timings=t, device_values=x.copy(order="F"))
        ref = sg.segment_columns_arrays(x, blocks)
        out[name] = {"identical": all(np.array_equal(ref[k], got[k]) for k in ref),
                     "where": ("prepared on the device" if "seg_device_prepare" in t else
                               "layout on the device" if "seg_device_layout" in t else
                               "copied in" if "seg_copy_in" in t else "?")}
    # the device-resident pipeline (normalize -> model -> segmentation) against the CPU pipeline
    import pandas as pd
    from gcnmops.data import make_count_data
    from gcnmops.cuda.probe import Backend
    from gcnmops.model.gpu import fit_gpu
    from gcnmops.params import METHODS, CnMopsParams
    from gcnmops.pipeline.cnmops import run_mops
    from gcnmops.pipeline.plan import RunPlan
    from gcnmops.pipeline.resident_gpu import normalize_and_fit_resident
    from gcnmops.pipeline.stages import Regions, finish_block
    m = 120
    mu = rng.gamma(8.0, 12.0, size=(m, 1)) * rng.uniform(0.8, 1.2, size=(1, 4))
    dose = np.ones((m, 4))
    dose[15:25, 1] = 0.25
    dose[75:88, 3] = 2.5
    y = rng.poisson(mu * dose).astype(float)
    y[100:104] = 0.0
    ranges = pd.DataFrame({"seqnames": ["chr1"] * 60 + ["chr2"] * 60, "start": np.arange(m) * 100 + 1,
                           "end": np.arange(m) * 100 + 100})
    data = make_count_data(y, None, ranges)
    for name, kw in (("resident_norm1", {}), ("resident_norm2_quant", {"norm": 2, "norm_type": "quant"}),
                     ("resident_norm0", {"norm": 0})):
        params = CnMopsParams(**kw).validated()
        plan = RunPlan(METHODS["cn.mops"], params, Backend.GPU, m)  # the simulator: no GPU to resolve "gpu" to
        spec = plan.spec
        cpu = run_mops(data, params, backend="cpu")
        timings, gpu_stats = {}, {}
        norm, res_out, device = normalize_and_fit_resident(plan, data, timings, chunk_rows=35, gpu_stats=gpu_stats)
        normalized, cov = norm.normalized, norm.cov
        host = fit_gpu(np.asfortranarray(cpu.normalized_data if params.norm != 2 else data.counts), cov, spec,
                       chunk_rows=35)
        res = finish_block(plan, Regions.of(data), norm, res_out, timings, device, gpu_stats)
        cols = ["seqnames", "start", "end", "sampleName"]
        out[name] = {
            "normalized_identical": bool(np.array_equal(normalized, cpu.normalized_data)),
            "model_equals_host_path": all(np.array_equal(getattr(res_out, f), getattr(host, f))
                                          for f in ("lam", "alpha", "sini", "cn", "ini")),
            "device_sini_equals_host": bool(np.array_equal(device.sini, res_out.sini)),
            "sini_max_abs_vs_cpu": float(np.abs(res.local_assessments - cpu.local_assessments).max()),
            "segment_rows_identical": bool(res.segmentation[cols].equals(cpu.segmentation[cols])),
            "cnvs": len(res.cnvs), "cnvs_rows_identical": bool(res.cnvs[cols].equals(cpu.cnvs[cols])),
            "launches": gpu_stats.get("model_launches"), "resident": gpu_stats.get("model_resident"),
            "normalize_path": gpu_stats.get("normalize_path"),
            "stages": sorted(timings),
        }
    json.dump(out, open(f"{sys.argv[1]}/result.json", "w"))
'''
SCENARIO = cudasim.register(__name__, CHILD)


@pytest.fixture(scope="module")
def sim_result(cuda_simulator):
    return cuda_simulator.result(SCENARIO)


@pytest.mark.parametrize("name", ["default", "alpha_count", "no_merge_minseg5", "short_blocks_nonfinite", "tie_prone"])
def test_sim_segments_identical(sim_result, name):
    assert sim_result[name]["identical"], sim_result[name]
    assert sim_result[name]["candidates"] > 0 or name == "short_blocks_nonfinite"


@pytest.mark.parametrize("name,path", [("norm_poisson", "gpu"), ("norm_mean", "gpu"),
                                       ("norm_fallback_quant", "cpu"), ("norm_fallback_nonwhole", "cpu")])
def test_sim_normalization_identical(sim_result, name, path):
    r = sim_result[name]
    assert r["identical"] and r["path"].startswith(path), r


@pytest.mark.parametrize("name,where", [("device_values", "prepared on the device"),
                                        ("device_values_gap", "layout on the device"),
                                        ("device_values_dirty", "copied in")])
def test_sim_segmentation_of_device_values(sim_result, name, where):
    r = sim_result[name]
    assert r["identical"] and r["where"] == where, r


@pytest.mark.parametrize("name,path", [("resident_norm1", "gpu"), ("resident_norm2_quant", "cpu"),
                                       ("resident_norm0", None)])
def test_sim_device_resident_pipeline(sim_result, name, path):
    """normalize -> model -> segmentation with the data on the "device": the CPU pipeline's normalized data and
    segments; the chunked resident model equals the host-path model bit for bit; sINI stays on the device."""
    r = sim_result[name]
    assert r["normalized_identical"] and r["model_equals_host_path"] and r["device_sini_equals_host"], r
    assert r["sini_max_abs_vs_cpu"] < 1e-9, r
    assert r["segment_rows_identical"] and r["cnvs_rows_identical"] and r["cnvs"] > 0, r
    assert r["resident"] is True and r["launches"] == 4, r  # 120 rows in launches of 35
    assert r["stages"] == ["evidence", "model", "normalize", "segment_call"], r
    if path is None:
        assert r["normalize_path"] is None, r
    else:
        assert r["normalize_path"].startswith(path), r


def test_sim_segment_means_and_medians(sim_result):
    """The segments' means (long double, in order) and medians (radix select on the values' bits) equal the
    host's, bit for bit."""
    assert sim_result["segment_values"] == {"means": True, "medians": True}


def test_sim_statistic_matches_cpu(sim_result):
    r = sim_result["statistic"]
    assert r["zero_pattern_equal"] and r["best_window_equal"], r
    assert r["candidates"] > 0 and r["max_rel"] < 1e-12, r


# ------------------------------------------------------------------ host logic with a perturbed statistic
def _perturbed(scale: float, seed: int):
    sgg = importlib.import_module("gcnmops.segmentation.gpu")

    def stat(xt, offs, coffs, e, V, ms, dl, mi, w, timings=None):
        p, js = sgg.cpu_statistic(xt, offs, coffs, e, V, ms, dl, mi, w)
        rng = np.random.default_rng(seed)
        return p * (1.0 + scale * rng.uniform(-1.0, 1.0, p.size)), js

    return stat


@pytest.mark.parametrize("seed", range(6))
def test_perturbed_statistic_gives_identical_segments(seed):
    """GPU values within TAU/100 of the CPU's (random, both signs) never change a segment."""
    sg = importlib.import_module("gcnmops.segmentation.cpu")
    sgg = importlib.import_module("gcnmops.segmentation.gpu")
    rng = np.random.default_rng(seed)
    m, n = 3000, 3
    x = rng.normal(size=(m, n)) * [1e-30, 0.05, 1.0][seed % 3]  # tiny values: many exact ties of p
    for _ in range(40):
        s, k = rng.integers(0, m - 30), rng.integers(0, n)
        x[s:s + rng.integers(3, 30), k] += rng.choice([-1.0, 1.0]) * 1e-6 ** (seed % 2)
    x[rng.random((m, n)) < 0.25] = 0.0
    kw = [{}, {"alpha": 0.2, "min_seg": 5}, {"alpha": 12}, {"seg_median_t": (0, 0)}, {"eps": 0.0},
          {"min_seg": 2, "delta": 4}][seed]
    blocks = [(0, 1200), (1200, 1201), (1201, m)]
    ref = sg.segment_columns_arrays(x, blocks, **kw)
    for scale in (0.0, sgg.TAU * 1e-2):
        got = sgg.segment_columns_arrays_gpu(x, blocks, statistic=_perturbed(scale, seed), **kw)
        for k in ref:
            assert np.array_equal(ref[k], got[k]), (k, scale, kw)
    full = sgg.segment_columns_arrays_gpu(x, blocks, statistic=_perturbed(sgg.TAU * 1e-2, seed),
                                          full_recompute=True, **kw)
    for k in ref:
        assert np.array_equal(ref[k], full[k]), (k, "full", kw)
