"""haplo_cn_mops, reference_cn_mops, single_cn_mops: semantics, inputs, bad input, the one-step model, the CLI.

Bit-identity with cn.mops is checked on the golden cases (tests/test_golden.py); here the one-step model is
compared with a plain transcription of cn.mops's R code run in numpy's long double.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from numba import njit

import gcnmops
from gcnmops import InputError, haplo_cn_mops, reference_cn_mops, single_cn_mops
from gcnmops.data import make_count_data
from gcnmops.example import example_cohort
from gcnmops.model.onestep import (REFERENCE_FLOOR, SINGLE_FLOOR, OneStepSpec, fit_onestep, ld_add, ld_add_ld, ld_div, ld_mean, row_means)
from gcnmops.params import HAPLO_FOLDS, REFERENCE_CLASSES, REFERENCE_FOLDS
from gcnmops.exact.rmath import lgamma_r

LD = np.longdouble
X87 = np.finfo(LD).nmant == 63  # the long double R uses on x86-64


@pytest.fixture(scope="module")
def cohort():
    data, truth = example_cohort(n_regions=600, n_samples=12, n_cnvs=4, seed=3)
    cases = make_count_data(data.counts[:, :4], data.sample_names[:4], data.ranges, min_samples=1)
    controls = make_count_data(data.counts[:, 4:], data.sample_names[4:], data.ranges, min_samples=1)
    return data, truth, cases, controls


@pytest.fixture(scope="module")
def reference(cohort):
    return reference_cn_mops(cohort[2], cohort[3], seg_algorithm="fast", backend="cpu")


# ------------------------------------------------------------------------------------- the one-step model
def _r_onestep(x, lam, cov, folds, classes, prior_impact, floor, mrc):
    """cn.mops's .referencecn.mops / .singlecn.mops transcribed (R recycling, long double sums and means)."""
    n, N = len(folds), len(x)
    if all(v <= mrc for v in x) and lam <= mrc:
        return None
    prior = np.ones(n)
    prior[classes.index("CN2")] = 1 + prior_impact
    prior = prior / math.fsum(prior)
    a = np.array([[math.exp(x[k] * math.log(lam * cov[k] * folds[i]) - lgamma_r(x[k] + 1.0) - lam * cov[k] * folds[i])
                   for i in range(n)] for k in range(N)])                      # N x n, as sapply builds it
    a = np.maximum(a, floor)
    a = (a.ravel(order="F") * np.resize(prior, N * n)).reshape((N, n), order="F")  # R's recycling
    rs = np.array([float(sum((LD(v) for v in a[k]), LD(0))) for k in range(N)])
    p = (a / rs[:, None]).T                                                    # n x N
    alpha = np.array([float(sum((LD(v) for v in p[i]), LD(0)) / LD(N)) for i in range(n)])
    log2 = np.log2(folds)
    sini = np.array([sum_seq(log2 * p[:, k]) for k in range(N)])
    gains = np.array([sum_seq(np.abs(log2) * p[:, k]) for k in range(N)])
    s = sum((LD(g) for g in gains), LD(0)) / LD(N)
    s += sum((LD(g) - s for g in gains), LD(0)) / LD(N)
    return alpha, sini, np.argmax(p, axis=0), float(s), p


def sum_seq(values) -> float:
    s = 0.0
    for v in values:
        s += v
    return s


@pytest.mark.skipif(not X87, reason="needs numpy's 80-bit long double to transcribe R")
@pytest.mark.parametrize("N,floor", [(5, REFERENCE_FLOOR), (3, REFERENCE_FLOOR), (1, SINGLE_FLOOR), (13, 1e-100)])
def test_onestep_matches_r_transcription(N, floor) -> None:
    rng = np.random.default_rng(N)
    folds = np.array(REFERENCE_FOLDS)
    classes = list(REFERENCE_CLASSES)
    m = 40
    lam = rng.uniform(0.5, 150, m)
    x = np.asfortranarray(rng.poisson(lam[:, None] * rng.choice([0.5, 1, 1, 1.5], (m, N))).astype(float))
    x[0] = 0.0
    lam[0] = 0.5  # the short-cut row
    cov = rng.uniform(0.8, 1.2, N)
    spec = OneStepSpec.build(folds, classes, 1.5, floor, 1.0)
    out = fit_onestep(x, cov, lam, spec, keep_post=True)
    assert out.ini[0] == 0 and (out.cn[0] == classes.index("CN2")).all() and out.alpha[0, 2] == 1
    assert (out.lam[0] == lam[0] * folds).all()
    for r in range(1, m):
        alpha, sini, cn, ini, post = _r_onestep(x[r], lam[r], cov, folds, classes, 1.5, floor, 1.0)
        assert np.array_equal(out.alpha[r], alpha), r
        assert np.array_equal(out.sini[r], sini), r
        assert np.array_equal(out.cn[r], cn), r
        assert out.ini[r] == ini, r
        assert np.array_equal(out.post[r], post), r


def test_onestep_prior_is_recycled_like_r() -> None:
    """With N samples the prior of class i for sample k is prior[(i*N + k) % n]: for N = 1 it is class i's."""
    folds = np.array([0.025, 0.5, 1.0, 1.5, 2.0])
    classes = ["CN0", "CN1", "CN2", "CN3", "CN4"]
    spec = OneStepSpec.build(folds, classes, 3.0, REFERENCE_FLOOR, 1.0)
    lam = np.array([100.0])
    one = fit_onestep(np.array([[100.0]]), np.ones(1), lam, spec)
    two = fit_onestep(np.array([[100.0, 100.0]]), np.ones(2), lam, spec)
    # same count in both samples: with N = 2 the boosted prior falls on CN1 (k=0) and CN4 (k=1), not on CN2
    assert one.cn[0, 0] == 2
    assert two.sini[0, 0] != two.sini[0, 1]
    assert one.alpha[0, 2] > two.alpha[0, 2]


@njit(cache=True)
def _ld_ops(v, w):
    hi = lo = 0.0
    shi = slo = 0.0
    for k in range(v.size):
        hi, lo = ld_add(hi, lo, v[k])
        shi, slo = ld_add_ld(shi, slo, w[k], 0.0)
    q = ld_div(hi, lo, float(v.size))
    return hi, lo, shi, slo, q[0], q[1], ld_mean(v, v.size), ld_mean(w, w.size)


@pytest.mark.skipif(not X87, reason="needs numpy's 80-bit long double")
def test_long_double_emulation_is_exact() -> None:
    rng = np.random.default_rng(7)
    for trial in range(400):
        n = int(rng.integers(1, 30))
        v = np.exp(rng.uniform(-240, 5, n)) if trial % 2 else rng.random(n)
        w = v * rng.choice([-1.0, 1.0], n)
        hi, lo, shi, slo, qhi, qlo, mv, mw = _ld_ops(v, w)
        s = sum((LD(a) for a in v), LD(0))
        sw = sum((LD(a) for a in w), LD(0))
        assert LD(hi) + LD(lo) == s and hi == float(s)
        assert LD(shi) + LD(slo) == sw
        assert LD(qhi) + LD(qlo) == s / LD(n)
        for vec, got in ((v, mv), (w, mw)):
            m = sum((LD(a) for a in vec), LD(0)) / LD(n)
            m += sum((LD(a) - m for a in vec), LD(0)) / LD(n)
            assert got == float(m)
    x = np.asfortranarray(rng.random((5, 7)))
    assert np.array_equal(row_means(x), [float(sum((LD(a) for a in r), LD(0)) / LD(7)) for r in x])


# ------------------------------------------------------------------------------------- referencecn.mops
def test_reference_result(reference, cohort) -> None:
    data, truth, cases, controls = cohort
    r = reference
    m = data.n_regions
    assert r.params["method"] == "referencecn.mops" and r.params["mainClass"] == "CN2"
    assert "useMedian" not in r.params
    assert r.params["classes"] == list(REFERENCE_CLASSES) and r.params["folds"] == list(REFERENCE_FOLDS)
    assert r.params["minWidth"] == 4 and r.params["L"].shape == (m, 13)
    assert r.sample_names == cases.sample_names and r.local_assessments.shape == (m, 4)
    assert np.array_equal(r.params["cov"], np.ones(4))
    both = gcnmops.normalize_chromosomes(np.column_stack([cases.counts, controls.counts]), data.chromosomes)
    assert np.array_equal(r.normalized_data, both[:, :4])
    lam = np.maximum(both[:, 4:].mean(axis=1), 1e-5)
    np.testing.assert_allclose(r.params["L"][:, 2], lam, rtol=1e-15)
    # every call is a planted CNV of its sample, and the planted losses are found
    for c in r.cnvs.itertuples():
        assert ((truth.sample_name == c.sampleName) & (truth.seqnames == c.seqnames) & (truth.start <= c.end)
                & (truth.end >= c.start)).any(), c
    losses = truth[truth.sample_name.isin(cases.sample_names) & (truth.CN < 2)]
    for t in losses.itertuples():
        assert ((r.cnvs.sampleName == t.sample_name) & (r.cnvs.seqnames == t.seqnames) & (r.cnvs.start <= t.end)
                & (r.cnvs.end >= t.start)).any(), t


def test_reference_integer_copy_numbers(reference, cohort) -> None:
    integer = gcnmops.calc_integer_copy_numbers(reference)
    assert integer.cnvs["CN"].notna().all() and (integer.cnvs["CN"] != "CN2").all()
    losses = integer.cnvs[integer.cnvs["mean"] < 0]["CN"]
    assert losses.isin(["CN0", "CN1"]).all()
    assert list(integer.cnvr.columns) == ["seqnames", "start", "end", *reference.sample_names]


def test_reference_input_forms(cohort) -> None:
    data, _, cases, controls = cohort
    # plain matrices: default names, "undef" pseudo-chromosome
    r = reference_cn_mops(cases.counts, controls.counts, seg_algorithm="fast", verbose=0, backend="cpu")
    assert r.sample_names == ["Case_1", "Case_2", "Case_3", "Case_4"]
    assert (r.gr["seqnames"] == "undef").all()
    # one case as a vector, DataFrames with coordinates, norm 0 and 2
    frame = lambda cd: pd.concat([cd.ranges, pd.DataFrame(cd.counts, columns=cd.sample_names)], axis=1)  # noqa: E731
    one = reference_cn_mops(cases.counts[:, 0], controls.counts, seg_algorithm="fast", backend="cpu")
    assert one.local_assessments.shape == (data.n_regions, 1) and one.sample_names == ["Case_1"]
    r0 = reference_cn_mops(frame(cases), frame(controls), norm=0, seg_algorithm="fast", backend="cpu")
    assert np.array_equal(r0.normalized_data, cases.counts)
    r2 = reference_cn_mops(frame(cases), frame(controls), norm=2, seg_algorithm="fast", backend="cpu")
    cov = gcnmops.normalization.cpu.sample_coverage(np.column_stack([cases.counts, controls.counts]))
    assert np.array_equal(r2.params["cov"], cov[:4])
    assert np.array_equal(r2.normalized_data, gcnmops.normalize_chromosomes(cases.counts, data.chromosomes))


def test_reference_bad_input(cohort) -> None:
    _, _, cases, controls = cohort
    with pytest.raises(InputError, match="same length"):
        reference_cn_mops(cases.counts, controls.counts[:-1], seg_algorithm="fast")
    shifted = controls.ranges.copy()
    shifted.loc[5, "start"] += 1
    moved = make_count_data(controls.counts, controls.sample_names, shifted, min_samples=1)
    with pytest.raises(InputError, match="same ranges"):
        reference_cn_mops(cases, moved, seg_algorithm="fast")
    with pytest.raises(InputError, match="both"):
        reference_cn_mops(cases, controls.counts, seg_algorithm="fast")
    short = make_count_data(controls.counts[:-3], controls.sample_names, controls.ranges.iloc[:-3], min_samples=1)
    with pytest.raises(InputError, match="same length"):
        reference_cn_mops(cases, short, seg_algorithm="fast")
    bad = controls.counts.copy()
    bad[0, 0] = -1
    with pytest.raises(InputError, match="controls"):
        reference_cn_mops(cases.counts, bad, seg_algorithm="fast")
    with pytest.raises(InputError, match="CN2"):
        reference_cn_mops(cases, controls, classes=[f"X{i}" for i in range(13)], seg_algorithm="fast")
    with pytest.raises(InputError, match="backend"):
        reference_cn_mops(cases, controls, backend="tpu")


# ------------------------------------------------------------------------------------- singlecn.mops
def test_single_semantics(cohort) -> None:
    data, truth, cases, _ = cohort
    one = make_count_data(cases.counts[:, :1], cases.sample_names[:1], cases.ranges, min_samples=1)
    r = single_cn_mops(one, backend="cpu")
    assert r.params["method"] == "referencecn.mops"  # cn.mops's own label for singlecn.mops results
    assert np.array_equal(r.normalized_data, one.counts) and np.array_equal(r.params["cov"], [1.0])
    for name, b0, b1 in gcnmops.data.chromosome_blocks(data.chromosomes):
        y = one.counts[b0:b1, 0]
        assert (r.params["L"][b0:b1, 2] == np.median(y[y > 0])).all(), name
    assert r.cnvr.equals(r.cnvs)  # cn.mops returns the CNVs themselves as CNV regions
    integer = gcnmops.calc_integer_copy_numbers(r)
    assert list(integer.cnvr.columns) == ["seqnames", "start", "end", "S_1"]
    assert (integer.cnvr["S_1"].to_numpy() == integer.cnvs["CN"].to_numpy()).all()


def test_single_inputs_and_errors(cohort) -> None:
    _, _, cases, _ = cohort
    v = cases.counts[:, 0]
    r = single_cn_mops(v, backend="cpu")
    assert (r.gr["seqnames"] == "undef").all() and r.gr["start"].tolist()[:3] == [1, 2, 3]
    assert r.sample_names == ["Sample_1"]
    r2 = single_cn_mops(pd.Series(v, name="tumour"), backend="cpu")
    assert r2.sample_names == ["tumour"] and np.array_equal(r2.local_assessments, r.local_assessments)
    with pytest.raises(InputError, match="More than one sample"):
        single_cn_mops(cases.counts[:, :2])
    with pytest.raises(InputError, match="CN2"):
        single_cn_mops(v, I=HAPLO_FOLDS, classes=[f"C{i}" for i in range(9)])
    # a chromosome without reads: lambda 0, every region takes the short-cut answer
    counts = np.concatenate([v[:200], np.zeros(50)])
    ranges = pd.DataFrame({"seqnames": ["a"] * 200 + ["b"] * 50, "start": np.arange(250) * 10 + 1,
                           "end": np.arange(250) * 10 + 10})
    frame = ranges.assign(S=counts)
    rz = single_cn_mops(frame, backend="cpu")
    assert (rz.params["L"][200:] == 0).all() and (rz.local_assessments[200:] == 0).all()


# ------------------------------------------------------------------------------------- haplocn.mops
def test_haplo_semantics(cohort) -> None:
    data = cohort[0]
    r = haplo_cn_mops(data, backend="cpu")
    assert r.params["method"] == "haplocn.mops" and r.params["mainClass"] == "CN1"
    assert "useMedian" not in r.params and r.params["upperThreshold"] == 0.6
    assert r.params["folds"] == list(HAPLO_FOLDS)
    assert list(r.cnvr.columns)[3:] == [f"CN.{s}" for s in data.sample_names]
    integer = gcnmops.calc_integer_copy_numbers(r)
    assert list(integer.cnvr.columns)[3:] == data.sample_names
    assert (integer.segmentation["CN"].isin(r.params["classes"])).all()
    # norm=2: coverages are recorded, but the model sees cov = 1 (cn.mops resets it)
    r2 = haplo_cn_mops(data, norm=2, backend="cpu")
    assert not np.allclose(r2.params["cov"], 1.0)
    spec = gcnmops.model.ModelSpec.build(HAPLO_FOLDS, r.classes, "CN1", 1.0, 20, 1.0)
    ref = gcnmops.model.fit(data.counts, np.ones(data.n_samples), spec, backend="cpu")
    assert np.array_equal(r2.local_assessments, ref.sini)


def test_haplo_bad_input(cohort) -> None:
    data = cohort[0]
    with pytest.raises(InputError, match="ONE sample"):
        haplo_cn_mops(data.counts[:, :1])
    with pytest.raises(InputError, match="CN1"):
        haplo_cn_mops(data, classes=[f"K{i}" for i in range(9)])


# ------------------------------------------------------------------------------------- command line
def test_cli_reference_and_single(cohort, tmp_path, capsys) -> None:
    from gcnmops.cli import main

    _, _, cases, controls = cohort
    frame = lambda cd: pd.concat([cd.ranges, pd.DataFrame(cd.counts, columns=cd.sample_names)], axis=1)  # noqa: E731
    frame(cases).to_csv(tmp_path / "cases.tsv", sep="\t", index=False)
    frame(controls).to_csv(tmp_path / "controls.tsv", sep="\t", index=False)
    run = ["run", "--quiet", "--backend", "cpu", "--formats", "tsv"]
    assert main(run + [str(tmp_path / "cases.tsv"), "--method", "reference", "--controls",
                       str(tmp_path / "controls.tsv"), "--seg-algorithm", "fast", "-o", str(tmp_path / "ref")]) == 0
    assert "referencecn.mops: 600 regions x 4 samples" in capsys.readouterr().out
    assert (tmp_path / "ref" / "cnvr.tsv").exists()
    frame(cases).iloc[:, :4].to_csv(tmp_path / "one.tsv", sep="\t", index=False)
    assert main(run + [str(tmp_path / "one.tsv"), "--method", "single", "-o", str(tmp_path / "one")]) == 0
    assert "600 regions x 1 samples" in capsys.readouterr().out
    assert main(run + [str(tmp_path / "cases.tsv"), "--method", "reference", "-o", str(tmp_path / "x")]) == 2
    assert "--controls" in capsys.readouterr().err
    assert main(run + [str(tmp_path / "cases.tsv"), "--method", "haplo", "--use-median", "-o",
                       str(tmp_path / "x")]) == 2


SIM_CHILD = r'''
import numpy as np
from gcnmops.model.onestep import OneStepSpec, fit_onestep, REFERENCE_FLOOR
from gcnmops.model.onestep_gpu import fit_onestep_gpu
from gcnmops.params import REFERENCE_CLASSES, REFERENCE_FOLDS
rng = np.random.default_rng(4)
for N in (3, 1):
    lam = rng.uniform(0.5, 120, 24)
    x = np.asfortranarray(rng.poisson(lam[:, None] * np.ones((1, N))).astype(float))
    x[0] = 0.0
    lam[0] = 0.5
    spec = OneStepSpec.build(REFERENCE_FOLDS, REFERENCE_CLASSES, 1.0, REFERENCE_FLOOR, 1.0)
    a = fit_onestep(x, np.ones(N), lam, spec, keep_post=True)
    b = fit_onestep_gpu(x, np.ones(N), lam, spec, keep_post=True)
    for f in ("lam", "alpha", "sini", "cn", "ini", "post"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), (N, f)
print("ok")
'''


def test_onestep_gpu_kernel_in_simulator() -> None:
    """The GPU driver's kernel (same onestep_region source) in numba's CUDA simulator equals the CPU driver."""
    import os
    import subprocess
    import sys

    pytest.importorskip("numba.cuda")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    done = subprocess.run([sys.executable, "-c", SIM_CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_cnvr_per_sample_for_files(cohort) -> None:
    """haplo's CN.<sample> columns and single's CNV-shaped cnvr become one column per sample for the writers."""
    from gcnmops.pipeline.family import cnvr_per_sample

    data, _, cases, _ = cohort
    h = haplo_cn_mops(data, backend="cpu")
    assert list(cnvr_per_sample(h).columns) == ["seqnames", "start", "end", *data.sample_names]
    one = make_count_data(cases.counts[:, :1], ["T"], cases.ranges, min_samples=1)
    s = single_cn_mops(one, backend="cpu")
    flat = cnvr_per_sample(s)
    assert list(flat.columns) == ["seqnames", "start", "end", "T"] and len(flat) == len(s.cnvs)
    integer = gcnmops.calc_integer_copy_numbers(s)
    assert cnvr_per_sample(integer).equals(integer.cnvr.reset_index(drop=True))


def test_entry_points_follow_the_method_table() -> None:
    """Every entry point's named arguments and defaults are its row of params.METHODS (one table), and the
    parameters it builds carry the row's result method and normal class."""
    import inspect

    from gcnmops.params import METHODS, canonical_method
    from gcnmops.pipeline.methods import build_params, entry_point, parameter_defaults

    for name, method in METHODS.items():
        fn = entry_point(name)
        sig = {k: p.default for k, p in inspect.signature(fn).parameters.items()
               if p.default is not p.empty}
        if name == "exome":  # its own defaults over cn_mops's (the rest through **kwargs)
            sig = {**{k: p.default for k, p in inspect.signature(gcnmops.cn_mops).parameters.items()
                      if p.default is not p.empty}, **sig}
        assert sig == parameter_defaults(name), name
        assert canonical_method(method.function.replace("_cn_mops", "cn.mops")) == name or name == "cn.mops"
        p, options = build_params(name, {})
        assert (p.method, p.main_class) == (method.result_method, method.main_class)
        assert options == dict(method.options)
    for alias in ("cnmops", "exomecn.mops", "haplocn.mops", "referencecn.mops", "singlecn.mops"):
        assert canonical_method(alias) in METHODS
