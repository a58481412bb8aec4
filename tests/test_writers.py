"""Writers: every format parses in the standard tools, tables round-trip, writes are all-or-nothing.

pysam (VCF, tabix) and bcftools are used where installed (scripts/setup.sh installs bcftools and tabix;
``pip install pysam``); the tests that need them skip otherwise.
"""
from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gcnmops
from gcnmops.example import example_cohort
from gcnmops.io import writers
from gcnmops.errors import InputError
from gcnmops.io.writers import DEFAULT_FORMATS, FORMATS, write_result

try:
    import pysam
except ImportError:  # pragma: no cover - optional
    pysam = None

needs_pysam = pytest.mark.skipif(pysam is None, reason="pysam not installed")
BCFTOOLS = shutil.which("bcftools")


@pytest.fixture(scope="module")
def results():
    """(raw, integer) results of a small simulated cohort on two chromosomes."""
    data, _ = example_cohort(n_regions=1200, n_samples=12, n_cnvs=6, seed=5)
    raw = gcnmops.cn_mops(data, backend="cpu")
    assert len(raw.cnvs) > 0
    return raw, gcnmops.calc_integer_copy_numbers(raw)


@pytest.fixture(scope="module")
def written(results, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    paths = write_result(results[1], out, formats=["tsv", "parquet", "bed", "vcf", "seg"])
    return out, paths


def _read_tsv(path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", float_precision="round_trip", keep_default_na=False, na_values=["NA"],
                       dtype={"seqnames": str})


# ------------------------------------------------------------------------------------------------ TSV
def test_every_file_is_written_with_normal_permissions(written):
    out, paths = written
    names = {p.name for p in paths}
    for name in ("normalized_data.tsv", "local_assessments.tsv", "individual_call.tsv", "integer_copy_number.tsv",
                 "ini_call.tsv", "params_L.tsv", "params_A.tsv", "segmentation.tsv", "cnvs.tsv", "cnvr.tsv",
                 "params.json", "cnvs.bed", "cnvr.bed", "cnvr.vcf", "segmentation.seg"):
        assert name in names and (out / name).stat().st_size > 0
    assert sorted(p.name for p in out.iterdir()) == sorted(names)  # nothing else (no temporary files)
    umask = os.umask(0)
    os.umask(umask)
    for p in paths:  # mkstemp's 0600 is not kept
        assert (p.stat().st_mode & 0o777) == (0o666 & ~umask)


def test_matrices_round_trip_exactly(written, results):
    out, _ = written
    r = results[1]
    for name, matrix in (("normalized_data", r.normalized_data), ("local_assessments", r.local_assessments),
                         ("individual_call", r.individual_call)):
        t = _read_tsv(out / f"{name}.tsv")
        assert list(t.columns) == ["seqnames", "start", "end", *r.sample_names]
        assert t[["seqnames", "start", "end"]].equals(r.gr)
        assert np.array_equal(t[r.sample_names].to_numpy(), matrix), name  # bit for bit
    labels = _read_tsv(out / "integer_copy_number.tsv")[r.sample_names].to_numpy()
    assert (labels == r.integer_copy_number).all()
    ini = _read_tsv(out / "ini_call.tsv")
    assert np.array_equal(ini["ini_call"].to_numpy(), r.ini_call)
    for key in ("L", "A"):
        t = _read_tsv(out / f"params_{key}.tsv")
        assert list(t.columns[3:]) == r.classes
        assert np.array_equal(t[r.classes].to_numpy(), r.params[key])


def test_tables_round_trip(written, results):
    out, _ = written
    r = results[1]
    for name in ("segmentation", "cnvs", "cnvr"):
        ours = getattr(r, name).reset_index(drop=True)
        back = _read_tsv(out / f"{name}.tsv")
        assert list(back.columns) == list(ours.columns)
        for col in ours.columns:
            if ours[col].dtype.kind == "f":
                assert np.array_equal(back[col].to_numpy(), ours[col].to_numpy())
            else:
                assert (back[col].astype(str).to_numpy() == ours[col].astype(str).to_numpy()).all(), col


def test_missing_values_and_special_floats_are_written_as_r_reads_them(tmp_path, results):
    raw = results[0]  # CN columns are None before integer copy numbers
    paths = write_result(raw, tmp_path, formats=["tsv"])
    assert paths
    cnvr = (tmp_path / "cnvr.tsv").read_text().splitlines()
    assert cnvr[1].split("\t")[3:] == ["NA"] * len(raw.sample_names)
    p = tmp_path / "special.tsv"
    writers.write_columns(p, ["a", "b", "c", "d"], [np.array([np.nan, np.inf, -np.inf, 0.1]),
                                                    np.array([1, 2, 3, 4]), np.array([True, False, True, True]),
                                                    pd.Series(["x", None, "tab\there", "q\"uote"])])
    lines = p.read_text().splitlines()
    assert lines[0] == "a\tb\tc\td"
    assert [ln.split("\t")[0] for ln in lines[1:]] == ["NA", "Inf", "-Inf", "0.1"]
    assert lines[1].split("\t")[2] == "TRUE" and lines[2].split("\t")[3] == "NA"
    back = pd.read_csv(p, sep="\t", keep_default_na=False, na_values=["NA"])
    assert back["d"].tolist()[2:] == ["tab\there", 'q"uote']  # quoted where needed, read back intact
    assert np.isinf(back["a"][1]) and back["a"][2] == -np.inf


def test_gzip_tsv(tmp_path, results):
    r = results[1]
    paths = write_result(r, tmp_path, formats=["tsv.gz"])
    assert {p.name for p in paths} >= {"normalized_data.tsv.gz", "cnvr.tsv"}
    with gzip.open(tmp_path / "local_assessments.tsv.gz", "rt") as fh:
        t = pd.read_csv(fh, sep="\t", float_precision="round_trip")
    assert np.array_equal(t[r.sample_names].to_numpy(), r.local_assessments)
    with pytest.raises(InputError, match="Unknown output format 'xlsx'"):
        write_result(r, tmp_path, formats=["xlsx"])


# ------------------------------------------------------------------------------------------------ BED
def test_bed_files_are_sorted_bed_and_tabix_indexable(written, results):
    out, _ = written
    r = results[1]
    cnvs = pd.read_csv(out / "cnvs.bed", sep="\t", header=None, dtype={0: str})
    assert cnvs.shape == (len(r.cnvs), 12)
    assert (cnvs[1] == cnvs[6]).all() and (cnvs[2] == cnvs[7]).all()  # thickStart/End = the CNV
    assert (cnvs[1] < cnvs[2]).all() and (cnvs[1] >= 0).all() and (cnvs[4] == 0).all() and (cnvs[5] == ".").all()
    assert set(cnvs[8]) <= {"200,0,0", "0,0,200", "128,128,128"}
    # same CNVs as the result (0-based half-open starts)
    mine = set(zip(cnvs[0], cnvs[1] + 1, cnvs[2], cnvs[3], cnvs[11]))
    assert mine == set(zip(r.cnvs["seqnames"], r.cnvs["start"], r.cnvs["end"], r.cnvs["sampleName"], r.cnvs["CN"]))
    # losses red, gains blue
    assert ((cnvs[8] == "200,0,0") == cnvs[11].isin(["CN0", "CN1"])).all()
    for path in (out / "cnvs.bed", out / "cnvr.bed"):
        bed = pd.read_csv(path, sep="\t", header=None, dtype={0: str})
        chrom_rank = bed[0].map({c: i for i, c in enumerate(pd.unique(r.gr["seqnames"]))})
        assert chrom_rank.is_monotonic_increasing
        for _, g in bed.groupby(0):
            assert g[1].is_monotonic_increasing
    cnvr = pd.read_csv(out / "cnvr.bed", sep="\t", header=None, dtype={0: str})
    assert cnvr.shape == (len(r.cnvr), 4)
    first = r.cnvr.iloc[0]
    carriers = r.cnvs[(r.cnvs["seqnames"] == first["seqnames"]) & (r.cnvs["start"] <= first["end"])
                      & (r.cnvs["end"] >= first["start"])]["sampleName"]
    row = cnvr[(cnvr[0] == first["seqnames"]) & (cnvr[1] == first["start"] - 1)].iloc[0]
    assert set(row[3].split(",")) == set(carriers)


@needs_pysam
def test_bed_tabix(written, tmp_path):
    out, _ = written
    for name in ("cnvs.bed", "cnvr.bed"):
        src = tmp_path / name
        shutil.copy(out / name, src)
        gz = pysam.tabix_index(str(src), preset="bed", force=True)  # fails on unsorted input
        with pysam.TabixFile(gz) as tbx:
            n = sum(1 for c in tbx.contigs for _ in tbx.fetch(c))
        assert n == sum(1 for _ in open(out / name))


# ------------------------------------------------------------------------------------------------ VCF
@needs_pysam
def test_vcf_parses_in_pysam(written, results):
    out, _ = written
    r = results[1]
    with pysam.VariantFile(str(out / "cnvr.vcf")) as vcf:
        hdr = vcf.header
        assert hdr.version == "VCFv4.3"
        assert list(hdr.samples) == r.sample_names
        assert {"SVTYPE", "END", "SVLEN", "IMPRECISE"} <= set(hdr.info)
        assert hdr.formats["CN"].type == "Integer"
        assert list(hdr.contigs) == list(pd.unique(r.gr["seqnames"]))
        records = list(vcf)
    assert len(records) == len(r.cnvr)
    main = 2
    for rec, (_, reg) in zip(records, r.cnvr.iterrows()):
        assert (rec.chrom, rec.pos + 1, rec.stop) == (reg["seqnames"], reg["start"], reg["end"])  # span = region
        cns = [rec.samples[s]["CN"] for s in r.sample_names]
        assert cns == [int(reg[s][2:]) for s in r.sample_names]
        svtype = rec.info["SVTYPE"]
        assert rec.alts == (f"<{svtype}>",)
        loss, gain = any(c < main for c in cns), any(c > main for c in cns)
        assert svtype == ("CNV" if loss and gain else "DEL" if loss else "DUP")
        assert abs(rec.info["SVLEN"]) == reg["end"] - reg["start"] + 1
        assert (rec.info["SVLEN"] < 0) == (svtype == "DEL")
        assert rec.info["IMPRECISE"] is True


@pytest.mark.skipif(BCFTOOLS is None, reason="bcftools not installed (apt-get install bcftools)")
def test_vcf_passes_bcftools(written, results, tmp_path):
    out, _ = written
    r = results[1]
    view = subprocess.run([BCFTOOLS, "view", str(out / "cnvr.vcf")], capture_output=True, text=True)
    assert view.returncode == 0 and not view.stderr.strip(), view.stderr
    gz = tmp_path / "cnvr.vcf.gz"
    subprocess.run([BCFTOOLS, "view", "-Oz", "-o", str(gz), str(out / "cnvr.vcf")], check=True)
    subprocess.run([BCFTOOLS, "index", "-t", str(gz)], check=True, capture_output=True)  # needs sorted records
    q = subprocess.run([BCFTOOLS, "query", "-f", "%CHROM\t%POS\t%END\t%SVTYPE[\t%CN]\n", str(gz)], check=True,
                       capture_output=True, text=True).stdout.splitlines()
    assert len(q) == len(r.cnvr)
    first = q[0].split("\t")
    assert (first[0], int(first[1]) + 1, int(first[2])) == (r.cnvr["seqnames"].iat[0], r.cnvr["start"].iat[0],
                                                            r.cnvr["end"].iat[0])


@needs_pysam
def test_vcf_before_integer_copy_numbers_and_with_fractional_labels(results, tmp_path):
    raw = results[0]
    (tmp_path / "raw.vcf").write_text(writers.vcf_text(raw))
    with pysam.VariantFile(str(tmp_path / "raw.vcf")) as vcf:
        recs = list(vcf)
    assert len(recs) == len(raw.cnvr)
    assert all(rec.samples[s]["CN"] is None for rec in recs for s in raw.sample_names)  # "." = unknown
    # direction from the sign of the CNVs' sINI means
    for rec, (_, reg) in zip(recs, raw.cnvr.iterrows()):
        inside = raw.cnvs[(raw.cnvs["seqnames"] == reg["seqnames"]) & (raw.cnvs["start"] <= reg["end"])
                          & (raw.cnvs["end"] >= reg["start"])]["mean"]
        expect = "CNV" if (inside < 0).any() and (inside > 0).any() else "DEL" if (inside < 0).any() else "DUP"
        assert rec.info["SVTYPE"] == expect
    frac_cnvr = raw.cnvr.copy()
    for s in raw.sample_names:
        frac_cnvr[s] = "CN2.0"
    frac_cnvr[raw.sample_names[0]] = "CN3.4"
    (tmp_path / "frac.vcf").write_text(writers.vcf_text(raw.replace(cnvr=frac_cnvr)))
    with pysam.VariantFile(str(tmp_path / "frac.vcf")) as vcf:
        assert vcf.header.formats["FCN"].type == "Float"
        rec = next(iter(vcf))
        assert rec.samples[raw.sample_names[0]]["FCN"] == pytest.approx(3.4)
        assert rec.info["SVTYPE"] == "DUP"


def test_vcf_of_a_result_without_cnvs(tmp_path):
    data = pd.DataFrame({"seqnames": "chr1", "start": np.arange(200) * 100 + 1, "end": np.arange(1, 201) * 100,
                         "a": 100.0, "b": 100.0, "c": 100.0})
    r = gcnmops.cn_mops(data, backend="cpu")
    assert len(r.cnvr) == 0
    paths = write_result(r, tmp_path)
    text = (tmp_path / "cnvr.vcf").read_text()
    assert text.splitlines()[-1].startswith("#CHROM") and len(paths) == 15
    assert (tmp_path / "cnvs.bed").read_text() == ""
    if pysam is not None:
        with pysam.VariantFile(str(tmp_path / "cnvr.vcf")) as vcf:
            assert list(vcf) == []


# ------------------------------------------------------------------------------------------------ SEG
def test_seg_loads_with_igv_columns(written, results):
    out, _ = written
    r = results[1]
    seg = pd.read_csv(out / "segmentation.seg", sep="\t", dtype={"chrom": str}, float_precision="round_trip")
    assert list(seg.columns) == ["ID", "chrom", "loc.start", "loc.end", "num.mark", "seg.mean"]
    assert len(seg) == len(r.segmentation)
    # ordered by sample, chromosome, start, as DNAcopy writes it
    rank = seg["ID"].map(r.sample_names.index)
    assert rank.is_monotonic_increasing
    # num.mark = regions in the segment; marks of a sample sum to the number of regions
    assert (seg.groupby("ID")["num.mark"].sum() == len(r.gr)).all()
    merged = seg.merge(r.segmentation, left_on=["ID", "chrom", "loc.start", "loc.end"],
                       right_on=["sampleName", "seqnames", "start", "end"])
    assert len(merged) == len(seg) and np.array_equal(merged["seg.mean"], merged["mean"])


# ------------------------------------------------------------------------------------------ atomicity
def test_a_failing_write_leaves_no_file(tmp_path, results, monkeypatch):
    r = results[1]
    out = tmp_path / "out"

    def boom(result):  # the VCF comes after every TSV and BED: they are complete when it fails
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(writers, "vcf_text", boom)
    with pytest.raises(OSError, match="simulated"):
        write_result(r, out)
    assert list(out.iterdir()) == []  # no final file and no temporary file


def test_a_failure_mid_file_keeps_the_previous_version(tmp_path, results, monkeypatch):
    r = results[1]
    write_result(r, tmp_path, formats=["tsv"])
    before = (tmp_path / "normalized_data.tsv").read_bytes()
    real = writers.write_columns
    calls = {"n": 0}

    def half_then_fail(path, names, columns, compress=False, header=True):
        calls["n"] += 1
        if calls["n"] == 2:  # the second matrix: write part of it, then fail
            Path(path).write_text("seqnames\tstart\n chr1\t1\n")
            raise KeyboardInterrupt
        return real(path, names, columns, compress, header)

    monkeypatch.setattr(writers, "write_columns", half_then_fail)
    with pytest.raises(KeyboardInterrupt):
        write_result(r.replace(normalized_data=r.normalized_data + 1.0), tmp_path, formats=["tsv"])
    assert (tmp_path / "normalized_data.tsv").read_bytes() == before  # the old file, untouched
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_atomic_write_helper(tmp_path):
    target = tmp_path / "x.txt"

    def fail(tmp):
        tmp.write_text("partial")
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        writers.atomic_write(target, fail)
    assert list(tmp_path.iterdir()) == []
    writers.atomic_write(target, lambda t: t.write_text("done"))
    assert target.read_text() == "done"


def test_formats_constant():
    assert DEFAULT_FORMATS == ("parquet", "bed", "vcf", "seg")
    assert set(DEFAULT_FORMATS) <= set(FORMATS)


def test_default_output_is_calls_as_text_and_matrices_as_parquet(results, tmp_path):
    names = sorted(p.name for p in write_result(results[1], tmp_path))
    matrices = ["individual_call", "ini_call", "integer_copy_number", "local_assessments", "normalized_data",
                "params_A", "params_L"]
    assert names == sorted([m + ".parquet" for m in matrices] + ["cnvr.bed", "cnvr.tsv", "cnvr.vcf", "cnvs.bed",
                                                                 "cnvs.tsv", "params.json", "segmentation.seg",
                                                                 "segmentation.tsv"])
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_parquet_matrices_are_lossless_and_labelled(results, tmp_path):
    import pyarrow.parquet as pq

    r = results[1]
    write_result(r, tmp_path, formats=["parquet"])
    t = pq.read_table(tmp_path / "local_assessments.parquet").to_pandas()
    assert list(t.columns) == ["seqnames", "start", "end", *r.sample_names]
    assert np.array_equal(t[r.sample_names].to_numpy(), r.local_assessments)  # bit for bit
    labels = pq.read_table(tmp_path / "integer_copy_number.parquet").to_pandas()[r.sample_names]
    assert (labels.astype(str).to_numpy() == r.integer_copy_number).all()
    assert pq.read_metadata(tmp_path / "normalized_data.parquet").row_group(0).column(3).compression == "ZSTD"


def _assert_same_result(a, b):
    for name in ("normalized_data", "local_assessments", "individual_call", "ini_call", "cn_index"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name
    pd.testing.assert_frame_equal(a.gr.reset_index(drop=True), b.gr.reset_index(drop=True))
    for name in ("segmentation", "cnvs", "cnvr"):
        pd.testing.assert_frame_equal(getattr(a, name).reset_index(drop=True), getattr(b, name).reset_index(drop=True))
    assert a.sample_names == b.sample_names and a.ranged == b.ranged
    assert a.params.keys() == b.params.keys()
    for k in a.params:
        if isinstance(a.params[k], np.ndarray):
            assert np.array_equal(a.params[k], b.params[k]), k
        else:
            assert a.params[k] == b.params[k], k


@pytest.mark.parametrize("fmt", ["parquet", "tsv", "tsv.gz"])
def test_read_result_round_trips(results, tmp_path, fmt):
    for r in results:  # before and after integer copy numbers
        folder = tmp_path / str(id(r))
        write_result(r, folder, formats=[fmt])
        _assert_same_result(gcnmops.read_result(folder), r)


def test_read_result_names_what_is_missing(results, tmp_path):
    with pytest.raises(InputError, match="params.json"):
        gcnmops.read_result(tmp_path)
    write_result(results[1], tmp_path, formats=["bed"])
    with pytest.raises(InputError, match="normalized_data"):
        gcnmops.read_result(tmp_path)


@pytest.mark.parametrize("formats, fragment", [(["vfc"], "'vfc' (did you mean 'vcf'?)"), (["foo"], "'foo'"),
                                               ([], "No output format")])
def test_unknown_formats_are_refused_naming_them(results, tmp_path, formats, fragment):
    with pytest.raises(InputError, match=fragment.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        write_result(results[1], tmp_path / "x", formats=formats)
    assert not (tmp_path / "x").exists()
