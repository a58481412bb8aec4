"""Sample QC (calls.qc), windows left out (io.exclude), call filters (calls.filters), and what a run writes of
them: sample_qc.tsv, params.json, the VCF header, FILTER values and filter columns, per-window tracks."""
from __future__ import annotations

import json
import logging
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from gcnmops.calls import qc
from gcnmops.calls.filters import call_filters, filter_status
from gcnmops.errors import InputError
from gcnmops.io.exclude import exclude_rows, overlapping_windows, read_exclude_bed

try:
    import pysam
except ImportError:  # pragma: no cover - optional
    pysam = None

needs_pysam = pytest.mark.skipif(pysam is None, reason="pysam not installed (pip install pysam)")
BEDTOOLS = shutil.which("bedtools")
BCFTOOLS = shutil.which("bcftools")


# ------------------------------------------------------------------------------------------------ spread
def test_spread_of_a_small_array_by_hand():
    mad, iqr, bivar = qc.spread(np.array([1.0, 2.0, 3.0, 4.0, 100.0, np.nan]))
    assert mad == pytest.approx(1.4826)  # median |a - 3| = 1, scaled
    assert iqr == pytest.approx(2.0)  # 4 - 2 (linear interpolation)
    assert 1.0 < bivar < 2.5  # the outlier 100 has no weight
    assert np.isnan(qc.spread(np.array([np.nan]))[0])


def test_spread_estimates_the_standard_deviation_robustly():
    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 0.5, 200_000)
    mad, iqr, bivar = qc.spread(x)
    assert mad == pytest.approx(0.5, rel=0.02) and bivar == pytest.approx(0.5, rel=0.02)
    assert iqr == pytest.approx(0.5 * 1.349, rel=0.02)
    x[:10_000] = 50.0  # 5% wild values: the standard deviation explodes, the robust scales barely move
    mad, _, bivar = qc.spread(x)
    assert np.std(x) > 10 and mad < 0.6 and bivar < 0.6


def test_biweight_midvariance_without_spread_is_the_mad():
    assert qc.biweight_midvariance(np.zeros(10)) == 0.0


# ------------------------------------------------------------------------------------------------ outliers
def _coverage(medians, empty):
    return pd.DataFrame({"sample": [f"s{i}" for i in range(len(medians))], "total_count": 1.0,
                         "median_count": np.asarray(medians, float), "empty_fraction": np.asarray(empty, float)})


def test_an_empty_sample_is_flagged_and_auto_excluded():
    cov = _coverage([98, 105, 0, 101, 99], [0.021, 0.03, 0.961, 0.025, 0.028])
    reasons = qc.outlier_reasons(cov)
    assert reasons[2] == ["median_zero", "empty_windows"] and not any(reasons[:2] + reasons[3:])
    assert qc.auto_excluded(cov) == ["s2"]
    assert qc.excluded_samples("auto", cov) == ["s2"]
    assert qc.excluded_samples("s0, s3", cov) == ["s0", "s3"]
    with pytest.raises(InputError, match="unknown sample"):
        qc.excluded_samples(["s9"], cov)


def test_a_tight_or_sparse_cohort_flags_nothing():
    assert not any(qc.outlier_reasons(_coverage([100, 100, 100, 101], [0.02, 0.02, 0.02, 0.05])))  # MAD 0
    assert not any(qc.outlier_reasons(_coverage([0, 0, 0, 0], [0.6, 0.7, 0.65, 0.62])))  # sparse data
    two = qc.outlier_reasons(_coverage([100, 0], [0.0, 0.9]))  # too few for the cohort rule
    assert two == [[], ["median_zero"]]


def test_spread_and_cnv_count_outliers():
    table = _coverage([100] * 5, [0.01] * 5).assign(log2_mad=[0.1, 0.12, 0.11, 0.6, 0.1],
                                                    cnvs=[40, 45, 2000, 50, 38])
    assert qc.outlier_reasons(table) == [[], [], ["cnv_count"], ["spread"], []]


def test_log2_ratios_against_the_windows_median():
    x = np.array([[10.0, 20.0, 30.0], [0.0, 0.0, 5.0], [np.nan, 4.0, 4.0]])
    lr = qc.log2_ratios(x)
    assert lr[0] == pytest.approx(np.log2(np.array([11, 21, 31]) / 21))
    assert np.isnan(lr[1]).all()  # median 0: left out
    assert np.isnan(lr[2, 0]) and lr[2, 1] == 0.0


# ------------------------------------------------------------------------------------------------ --exclude
WINDOWS = pd.DataFrame({"seqnames": ["chr1"] * 5 + ["chr2"] * 2,
                        "start": [1, 101, 201, 301, 401, 1, 101], "end": [100, 200, 300, 400, 500, 100, 200]})
#: BED lines (0-based, half-open) and the windows each removes (row numbers of WINDOWS)
BOUNDARIES = [
    ("chr1\t100\t101", {1}),        # base 101 (1-based): the second window only
    ("chr1\t99\t100", {0}),         # base 100: the first window only
    ("chr1\t0\t100", {0}),          # the first window exactly
    ("chr1\t200\t200", {1, 2}),     # a point between bases 200 and 201: both sides (bedtools)
    ("chr1\t399\t401", {3, 4}),     # bases 400 and 401
    ("chr2\t0\t1", {5}),            # base 1 of chr2
    ("chr1\t500\t600", set()),      # after the last window
    ("chr1\t1000\t2000\nchr3\t0\t1000", set()),  # beyond the windows; another chromosome
]


def _write_bed(path, lines):
    path.write_text("track name=blacklist\n# a comment\n" + "".join(f"{ln}\tname\n" for ln in lines))
    return path


@pytest.mark.parametrize("line,removed", BOUNDARIES)
def test_exclude_boundaries(tmp_path, line, removed):
    hit = exclude_rows(WINDOWS, _write_bed(tmp_path / "x.bed", [line]))
    assert set(np.flatnonzero(hit)) == removed


@pytest.mark.skipif(BEDTOOLS is None, reason="bedtools not installed")
def test_exclude_is_bedtools_intersect_v(tmp_path):
    """Random windows and intervals (points, touching and nested ones too): the windows left are those of
    ``bedtools intersect -v``."""
    rng = np.random.default_rng(7)
    starts = np.sort(rng.choice(np.arange(1, 100_000), 400, replace=False))
    ends = starts + rng.integers(0, 300, starts.size)
    windows = pd.DataFrame({"seqnames": "chr1", "start": starts, "end": ends})
    a = rng.integers(0, 100_000, 60)
    bed = [f"chr1\t{s}\t{s + w}" for s, w in zip(a, rng.choice([0, 1, 2, 50, 500], 60))]
    hit = exclude_rows(windows, _write_bed(tmp_path / "x.bed", bed))
    wpath = tmp_path / "w.bed"
    wpath.write_text("".join(f"chr1\t{s - 1}\t{e}\n" for s, e in zip(starts, ends)))
    plain = tmp_path / "b.bed"
    plain.write_text("".join(f"{ln}\n" for ln in bed))
    out = subprocess.run([BEDTOOLS, "intersect", "-v", "-a", wpath, "-b", plain], capture_output=True, text=True,
                         check=True).stdout.split()
    kept = {int(v) + 1 for v in out[1::3]}
    assert set(starts[~hit]) == kept and 0 < hit.sum() < hit.size


def test_exclude_merges_touching_intervals_and_refuses_bad_lines(tmp_path):
    merged = read_exclude_bed(_write_bed(tmp_path / "m.bed", ["chr1\t10\t20", "chr1\t20\t30", "chr1\t5\t12"]))
    assert [list(v) for v in merged["chr1"]] == [[5], [30]]
    assert overlapping_windows(WINDOWS, merged).sum() == 1
    with pytest.raises(InputError, match="line 3"):
        read_exclude_bed(_write_bed(tmp_path / "bad.bed", ["chr1\tten\t20"]))
    with pytest.raises(InputError, match="naming"):
        exclude_rows(WINDOWS, _write_bed(tmp_path / "n.bed", ["1\t0\t100"]))
    with pytest.raises(InputError, match="bare matrix"):
        exclude_rows(None, tmp_path / "n.bed")


# ------------------------------------------------------------------------------------------------ filters
def test_filter_status():
    sel = call_filters(min_length=1000, min_quality=20)
    assert sel == {"minLength": 1000, "minQuality": 20}
    got = filter_status(np.array([999, 1000, 5000, 10]), np.array([30, 19, 20, 5]), sel)
    assert list(got) == ["Short", "LowQual", "PASS", "LowQual;Short"]
    assert list(filter_status(np.array([1]), np.array([0]), {})) == ["PASS"]
    with pytest.raises(InputError, match="--min-length"):
        call_filters(min_length=-1)


# ------------------------------------------------------------------------------------------------ a run
@pytest.fixture(scope="module")
def run_with_everything(tmp_path_factory):
    """A cohort with one nearly empty sample, run with --exclude, --exclude-samples auto, both filters, per-sample
    VCFs and tracks."""
    from gcnmops.data import make_count_data
    from gcnmops.example import example_cohort
    from gcnmops.outputs.callfiles import VcfOptions
    from gcnmops.pipeline.run import run_and_write

    data, _ = example_cohort(n_regions=1200, n_samples=8, n_cnvs=4, seed=5)
    counts = data.counts.copy()
    rng = np.random.default_rng(1)
    counts[rng.random(len(counts)) < 0.96, 3] = 0.0  # sample 4: 96% empty windows
    data = make_count_data(counts, data.sample_names, data.ranges)
    folder = tmp_path_factory.mktemp("qc_run")
    bed = folder.parent / "exclude.bed"
    bed.write_text("chr1\t0\t250000\nchr2\t1000000\t1000001\n")  # the first 10 windows of chr1, one base of chr2
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("gcnmops")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        result, written = run_and_write("cn.mops", data, folder, backend="cpu", exclude=str(bed),
                                        exclude_samples="auto", min_length=500_000, min_quality=40,
                                        formats=["bed", "vcf", "tracks"], vcf=VcfOptions(per_sample=True))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return data, result, folder, [r.getMessage() for r in records]


def test_a_run_excludes_the_empty_sample_and_the_windows_and_says_so(run_with_everything):
    data, result, folder, messages = run_with_everything
    empty = data.sample_names[3]
    assert empty not in result.sample_names and len(result.sample_names) == 7
    assert len(result.gr) == 1200 - 11 and result.gr["start"].iloc[0] == 250_001
    assert any(empty in m and "median_zero" in m and "removed before the model" in m for m in messages)
    assert any("11 of 1,200 windows removed" in m for m in messages)
    params = json.loads((folder / "params.json").read_text())
    assert params["excludedSamples"] == [empty] and params["excludedWindows"] == 11
    assert params["minLength"] == 500_000 and params["minQuality"] == 40
    assert params["sampleQC"][empty] == {"outlier": True, "reasons": ["median_zero", "empty_windows"],
                                         "excluded": True}
    table = pd.read_csv(folder / "sample_qc.tsv", sep="\t", keep_default_na=False)
    assert list(table.columns) == list(qc.QC_COLUMNS) and list(table["sample"]) == list(data.sample_names)
    row = table.set_index("sample").loc[empty]
    assert row["median_count"] == 0 and row["empty_fraction"] > 0.9 and row["cnvs"] == "NA"
    assert row["outlier"] is np.True_ and row["excluded"] is np.True_  # TRUE/FALSE: read as booleans
    kept = table[table["sample"] != empty]
    assert not kept["outlier"].any() and not kept["excluded"].any() and (kept["log2_mad"].astype(float) > 0).all()
    per_sample = result.cnvs.groupby("sampleName").size()
    assert [int(v) for v in kept["cnvs"]] == [int(per_sample.get(s, 0)) for s in kept["sample"]]


@needs_pysam
def test_the_vcf_header_carries_the_sample_qc_and_the_filters(run_with_everything):
    data, result, folder, _ = run_with_everything
    with pysam.VariantFile(str(folder / "cnvr.vcf.gz")) as vcf:
        header = str(vcf.header)
        recs = list(vcf)
    assert f"##sampleQC=<ID={data.sample_names[3]},MedianCount=0," in header
    assert "Reasons=median_zero|empty_windows,Excluded=yes>" in header
    assert '##FILTER=<ID=LowQual,Description="Quality below 40' in header and "##FILTER=<ID=Short" in header
    assert recs
    for rec in recs:
        if "NoCarrier" in rec.filter:
            continue
        want = {"LowQual"} if rec.qual < 40 else set()
        want |= {"Short"} if rec.stop - rec.pos < 500_000 else set()  # END - POS: the region's length
        assert set(rec.filter) == (want or {"PASS"})


def test_filters_mark_the_beds_and_tables_instead_of_removing(run_with_everything):
    _, result, folder, _ = run_with_everything
    bed = pd.read_csv(folder / "cnvs.bed", sep="\t", header=None, keep_default_na=False)
    assert bed.shape == (len(result.cnvs), 10)  # every call is still there
    length = bed[2] - bed[1]
    want = [";".join([n for n, f in (("LowQual", s < 400), ("Short", w < 500_000)) if f]) or "PASS"
            for s, w in zip(bed[4], length)]  # score = 10 x Q
    assert list(bed[9]) == want and len(set(want)) > 1
    table = pd.read_csv(folder / "cnvs.tsv", sep="\t")
    assert table.columns[-1] == "filter" and sorted(table["filter"]) == sorted(want)
    assert pd.read_csv(folder / "cnvr.tsv", sep="\t").columns[-1] == "filter"


@pytest.mark.skipif(BCFTOOLS is None, reason="bcftools not installed")
def test_per_sample_vcfs_have_no_base_outside_the_samples_calls(run_with_everything):
    _, result, folder, _ = run_with_everything
    total = 0
    for s in result.sample_names:
        out = subprocess.run([BCFTOOLS, "query", "-f", "%CHROM\t%POS\t%END\t%FILTER\n", folder / f"cnvr.{s}.vcf.gz"],
                             capture_output=True, text=True, check=True).stdout.split("\n")
        own = result.cnvs[result.cnvs["sampleName"] == s]
        spans = {(c, a, b) for c, a, b in zip(own["seqnames"], own["start"], own["end"])}
        for line in filter(None, out):
            chrom, pos, end, _ = line.split("\t")
            assert (chrom, int(pos) + 1, int(end)) in spans  # POS: the padding base
            total += 1
    assert total > 0


@needs_pysam
def test_tracks_read_back_with_their_coordinates(run_with_everything):
    _, result, folder, _ = run_with_everything
    gr = result.gr
    for j, s in enumerate(result.sample_names[:3]):
        for track, values in (("sini", result.local_assessments[:, j]),
                              ("log2ratio", qc.log2_ratios(result.normalized_data)[:, j])):
            path = folder / "tracks" / f"{s}.{track}.bedgraph.gz"
            assert (folder / "tracks" / f"{s}.{track}.bedgraph.gz.tbi").is_file()
            frame = pd.read_csv(path, sep="\t", header=None, names=["chrom", "start", "end", "value"],
                                float_precision="round_trip")
            keep = np.isfinite(values)
            assert (frame["start"].to_numpy() == gr["start"].to_numpy()[keep] - 1).all()  # bedGraph: 0-based
            assert (frame["end"].to_numpy() == gr["end"].to_numpy()[keep]).all()
            assert np.array_equal(frame["value"].to_numpy(), values[keep])  # shortest exact text of each double
            one = gr.iloc[100]
            with pysam.TabixFile(str(path)) as tbx:  # a window's own base range finds that window alone
                got = list(tbx.fetch(one["seqnames"], int(one["start"]) - 1, int(one["end"])))
            assert [ln.split("\t")[1] for ln in got] == [str(one["start"] - 1)]


def test_run_flags_reach_the_run(tmp_path):
    from gcnmops.cli import build_parser, main

    args = build_parser().parse_args(["run", "x.tsv", "-o", str(tmp_path), "--exclude", "b.bed", "--exclude-samples",
                                      "auto", "--min-length", "1000", "--min-quality", "20", "--tracks"])
    assert (args.exclude, args.exclude_samples, args.min_length, args.min_quality, args.tracks) == \
        ("b.bed", "auto", 1000, 20, True)
    assert main(["run", str(tmp_path / "x.parquet"), "--stream", "--tracks", "-o", str(tmp_path / "o")]) == 2


def test_the_report_shows_the_sample_qc(run_with_everything):
    from gcnmops.report import report_html

    data, result, folder, _ = run_with_everything
    page = report_html(result, folder)
    section = page.split("<h2>Sample QC</h2>")[1].split("<h2>")[0]
    assert f'<tr class="loss"><td>{data.sample_names[3]}</td>' in section  # the outlier's row highlighted
    assert section.count('<tr class="loss">') == 1 and "excludedSamples" in section
    assert section.count("<tr") == 1 + len(data.sample_names)


def test_log2_ratios_of_column_groups_are_the_whole_matrix_ones():
    """A block of windows gives its rows' medians; a group of columns with the whole matrix's medians gives its
    columns' ratios (how a streamed run computes them), also where a window holds a non-finite value."""
    rng = np.random.default_rng(2)
    x = np.asfortranarray(rng.poisson(30.0, (400, 7)).astype(np.float64))
    x[5, 2], x[7, :] = np.nan, 0.0
    whole = qc.log2_ratios(x)
    medians = np.concatenate([qc.window_medians(x[a:a + 100]) for a in range(0, 400, 100)])
    assert np.array_equal(medians, qc.window_medians(x), equal_nan=True)
    for c0, c1 in ((0, 3), (3, 7)):
        assert np.array_equal(qc.log2_ratios(x[:, c0:c1], medians), whole[:, c0:c1], equal_nan=True)
    assert np.isnan(whole[7]).all() and np.isnan(whole[5, 2]) and np.isfinite(whole[5, [0, 1, 3]]).all()


def test_cli_call_writes_the_sample_qc(tmp_path, capsys):
    """gcnmops call: sample_qc.tsv of the new samples (their coverage, spreads and calls), the nearly empty one
    flagged, in the summary, params.json and the VCF header as gcnmops run writes them."""
    import gcnmops
    from gcnmops.cli import main
    from gcnmops.data import make_count_data
    from gcnmops.example import example_cohort

    data, _ = example_cohort(n_regions=1500, n_samples=14, n_cnvs=4, seed=5)
    counts = data.counts.copy()
    counts[np.random.default_rng(1).random(len(counts)) < 0.96, 12] = 0.0  # the third new sample: 96% empty
    names = data.sample_names
    ref = make_count_data(counts[:, :10], names[:10], data.ranges)
    new = make_count_data(counts[:, 10:], names[10:], data.ranges, min_samples=1)
    gcnmops.build_reference(ref, backend="cpu").save(tmp_path / "ref")
    pd.concat([new.ranges, pd.DataFrame(new.counts, columns=new.sample_names)], axis=1).to_csv(
        tmp_path / "new.tsv", sep="\t", index=False)
    out = tmp_path / "out"
    assert main(["call", str(tmp_path / "new.tsv"), "--reference-cohort", str(tmp_path / "ref"), "-o", str(out),
                 "--backend", "cpu", "--quiet", "--formats", "tsv,vcf"]) == 0
    printed = capsys.readouterr().out
    table = gcnmops.read_result(out).sample_qc
    called = gcnmops.call_samples(new, tmp_path / "ref", integer=True, backend="cpu")
    expected = qc.sample_qc(called, qc.coverage_qc(new.counts, new.sample_names),
                             medians=qc.normal_levels(called))  # ratios against the reference's level
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)
    assert list(table.columns) == list(qc.QC_COLUMNS) and table["sample"].tolist() == names[10:]
    empty = names[12]
    assert table["outlier"].tolist() == [False, False, True, False]
    assert "median_zero" in table.loc[2, "reasons"] and table.loc[2, "median_count"] == 0
    assert f"1 outlier(s): {empty} (median_zero" in printed and str(out / "sample_qc.tsv") in printed
    params = json.loads((out / "params.json").read_text())
    assert params["sampleQC"][empty]["outlier"] is True and "sampleQC" not in called.params
    header = subprocess.run(["gzip", "-dc", str(out / "cnvr.vcf.gz")], capture_output=True, text=True).stdout \
        if (out / "cnvr.vcf.gz").exists() else (out / "cnvr.vcf").read_text()
    assert sum(line.startswith("##sampleQC=") for line in header.splitlines()) == 4


def _numpy_spread(values):
    """The definitions of calls.qc's spreads in numpy (pairwise sums): the reference of the compiled ones."""
    a = values[np.isfinite(values)]
    if a.size == 0:
        return np.nan, np.nan, np.nan
    q1, q3 = np.percentile(a, [25, 75])
    loc = np.median(a)
    for _ in range(5):
        d = a - loc
        u = d / max(6.0 * np.median(np.abs(d)), 1e-3)
        w = (1 - u[np.abs(u) < 1] ** 2) ** 2
        if w.sum() == 0:
            break
        step = (d[np.abs(u) < 1] * w).sum() / w.sum()
        loc += step
        if abs(step) <= 1e-3:
            break
    d = a - loc
    mad = np.median(np.abs(d))
    u = d / max(9.0 * mad, 1e-3)
    inside = np.abs(u) < 1
    if u[inside].sum() == 0:
        bivar = mad * qc.MAD_SCALE
    else:
        d, u2 = d[inside], u[inside] ** 2
        bivar = np.sqrt(inside.sum() * (d ** 2 * (1 - u2) ** 4).sum() / ((1 - u2) * (1 - 5 * u2)).sum() ** 2)
    return np.median(np.abs(a - np.median(a))) * qc.MAD_SCALE, q3 - q1, bivar


@pytest.mark.parametrize("m", [1, 2, 9, 130, 5001])
def test_column_spreads_are_the_definitions(m):
    """The compiled spreads of every column (in parallel) against the definitions in numpy: the MAD and IQR (order
    statistics, numpy's linear interpolation) the same doubles, the biweight within rounding of numpy's pairwise
    sums; columns with outliers, ties, signed zeros, NaN and Inf."""
    rng = np.random.default_rng(m)
    n = 120
    values = np.log2((rng.poisson(60, (m, n)) + 1.0) / 61.0)
    values[:, :20] = rng.standard_cauchy((m, 20))
    values[:, 20:30] = rng.choice([0.0, -0.0, 1.0, -1.0], (m, 10))
    values[0, 30:40] = np.nan
    values[-1, 40:45] = np.inf
    values[:, 45] = np.nan
    values = np.asfortranarray(values)
    got = qc.column_spreads(values)
    want = np.array([_numpy_spread(values[:, j]) for j in range(n)], dtype=np.float64)
    assert np.array_equal(got[:, :2], want[:, :2], equal_nan=True)
    assert np.allclose(got[:, 2], want[:, 2], rtol=1e-12, atol=0, equal_nan=True)
    assert np.isnan(got[45]).all() and np.array_equal(np.array(qc.spread(values[:, 7])), got[7])


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8, 15, 16, 1000])
def test_order_statistics_are_numpys(n):
    """Medians and quartiles by selection are the doubles numpy's median and percentile give, with many ties; so
    are the windows' medians and the samples' coverage (totals, medians, empty fraction)."""
    from gcnmops.calls import spreads

    rng = np.random.default_rng(n)
    for values in (rng.normal(size=n), rng.integers(0, 3, n).astype(float), np.sort(rng.normal(size=n))[::-1]):
        assert spreads._median(values.copy()) == np.median(values)
        for q in (0.25, 0.75):
            assert spreads._quantile(values.copy(), q) == np.percentile(values, 100 * q)
    x = np.asfortranarray(rng.poisson(3.0, (50, n)).astype(float))
    x[3, 0], x[4, :] = np.nan, np.inf
    want = np.array([np.median(r[np.isfinite(r)]) if np.isfinite(r).any() else np.nan for r in x])
    assert np.array_equal(qc.window_medians(x), want, equal_nan=True)
    counts = np.asfortranarray(rng.poisson(2.0, (n, 6)).astype(float))
    counts[0, 1] = np.nan
    got = qc.coverage_qc(counts, list("abcdef"))
    assert np.array_equal(got["total_count"], np.nansum(counts, axis=0))
    assert np.array_equal(got["median_count"], np.median(counts, axis=0), equal_nan=True)
    assert np.array_equal(got["empty_fraction"], (counts == 0).sum(axis=0) / n)


@pytest.mark.parametrize("pattern", ["normal", "one_binade", "ties", "equal", "signed_zeros", "tiny_and_huge",
                                     "two_values"])
def test_radix_selection_is_the_sorted_order_statistic(pattern):
    """The radix selection behind the spreads' medians and quantiles (calls/spreads.py ``_kth_pair``) gives the
    sorted array's k-th and (k+1)-th values for every kind of input above its quickselect size: values within one
    binade (the first digit splits them little, the next ones do), ties, all equal, signed zeros, subnormals
    beside huge values and infinities, and ranks whose two values straddle two digits; at the ends too."""
    from gcnmops.calls import spreads

    rng = np.random.default_rng(11)
    n = 3 * spreads._DIRECT + 7
    values = {"normal": rng.normal(size=n), "one_binade": rng.uniform(32.0, 64.0, n),
              "ties": rng.integers(0, 5, n).astype(float), "equal": np.full(n, -2.5),
              "signed_zeros": rng.choice([0.0, -0.0, 1e-310, -1e-310], n),
              "tiny_and_huge": np.concatenate([rng.uniform(0, 5e-324 * 50, n // 2),
                                               rng.uniform(1e300, 1e308, n - n // 2 - 2), [np.inf, -np.inf]]),
              "two_values": np.where(rng.random(n) < 0.5, 1.0, 2.0)}[pattern]
    ordered = np.sort(values)
    for k in sorted({0, 1, n // 4, n // 2 - 1, n // 2, n - 2, n - 1, int(np.searchsorted(ordered, ordered[n // 2],
                                                                                           side="right")) - 1}):
        lo, hi = spreads._kth_pair(values.copy(), k)
        assert lo == ordered[k] and hi == ordered[min(k + 1, n - 1)], (pattern, k)
    finite = values[np.isfinite(values)]
    assert spreads._median(finite.copy()) == np.median(finite)
    for q in (0.25, 0.75):
        assert spreads._quantile(finite.copy(), q) == np.percentile(finite, 100 * q)
    for x in (finite, finite[:spreads._DIRECT + 1], finite[:spreads._DIRECT + 2]):  # one pass, or three where the
        # wanted digits hold most values (ties, one binade)
        kept = x.copy()
        q1, q3, med = spreads._quartiles_median(kept, np.empty_like(x))
        assert np.array_equal(kept, x)
        assert (q1, q3, med) == (np.percentile(x, 25), np.percentile(x, 75), np.median(x)), pattern


def test_tallied_counts_give_the_coverage_of_the_columns():
    """Counts tallied block by block, blocks in any order (``tally_counts``), give column_counts' totals, zeros and
    medians bit for bit (odd and even lengths, NaN columns, zeros, counts beyond the bins below the median); a
    median beyond the bins gives None; fractional, negative and infinite counts are flagged."""
    from gcnmops.calls.spreads import TALLY_BINS, column_counts, tally_counts, tally_medians

    rng = np.random.default_rng(4)
    undecided = 0
    for trial in range(120):
        m, n = int(rng.integers(1, 50)), int(rng.integers(1, 5))
        x = rng.integers(0, 9, size=(m, n)).astype(float)
        if trial % 3 == 0:
            x[rng.random((m, n)) < 0.1] = np.nan
        if trial % 4 == 0:
            x[0, 0] = TALLY_BINS + 7.0
        if trial % 5 == 0:
            x[:, -1] = 3 * TALLY_BINS
        hist = np.zeros((n, TALLY_BINS), np.int32)
        zeros, flags = np.zeros(n, np.int64), np.zeros((n, 2), bool)
        cuts = sorted({0, m, *rng.integers(0, m, 3).tolist()})
        spans = list(zip(cuts, cuts[1:]))
        rng.shuffle(spans)
        sums = {a: tally_counts(np.asfortranarray(x[a:b]), hist, zeros, flags) for a, b in spans}
        totals = np.zeros(n)
        for a in sorted(sums):
            totals = totals + sums[a]
        want_totals, want_medians, want_zeros = column_counts(np.asfortranarray(x))
        assert np.array_equal(totals, want_totals) and np.array_equal(zeros, want_zeros)
        assert np.array_equal(flags[:, 0], np.isnan(x).any(axis=0)) and not flags[:, 1].any()
        medians = tally_medians(hist, flags[:, 0], m)
        if medians is None:
            undecided += 1
            assert (want_medians[~flags[:, 0]] >= TALLY_BINS).any()
        else:
            assert np.array_equal(medians, want_medians, equal_nan=True)
    assert 0 < undecided < 120
    for bad in (0.5, -1.0, np.inf):
        flags = np.zeros((1, 2), bool)
        tally_counts(np.array([[1.0], [bad]]), np.zeros((1, TALLY_BINS), np.int32), np.zeros(1, np.int64), flags)
        assert flags[0, 1], bad


@pytest.mark.parametrize("changed", [False, True])
def test_a_runs_qc_spreads_are_made_beside_the_segmentation(tmp_path, monkeypatch, changed):
    """run_and_write makes the sample QC's spreads from the model's part on a side thread while the segmentation
    runs, once; the table equals sample_qc made from the finished result. Where a method changes the sINI after
    the model (``changed``), the spreads are made again from the result's."""
    from gcnmops.pipeline import run

    monkeypatch.setattr(run, "run_threads", lambda: 2)
    import threading
    import time

    from gcnmops.example import example_cohort
    from gcnmops.pipeline import run, stages
    from gcnmops.pipeline.selection import counts_qc

    data, _ = example_cohort(n_regions=1500, n_samples=6, seed=9)
    calls, lock, real_spreads, real_segment = [], threading.Lock(), run.sample_spreads, stages.segment_and_call

    def spreads(part, **kwargs):
        with lock:
            calls.append(("spreads", threading.current_thread().name))
        return real_spreads(part, **kwargs)

    def segment(*args, **kwargs):
        out = real_segment(*args, **kwargs)
        time.sleep(0.2)
        with lock:
            calls.append(("segmented", threading.current_thread().name))
        return out

    monkeypatch.setattr(run, "sample_spreads", spreads)
    monkeypatch.setattr(stages, "segment_and_call", segment)
    if changed:
        real_method = run.run_method

        def method(*args, **kwargs):
            res = real_method(*args, **kwargs)
            return res.replace(local_assessments=np.asfortranarray(res.local_assessments * 0.5))

        monkeypatch.setattr(run, "run_method", method)
    result, _ = run.run_and_write("cn.mops", data, tmp_path / "out", backend="cpu", formats=["bed"])
    assert calls[0][0] == "spreads" and calls[0][1] != threading.current_thread().name
    assert calls[1][0] == "segmented" and len(calls) == 2
    expected = counts_qc(result, data)
    pd.testing.assert_frame_equal(result.sample_qc, expected, check_exact=True)
    written = pd.read_csv(tmp_path / "out" / "sample_qc.tsv", sep="\t", keep_default_na=False)
    assert np.allclose(written["log2_mad"].astype(float), expected["log2_mad"], rtol=1e-6, atol=0)


def test_a_one_thread_runs_qc_spreads_wait_for_the_segmentation(tmp_path, monkeypatch):
    """With one thread (--threads 1) nothing runs beside the segmentation: the spreads are made after it, on the
    run's thread; the same table."""
    import threading

    from gcnmops.example import example_cohort
    from gcnmops.pipeline import run, stages
    from gcnmops.pipeline.selection import counts_qc

    monkeypatch.setattr(run, "run_threads", lambda: 1)
    data, _ = example_cohort(n_regions=1500, n_samples=6, seed=9)
    calls, real_spreads, real_segment = [], run.sample_spreads, stages.segment_and_call
    monkeypatch.setattr(run, "sample_spreads", lambda *a, **k: calls.append("beside") or real_spreads(*a, **k))
    monkeypatch.setattr(stages, "segment_and_call",
                        lambda *a, **k: (real_segment(*a, **k), calls.append("segmented"))[0])
    real_qc = qc.sample_spreads
    monkeypatch.setattr(qc, "sample_spreads",
                        lambda *a, **k: calls.append(("after", threading.current_thread().name)) or real_qc(*a, **k))
    result, _ = run.run_and_write("cn.mops", data, tmp_path / "out", backend="cpu", formats=["bed"])
    assert calls == ["segmented", ("after", threading.current_thread().name)]
    pd.testing.assert_frame_equal(result.sample_qc, counts_qc(result, data), check_exact=True)


@pytest.mark.parametrize("m", [1, 2, 7, 8, 20_001])
def test_column_counts_medians_equal_numpy_from_the_tally_or_by_selection(m):
    """Whole counts below TALLY_BINS give their median from the tally; large, fractional or negative counts, and
    NaN, by selection or as NaN: numpy's median in every case, bit for bit."""
    from gcnmops.calls.spreads import TALLY_BINS, column_counts

    rng = np.random.default_rng(m)
    x = rng.poisson(rng.gamma(2.0, 60.0, (m, 1)), (m, 6)).astype(np.float64)
    x[:, 1] += TALLY_BINS  # every count beyond the tally
    x[::3, 2] = TALLY_BINS * 3.0  # a third beyond it
    x[:, 3] += 0.5  # fractional
    x[0, 4] = np.nan
    x[-1, 5] = -1.0  # negative
    totals, medians, zeros = column_counts(np.asfortranarray(x))
    assert np.array_equal(medians, np.median(x, axis=0), equal_nan=True)
    assert np.array_equal(zeros, (x == 0).sum(axis=0))
    assert np.array_equal(totals, np.array([np.sum(c[~np.isnan(c)]) for c in x.T]))
