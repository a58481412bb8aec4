"""The whole pipeline with backend="gpu" on a real CUDA GPU (`pytest -m gpu`): segmentation's statistic on
the GPU (segmentation/gpu.py) on top of the GPU model.

- The GPU segmentation of a given sINI equals the CPU segmentation bit for bit (every golden case's sINI,
  random cohorts with every parameter combination the drivers branch on).
- referencecn.mops / singlecn.mops golden cases with backend="gpu": model arrays bit-identical to the CPU's,
  tables equal to cn.mops's.
- Every golden case through cn_mops(..., backend="gpu"): every model array bit-identical to the CPU pipeline's
  and segmentation, cnvs and cnvr (and the integer copy number tables) equal to the CPU pipeline's; the same
  rows as cn.mops's golden tables, means/medians within the golden tolerance.
Set GCNMOPS_GPU_REPORT=path to write the measured differences as JSON.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest

import gcnmops
from golden import GOLDEN_DIR, case_names, manifest, table

pytestmark = pytest.mark.gpu

REPORT: dict = {}
SEG_COLS = ("block", "sample", "start", "end", "mean", "median")


def _gpu():
    from gcnmops.cuda.probe import gpu_available

    if not gpu_available():
        pytest.skip("no usable CUDA GPU")
    import gcnmops.segmentation.gpu as sgg

    return sgg


def _seg_cpu():
    import importlib

    return importlib.import_module("gcnmops.segmentation.cpu")


def _assert_same_arrays(a: dict, b: dict, what: str) -> None:
    for k in SEG_COLS:
        assert a[k].shape == b[k].shape, f"{what}: {k} has {a[k].shape} vs {b[k].shape}"
        assert np.array_equal(a[k], b[k]), f"{what}: {k} differs"


def _p_diff(sgg, values, blocks, **kw):
    """(largest relative difference GPU vs CPU statistic over all candidates, fraction of equal best windows)."""
    d = sgg.statistic_difference(values, blocks, **kw)
    assert d["zero_pattern_equal"], d
    return d["max_rel_p"], d["best_window_equal_fraction"]


def _cohort(m, n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(m, n)) * 0.05
    for _ in range(m // 40):
        s, k = rng.integers(0, m - 30), rng.integers(0, n)
        x[s:s + rng.integers(3, 30), k] += rng.choice([-1.0, 1.0]) * rng.uniform(0.3, 2)
    x[rng.random((m, n)) < 0.3] = 0.0  # exact ties of the statistic
    return x


@pytest.mark.parametrize("kw", [dict(), dict(alpha=0.2, min_seg=5), dict(alpha=7), dict(seg_median_t=(0, 0)),
                                dict(eps=0.0, delta=3, max_int=12), dict(seg_median_t=0.5, cyber_weight=5)])
def test_random_segmentation_identical(kw):
    sgg = _gpu()
    sg = _seg_cpu()
    x = _cohort(20_000, 4, 7)
    x[5, 1] = np.inf
    x[17, 2] = np.nan
    blocks = [(0, 7000), (7000, 7001), (7001, 15000), (15000, 20_000)]
    ref = sg.segment_columns_arrays(x, blocks, **kw)
    t: dict = {}
    out = sgg.segment_columns_arrays_gpu(x, blocks, timings=t, **kw)
    _assert_same_arrays(out, ref, f"random {kw}")
    full = sgg.segment_columns_arrays_gpu(x, blocks, full_recompute=True, **kw)
    _assert_same_arrays(full, ref, f"random {kw} full recompute")
    REPORT.setdefault("random", {})[json.dumps(kw)] = {"candidates": t.get("seg_candidates"),
                                                       "recomputed": t.get("seg_recomputed")}


def test_statistic_close_to_cpu():
    sgg = _gpu()
    x = _cohort(50_000, 3, 11)
    rel, jeq = _p_diff(sgg, x, [(0, 30_000), (30_000, 50_000)])
    REPORT["statistic_random"] = {"max_rel_p_gpu_vs_cpu": rel, "best_window_equal_fraction": jeq}
    assert rel < sgg.TAU * 1e-2


@pytest.mark.parametrize("kw", [dict(), dict(norm_type="mean")])
def test_normalization_identical(kw):
    """The device normalization (normalization/device_kernels.py) equals the CPU's bit for bit; where not, the
    report names the first differing chromosome and whether its variance-to-mean ratios agree."""
    _gpu()
    from gcnmops.normalization import cpu as nz
    from gcnmops.normalization import device_kernels
    from gcnmops.normalization.gpu import normalize_chromosomes_gpu
    from gcnmops.normalization.kernels import variance_to_mean

    rng = np.random.default_rng(4)
    m = 200_000
    x = rng.poisson(rng.gamma(6.0, 15.0, size=(m, 1)) * rng.uniform(0.7, 1.3, size=(1, 12))).astype(float)
    x[1000:1500] = 0.0
    chrom = np.repeat([f"chr{i}" for i in range(1, 9)], m // 8)
    t: dict = {}
    a = nz.normalize_chromosomes(x, chrom, **kw)
    b = normalize_chromosomes_gpu(x, chrom, timings=t, **kw)
    assert t["normalize_path"] == "gpu"
    rel = float((np.abs(a - b) / np.maximum(np.abs(a), 1e-300)).max())
    rows = np.flatnonzero((a != b).any(axis=1))
    rec = REPORT.setdefault("normalize", {})[json.dumps(kw)] = {
        "max_rel": rel, "rows_differing": int(rows.size), "first_rows": rows[:3].tolist(),
        "chromosomes_differing": sorted(set(chrom[rows].tolist()))}
    if rows.size:  # diagnosis: the ratios of the first differing chromosome, GPU kernel vs CPU
        import cupy as cp

        c = chrom[rows[0]]
        r0, r1 = int(np.flatnonzero(chrom == c)[0]), int(np.flatnonzero(chrom == c)[-1]) + 1
        X = np.asfortranarray(x)
        silent = X[r0:r1].max(axis=1) < 1
        f = np.ones(12) * 1.0123456789
        idx = (r0 + np.flatnonzero(~silent)).astype(np.int64)
        v_cpu = variance_to_mean(X, idx, f)
        d_silent = cp.zeros(X.shape[0], dtype=cp.uint8)
        d_silent[r0:r1] = cp.asarray(silent)
        sel = device_kernels.selected(np.array([r0]), np.array([r1]))
        v_gpu = device_kernels.ratios(cp.asarray(X), sel, f[None, :], d_silent).get()[~silent]
        rec["ratios_equal"] = bool(np.array_equal(v_cpu, v_gpu))
        rec["ratios_max_rel"] = float((np.abs(v_cpu - v_gpu) / np.abs(v_cpu)).max())
        rec["factor_rel"] = float(np.abs(a[rows[0]] / b[rows[0]] - 1).max())
    assert rows.size == 0, rec


def test_device_resident_equals_host_path(monkeypatch):
    """The device-resident pipeline and the chunked host path (forced by a device-memory cap) give the same
    normalized data and segments; integer copy numbers refitted on the GPU (however few the CNVs) equal the
    CPU's."""
    _gpu()
    monkeypatch.setattr("gcnmops.calls.integer.INTEGER_GPU_MIN_CELLS", 0)
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_pipeline import simulated_cohort

    from gcnmops.pipeline.cnmops import run_mops
    from gcnmops.params import CnMopsParams

    data = simulated_cohort(300_000, 15, seed=5)
    params = CnMopsParams().validated()
    res = run_mops(data, params, backend="gpu", chunk_rows=70_000)
    stats = res.gpu_stats
    host = run_mops(data, params, backend="gpu", max_device_memory=64 << 20)
    assert stats["model_resident"] is True and stats["model_launches"] == 5
    assert host.gpu_stats["model_resident"] is False and host.gpu_stats["model_launches"] > 1
    # 64 MB leave no room for the posterior scratch: the host path recomputes them, to the same bits
    assert stats["model_store_posteriors"] is True and host.gpu_stats["model_store_posteriors"] is False
    np.testing.assert_array_equal(res.normalized_data, host.normalized_data)
    np.testing.assert_array_equal(res.cn_index, host.cn_index)
    np.testing.assert_array_equal(res.local_assessments, host.local_assessments)
    cols = ["seqnames", "start", "end", "sampleName"]
    assert len(res.cnvs) > 0 and res.segmentation[cols].equals(host.segmentation[cols])
    gpu_int = gcnmops.calc_integer_copy_numbers(res, backend="gpu")
    cpu_int = gcnmops.calc_integer_copy_numbers(res, backend="cpu")
    assert gpu_int.cnvs["CN"].tolist() == cpu_int.cnvs["CN"].tolist()
    assert gpu_int.cnvr.equals(cpu_int.cnvr)
    REPORT["resident_vs_host"] = {"sini_bit_equal": bool(np.array_equal(res.local_assessments,
                                                                         host.local_assessments)),
                                  "segments": len(res.segmentation), "cnvs": len(res.cnvs)}


# ------------------------------------------------------------------------------------------ golden cases
ENTRY = {"cn.mops": gcnmops.cn_mops, "exomecn.mops": gcnmops.exome_cn_mops, "haplocn.mops": gcnmops.haplo_cn_mops}


def _golden_cases():
    out = []
    for c in case_names():
        call = manifest(c).get("call", "").split("(")[0]
        if call in ENTRY and "segmentation" in (manifest(c).get("tables") or {}):
            out.append(c)
    return out


def _run(case, backend):
    from test_golden import call_kwargs, input_frame

    data = input_frame(case, "input_counts", manifest(case)["sampleNames"])
    res = ENTRY[manifest(case)["call"].split("(")[0]](data, backend=backend, **call_kwargs(case))
    resident = res.gpu_stats.get("model_resident") if backend == "gpu" else None
    integer = None
    if "cnvr_integer" in (manifest(case)["tables"] or {}) and len(res.cnvr) and len(res.cnvs):
        integer = gcnmops.calc_integer_copy_numbers(res, backend=backend)
    return res, integer, resident


def _compare(a: pd.DataFrame, b: pd.DataFrame, what: str, atol: float, errors: list) -> float:
    """Identical columns and non-float cells; mean/median within 1e-9 relative or ``atol``. Appends what
    differs to ``errors``; returns the largest relative difference of mean/median."""
    if list(a.columns) != list(b.columns):
        errors.append(f"{what}: columns {list(a.columns)} vs {list(b.columns)}")
        return math.nan
    if len(a) != len(b):
        errors.append(f"{what}: {len(a)} rows vs {len(b)}")
        return math.nan
    worst = 0.0
    for col in a.columns:
        if col in ("mean", "median"):
            x, y = a[col].to_numpy(float), b[col].to_numpy(float)
            d = np.abs(x - y)
            if d.size:
                worst = max(worst, float((d / np.maximum(np.abs(y), 1e-300)).max()))
                bad = np.flatnonzero(d > 1e-9 * np.abs(y) + atol)
                if bad.size:
                    errors.append(f"{what}.{col}: {bad.size} rows beyond tolerance, first {bad[0]}: "
                                  f"{x[bad[0]]!r} vs {y[bad[0]]!r}")
        else:
            na = ("NA", "None", "nan")
            xs = [("NA" if str(v) in na else str(v)) for v in a[col]]
            ys = [("NA" if str(v) in na else str(v)) for v in b[col]]
            bad = [i for i, (u, v) in enumerate(zip(xs, ys)) if u != v]
            if bad:
                errors.append(f"{what}.{col}: {len(bad)} rows differ, first {bad[0]}: "
                              f"{xs[bad[0]]!r} vs {ys[bad[0]]!r}")
    return worst


@pytest.mark.skipif(not GOLDEN_DIR.is_dir(), reason="no golden directory")
@pytest.mark.parametrize("case", _golden_cases())
def test_golden_case_pipeline_gpu(case):
    sgg = _gpu()
    sg = _seg_cpu()
    gpu, gpu_int, resident = _run(case, "gpu")
    cpu, cpu_int, _ = _run(case, "cpu")
    rec = REPORT.setdefault(case, {})
    rec["device_resident"] = resident
    assert resident is True
    # the segmentation component: the same sINI gives bit-identical segments
    from gcnmops.data import chromosome_blocks

    blocks = [(b, e) for _, b, e in chromosome_blocks(np.asarray(gpu.gr["seqnames"]))]
    min_seg = int(gpu.params["minWidth"])
    seg_args = dict(gpu.params.get("SegmentationParams") or {})
    for name, sini in (("gpu_sini", gpu.local_assessments), ("cpu_sini", cpu.local_assessments)):
        ref = sg.segment_columns_arrays(sini, blocks, min_seg=min_seg, **seg_args)
        t: dict = {}
        out = sgg.segment_columns_arrays_gpu(sini, blocks, min_seg=min_seg, timings=t, **seg_args)
        _assert_same_arrays(out, ref, f"{case} {name}")
        rec[f"recomputed_{name}"] = t.get("seg_recomputed")
        rec[f"candidates_{name}"] = t.get("seg_candidates")
    rec["max_rel_p"], rec["best_window_equal"] = _p_diff(sgg, cpu.local_assessments, blocks, min_seg=min_seg)
    rec["normalized_identical"] = bool(np.array_equal(gpu.normalized_data, cpu.normalized_data))
    # the whole pipeline: every array and table the CPU pipeline's bit for bit; the same rows as cn.mops's
    # tables, means/medians within the golden tolerance (1e-9 relative)
    errors: list = []
    for name in ("normalized_data", "local_assessments", "individual_call", "ini_call", "cn_index"):
        a, b = np.asarray(getattr(gpu, name)), np.asarray(getattr(cpu, name))
        rec[f"{name}_identical"] = bool(a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
        if not rec[f"{name}_identical"]:
            errors.append(f"{name}: not bit-identical to the CPU pipeline's")
    pairs = [(item, gpu, cpu) for item in ("segmentation", "cnvs", "cnvr")]
    if gpu_int is not None:
        pairs += [(f"{item}_integer", gpu_int, cpu_int) for item in ("segmentation", "cnvs", "cnvr")]
    for item, ours, theirs in pairs:
        name = item.removesuffix("_integer")
        a = getattr(ours, name)
        if not a.equals(getattr(theirs, name)):
            errors.append(f"{item}: differs from the CPU pipeline's")
        rec[f"{item}_max_rel_vs_golden"] = _compare(a, table(case, item), f"{item} vs golden", 0.0, errors)
    rec["errors"] = errors
    assert not errors, errors
    rec["passed"] = True


#: entry points whose model is the one-step model (model/onestep.py), not the EM
ONESTEP = ("referencecn.mops", "singlecn.mops")


@pytest.mark.skipif(not GOLDEN_DIR.is_dir(), reason="no golden directory")
@pytest.mark.parametrize("case", [c for c in case_names() if manifest(c).get("call", "").split("(")[0] in ONESTEP])
def test_golden_onestep_case_gpu(case):
    """referencecn.mops / singlecn.mops with backend="gpu" (the one-step kernel: glibc's exp and log, no
    contraction; integer copy numbers refitted on the GPU): every model array the CPU's bit for bit, every
    table cn.mops's."""
    _gpu()
    from test_golden import MODEL_ARRAYS, compare_table, items, ours_array, run_case

    gpu, gpu_int = run_case(case, "gpu")
    cpu, _ = run_case(case, "cpu")
    checked = []
    for item in items(case):
        if item in MODEL_ARRAYS:
            a, b = np.asarray(ours_array(gpu, item)), np.asarray(ours_array(cpu, item))
            assert a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f"{case}/{item}"
        else:
            res = gpu_int if item.endswith("_integer") else gpu
            name = item.removesuffix("_integer")
            compare_table(res.gr if name == "gr" else getattr(res, name), table(case, item), f"{case}/{item}")
        checked.append(item)
    REPORT.setdefault(case, {})["identical_to_cpu_and_golden"] = checked


def teardown_module(module):
    path = os.environ.get("GCNMOPS_GPU_REPORT")
    if path and REPORT:
        with open(path, "w") as fh:
            json.dump(REPORT, fh, indent=1, default=str)
