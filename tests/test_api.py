"""cn_mops() as users call it: inputs, parameters, bad input, the CLI."""
from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

import gcnmops
from gcnmops import InputError, cn_mops
from gcnmops.example import example_cohort


@pytest.fixture(scope="module")
def cohort():
    data, truth = example_cohort(n_regions=1200, n_samples=12, seed=5)
    return data, truth


@pytest.fixture(scope="module")
def result(cohort):
    return cn_mops(cohort[0], backend="cpu")


def test_result_slots_shapes_and_layout(result, cohort) -> None:
    data = cohort[0]
    m, n_samples = data.counts.shape
    for name in ("normalized_data", "local_assessments", "individual_call"):
        arr = getattr(result, name)
        assert arr.shape == (m, n_samples) and arr.dtype == np.float64 and arr.flags.f_contiguous, name
    assert result.params["L"].shape == (m, 9) and result.params["L"].flags.f_contiguous
    assert result.integer_copy_number.shape == (m, n_samples)
    assert set(np.unique(result.integer_copy_number)) <= set(gcnmops.params.DEFAULT_CLASSES)
    assert result.ini_call.shape == (m,)
    assert result.posterior_probs is None
    assert list(result.gr.columns) == ["seqnames", "start", "end"]
    assert result.sample_names == data.sample_names


def test_planted_cnvs_are_found(result, cohort) -> None:
    truth = cohort[1]
    found = 0
    for _, t in truth.iterrows():
        hit = result.cnvs[(result.cnvs.sampleName == t.sample_name) & (result.cnvs.seqnames == t.seqnames)
                          & (result.cnvs.start <= t.end) & (result.cnvs.end >= t.start)]
        found += len(hit) > 0
    assert found / len(truth) > 0.7  # CNVs carried by most of a 12-sample cohort are the new normal


def test_integer_copy_numbers_label_cnvs(result) -> None:
    integer = gcnmops.calc_integer_copy_numbers(result)
    assert integer.cnvs["CN"].notna().all()
    assert (integer.cnvs["CN"] != "CN2").all()
    losses = integer.cnvs[integer.cnvs["mean"] < 0]["CN"]
    assert losses.isin(["CN0", "CN1"]).all()
    assert result.cnvs["CN"].isna().all()  # the input result is unchanged


def test_small_integer_refits_run_on_the_cpu(result, monkeypatch) -> None:
    """On the GPU backend the refit of fewer CNVs x samples than INTEGER_GPU_MIN_CELLS runs on the CPU (the same
    EM), from that many on the GPU; the labels are the same either way."""
    from gcnmops.calls import integer
    from gcnmops.cuda.probe import Backend

    asked, real = [], integer.fit

    def fit(means, cov, spec, backend):
        asked.append(backend)
        return real(means, cov, spec, backend=Backend.CPU)

    monkeypatch.setattr(integer, "resolve_backend", lambda backend: Backend.GPU)
    monkeypatch.setattr(integer, "fit", fit)
    cells = len(result.cnvs) * len(result.sample_names)
    labels = []
    for floor in (cells + 1, cells):
        monkeypatch.setattr(integer, "INTEGER_GPU_MIN_CELLS", floor)
        labels.append(integer.calc_integer_copy_numbers(result, backend="gpu").cnvs["CN"].tolist())
    assert asked == [Backend.CPU, Backend.GPU]
    assert labels[0] == labels[1] == gcnmops.calc_integer_copy_numbers(result).cnvs["CN"].tolist()


def test_matrix_input_uses_row_indices() -> None:
    data, _ = example_cohort(n_regions=300, n_samples=6, seed=2)
    r = cn_mops(np.asarray(data.counts), backend="cpu", norm=0)
    assert (r.gr["seqnames"] == "undef").all()
    assert r.gr["start"].tolist() == list(range(1, 301))
    assert r.sample_names == [f"Sample_{k}" for k in range(1, 7)]


def test_posteriors_when_asked(cohort) -> None:
    r = cn_mops(cohort[0].counts[:200], backend="cpu", return_posterior=True)
    assert r.posterior_probs.shape == (200, 9, 12)
    np.testing.assert_allclose(r.posterior_probs.sum(axis=1), 1.0, rtol=1e-12)


def test_few_regions_warn_and_skip_segmentation() -> None:
    x = np.random.default_rng(0).poisson(50, size=(5, 4)).astype(float)
    with pytest.warns(RuntimeWarning, match="small number of segments"):
        r = cn_mops(x, backend="cpu")
    assert len(r.segmentation) == 0 and len(r.cnvs) == 0 and len(r.cnvr) == 0
    np.testing.assert_array_equal(r.individual_call, r.local_assessments)


BAD_PARAMS = [
    (dict(classes=["CN0", "CN1", "CN3"], I=[0.025, 0.5, 1.5]), "CN2"),
    (dict(I=[0.5, 1]), "same length"),
    (dict(I=["a"] * 9), "numeric"),
    (dict(cyc=0), "cyc"),
    (dict(norm=3), "norm"),
    (dict(norm_type="fancy"), "norm_type"),
    (dict(size_factor="fancy"), "size_factor"),
    (dict(prior_impact="high"), "prior_impact"),
    (dict(backend="tpu"), "backend"),
    (dict(I=[0.025, 0, 1, 1.5, 2, 2.5, 3, 3.5, 4]), "positive"),
]


@pytest.mark.parametrize("kwargs,match", BAD_PARAMS, ids=[m for _, m in BAD_PARAMS])
def test_bad_parameters(kwargs, match) -> None:
    x = np.random.default_rng(0).poisson(50, size=(200, 4)).astype(float)
    with pytest.raises(InputError, match=match):
        cn_mops(x, **kwargs)


BAD_COUNTS = {
    "negative": (np.array([[1.0, -1.0], [2.0, 3.0]] * 10), "non-negative"),
    "nan": (np.array([[1.0, np.nan], [2.0, 3.0]] * 10), "finite"),
    "inf": (np.array([[1.0, np.inf], [2.0, 3.0]] * 10), "finite"),
    "non-numeric": (np.array([["a", "b"], ["c", "d"]] * 10), "non-numeric"),
    "one sample": (np.arange(20.0).reshape(20, 1), "ONE sample"),
    "all-zero sample": (np.c_[np.arange(1.0, 121.0), np.zeros(120)], "[Zz]ero"),
}


@pytest.mark.parametrize("name", list(BAD_COUNTS))
def test_bad_counts(name) -> None:
    x, match = BAD_COUNTS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(InputError, match=match):
            cn_mops(x, backend="cpu")


def test_duplicated_sample_names() -> None:
    frame = pd.DataFrame(np.ones((150, 3)) * 10, columns=["a", "b", "c"])
    frame.columns = ["a", "a", "c"]
    with pytest.raises(InputError, match="[Dd]uplicat"):
        cn_mops(frame, backend="cpu")


def test_cli_example_writes_every_format(tmp_path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "gcnmops", "run", "--example", "-o", str(out), "--backend", "cpu",
                           "--quiet"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "CNVs" in proc.stdout and "time per stage" in proc.stdout
    for name in ("cnvs.tsv", "cnvr.tsv", "segmentation.tsv", "normalized_data.parquet", "cnvs.bed", "cnvr.bed",
                 "cnvr.vcf.gz", "segmentation.seg", "params.json"):
        assert (out / name).stat().st_size > 0, name
    assert not list(out.glob(".*.tmp"))
    cnvr = pd.read_csv(out / "cnvr.tsv", sep="\t")
    assert cnvr.iloc[:, 3:].isin([f"CN{i}" for i in range(9)]).all().all()
    # the default output of the example is small (matrices as Parquet) and reads back into the same calls
    assert sum(p.stat().st_size for p in out.iterdir()) <= 4_000_000
    back = gcnmops.read_result(out)
    assert back.local_assessments.shape == (5000, 40)
    assert list(back.cnvr.columns[3:]) == back.sample_names and len(back.cnvr) == len(cnvr)


def test_cli_bad_input_writes_nothing(tmp_path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("seqnames\tstart\tend\ts1\ts2\nchr1\t1\t100\t5\t-3\n")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "gcnmops", "run", str(bad), "-o", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "error:" in proc.stderr and "negative" in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("dtype", [object, "string[pyarrow]", "category"])
def test_chromosome_blocks_of_any_string_storage(dtype) -> None:
    """Row blocks of each chromosome, whether the names are Python strings, Arrow strings (pandas 3's default:
    compared in Arrow, not converted) or a categorical; a chromosome met again starts a new block."""
    from gcnmops.data import chromosome_blocks

    names = pd.Series(["chr1"] * 3 + ["chr2"] * 2 + ["chr10"] + ["chr1"], dtype=dtype)
    want = [("chr1", 0, 3), ("chr2", 3, 5), ("chr10", 5, 6), ("chr1", 6, 7)]
    assert chromosome_blocks(names) == want
    assert chromosome_blocks(names.to_numpy(dtype=object)) == want
    assert chromosome_blocks(names.iloc[:0]) == []


@pytest.mark.parametrize("dtype", [object, "string[pyarrow]", "category", "int"])
def test_region_names_become_python_strings(dtype, caplog) -> None:
    """seqnames of any storage (Arrow strings, categorical, numbers) are stored as Python strings in an object
    column; rows of a chromosome that are not contiguous are regrouped (stable), as before."""
    from gcnmops.data import make_count_data

    seq = pd.Series([1, 1, 2, 1, 3, 3]).astype(str if dtype != "int" else int)
    if dtype not in (object, "int"):
        seq = seq.astype(dtype)
    ranges = pd.DataFrame({"seqnames": seq, "start": [1, 101, 1, 201, 1, 101], "end": [100, 200, 100, 300, 100, 200]})
    x = np.arange(12.0).reshape(6, 2)
    with caplog.at_level("WARNING", logger="gcnmops"):
        data = make_count_data(x, ranges=ranges)
    assert "not contiguous" in caplog.text
    assert data.ranges["seqnames"].dtype == object
    assert data.ranges["seqnames"].tolist() == ["1", "1", "1", "2", "3", "3"]
    assert data.ranges["start"].tolist() == [1, 101, 201, 1, 1, 101]
    assert data.counts[:, 0].tolist() == [0.0, 2.0, 6.0, 4.0, 8.0, 10.0]
    assert data.blocks() == [("1", 0, 3), ("2", 3, 4), ("3", 4, 6)]


def test_a_result_prints_as_a_short_summary() -> None:
    data, _ = example_cohort(n_regions=600, n_samples=8, n_cnvs=3, seed=2)
    raw = cn_mops(data, backend="cpu")
    text = repr(raw)
    assert text.startswith("<CNVDetectionResult cn.mops: 600 regions x 8 samples") and len(text) < 300
    assert "no integer copy numbers yet" in text
    if len(raw.cnvr):
        assert "; integer copy numbers>" in repr(gcnmops.calc_integer_copy_numbers(raw))
    html_text = raw._repr_html_()
    assert "<table>" in html_text and "regions" in html_text
