"""Count files of other tools (GATK CollectReadCounts TSV/HDF5, GATK-SV per-sample bincov, mosdepth, CNVkit,
bedGraph, stdin), one sample each, and cohorts of them from a sample sheet: each read to the same cohort as the
equivalent merged 1-based TSV; depths refused unless converted on request; no format read with shifted
coordinates. Files are written with the tools' libraries where they are installable (pysam, h5py)."""
from __future__ import annotations

import io
import logging
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gcnmops
from gcnmops.errors import InputError
from gcnmops.example import example_cohort
from gcnmops.io import read_counts
from gcnmops.io.samplesheet import read_sample_sheet

pysam = pytest.importorskip("pysam")
READ_LENGTH = 100


@pytest.fixture(scope="module")
def cohort():
    return example_cohort(n_regions=400, n_samples=6, window=1000, seed=5, n_cnvs=3)[0]


@pytest.fixture(scope="module")
def merged(cohort, tmp_path_factory):
    """The cohort as a merged 1-based TSV, read back: what every format must read to."""
    p = tmp_path_factory.mktemp("merged") / "cohort.tsv"
    r = cohort.ranges
    df = pd.DataFrame({"seqnames": r["seqnames"].astype(str), "start": r["start"], "end": r["end"]})
    for k, s in enumerate(cohort.sample_names):
        df[s] = cohort.counts[:, k].astype(np.int64)
    df.to_csv(p, sep="\t", index=False)
    return read_counts(p)


def _bins(data, zero_based: bool):
    r = data.ranges
    return r["seqnames"].astype(str).to_numpy(), (r["start"] - int(zero_based)).to_numpy(), r["end"].to_numpy()


def _same_bins(a, b):
    pd.testing.assert_frame_equal(a.ranges.reset_index(drop=True).astype({"seqnames": str}),
                                  b.ranges.reset_index(drop=True).astype({"seqnames": str}), check_dtype=False)


def _same(a, b):
    _same_bins(a, b)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert list(a.sample_names) == list(b.sample_names)


def _bgzip(plain, preset="bed", csi=False):
    """bgzip + tabix index with pysam (htslib), as bgzip/tabix (and mosdepth's .csi) make them."""
    return Path(pysam.tabix_index(str(plain), preset=preset, force=True, csi=csi))


def _sheet(tmp_path, files, header=True):
    p = tmp_path / "sheet.tsv"
    lines = (["name\tpath"] if header else []) + [f"{name}\t{path.relative_to(tmp_path)}" for name, path in files]
    p.write_text("\n".join(lines) + "\n")
    return p


# ------------------------------------------------------------------------------------------- writers of the formats
def gatk_tsv(tmp_path, data, k, *, zero_based=False):
    seq, start, end = _bins(data, zero_based)
    name = data.sample_names[k]
    lengths = pd.Series(end).groupby(seq, sort=False).max()
    header = pysam.AlignmentHeader.from_dict({
        "HD": {"VN": "1.6"}, "SQ": [{"SN": s, "LN": int(n)} for s, n in lengths.items()],
        "RG": [{"ID": "GATKCopyNumber", "SM": name}]})
    p = tmp_path / f"{name}.counts.tsv"
    body = pd.DataFrame({"CONTIG": seq, "START": start, "END": end, "COUNT": data.counts[:, k].astype(np.int64)})
    p.write_text(str(header) + body.to_csv(sep="\t", index=False))
    return p


def gatk_hdf5(tmp_path, data, k):
    """HDF5SimpleCountCollection's layout: sample name, sequence dictionary, intervals (contig names + 3 x n
    index/start/end doubles, 1-based), counts (1 x n doubles)."""
    h5py = pytest.importorskip("h5py")
    seq, start, end = _bins(data, False)
    contigs = list(dict.fromkeys(seq))
    index = np.array([contigs.index(s) for s in seq], dtype=np.float64)
    p = tmp_path / f"{data.sample_names[k]}.counts.hdf5"
    with h5py.File(p, "w") as f:
        f["sample_metadata/sample_name"] = np.array([data.sample_names[k]], dtype="S")
        f["locatable_metadata/sequence_dictionary"] = np.array(["@HD\tVN:1.6\n"], dtype="S")
        f["intervals/indexed_contig_names"] = np.array(contigs, dtype="S")
        f["intervals/transposed_index_start_end"] = np.vstack([index, start, end]).astype(np.float64)
        f["counts/values"] = data.counts[:, k].reshape(1, -1).astype(np.float64)
    return p


def gatksv_rd(tmp_path, data, k, *, header=True):
    seq, start, end = _bins(data, True)
    name = data.sample_names[k]
    df = pd.DataFrame({"#Chr": seq, "Start": start, "End": end, name: data.counts[:, k].astype(np.int64)})
    plain = tmp_path / f"{name}.RD.txt"
    df.to_csv(plain, sep="\t", index=False, header=header)
    pysam.tabix_compress(str(plain), str(plain) + ".gz", force=True)
    return tmp_path / f"{name}.RD.txt.gz"


def depths(data, k, zero_based=True):
    seq, start, end = _bins(data, zero_based)
    width = end - start if zero_based else end - start + 1
    return seq, start, end, data.counts[:, k] * READ_LENGTH / width  # mean depth of reads of READ_LENGTH bases


def mosdepth(tmp_path, data, k, *, zero_based=True):
    seq, start, end, depth = depths(data, k, zero_based)
    plain = tmp_path / f"{data.sample_names[k]}.regions.bed"
    pd.DataFrame({0: seq, 1: start, 2: end, 3: [f"{d:.2f}" for d in depth]}).to_csv(plain, sep="\t", index=False,
                                                                                   header=False)
    return _bgzip(plain, csi=True)  # mosdepth writes bgzip + .csi


def cnvkit(tmp_path, data, k):
    seq, start, end, depth = depths(data, k)
    p = tmp_path / f"{data.sample_names[k]}.targetcoverage.cnn"
    log2 = [math.log2(d) if d > 0 else -20.0 for d in depth]
    pd.DataFrame({"chromosome": seq, "start": start, "end": end, "gene": "-", "depth": depth, "log2": log2}).to_csv(
        p, sep="\t", index=False)
    return p


def bedgraph(tmp_path, data, k, *, values=None, zero_based=True):
    seq, start, end = _bins(data, zero_based)
    p = tmp_path / f"{data.sample_names[k]}.bedGraph"
    v = data.counts[:, k].astype(np.int64) if values is None else values
    body = pd.DataFrame({0: seq, 1: start, 2: end, 3: v}).to_csv(sep="\t", index=False, header=False)
    p.write_text(f'track type=bedGraph name="{data.sample_names[k]}"\n' + body)
    return p


WRITERS = {"gatk_tsv": gatk_tsv, "gatk_hdf5": gatk_hdf5, "gatksv_rd": gatksv_rd,
           "gatksv_rd_no_header": lambda t, d, k: gatksv_rd(t, d, k, header=False), "bedgraph": bedgraph}


# ------------------------------------------------------------------------------------------- each format, a cohort
@pytest.mark.parametrize("fmt", list(WRITERS))
def test_sheet_of_count_files_reads_to_the_merged_cohort(tmp_path, cohort, merged, fmt, caplog):
    files = [(s, WRITERS[fmt](tmp_path, cohort, k)) for k, s in enumerate(cohort.sample_names)]
    with caplog.at_level(logging.INFO, logger="gcnmops"):
        data = read_sample_sheet(_sheet(tmp_path, files))
    _same(data, merged)
    said = [r.getMessage() for r in caplog.records if "coordinates of" in r.getMessage()]
    assert len(said) == 1 and f"{len(files)} file(s)" in said[0]  # one line for the sheet, not one per file


@pytest.mark.parametrize("fmt", ["mosdepth", "cnvkit"])
def test_depths_are_refused_then_converted_on_request(tmp_path, cohort, merged, fmt):
    writer = mosdepth if fmt == "mosdepth" else cnvkit
    files = [(s, writer(tmp_path, cohort, k)) for k, s in enumerate(cohort.sample_names)]
    sheet = _sheet(tmp_path, files, header=False)
    with pytest.raises(InputError, match="mean depths.*--depth-to-counts READ_LENGTH"):
        read_sample_sheet(sheet)
    _same(read_sample_sheet(sheet, depth_to_counts=READ_LENGTH), merged)


def test_single_files_are_read_directly(tmp_path, cohort, merged):
    for writer in (gatk_tsv, gatk_hdf5, gatksv_rd, bedgraph):
        one = read_counts(writer(tmp_path, cohort, 2), min_samples=1)
        assert one.sample_names == [cohort.sample_names[2]]
        np.testing.assert_array_equal(one.counts[:, 0], merged.counts[:, 2])
        _same_bins(one, merged)
    with pytest.raises(InputError, match="--samples SHEET"):  # a cohort method: the sheet is named
        read_counts(gatk_tsv(tmp_path, cohort, 0))
    from gcnmops.pipeline.family import read_single_sample

    one = read_single_sample(str(mosdepth(tmp_path, cohort, 1)), depth_to_counts=READ_LENGTH)
    np.testing.assert_array_equal(one.counts[:, 0], merged.counts[:, 1])


def test_stdin(tmp_path, cohort, merged, monkeypatch):
    p = gatksv_rd(tmp_path, cohort, 0)  # bgzipped, BED-style header
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(p.read_bytes())))
    one = read_counts("-", min_samples=1)
    np.testing.assert_array_equal(one.counts[:, 0], merged.counts[:, 0])
    _same_bins(one, merged)
    tsv = merged.ranges.assign(**{s: merged.counts[:, k] for k, s in enumerate(merged.sample_names)})
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(tsv.to_csv(sep="\t", index=False).encode())))
    _same(read_counts("-"), merged)


def test_zero_based_files_give_the_calls_of_the_one_based_table(tmp_path, cohort, merged):
    files = [(s, mosdepth(tmp_path, cohort, k)) for k, s in enumerate(cohort.sample_names)]
    a = gcnmops.cn_mops(read_sample_sheet(_sheet(tmp_path, files), depth_to_counts=READ_LENGTH), backend="cpu")
    b = gcnmops.cn_mops(merged, backend="cpu")
    assert len(b.cnvs) > 0
    pd.testing.assert_frame_equal(a.cnvs.reset_index(drop=True), b.cnvs.reset_index(drop=True))
    assert (a.cnvs["start"] % 1000 == 1).all()


# ------------------------------------------------------------------------------------------- refused, never shifted
def test_shifted_coordinates_are_refused(tmp_path, cohort):
    with pytest.raises(InputError, match="1-based and closed.*look 0-based.*--zero-based"):
        read_counts(gatk_tsv(tmp_path, cohort, 0, zero_based=True), min_samples=1)
    with pytest.raises(InputError, match="1-based closed bins do.*--zero-based"):
        read_counts(bedgraph(tmp_path, cohort, 0, zero_based=False), min_samples=1)
    with pytest.raises(InputError, match="1-based closed bins do"):
        read_counts(mosdepth(tmp_path, cohort, 0, zero_based=False), min_samples=1, depth_to_counts=READ_LENGTH)
    said = read_counts(bedgraph(tmp_path, cohort, 1, zero_based=False), min_samples=1, coordinates="1-based")
    assert said.ranges["start"].iloc[0] == 1  # the user's word: read as it stands


def test_bins_that_differ_are_named(tmp_path, cohort):
    files = [(s, gatk_tsv(tmp_path, cohort, k)) for k, s in enumerate(cohort.sample_names[:3])]
    other = example_cohort(n_regions=400, n_samples=2, window=500, seed=5)[0]
    (tmp_path / "other").mkdir()
    files.append(("odd", gatk_tsv(tmp_path / "other", other, 0)))
    with pytest.raises(InputError, match=r"Sample 'odd' .* bin 1 is chr1:1-500, where 'S\w*' has chr1:1-1000"):
        read_sample_sheet(_sheet(tmp_path, files))
    short = tmp_path / "short.counts.tsv"
    short.write_text("\n".join(gatk_tsv(tmp_path, cohort, 0).read_text().splitlines()[:-5]) + "\n")
    files[-1] = ("short", short)
    with pytest.raises(InputError, match="'short' .* 395 bins"):
        read_sample_sheet(_sheet(tmp_path, files))


def test_fractional_counts_and_merged_windows_are_refused(tmp_path, cohort):
    frac = bedgraph(tmp_path, cohort, 0, values=cohort.counts[:, 0] + 0.25)
    with pytest.raises(InputError, match="not whole numbers.*not rounded.*--depth-to-counts"):
        read_counts(frac, min_samples=1)
    merged_runs = tmp_path / "runs.bedGraph"
    merged_runs.write_text("chr1\t0\t1000\t5\nchr1\t1000\t3000\t7\nchr1\t3000\t4000\t2\n")
    with pytest.raises(InputError, match="not fixed windows.*2000 bp wide"):
        read_counts(merged_runs, min_samples=1)
    with pytest.raises(InputError, match="holds read counts.*leave it out"):
        read_counts(gatk_tsv(tmp_path, cohort, 0), min_samples=1, depth_to_counts=READ_LENGTH)


def test_foreign_hdf5_and_cnvkit_reference_are_refused(tmp_path, cohort):
    h5py = pytest.importorskip("h5py")
    p = tmp_path / "other.h5"
    with h5py.File(p, "w") as f:
        f["x"] = np.zeros(3)
    with pytest.raises(InputError, match="not GATK CollectReadCounts's.*/counts/values"):
        read_counts(p, min_samples=1)
    ref = tmp_path / "reference.cnn"
    ref.write_text("chromosome\tstart\tend\tgene\tlog2\tdepth\tgc\trmask\tspread\nchr1\t0\t1000\t-\t0\t1\t0.4\t0\t0.1\n")
    with pytest.raises(InputError, match="CNVkit reference"):
        read_counts(ref, min_samples=1)


def test_cli_samples_sheet(tmp_path, cohort, merged):
    files = [(s, mosdepth(tmp_path, cohort, k)) for k, s in enumerate(cohort.sample_names)]
    sheet = _sheet(tmp_path, files)
    cmd = [sys.executable, "-m", "gcnmops", "convert", "--samples", str(sheet), "-o", str(tmp_path / "c.zarr")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 2 and "--depth-to-counts" in r.stderr
    pytest.importorskip("zarr")
    r = subprocess.run(cmd + ["--depth-to-counts", str(READ_LENGTH)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"{merged.n_regions:,} regions x {merged.n_samples} samples" in r.stdout
    from gcnmops.io.store import open_count_store

    store = open_count_store(tmp_path / "c.zarr")
    np.testing.assert_array_equal(store.rows(0, merged.n_regions), merged.counts)


def test_single_method_takes_the_coordinate_flag(tmp_path, cohort, merged):
    from gcnmops.pipeline.family import read_single_sample

    p = tmp_path / "one.tsv"  # 0-based bins without a BED marker: refused, then read as the flag says
    r = merged.ranges
    pd.DataFrame({"seqnames": r["seqnames"], "start": r["start"] - 1, "end": r["end"], "s": merged.counts[:, 0]}).to_csv(
        p, sep="\t", index=False)
    with pytest.raises(InputError, match="--zero-based"):
        read_single_sample(str(p))
    one = read_single_sample(str(p), coordinates="0-based")
    _same_bins(one, merged)


# ------------------------------------------------------------------------------------------- read in parts
PARTS_WRITERS = {**WRITERS, "mosdepth": mosdepth, "cnvkit": cnvkit}


@pytest.mark.parametrize("fmt", sorted(PARTS_WRITERS))
def test_sheet_converted_in_parts_equals_the_whole_read(tmp_path, cohort, fmt):
    """convert --samples reads every file in parts (37 rows: parts end inside chromosomes) to the store of the
    whole read, regions included; each file's parts are its whole read."""
    pytest.importorskip("zarr")
    from gcnmops.io.samplesheet import convert_sample_sheet
    from gcnmops.io.store import open_count_store
    from gcnmops.io.toolformats import read_tool_file, sniff, tool_file_parts

    files = [(s, PARTS_WRITERS[fmt](tmp_path, cohort, k)) for k, s in enumerate(cohort.sample_names)]
    depth = READ_LENGTH if fmt in ("mosdepth", "cnvkit") else None
    whole = read_sample_sheet(_sheet(tmp_path, files), depth_to_counts=depth)
    path, in_parts = convert_sample_sheet(_sheet(tmp_path, files), tmp_path / "c.zarr", rows=37,
                                          depth_to_counts=depth)
    assert in_parts
    store = open_count_store(path)
    np.testing.assert_array_equal(store.rows(0, whole.n_regions), whole.counts)
    assert list(store.sample_names) == list(whole.sample_names)
    pd.testing.assert_frame_equal(store.genomic_ranges().reset_index(drop=True).astype({"seqnames": str}),
                                  whole.ranges.reset_index(drop=True).astype({"seqnames": str}), check_dtype=False)
    one = files[1][1]
    if sniff(one) is None:
        return  # a one-sample table (#Chr Start End <sample>), read in parts by the table reader
    parts = list(tool_file_parts(one, sniff(one), shown=str(one), depth_to_counts=depth, rows=37))
    assert len(parts) == -(-whole.n_regions // 37)
    alone = read_tool_file(one, sniff(one), shown=str(one), depth_to_counts=depth)
    np.testing.assert_array_equal(np.concatenate([p.counts for p in parts]), alone.counts)


def test_parts_keep_the_checks(tmp_path, cohort):
    """A bin that differs in a later part, a file that ends early, and a bedGraph window joined in a later part
    are refused with the row numbers of the whole file."""
    from gcnmops.io.samplesheet import convert_sample_sheet

    files = [(s, gatk_tsv(tmp_path, cohort, k)) for k, s in enumerate(cohort.sample_names)]
    text = files[2][1].read_text().splitlines(True)
    header = sum(line.startswith(("@", "CONTIG")) for line in text)
    f = text[header + 300].split("\t")
    shifted = text[:header + 300] + ["\t".join([f[0], str(int(f[1]) + 5)] + f[2:])] + text[header + 301:]
    files[2][1].write_text("".join(shifted))
    with pytest.raises(InputError, match=r"its bin 301 is"):
        convert_sample_sheet(_sheet(tmp_path, files), tmp_path / "a.zarr", rows=37)
    files[2][1].write_text("".join(text[:header + 350]))
    with pytest.raises(InputError, match=r"has 350 bins"):
        convert_sample_sheet(_sheet(tmp_path, files), tmp_path / "b.zarr", rows=37)
    assert not (tmp_path / "a.zarr").exists() and not (tmp_path / "b.zarr").exists()
    seq, start, end = _bins(cohort, True)
    end = end.copy()
    end[100] += 1000  # a joined window inside the third part
    p = tmp_path / "x.bedGraph"
    p.write_text("".join(f"{a}\t{b}\t{c}\t1\n" for a, b, c in zip(seq, start, end)))
    from gcnmops.io.toolformats import BEDGRAPH, tool_file_parts

    with pytest.raises(InputError, match=r"data row 101,"):
        list(tool_file_parts(p, BEDGRAPH, shown=str(p), rows=37))


def test_sheet_conversion_memory_is_one_part(tmp_path, monkeypatch):
    """Cohorts of GATK-SV per-sample files converted in parts (store chunks made small): Python's peak allocation
    (tracemalloc) grows with the rows by far less than the matrix does (by the regions, not the counts)."""
    pytest.importorskip("zarr")
    import gzip
    import tracemalloc

    import gcnmops.io.store as store
    from gcnmops.io.samplesheet import convert_sample_sheet

    monkeypatch.setattr(store, "CHUNK_BYTES", 1 << 18)
    n, rng = 32, np.random.default_rng(1)

    def peak(m: int) -> int:
        folder = tmp_path / str(m)
        folder.mkdir()
        starts = np.arange(m, dtype=np.int64) * 100
        files = []
        for k in range(n):
            body = "".join(f"chr1\t{s}\t{s + 100}\t{v}\n" for s, v in zip(starts.tolist(),
                                                                          rng.poisson(40, m).tolist()))
            path = folder / f"s{k}.RD.txt.gz"
            with gzip.open(path, "wt", compresslevel=1) as fh:
                fh.write(f"#Chr\tStart\tEnd\ts{k}\n" + body)
            files.append((f"s{k}", path))
        sheet = _sheet(folder, files)
        tracemalloc.start()
        try:
            _, in_parts = convert_sample_sheet(sheet, folder / "c.zarr", rows=4096)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            assert in_parts

    small, large = peak(32_768), peak(65_536)  # files past the text parser's read buffer
    matrix_growth = (65_536 - 32_768) * n * 8
    assert large - small < matrix_growth / 2, (small, large, matrix_growth)
