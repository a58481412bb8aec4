"""Read counting from BAM files (gcnmops.alignments.counting / gcnmops.alignments.bam) against cn.mops's golden counts,
an independent brute-force count, pysam, and (where R is installed) Rsamtools."""
from __future__ import annotations

import gzip
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pysam = pytest.importorskip("pysam", reason="pysam not installed (pip install 'gcnmops[bam]')")

from gcnmops.cli import main  # noqa: E402
from gcnmops.alignments.counting import count_reads, write_counts  # noqa: E402
from gcnmops.errors import InputError  # noqa: E402
from gcnmops.alignments import bam as B  # noqa: E402
from gcnmops.alignments import bamheader, regions  # noqa: E402
from gcnmops.io import read_counts  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GOLDEN_DIR = Path(os.environ.get("GCNMOPS_GOLDEN_DIR", REPO.parent / "shared" / "golden"))
GOLDEN_BAMS = [GOLDEN_DIR / "bam" / f"test{i}.bam" for i in (1, 2, 3)]
needs_golden = pytest.mark.skipif(
    not (GOLDEN_DIR / "bam_counts" / "manifest.json").is_file() or not all(p.is_file() for p in GOLDEN_BAMS),
    reason=f"golden case bam_counts not found under {GOLDEN_DIR} (set GCNMOPS_GOLDEN_DIR)")

FLAG_UNMAPPED, FLAG_SECONDARY, FLAG_QCFAIL, FLAG_DUP, FLAG_SUPP = 0x4, 0x100, 0x200, 0x400, 0x800


def golden_table(name: str) -> pd.DataFrame:
    return pd.read_csv(GOLDEN_DIR / "bam_counts" / f"{name}.tsv", sep="\t", dtype={"seqnames": str})


# --------------------------------------------------------------------------------------------
# helpers: synthetic BAMs
# --------------------------------------------------------------------------------------------
def simulate_reads(refs, n, seed=0):
    """Random reads (ref index, 1-based pos, mapq, flag); positions include each reference's ends."""
    rng = np.random.default_rng(seed)
    lens = np.array([length for _, length in refs])
    ref = rng.integers(0, len(refs), n)
    pos = (rng.random(n) * lens[ref]).astype(np.int64) + 1
    edge = rng.random(n) < 0.05
    pos[edge] = np.where(rng.random(edge.sum()) < 0.5, 1, lens[ref[edge]])
    mapq = rng.choice([0, 1, 2, 37, 60, 255], n, p=[0.1, 0.05, 0.05, 0.2, 0.5, 0.1])
    flag = rng.choice([0, 16, FLAG_DUP, FLAG_SECONDARY, FLAG_SUPP, FLAG_QCFAIL, FLAG_UNMAPPED], n,
                      p=[0.45, 0.3, 0.06, 0.05, 0.04, 0.04, 0.06])
    return ref, pos, mapq, flag


def write_bam(path: Path, refs, reads, *, index=True, unplaced=3, read_len=30, long_read_at=None):
    """Write a coordinate-sorted BAM of ``reads`` (+ ``unplaced`` unmapped reads without reference)."""
    ref, pos, mapq, flag = reads
    order = np.lexsort((pos, ref))
    header = {"HD": {"VN": "1.6", "SO": "coordinate"}, "SQ": [{"SN": n, "LN": int(ln)} for n, ln in refs]}
    qual = pysam.qualitystring_to_array("I" * read_len)
    with pysam.AlignmentFile(str(path), "wb", header=header) as out:
        for k, i in enumerate(order):
            a = pysam.AlignedSegment(out.header)
            a.query_name = f"r{i}"
            a.flag = int(flag[i])
            a.reference_id = int(ref[i])
            a.reference_start = int(pos[i]) - 1
            a.mapping_quality = int(mapq[i])
            length = 70000 if long_read_at is not None and k == long_read_at else read_len
            a.query_sequence = "ACGT" * (length // 4) + "A" * (length % 4)
            a.query_qualities = qual if length == read_len else pysam.qualitystring_to_array("I" * length)
            if not flag[i] & FLAG_UNMAPPED:
                a.cigarstring = f"{length}M"
            out.write(a)
        for u in range(unplaced):
            a = pysam.AlignedSegment(out.header)
            a.query_name = f"u{u}"
            a.flag = FLAG_UNMAPPED
            a.reference_id = -1
            a.reference_start = -1
            a.query_sequence = "A" * read_len
            a.query_qualities = qual
            out.write(a)
    if index:
        pysam.index(str(path))
    return path


def brute_force(ranges: pd.DataFrame, refs, reads, min_mapq=1) -> np.ndarray:
    """Independent oracle: per region, the reads it holds (mapped, mapq >= min_mapq, at pos)."""
    ref, pos, mapq, flag = reads
    names = np.array([n for n, _ in refs], dtype=object)
    ok = ((flag & FLAG_UNMAPPED) == 0) & (mapq >= min_mapq)
    out = np.zeros(len(ranges))
    for i, (s, st, en) in enumerate(ranges[["seqnames", "start", "end"]].itertuples(index=False)):
        out[i] = np.count_nonzero(ok & (names[ref] == s) & (pos >= st) & (pos <= en))
    return out


def rebgzf(src: Path, dst: Path, sizes=(1, 3, 2, 7, 50, 333, 4096, 5, 1000)) -> Path:
    """Recompress a BAM into BGZF blocks of the given (cycled) data sizes, so records straddle
    blocks in every way (even the 4-byte length field), as other writers may produce."""
    data = gzip.open(src).read()
    out = bytearray()
    p, k = 0, 0
    while p < len(data):
        chunk = data[p:p + sizes[k % len(sizes)]]
        p += len(chunk)
        k += 1
        comp = zlib.compressobj(6, zlib.DEFLATED, -15)
        body = comp.compress(chunk) + comp.flush()
        out += struct.pack("<4BI2BH2BHH", 31, 139, 8, 4, 0, 0, 255, 6, 66, 67, 2, 25 + len(body))
        out += body + struct.pack("<II", zlib.crc32(chunk), len(chunk))
    out += bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
    dst.write_bytes(bytes(out))
    return dst


REFS = [("chr1", 100_000), ("chr2", 60_000), ("chrM", 16_569), ("chr10", 20_000)]


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("bams")
    reads = [simulate_reads(REFS, 4000, seed=s) for s in (1, 2)]
    paths = [write_bam(d / f"s{k + 1}.bam", REFS, r) for k, r in enumerate(reads)]
    return d, paths, reads


# --------------------------------------------------------------------------------------------
# golden: cn.mops getReadCountsFromBAM / getSegmentReadCountsFromBAM
# --------------------------------------------------------------------------------------------
@needs_golden
@pytest.mark.parametrize("engine", ["native", "pysam"])
@pytest.mark.parametrize("wl", [5000, 10000])
def test_golden_windows(wl, engine):
    gold = golden_table(f"counts_WL{wl}")
    data = count_reads([str(p) for p in GOLDEN_BAMS], window=wl, engine=engine, progress=False)
    assert data.sample_names == ["test1", "test2", "test3"]
    pd.testing.assert_frame_equal(data.ranges, gold[["seqnames", "start", "end"]], check_dtype=False)
    np.testing.assert_array_equal(data.counts, gold[["test1", "test2", "test3"]].to_numpy(np.float64))
    assert data.counts.dtype == np.float64 and data.counts.flags.f_contiguous


@needs_golden
@pytest.mark.parametrize("engine", ["native", "pysam"])
def test_golden_segments(engine):
    gold = golden_table("segment_counts")
    data = count_reads(GOLDEN_BAMS, regions=gold[["seqnames", "start", "end"]], engine=engine, progress=False)
    pd.testing.assert_frame_equal(data.ranges, gold[["seqnames", "start", "end"]], check_dtype=False)
    np.testing.assert_array_equal(data.counts, gold[["test1", "test2", "test3"]].to_numpy(np.float64))


@needs_golden
def test_golden_segments_from_bed(tmp_path):
    gold = golden_table("segment_counts")
    bed = tmp_path / "regions.bed"
    bed.write_text("track name=x\n# comment\n" + "".join(
        f"{s}\t{a - 1}\t{b}\tname{i}\n" for i, (s, a, b) in enumerate(gold[["seqnames", "start", "end"]].itertuples(
            index=False))))
    data = count_reads(GOLDEN_BAMS, regions=bed, progress=False)
    np.testing.assert_array_equal(data.ranges["start"], gold["start"])
    np.testing.assert_array_equal(data.counts, gold[["test1", "test2", "test3"]].to_numpy(np.float64))


@needs_golden
def test_golden_zlib_fallback_and_threads(monkeypatch):
    gold = golden_table("counts_WL5000")
    monkeypatch.setattr(B, "_inflate", lambda data, isize: zlib.decompress(data, -15, max(isize, 1)))
    monkeypatch.setattr(B, "_crc32", zlib.crc32)
    for threads in (1, 3):
        data = count_reads(GOLDEN_BAMS, window=5000, threads=threads, progress=False)
        np.testing.assert_array_equal(data.counts, gold[["test1", "test2", "test3"]].to_numpy(np.float64))


@needs_golden
def test_golden_counting_rule():
    """The golden totals are mapped reads with mapq >= 1, duplicates included (checked with pysam)."""
    gold = golden_table("counts_WL5000")
    for p, col in zip(GOLDEN_BAMS, ["test1", "test2", "test3"]):
        with pysam.AlignmentFile(str(p)) as f:
            reads = list(f.fetch(until_eof=True))
        expect = sum(1 for r in reads if not r.is_unmapped and r.mapping_quality >= 1)
        assert gold[col].sum() == expect
        assert any(r.is_duplicate and r.mapping_quality >= 1 for r in reads)  # so duplicates do count
    # segments count reads by their start position, not by overlap: test1 has 2 reads that start
    # before 60000 and overlap the first region, which cn.mops does not count
    seg = golden_table("segment_counts")
    with pysam.AlignmentFile(str(GOLDEN_BAMS[0])) as f:
        overlapping = sum(1 for r in f.fetch("20", 59_999, 64_999) if r.mapping_quality >= 1)
    assert seg["test1"][0] == 458 and overlapping == 460


# --------------------------------------------------------------------------------------------
# windows
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("length,wl,starts,ends", [
    (100, 100, [0], [100]),  # WL >= L: [0, L]
    (100, 1000, [0], [100]),
    (100, 10, list(range(1, 92, 10)), list(range(10, 91, 10)) + [99]),  # L multiple of WL: L - 1
    (101, 10, list(range(1, 102, 10)), list(range(10, 101, 10)) + [101]),  # last window [101, 101]
    (105, 10, list(range(1, 102, 10)), list(range(10, 101, 10)) + [105]),
    (2, 1, [1], [1]),
])
def test_reference_windows(length, wl, starts, ends):
    s, e = regions.reference_windows(length, wl)
    assert s.tolist() == starts and e.tolist() == ends


def test_windows_against_brute_force(synth):
    d, paths, reads = synth
    for wl in (997, 5000, 16_569, 20_000, 200_000):
        data = count_reads(paths, window=wl, progress=False)
        assert data.sample_names == ["s1", "s2"]
        assert list(dict.fromkeys(data.ranges["seqnames"])) == [n for n, _ in REFS]
        for j in range(2):
            np.testing.assert_array_equal(data.counts[:, j], brute_force(data.ranges, REFS, reads[j]))
    # chrM is 16569 bp: with WL 16569 it is the single window [0, 16569]; chr10 (20000) with WL 5000 loses its last bp
    data = count_reads(paths, window=16_569, ref_seq_names=["chrM"], progress=False)
    assert data.ranges[["start", "end"]].values.tolist() == [[0, 16_569]]
    data = count_reads(paths, window=5000, ref_seq_names="chr10", progress=False)
    assert data.ranges["end"].tolist() == [5000, 10000, 15000, 19999]


def test_min_mapq_and_engines_agree(synth):
    d, paths, reads = synth
    for q in (0, 1, 30, 255):
        nat = count_reads(paths, window=3000, min_mapq=q, progress=False)
        pys = count_reads(paths, window=3000, min_mapq=q, engine="pysam", progress=False)
        np.testing.assert_array_equal(nat.counts, pys.counts)
        np.testing.assert_array_equal(nat.counts[:, 0], brute_force(nat.ranges, REFS, reads[0], min_mapq=q))


def test_reference_subset_with_and_without_index(synth, tmp_path):
    d, paths, reads = synth
    noidx = tmp_path / "noidx.bam"
    shutil.copy(paths[0], noidx)
    subset = ["chr2", "chr10"]  # not header order: output follows ref_seq_names
    a = count_reads([paths[0]], ref_seq_names=subset, window=4000, progress=False)
    b = count_reads([noidx], ref_seq_names=subset, window=4000, progress=False)
    assert list(dict.fromkeys(a.ranges["seqnames"])) == subset
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_array_equal(a.counts[:, 0], brute_force(a.ranges, REFS, reads[0]))
    full = count_reads([noidx], window=4000, progress=False)  # no index needed for the whole file
    np.testing.assert_array_equal(full.counts[:, 0], brute_force(full.ranges, REFS, reads[0]))


def test_records_straddling_blocks(synth, tmp_path):
    """Tiny BGZF blocks (records split anywhere), with and without an index, and a >64 KiB record."""
    d, paths, reads = synth
    small = rebgzf(paths[0], tmp_path / "small.bam")
    expect = count_reads([paths[0]], window=2500, progress=False).counts
    for workers in (1, 4):
        got = count_reads([small], window=2500, threads=workers, progress=False)
        np.testing.assert_array_equal(got.counts, expect)
    pysam.index(str(small))
    for subset in (["chr2"], ["chrM", "chr2"], ["chr1", "chr10"]):
        got = count_reads([small], ref_seq_names=subset, window=2500, progress=False)
        np.testing.assert_array_equal(got.counts[:, 0], brute_force(got.ranges, REFS, reads[0]))
    long_reads = simulate_reads(REFS, 300, seed=9)
    big = write_bam(tmp_path / "long.bam", REFS, long_reads, long_read_at=150)
    got = count_reads([big], window=7000, progress=False)
    np.testing.assert_array_equal(got.counts[:, 0], brute_force(got.ranges, REFS, long_reads))


@pytest.mark.parametrize("group", [1, 3, 7, 64])
def test_parallel_speculative_scan(synth, tmp_path, monkeypatch, group):
    """Pool tasks scan their blocks on the guess that a record starts at their first byte; the guess
    holds for htslib-written files and fails (rescanned in order) when records straddle tasks."""
    d, paths, reads = synth
    monkeypatch.setattr(B, "_group_size", lambda nbytes, n_threads: group)
    small = rebgzf(paths[0], tmp_path / "small.bam", sizes=(5000, 17, 3000, 1, 64000))
    for p in (paths[0], small):
        got = count_reads([p], window=1500, threads=3, progress=False)
        np.testing.assert_array_equal(got.counts[:, 0], brute_force(got.ranges, REFS, reads[0]))
    # unsorted records: runs are merged with np.add.at (intervals repeat across runs)
    shuffled = tmp_path / "unsorted.bam"
    with pysam.AlignmentFile(str(paths[0])) as src, pysam.AlignmentFile(str(shuffled), "wb", template=src) as out:
        recs = list(src.fetch(until_eof=True))
        for i in np.random.default_rng(3).permutation(len(recs)):
            out.write(recs[i])
    got = count_reads([shuffled], window=1500, threads=3, progress=False)
    np.testing.assert_array_equal(got.counts[:, 0], brute_force(got.ranges, REFS, reads[0]))


def test_regions_overlapping_and_unsorted(synth, tmp_path):
    d, paths, reads = synth
    regions = pd.DataFrame({"seqnames": ["chr2", "chr1", "chr1", "chr1", "chrM", "chr2"],
                            "start": [1, 50_000, 40_000, 100_000, 0, 59_999],
                            "end": [60_000, 60_000, 55_000, 100_000, 16_569, 60_000]})
    data = count_reads(paths, regions=regions, progress=False)
    # make_count_data groups a chromosome's rows (stably): chr2 rows first, then chr1, then chrM; within a
    # chromosome, regions are sorted by start (then end), as the segmentation needs
    order = [0, 5, 2, 1, 3, 4]
    exp = regions.iloc[order].reset_index(drop=True)
    pd.testing.assert_frame_equal(data.ranges, exp, check_dtype=False)
    for j in range(2):
        np.testing.assert_array_equal(data.counts[:, j], brute_force(exp, REFS, reads[j]))
    tsv = tmp_path / "regions.tsv"
    regions.rename(columns={"seqnames": "chrom"}).to_csv(tsv, sep="\t", index=False)
    np.testing.assert_array_equal(count_reads(paths, regions=tsv, progress=False).counts, data.counts)


# --------------------------------------------------------------------------------------------
# Rsamtools agrees on the rule (mapq 255 counts, unmapped never)
# --------------------------------------------------------------------------------------------
@pytest.mark.r
def test_rsamtools_agrees(synth, tmp_path):
    if shutil.which("Rscript") is None:
        pytest.skip("Rscript not found")
    probe = subprocess.run(["Rscript", "-e", "suppressMessages(library(Rsamtools))"], capture_output=True)
    if probe.returncode:
        pytest.skip("Rsamtools not installed")
    d, paths, reads = synth
    script = tmp_path / "count.R"
    script.write_text(R_COUNT_SCRIPT)
    out = tmp_path / "r.tsv"
    subprocess.run(["Rscript", str(script), str(paths[0]), "3000", str(out)], check=True, capture_output=True)
    r = pd.read_csv(out, sep="\t", dtype={"seqnames": str})
    ours = count_reads([paths[0]], window=3000, progress=False)
    pd.testing.assert_frame_equal(ours.ranges, r[["seqnames", "start", "end"]], check_dtype=False)
    np.testing.assert_array_equal(ours.counts[:, 0], r["count"].to_numpy(np.float64))


R_COUNT_SCRIPT = r"""
suppressMessages({library(Rsamtools); library(GenomicRanges)})
a <- commandArgs(TRUE); f <- a[1]; WL <- as.integer(a[2])
tg <- scanBamHeader(f)[[1]]$targets
out <- list()
for (chr in names(tg)) {
  L <- tg[[chr]]
  if (WL >= L) { st <- 0L; en <- L } else {
    if (L %% WL == 0) L <- L - 1L
    st <- seq(1L, L, by = WL); en <- c(st[-1] - 1L, L) }
  x <- scanBam(f, param = ScanBamParam(what = c("pos", "mapq"), which = GRanges(chr, IRanges(1, tg[[chr]]))))[[1]]
  keep <- which(x$mapq >= 1L)
  out[[chr]] <- data.frame(seqnames = chr, start = st, end = en,
                           count = countOverlaps(IRanges(st, en), IRanges(x$pos[keep], width = 1L)))
}
write.table(do.call(rbind, out), a[3], sep = "\t", quote = FALSE, row.names = FALSE)
"""


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
def test_error_missing_and_not_bam(synth, tmp_path):
    d, paths, _ = synth
    with pytest.raises(InputError, match="not found"):
        count_reads([paths[0], tmp_path / "nope.bam"], progress=False)
    with pytest.raises(InputError, match="directory"):
        count_reads([tmp_path], progress=False)
    (tmp_path / "empty.bam").write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        count_reads([tmp_path / "empty.bam"], progress=False)
    (tmp_path / "text.bam").write_text("@HD\tVN:1.6\nr1\t0\tchr1\t1\t60\t*\t*\t0\t0\t*\t*\n")
    with pytest.raises(InputError, match="not a BAM"):
        count_reads([tmp_path / "text.bam"], progress=False)
    with pytest.raises(InputError, match="No BAM files"):
        count_reads([], progress=False)


def test_error_truncated_and_corrupt(synth, tmp_path):
    d, paths, reads = synth
    raw = paths[0].read_bytes()
    (tmp_path / "cut.bam").write_bytes(raw[:-1000])
    with pytest.raises(InputError, match="truncated"):
        count_reads([tmp_path / "cut.bam"], progress=False)
    # only the EOF marker missing (htslib: "EOF marker is absent"): refused, as a file cut at a block boundary
    (tmp_path / "noeof.bam").write_bytes(raw[:-28])
    with pytest.raises(InputError, match="end-of-file block"):
        count_reads([tmp_path / "noeof.bam"], window=5000, progress=False)
    bad = bytearray(raw)
    mid = len(bad) // 2
    bad[mid:mid + 64] = bytes(64)
    (tmp_path / "bad.bam").write_bytes(bytes(bad))
    with pytest.raises(InputError, match="damaged|corrupt|not a BAM"):
        count_reads([tmp_path / "bad.bam"], progress=False)


def test_error_headers_differ(synth, tmp_path):
    d, paths, _ = synth
    few = simulate_reads(REFS[:2], 50)
    other_len = write_bam(tmp_path / "len.bam", [("chr1", 100_000), ("chr2", 60_001), *REFS[2:]], few)
    other_names = write_bam(tmp_path / "names.bam", [("chr1", 100_000), ("chrX", 60_000), *REFS[2:]], few)
    other_order = write_bam(tmp_path / "order.bam", [REFS[1], REFS[0], *REFS[2:]], few)
    with pytest.raises(InputError, match="different lengths"):
        count_reads([paths[0], other_len], progress=False)
    with pytest.raises(InputError, match="different references"):
        count_reads([paths[0], other_names], progress=False)
    with pytest.raises(InputError, match="different order"):
        count_reads([paths[0], other_order], progress=False)


def test_error_arguments(synth, tmp_path):
    d, paths, _ = synth
    with pytest.raises(InputError, match="chr99.*not in the BAM header"):
        count_reads(paths, ref_seq_names=["chr1", "chr99"], progress=False)
    with pytest.raises(InputError, match="more than once"):
        count_reads(paths, ref_seq_names=["chr1", "chr1"], progress=False)
    with pytest.raises(InputError, match="chr99.*not in the BAM header"):
        count_reads(paths, regions=pd.DataFrame({"seqnames": ["chr99"], "start": [1], "end": [10]}), progress=False)
    with pytest.raises(InputError, match="window"):
        count_reads(paths, window=0, progress=False)
    with pytest.raises(InputError, match="sample names"):
        count_reads(paths, sample_names=["a"], progress=False)
    with pytest.raises(InputError, match="unique"):
        count_reads(paths, sample_names=["a", "a"], progress=False)
    with pytest.raises(InputError, match="either regions or ref_seq_names"):
        count_reads(paths, regions=pd.DataFrame({"seqnames": ["chr1"], "start": [1], "end": [10]}),
                    ref_seq_names=["chr1"], progress=False)
    (tmp_path / "bad.bed").write_text("chr1\t10\n")
    with pytest.raises(InputError, match="BED line"):
        count_reads(paths, regions=tmp_path / "bad.bed", progress=False)
    with pytest.raises(InputError, match="Regions file not found"):
        count_reads(paths, regions=tmp_path / "none.bed", progress=False)
    with pytest.raises(InputError, match="min_mapq"):
        count_reads(paths, min_mapq=-1, progress=False)
    with pytest.raises(InputError, match="threads"):
        count_reads(paths, threads=0, progress=False)
    with pytest.warns(DeprecationWarning, match="threads"):  # the former name still works
        assert count_reads(paths, workers=1, window=50_000, progress=False).n_samples == 2


def test_sample_names_and_progress(synth, capsys):
    d, paths, _ = synth
    data = count_reads(paths, sample_names=["x", "y"], window=50_000, progress=True)
    assert data.sample_names == ["x", "y"]
    data = count_reads(str(paths[0]), window=50_000, progress=False)  # one path as a string
    assert data.sample_names == ["s1"] and data.n_samples == 1


# --------------------------------------------------------------------------------------------
# command line: count -> read_counts -> run
# --------------------------------------------------------------------------------------------
def test_cli_count_round_trip(synth, tmp_path):
    d, paths, _ = synth
    out = tmp_path / "counts.tsv"
    proc = subprocess.run([sys.executable, "-m", "gcnmops", "count", *map(str, paths), "--window", "5000",
                           "--threads", "2", "--quiet", "-o", str(out)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "2 samples" in proc.stdout
    expect = count_reads(paths, window=5000, progress=False)
    back = read_counts(out)
    assert back.sample_names == ["s1", "s2"]
    pd.testing.assert_frame_equal(back.genomic_ranges(), expect.genomic_ranges(), check_dtype=False)
    np.testing.assert_array_equal(back.counts, expect.counts)
    assert out.read_text().splitlines()[0] == "seqnames\tstart\tend\ts1\ts2"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    # regions and gzip output
    bed = tmp_path / "r.bed"
    bed.write_text("chr1\t0\t50000\nchr2\t100\t200\n")
    out_gz = tmp_path / "seg.tsv.gz"
    assert main(["count", *map(str, paths), "--regions", str(bed), "--sample-names", "a,b", "--quiet", "--workers", "1",
                 "-o", str(out_gz)]) == 0
    back = read_counts(out_gz)
    assert back.sample_names == ["a", "b"] and back.ranges["start"].tolist() == [1, 101]


def test_cli_count_errors(synth, tmp_path, capsys):
    d, paths, _ = synth
    assert main(["count", str(tmp_path / "missing.bam"), "-o", str(tmp_path / "c.tsv")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["count", str(paths[0]), "--ref-seq-names", "chr1,nope", "-o", str(tmp_path / "c.tsv")]) == 2
    assert "nope" in capsys.readouterr().err
    assert not (tmp_path / "c.tsv").exists()


def test_write_counts_atomic_on_failure(synth, tmp_path, monkeypatch):
    d, paths, _ = synth
    data = count_reads(paths, window=50_000, progress=False)
    out = tmp_path / "c.tsv"
    out.write_text("old")

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", boom)
    with pytest.raises(RuntimeError):
        write_counts(data, out)
    assert out.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["c.tsv"]


# --------------------------------------------------------------------------------------------
# count table formats, CRAM
# --------------------------------------------------------------------------------------------
MAGIC = {".tsv": b"seqnames\t", ".tsv.gz": b"\x1f\x8b", ".parquet": b"PAR1", ".npz": b"PK\x03\x04"}


@pytest.mark.parametrize("ext", list(MAGIC))
def test_count_output_format_by_extension(synth, tmp_path, ext):
    """-o decides the format; gcnmops run reads every one of them back."""
    d, paths, _ = synth
    out = tmp_path / f"counts{ext}"
    assert main(["count", *map(str, paths), "--window", "5000", "--quiet", "-o", str(out)]) == 0
    assert out.read_bytes()[:len(MAGIC[ext])] == MAGIC[ext]
    expect = count_reads(paths, window=5000, progress=False)
    back = read_counts(out)
    assert back.sample_names == ["s1", "s2"]
    pd.testing.assert_frame_equal(back.genomic_ranges(), expect.genomic_ranges(), check_dtype=False)
    np.testing.assert_array_equal(back.counts, expect.counts)
    assert main(["run", str(out), "--backend", "cpu", "--quiet", "--formats", "bed", "-o", str(tmp_path / "o")]) == 0


def test_count_refuses_an_unknown_output_format_before_counting(synth, tmp_path, capsys, monkeypatch):
    import gcnmops.alignments.counting as counting

    d, paths, _ = synth
    monkeypatch.setattr(counting, "count_reads", lambda *a, **k: pytest.fail("counted before checking -o"))
    for name in ("c.bed", "c.csv", "c.txt", "parquet", "c.tsv.bz2"):
        assert main(["count", str(paths[0]), "-o", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error:") and ".tsv, .tsv.gz, .parquet or .npz" in err
    assert main(["count", str(paths[0]), "-o", str(tmp_path / "no" / "c.tsv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def _cram(bam: Path, cram: Path, fasta: Path) -> Path:
    with pysam.AlignmentFile(str(bam)) as src, \
            pysam.AlignmentFile(str(cram), "wc", template=src, reference_filename=str(fasta)) as out:
        for read in src.fetch(until_eof=True):
            out.write(read)
    return cram


@pytest.fixture(scope="module")
def crams(synth, tmp_path_factory):
    d, paths, _ = synth
    c = tmp_path_factory.mktemp("cram")
    rng = np.random.default_rng(3)
    fasta = c / "ref.fa"
    fasta.write_text("".join(f">{name}\n" + "".join(rng.choice(list("ACGT"), length)) + "\n" for name, length in REFS))
    return fasta, [_cram(p, c / (p.stem + ".cram"), fasta) for p in paths]


def test_cram_counts_equal_bam_counts(synth, crams, tmp_path):
    d, paths, reads = synth
    fasta, cram_paths = crams
    assert bamheader.is_cram(cram_paths[0]) and not bamheader.is_cram(paths[0])
    for kwargs in (dict(window=5000), dict(regions=pd.DataFrame({"seqnames": ["chr1", "chr2", "chr1"],
                                                                   "start": [1, 500, 20_000],
                                                                   "end": [30_000, 59_000, 90_000]}))):
        bam = count_reads(paths, progress=False, **kwargs)
        cram = count_reads(cram_paths, reference=fasta, threads=2, progress=False, **kwargs)
        assert cram.sample_names == ["s1", "s2"]
        np.testing.assert_array_equal(cram.counts, bam.counts)
        pd.testing.assert_frame_equal(cram.genomic_ranges(), bam.genomic_ranges())
    mixed = count_reads([paths[0], cram_paths[1]], reference=fasta, window=5000, progress=False)
    np.testing.assert_array_equal(mixed.counts, count_reads(paths, window=5000, progress=False).counts)
    out = tmp_path / "c.parquet"
    assert main(["count", *map(str, cram_paths), "--reference", str(fasta), "--window", "5000", "--quiet",
                 "-o", str(out)]) == 0
    np.testing.assert_array_equal(read_counts(out).counts, count_reads(paths, window=5000, progress=False).counts)


def test_cram_needs_its_reference(synth, crams, tmp_path, capsys):
    fasta, cram_paths = crams
    with pytest.raises(InputError, match="CRAM file.*--reference FASTA"):
        count_reads(cram_paths, progress=False)
    assert main(["count", str(cram_paths[0]), "-o", str(tmp_path / "c.tsv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "--reference" in err and "Traceback" not in err
    with pytest.raises(InputError, match="Reference FASTA not found"):
        count_reads(cram_paths, reference=tmp_path / "none.fa", progress=False)
    with pytest.raises(InputError, match="Cannot read the reference FASTA"):
        count_reads(cram_paths, reference=cram_paths[1], progress=False)
    assert not (tmp_path / "c.tsv").exists()


@needs_golden
def test_golden_counts_from_cram(tmp_path):
    """The golden BAMs as CRAM (against a stand-in reference of the header's length): cn.mops's counts."""
    gold = golden_table("counts_WL5000")
    with pysam.AlignmentFile(str(GOLDEN_BAMS[0])) as bam:
        header = bam.header.to_dict()
        lengths = dict(zip(bam.references, bam.lengths))
    for sq in header["SQ"]:  # the stand-in is not the reference that M5 and UR name
        sq.pop("M5", None)
        sq.pop("UR", None)
    rng = np.random.default_rng(0)
    fasta = tmp_path / "ref.fa"
    with open(fasta, "wb") as fh:
        for name, n in lengths.items():
            fh.write(f">{name}\n".encode() + np.frombuffer(b"ACGT", "S1")[rng.integers(0, 4, n)].tobytes() + b"\n")
    crams = []
    for p in GOLDEN_BAMS:
        crams.append(tmp_path / (p.stem + ".cram"))
        quiet = pysam.set_verbosity(0)  # reads of read groups missing from the header: htslib warns per read
        with pysam.AlignmentFile(str(p)) as src, pysam.AlignmentFile(str(crams[-1]), "wc", header=header,
                                                                     reference_filename=str(fasta)) as out:
            for read in src.fetch(until_eof=True):
                out.write(read)
        pysam.set_verbosity(quiet)
    data = count_reads(crams, window=5000, reference=fasta, progress=False)
    assert data.sample_names == ["test1", "test2", "test3"]
    np.testing.assert_array_equal(data.counts, gold[["test1", "test2", "test3"]].to_numpy(np.float64))


@pytest.mark.parametrize("threads", [1, 3])
def test_inflate_bgzf_kernel_equals_block_by_block(tmp_path, monkeypatch, threads):
    """libdeflate's kernel (groups of blocks inflated without the GIL) and block-by-block inflating give the file's
    bytes; a block whose data, size or CRC32 is damaged is refused with its byte offset by both."""
    from gcnmops.alignments import bam, libdeflate

    if not libdeflate.AVAILABLE:
        pytest.skip("the deflate package (libdeflate) is not installed")
    text = np.random.default_rng(1).integers(48, 58, 300_000, dtype=np.uint8).tobytes()
    src = tmp_path / "plain.gz"
    with gzip.open(src, "wb") as fh:
        fh.write(text)
    good = rebgzf(src, tmp_path / "t.bgz", sizes=(65280, 1, 40000, 0, 777))
    monkeypatch.setattr(bam, "_RUN_BLOCKS", 2)
    got = b"".join(bytes(p) for p in bam.inflate_bgzf(good, threads=threads))
    assert bam.bgzf_inflated_size(good) == len(text)  # every block read: exact
    assert 0.5 * len(text) < bam.bgzf_inflated_size(good, blocks=3) < 2 * len(text)  # from the first three
    assert sum(bam.inflate_bgzf(good, threads=threads, each=len)) == len(text)
    monkeypatch.setattr(libdeflate, "AVAILABLE", False)
    assert got == text == b"".join(bytes(p) for p in bam.inflate_bgzf(good, threads=threads))
    raw = good.read_bytes()
    second = raw.index(b"\x1f\x8b\x08\x04", 1)  # the second block (1 byte of data) starts here
    for where, value, message in ((second + 18, 0xFF, "corrupt"), (second + 18 + 3 + 4, 0, "corrupt|size"),
                                  (second + 18 + 3, 0x55, "CRC32")):
        bad = bytearray(raw)
        bad[where] ^= value if value else 0xFF
        (tmp_path / "bad.bgz").write_bytes(bytes(bad))
        for kernel in (True, False):
            monkeypatch.setattr(libdeflate, "AVAILABLE", kernel)
            with pytest.raises(InputError, match=rf"(?=.*at byte {second}\b)(?=.*({message}))"):
                list(bam.inflate_bgzf(tmp_path / "bad.bgz", threads=threads))
