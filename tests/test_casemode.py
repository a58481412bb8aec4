"""Case mode (gcnmops.casemode): the E-step against stored parameters, normalization against a reference cohort,
refit = cn.mops on the combined cohort (golden cases), frozen vs refit, the reference store, sex chromosomes."""
from __future__ import annotations

import json
import warnings
from functools import lru_cache

import numpy as np
import pandas as pd
import pytest

import gcnmops
from gcnmops.casemode.normalize import cohort_state, coverage_against, coverage_median, normalized_against
from gcnmops.casemode.reference import FORMAT_VERSION
from gcnmops.casemode.simulate import mixed_sex_cohort
from gcnmops.data import make_count_data
from gcnmops.errors import InputError
from gcnmops.example import example_cohort
from gcnmops.model import fit
from gcnmops.model.estep import estep_cpu
from gcnmops.model.spec import ModelSpec
from gcnmops.normalization.cpu import normalize_chromosomes, sample_coverage
from gcnmops.params import METHODS

from golden import GOLDEN_DIR, array, call_kwargs, case_names, manifest, table
from test_golden import input_frame

FOLDS = (0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4)
CLASSES = tuple(f"CN{i}" for i in range(9))


def _split(data, n_ref: int):
    ref = make_count_data(data.counts[:, :n_ref], data.sample_names[:n_ref], data.ranges)
    new = make_count_data(data.counts[:, n_ref:], data.sample_names[n_ref:], data.ranges, min_samples=1)
    return ref, new


@lru_cache(maxsize=None)
def _cohort():
    """example_cohort 5000 x 40: a reference of the first 30 samples, the last 10 as new samples."""
    data, truth = example_cohort(5000, 40, seed=3)
    ref_data, new = _split(data, 30)
    return data, truth, ref_data, new, gcnmops.build_reference(ref_data, backend="cpu")


# ------------------------------------------------------------------------------------------ the E-step
def test_estep_with_the_last_estep_parameters_is_the_em_bit_for_bit():
    data, _ = example_cohort(1500, 12, seed=2)
    x = normalize_chromosomes(data.counts, data.chromosomes)
    spec = ModelSpec.build(FOLDS, CLASSES, "CN2", 1.0, 20, 5.0)
    full = fit(x, np.ones(12), spec, keep_post=True)
    before_last = fit(x, np.ones(12), ModelSpec.build(FOLDS, CLASSES, "CN2", 1.0, 19, 5.0))
    e = estep_cpu(x, np.ones(12), before_last.lam, before_last.alpha, spec, True)
    for name in ("sini", "cn", "ini", "post"):
        assert np.array_equal(getattr(e, name), getattr(full, name)), name


# -------------------------------------------------------------------------------- normalization
@pytest.mark.parametrize("norm_type,size_factor", [("poisson", "mean"), ("poisson", "median"), ("mean", "quant"),
                                                   ("median", "mode"), ("quant", "mean"), ("mode", "median")])
def test_cohort_normalized_against_its_own_state_is_normalize_chromosomes(norm_type, size_factor):
    data, _ = example_cohort(3000, 8, seed=4)
    x = data.counts.copy(order="F")
    x[100:120] = 0  # silent rows
    p = METHODS["cn.mops"].params(norm_type=norm_type, size_factor=size_factor)
    state = cohort_state(x, data.blocks(), p)
    assert np.array_equal(normalized_against(x, state, data.sample_names),
                          normalize_chromosomes(x, data.chromosomes, norm_type=norm_type, size_factor=size_factor))
    assert np.array_equal(coverage_against(x, coverage_median(x), data.sample_names), sample_coverage(x))


def test_new_sample_without_reads_on_a_chromosome_is_refused():
    _, _, _, new, ref = _cohort()
    x = new.counts[:, :1].copy(order="F")
    x[new.chromosomes == "chr2"] = 0
    with pytest.raises(InputError, match="no reads on chromosome chr2"):
        gcnmops.call_samples(make_count_data(x, ["lost"], new.ranges, min_samples=1), ref, backend="cpu")


# --------------------------------------------------------------------------------- frozen / refit
def test_cohort_sample_called_frozen_reproduces_its_cohort_run():
    data, _, ref_data, _, ref = _cohort()
    own = make_count_data(ref_data.counts[:, :5], ref_data.sample_names[:5], ref_data.ranges, min_samples=1)
    frozen = gcnmops.call_samples(own, ref, backend="cpu")
    cohort = gcnmops.cn_mops(ref_data, backend="cpu")
    assert np.array_equal(frozen.normalized_data, cohort.normalized_data[:, :5])  # the same factors, bit for bit
    diff = np.abs(frozen.local_assessments - cohort.local_assessments[:, :5])
    # parameters after the last M-step (not those of the last E-step), and the samples join the weights again
    assert np.median(diff) < 1e-8 and np.quantile(diff, 0.999) < 0.05
    assert (frozen.cn_index == cohort.cn_index[:, :5]).mean() > 0.9995


def _reciprocal(a: pd.DataFrame, b: pd.DataFrame, share: float = 0.5) -> float:
    """Share of the CNVs of ``a`` matched by one of ``b`` (same sample and chromosome, reciprocal overlap)."""
    hit = 0
    for _, c in a.iterrows():
        o = b[(b.sampleName == c.sampleName) & (b.seqnames == c.seqnames)]
        ov = np.minimum(o.end, c.end) - np.maximum(o.start, c.start) + 1
        ok = (ov >= share * (c.end - c.start + 1)) & (ov >= share * (o.end - o.start + 1))
        hit += bool(ok.any())
    return hit / max(1, len(a))


def test_frozen_agrees_with_refit_on_a_simulated_cohort():
    """One new sample at a time (each of 8 held out of a 40-sample cohort, the reference the other 39)."""
    data, _ = example_cohort(5000, 40, seed=1)
    same, frozen_cnvs, refit_cnvs = [], [], []
    for k in range(0, 40, 5):
        others = [j for j in range(40) if j != k]
        ref = gcnmops.build_reference(make_count_data(data.counts[:, others], [data.sample_names[j] for j in others],
                                                      data.ranges), backend="cpu")
        one = make_count_data(data.counts[:, [k]], [data.sample_names[k]], data.ranges, min_samples=1)
        frozen = gcnmops.call_samples(one, ref, "frozen", backend="cpu")
        refit = gcnmops.call_samples(one, ref, "refit", backend="cpu")
        same.append(frozen.cn_index[:, 0] == refit.cn_index[:, 0])
        frozen_cnvs.append(frozen.cnvs)
        refit_cnvs.append(refit.cnvs)
    frozen_cnvs, refit_cnvs = pd.concat(frozen_cnvs), pd.concat(refit_cnvs)
    assert np.concatenate(same).mean() >= 0.99
    assert len(refit_cnvs) >= 5
    # 16 CNVs here: one disagreement is 6%; benchmarks/accuracy.py --casemode measures every held-out sample
    assert _reciprocal(refit_cnvs, frozen_cnvs) >= 0.9 and _reciprocal(frozen_cnvs, refit_cnvs) >= 0.9
    assert frozen.params["caseMode"]["mode"] == "frozen" and frozen.sample_names == one.sample_names


def test_frozen_calls_a_homozygous_deletion_no_reference_sample_has():
    """The fit holds the CN0 weight at the likelihood floor where no cohort sample lacks both copies: the new
    sample's weights are refitted from the EM's start (model/estep.py), so its zero counts are CN0 as in a refit,
    not CN1 (a class weight at the floor times a likelihood e^-lambda/40 below CN1's)."""
    _, _, ref_data, new, ref = _cohort()
    rows = slice(1000, 1030)
    assert (ref_data.counts[rows] > 5).all()  # every reference sample has reads there
    x = new.counts[:, :1].copy(order="F")
    x[rows] = 0.0
    one = make_count_data(x, new.sample_names[:1], new.ranges, min_samples=1)
    frozen = gcnmops.call_samples(one, ref, "frozen", backend="cpu")
    refit = gcnmops.call_samples(one, ref, "refit", backend="cpu")
    assert (frozen.cn_index[rows, 0] == 0).all() and (refit.cn_index[rows, 0] == 0).all()
    assert np.allclose(frozen.local_assessments[rows, 0], np.log2(0.025))
    hit = frozen.cnvs[(frozen.cnvs.start <= new.ranges.end.iat[1029]) & (frozen.cnvs.end >= new.ranges.start.iat[1000])]
    assert len(hit) == 1 and hit["mean"].iat[0] < -5


def test_frozen_integer_copy_numbers():
    _, _, _, new, ref = _cohort()
    with_int = gcnmops.call_samples(new, ref, "frozen", backend="cpu", integer=True)
    assert with_int.cnvs["CN"].isin(CLASSES).all() and (with_int.cnvs["CN"] != "CN2").all()


@pytest.mark.parametrize("mode", ["frozen", "refit"])
def test_calc_integer_copy_numbers_refuses_a_result_called_against_a_reference(mode):
    """Such a result holds neither the fitted parameters nor the cohort: calc_integer_copy_numbers would refit the
    new samples alone and give other copy numbers than the call's, silently."""
    _, _, _, new, ref = _cohort()
    called = gcnmops.call_samples(new, ref, mode, backend="cpu")
    with pytest.raises(InputError, match=r"stored reference.*integer=True"):
        gcnmops.calc_integer_copy_numbers(called, backend="cpu")


def test_refit_is_cn_mops_on_the_combined_cohort():
    data, _, _, new, ref = _cohort()
    refit = gcnmops.call_samples(new, ref, "refit", backend="cpu")
    full = gcnmops.cn_mops(data, backend="cpu")
    assert np.array_equal(refit.local_assessments, full.local_assessments[:, 30:])
    assert np.array_equal(refit.normalized_data, full.normalized_data[:, 30:])
    cnvs = full.cnvs[full.cnvs.sampleName.isin(new.sample_names)].reset_index(drop=True)
    pd.testing.assert_frame_equal(refit.cnvs, cnvs)


EM_ENTRY = {"cn.mops": "cn.mops", "exomecn.mops": "exome", "haplocn.mops": "haplo"}


def _em_cases():
    return [c for c in case_names() if manifest(c)["call"].split("(")[0] in EM_ENTRY]


@pytest.mark.skipif(not GOLDEN_DIR.is_dir(), reason=f"golden directory {GOLDEN_DIR} not found")
@pytest.mark.parametrize("case", _em_cases())
def test_refit_with_the_held_out_sample_is_cn_mops_golden(case):
    """The golden cohort less its last sample as the reference; that sample re-added by refit: cn.mops's answer."""
    names = manifest(case)["sampleNames"]
    frame = input_frame(case, "input_counts", names)
    coords = [c for c in ("seqnames", "start", "end") if c in frame.columns]
    method = EM_ENTRY[manifest(case)["call"].split("(")[0]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = gcnmops.build_reference(frame[coords + names[:-1]], method, backend="cpu", **call_kwargs(case))
        integer = "cnvs_integer" in manifest(case)["tables"]
        got = gcnmops.call_samples(frame[coords + names[-1:]], ref, "refit", backend="cpu", integer=integer)
    for ours, gold in ((got.local_assessments, "localAssessments"), (got.normalized_data, "normalizedData")):
        assert np.array_equal(ours[:, 0], array(case, gold)[:, -1]), gold
    assert (got.integer_copy_number[:, 0] == array(case, "integerCopyNumber")[:, -1]).all()
    gold = table(case, "cnvs_integer" if integer else "cnvs")
    gold = gold[gold.sampleName == names[-1]].reset_index(drop=True)
    assert got.cnvs[["start", "end"]].to_numpy().tolist() == gold[["start", "end"]].to_numpy().tolist()
    if integer:
        assert got.cnvs["CN"].tolist() == gold["CN"].tolist()


# ----------------------------------------------------------------------------------------- the store
def test_store_round_trip_and_versions(tmp_path):
    _, _, _, new, ref = _cohort()
    path = ref.save(tmp_path / "ref")
    back = gcnmops.load_reference(path)
    assert back.params == ref.params and back.sample_names == ref.sample_names
    assert np.array_equal(back.fits[0].lam, ref.fits[0].lam) and np.array_equal(back.counts, ref.counts)
    a = gcnmops.call_samples(new, back, backend="cpu")
    b = gcnmops.call_samples(new, str(path), backend="cpu")
    assert np.array_equal(a.local_assessments, b.local_assessments)
    ref.save(path)  # replaces the store in place
    man = json.loads((path / "manifest.json").read_text())
    man["format_version"] = FORMAT_VERSION + 1
    (path / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(InputError, match="newer gcnmops"):
        gcnmops.load_reference(path)
    with pytest.raises(InputError, match="not a gcnmops reference"):
        gcnmops.load_reference(tmp_path)


def test_regions_must_match_and_refit_needs_counts():
    _, _, _, new, ref = _cohort()
    shifted = new.ranges.copy()
    shifted.loc[7, "start"] += 1
    with pytest.raises(InputError, match="first difference at region 8"):
        gcnmops.call_samples(make_count_data(new.counts, new.sample_names, shifted, min_samples=1), ref)
    with pytest.raises(InputError, match="4,999 regions"):
        gcnmops.call_samples(make_count_data(new.counts[:-1], new.sample_names, new.ranges.iloc[:-1],
                                             min_samples=1), ref)
    light = gcnmops.build_reference(make_count_data(new.counts, new.sample_names, new.ranges), keep_counts=False,
                                    backend="cpu")
    with pytest.raises(InputError, match="keep_counts"):
        gcnmops.call_samples(new, light, "refit")
    with pytest.raises(InputError, match="mode must be"):
        gcnmops.call_samples(new, light, "thawed")
    with pytest.raises(InputError, match="cohort method"):
        gcnmops.build_reference(new, "reference")


# ------------------------------------------------------------------------------------- sex chromosomes
@lru_cache(maxsize=None)
def _mixed():
    return mixed_sex_cohort(40, seed=1)


def _male_false_calls(cnvs, truth, sexes, names) -> int:
    male = {n for n, s in zip(names, sexes) if s == "male"}
    false = 0
    for _, c in cnvs[cnvs.seqnames.isin(["chrX", "chrY"]) & cnvs.sampleName.isin(male)].iterrows():
        t = truth[(truth.sample_name == c.sampleName) & (truth.seqnames == c.seqnames) & (truth.start <= c.end)
                  & (truth.end >= c.start)]
        false += len(t) == 0
    return false


def _found(cnvs, truth) -> float:
    hit = [((cnvs.sampleName == t.sample_name) & (cnvs.seqnames == t.seqnames) & (cnvs.start <= t.end)
            & (cnvs.end >= t.start)).any() for t in truth.itertuples()]
    return float(np.mean(hit))


def test_sex_aware_cohort_has_no_false_male_calls_and_keeps_autosomes():
    data, truth, sexes = _mixed()
    aware = gcnmops.sex_aware_cn_mops(data, backend="cpu", integer=True)
    assert [s["sex"] for s in aware.params["sex"]] == sexes
    plain = gcnmops.cn_mops(data, backend="cpu")
    assert _male_false_calls(plain.cnvs, truth, sexes, data.sample_names) > 10  # cn.mops: a male's X is a loss
    assert _male_false_calls(aware.cnvs, truth, sexes, data.sample_names) == 0
    on_sex = truth[truth.seqnames.isin(["chrX", "chrY"])]
    assert _found(aware.cnvs, on_sex) >= 0.9 > _found(plain.cnvs, on_sex)
    auto = np.isin(data.chromosomes, ["chr1", "chr2"])
    assert np.array_equal(aware.local_assessments[auto], plain.local_assessments[auto])
    male_x = aware.segmentation[(aware.segmentation.seqnames == "chrX") & (aware.segmentation.sampleName == "S_2")]
    assert "CN1" in set(male_x["CN"])  # a male's normal chrX: one copy


def test_sex_aware_reference_calls_new_samples_of_both_sexes():
    data, truth, sexes = _mixed()
    ref_data, new = _split(data, 32)
    ref = gcnmops.build_reference(ref_data, sex_aware=True, backend="cpu")
    assert ref.sex_aware and len(ref.fits) == 4
    frozen = gcnmops.call_samples(new, ref, "frozen", backend="cpu")
    refit = gcnmops.call_samples(new, ref, "refit", backend="cpu")
    assert [s["sex"] for s in frozen.params["sex"]] == sexes[32:]
    assert _male_false_calls(frozen.cnvs, truth, sexes, data.sample_names) == 0
    assert (frozen.cn_index == refit.cn_index).mean() >= 0.99
    full = gcnmops.sex_aware_cn_mops(data, backend="cpu")
    assert np.array_equal(refit.local_assessments, full.local_assessments[:, 32:])
    given = gcnmops.call_samples(new, ref, sex=["male"] * new.n_samples, backend="cpu")
    assert all(s["given"] and s["sex"] == "male" for s in given.params["sex"])
    with pytest.raises(InputError, match="not female/male"):
        gcnmops.call_samples(new, ref, sex=["other"] * new.n_samples)


# ------------------------------------------------------------------------------------------ CLI
def test_cli_reference_build_and_call(tmp_path, capsys):
    from gcnmops.cli import main

    data, _, ref_data, new, _ = _cohort()
    frame = lambda d: pd.concat([d.ranges, pd.DataFrame(d.counts, columns=d.sample_names)], axis=1)  # noqa: E731
    frame(ref_data).to_csv(tmp_path / "cohort.tsv", sep="\t", index=False)
    frame(new).to_csv(tmp_path / "new.tsv", sep="\t", index=False)
    assert main(["reference", "build", str(tmp_path / "cohort.tsv"), "-o", str(tmp_path / "ref"), "--backend", "cpu",
                 "--quiet"]) == 0
    assert main(["call", str(tmp_path / "new.tsv"), "--reference-cohort", str(tmp_path / "ref"), "-o",
                 str(tmp_path / "out"), "--backend", "cpu", "--quiet", "--formats", "tsv"]) == 0
    out = capsys.readouterr().out
    assert "frozen" in out and (tmp_path / "out" / "cnvs.tsv").exists()
    frame(new).iloc[:-1].to_csv(tmp_path / "short.tsv", sep="\t", index=False)
    assert main(["call", str(tmp_path / "short.tsv"), "--reference-cohort", str(tmp_path / "ref"), "-o",
                 str(tmp_path / "out2"), "--quiet"]) == 2
    assert "error:" in capsys.readouterr().err


def test_cli_call_reference_is_the_fasta_as_in_run(tmp_path, capsys):
    """call's --reference is run's (the FASTA of the VCF's REF bases), the cohort is --reference-cohort: an
    old-style --reference REFDIR and a call without a cohort are refused before any work (error:, exit 2)."""
    from gcnmops.cli import main

    pysam = pytest.importorskip("pysam")
    _, _, ref_data, new, ref = _cohort()
    ref.save(tmp_path / "ref")
    counts = tmp_path / "new.tsv"
    pd.concat([new.ranges, pd.DataFrame(new.counts, columns=new.sample_names)], axis=1).to_csv(counts, sep="\t",
                                                                                             index=False)
    for extra, fragment in ((["--reference", str(tmp_path / "ref")], "--reference-cohort " + str(tmp_path / "ref")),
                            ([], "--reference-cohort REF"),
                            (["--reference-cohort", str(tmp_path / "ref"), "--reference", str(tmp_path / "none.fa")],
                             "not found")):
        assert main(["call", str(counts), "-o", str(tmp_path / "out"), "--quiet", "--backend", "cpu", *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error:") and fragment in err, err
        assert not (tmp_path / "out").exists()
    rng = np.random.default_rng(0)
    fasta = tmp_path / "ref.fa"
    ends = new.ranges.groupby("seqnames", sort=False)["end"].max()
    fasta.write_text("".join(f">{c}\n{''.join(rng.choice(list('ACGT'), int(n)))}\n" for c, n in ends.items()))
    assert main(["call", str(counts), "--reference-cohort", str(tmp_path / "ref"), "--reference", str(fasta), "-o",
                 str(tmp_path / "out"), "--quiet", "--backend", "cpu", "--formats", "vcf", "--per-sample-vcf"]) == 0
    assert (tmp_path / "out" / f"cnvr.{new.sample_names[0]}.vcf.gz").exists()
    with pysam.VariantFile(str(tmp_path / "out" / "cnvr.vcf.gz")) as vcf, pysam.FastaFile(str(fasta)) as fa:
        records = list(vcf)
        assert records and all(r.ref == fa.fetch(r.chrom, r.pos - 1, r.pos) for r in records)


def _cli(*args, timeout: int = 300):
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[1])
    return subprocess.run([sys.executable, "-m", "gcnmops", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": repo})


def test_cli_run_sex_aware(tmp_path):
    """``gcnmops run --sex-aware`` is sex_aware_cn_mops: the same calls, the sexes in params.json and printed;
    --sex given per sample; bad sex options refused before any work (exit 2, no output folder)."""
    data, _, sexes = mixed_sex_cohort(16, n_autosomal=1200, n_x=500, n_y=300, seed=3)
    path = tmp_path / "cohort.tsv"
    pd.concat([data.ranges, pd.DataFrame(data.counts, columns=data.sample_names)], axis=1).to_csv(path, sep="\t",
                                                                                                  index=False)
    out = tmp_path / "out"
    proc = _cli("run", path, "-o", out, "--sex-aware", "--backend", "cpu", "--quiet", "--formats", "tsv")
    assert proc.returncode == 0, proc.stderr
    inferred = json.loads((out / "params.json").read_text())["sex"]
    assert [s["sex"] for s in inferred] == sexes and not any(s["given"] for s in inferred)
    assert "sex: S_1 female (inferred" in proc.stdout and "S_2 male (inferred" in proc.stdout
    qc = pd.read_csv(out / "sample_qc.tsv", sep="\t")
    assert list(qc.columns[:2]) == ["sample", "sex"] and qc["sex"].tolist() == sexes  # the inferred sexes
    direct = gcnmops.sex_aware_cn_mops(data, backend="cpu", integer=True)
    cnvs = pd.read_csv(out / "cnvs.tsv", sep="\t")
    assert len(cnvs) == len(direct.cnvs) > 0 and cnvs["CN"].tolist() == direct.cnvs["CN"].tolist()
    assert set(cnvs.loc[cnvs.seqnames.eq("chrX") & cnvs.sampleName.isin(data.sample_names[1::2]), "CN"]) <= {
        "CN0", "CN2", "CN3"}  # a male's X is called against one copy

    flipped = ["m" if s == "female" else "f" for s in sexes]  # given sexes win over coverage
    proc = _cli("run", path, "-o", tmp_path / "given", "--sex-aware", "--sex", ",".join(flipped), "--genome", "hg19",
                "--backend", "cpu", "--quiet", "--formats", "tsv", "--no-integer")
    assert proc.returncode == 0, proc.stderr
    given = json.loads((tmp_path / "given" / "params.json").read_text())["sex"]
    assert [s["sex"][0] for s in given] == flipped and all(s["given"] for s in given)

    for args, message in ((["--sex", "f,m"], "--sex applies with --sex-aware only"),
                          (["--genome", "hg19"], "--genome applies with --sex-aware only"),
                          (["--sex-aware", "--method", "haplo"], "cn.mops or exomecn.mops"),
                          (["--sex-aware", "--sex", "f,x"], "'x' is not female/male")):
        proc = _cli("run", path, "-o", tmp_path / "refused", *args, "--quiet")
        assert proc.returncode == 2 and "error: " in proc.stderr and message in proc.stderr, (args, proc.stderr)
        assert not (tmp_path / "refused").exists()
    proc = _cli("run", path, "-o", tmp_path / "short", "--sex-aware", "--sex", "f,m", "--backend", "cpu", "--quiet")
    assert proc.returncode == 2 and "2 values for 16 samples" in proc.stderr


def test_cli_call_sample_qc_spreads_against_the_reference(tmp_path):
    """gcnmops call's sample QC takes a new sample's log2 ratios against the reference's normal level of each
    window (the normal class's lambda): against the new samples' own median, one sample's ratios were all 0."""
    from gcnmops.calls.qc import QC_COLUMNS, column_spreads, log2_ratios, normal_levels
    from gcnmops.cli import main

    _, _, ref_data, new, ref = _cohort()
    ref.save(tmp_path / "ref")
    one = make_count_data(new.counts[:, :1], new.sample_names[:1], new.ranges, min_samples=1)
    pd.concat([one.ranges, pd.DataFrame(one.counts, columns=one.sample_names)], axis=1).to_csv(
        tmp_path / "one.tsv", sep="\t", index=False)
    assert main(["call", str(tmp_path / "one.tsv"), "--reference-cohort", str(tmp_path / "ref"), "-o",
                 str(tmp_path / "out"), "--backend", "cpu", "--quiet", "--formats", "tsv", "--no-integer"]) == 0
    qc = pd.read_csv(tmp_path / "out" / "sample_qc.tsv", sep="\t")
    res = gcnmops.call_samples(one, ref, "frozen", backend="cpu")
    want = column_spreads(log2_ratios(res.normalized_data, normal_levels(res)), res.local_assessments)[0]
    got = qc.loc[0, list(QC_COLUMNS[4:10])].to_numpy(dtype=float)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert 0.05 < got[0] < 1  # Poisson noise around the reference's level, not 0
    assert np.allclose(column_spreads(log2_ratios(res.normalized_data), res.local_assessments)[0][:3], 0)


def test_cli_call_sample_qc_leaves_the_sex_parts_out(tmp_path):
    """With a sex-aware reference the normal level of chrX/chrY windows depends on the sample's sex (the level
    stored is one part's): those windows are left out of the QC's log2 ratios, so that a male's spread is not
    taken against a female's chrX level (half his ratios there near -1)."""
    from gcnmops.cli import main

    data, _, sexes = _mixed()
    ref_data, new = _split(data, 32)
    gcnmops.build_reference(ref_data, sex_aware=True, backend="cpu").save(tmp_path / "ref")
    pd.concat([new.ranges, pd.DataFrame(new.counts, columns=new.sample_names)], axis=1).to_csv(
        tmp_path / "new.tsv", sep="\t", index=False)
    assert main(["call", str(tmp_path / "new.tsv"), "--reference-cohort", str(tmp_path / "ref"), "-o",
                 str(tmp_path / "out"), "--backend", "cpu", "--quiet", "--formats", "tsv", "--no-integer"]) == 0
    qc = pd.read_csv(tmp_path / "out" / "sample_qc.tsv", sep="\t").set_index("sample")
    male = np.array([s == "male" for s in sexes[32:]])
    assert male.any() and (~male).any()
    for column in ("log2_mad", "log2_iqr"):  # 1.25x and 1.34x the females' with a female chrX level for all
        spread = qc.loc[new.sample_names, column].to_numpy()
        assert (spread > 0).all() and spread[male].mean() < 1.1 * spread[~male].mean(), column
