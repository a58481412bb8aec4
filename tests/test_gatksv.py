"""GATK-SV's cn.MOPS step (gcnmops.gatksv) against the goldens of the real scripts (../shared/golden/gatksv): every
pass's GFF (but its ##date line) and every CleanCNMops output, byte for byte; the scripts' interfaces."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gcnmops.exact.rformat import as_character
from gcnmops.gatksv import shelltools

_GOLDEN = Path(os.environ.get("GCNMOPS_GOLDEN_DIR", Path(__file__).resolve().parents[2] / "shared" / "golden"))
GOLD = _GOLDEN / "gatksv" / "simA"
if not GOLD.is_dir():
    GOLD = Path("/work/shared/golden/gatksv/simA")
needs_golden = pytest.mark.skipif(not GOLD.is_dir(), reason="GATK-SV goldens not found")
INPUTS = GOLD / "inputs"
CALLS = {"header": dict(r1=3, r2=10, stitch=False), "large": dict(r1=1000, r2=100, stitch=True)}
pytest.importorskip("pysam")


def _no_date(text: str) -> str:
    return "".join(line for line in text.splitlines(True) if not line.startswith("##date "))


def _gunzip(path: Path) -> str:
    with gzip.open(path, "rt") as fh:
        return fh.read()


@pytest.fixture(scope="module")
def calls(tmp_path_factory):
    """Both CNMOPS calls of GatherBatchEvidence run by `gcnmops gatk-sv cnmops` (CPU)."""
    out = {}
    for prefix, c in CALLS.items():
        folder = tmp_path_factory.mktemp(prefix)
        args = [sys.executable, "-m", "gcnmops", "gatk-sv", "cnmops", "--bincov-matrix",
                str(INPUTS / "simA.bincov.bed.gz"), "--chrom-file", str(INPUTS / "chrom_file.fai"), "--allo-file",
                str(INPUTS / "allo_file.fai"), "--ped-file", str(INPUTS / "simA.ped"), "--exclude-list",
                str(INPUTS / "exclude_list.bed"), "--r1", str(c["r1"]), "--r2", str(c["r2"]), "--batch", "simA",
                "--prefix", prefix, "-o", str(folder), "--backend", "cpu", "--timings", str(folder / "timings.json")]
        if c["stitch"]:
            args.append("--stitch-and-clean-large-events")
        r = subprocess.run(args, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        out[prefix] = folder
    return out


@needs_golden
@pytest.mark.parametrize("name", sorted(p.name for p in (GOLD / "passes").iterdir()) if GOLD.is_dir() else [])
def test_pass_gff(calls, name):
    r = int(name.rsplit(".r", 1)[1])
    folder = calls["header" if r in (3, 10) else "large"]
    ours = (folder / "passes" / name / "cnMOPS.cnMOPS.gff").read_text()
    gold = (GOLD / "passes" / name / "cnMOPS.cnMOPS.gff").read_text()
    assert _no_date(ours) == _no_date(gold)
    if gold:
        assert f"##date {time.strftime('%Y-%m-%d')}\n" in ours
    else:
        assert ours == ""  # the empty-result rule


@needs_golden
def test_timings(calls):
    """--timings: the seconds of the read, all passes, each pass group, the tables, cn.mops and the clean step, and
    the total (on the CPU one pass at a time: the groups add up to the passes' wall time)."""
    t = json.loads((calls["header"] / "timings.json").read_text())
    assert set(t) == {"read", "passes", "MR2", "MR1", "NR2", "NR1", "FR2", "FR1", "tables", "cn.mops", "clean",
                      "total"}
    groups = sum(t[g] for g in ("MR2", "MR1", "NR2", "NR1", "FR2", "FR1"))
    assert t["tables"] + t["cn.mops"] <= groups + 0.01  # a group's passes: their tables, cn.mops and writing
    assert groups <= t["passes"] + 0.01
    assert 0 < t["read"] + t["passes"] + t["clean"] <= t["total"]


@needs_golden
def test_passes_run_together_write_what_one_at_a_time_writes(tmp_path, monkeypatch, capsys):
    """Passes run two at a time (as on a GPU: here two CPU threads) write the goldens' GFFs; each pass's log reaches
    stderr whole; a pass that runs out of device memory beside another runs again alone, with the same GFF."""
    from gcnmops.gatksv import cnmops
    from gcnmops.gatksv.intervals import read_bed
    from gcnmops.gatksv.matrix import read_depth_matrix

    matrix = read_depth_matrix(INPUTS / "simA.bincov.bed.gz")
    bed = read_bed(INPUTS / "exclude_list.bed")
    groups = cnmops.call_passes(cnmops.read_contigs(INPUTS / "chrom_file.fai"),
                                cnmops.read_contigs(INPUTS / "allo_file.fai"), 3, 10)
    passes = [p for g in groups.values() for p in g]
    monkeypatch.setattr(cnmops, "pass_slots", lambda backend, devices=None, per_device=2: [None, None])
    run_pass, failed = cnmops.run_pass, []

    def flaky(matrix, p, *args, **kwargs):
        kwargs["out"].write(f"log of {p.name}\n")
        if p == passes[1] and not failed:
            failed.append(p)
            raise MemoryError("out of memory (simulated)")
        return run_pass(matrix, p, *args, **kwargs)

    monkeypatch.setattr(cnmops, "run_pass", flaky)
    timings: dict = {}
    done = cnmops.run_passes(matrix, passes, INPUTS / "simA.ped", bed, tmp_path, backend="cpu", timings=timings)
    assert set(done) == set(passes) and failed == [passes[1]]
    for p in passes:
        assert _no_date(done[p].read_text()) == _no_date((GOLD / "passes" / p.name / "cnMOPS.cnMOPS.gff").read_text())
        assert timings[p.name] > 0
    err = capsys.readouterr().err
    assert err.count(f"log of {passes[1].name}\n") == 1  # the failed attempt's log is dropped, the rerun's kept
    assert all(err.count(f"log of {p.name}\n") == 1 for p in passes)


@needs_golden
def test_a_matrix_too_large_to_hold_as_text_is_read_the_same(monkeypatch):
    """Above STREAM_TEXT_SHARE of the available memory, the matrix's lines are counted first and its text parsed
    as it is inflated: the same matrix."""
    from gcnmops.gatksv import matrix as mx

    held = mx.read_depth_matrix(INPUTS / "simA.bincov.bed.gz", threads=2)
    monkeypatch.setattr(mx, "STREAM_TEXT_SHARE", 0.0)
    assert mx._streamed(INPUTS / "simA.bincov.bed.gz")
    streamed = mx.read_depth_matrix(INPUTS / "simA.bincov.bed.gz", threads=2)
    assert streamed.header == held.header and streamed.samples == held.samples
    for name in ("contig", "start", "end", "base"):
        np.testing.assert_array_equal(getattr(streamed, name), getattr(held, name))


@needs_golden
def test_passes_run_largest_first():
    """Work = the contig's bins / r x its samples: chr21 (normal, r3) first, chrY's male pass at r10 last."""
    from gcnmops.gatksv import cnmops
    from gcnmops.gatksv.matrix import read_depth_matrix

    matrix = read_depth_matrix(INPUTS / "simA.bincov.bed.gz")
    groups = cnmops.call_passes(cnmops.read_contigs(INPUTS / "chrom_file.fai"),
                                cnmops.read_contigs(INPUTS / "allo_file.fai"), 3, 10)
    passes = list(dict.fromkeys(p for g in groups.values() for p in g))
    order = cnmops.largest_first(matrix, passes, INPUTS / "simA.ped")
    assert sorted(order, key=passes.index) == passes
    bins = {c: len(matrix.rows_of([c])) for c in matrix.contig_names()}
    n, males = len(matrix.samples), len(cnmops.ped_samples(INPUTS / "simA.ped", "1"))
    work = [bins[p.contig] / p.r * (n if p.mode == "normal" else males if p.mode == "1" else n - males)
            for p in order]
    assert work == sorted(work, reverse=True) and work[0] > work[-1]


@needs_golden
@pytest.mark.gpu
def test_passes_two_per_gpu_write_the_goldens(tmp_path):
    """Two passes at a time on one GPU (cuda/config.py's PASSES_PER_DEVICE), each on its own host thread, memory
    pool and streams, write the goldens' GFFs, run after run."""
    from gcnmops.gatksv import cnmops
    from gcnmops.gatksv.intervals import read_bed
    from gcnmops.gatksv.matrix import read_depth_matrix

    if len(cnmops.pass_slots("gpu", None, 2)) != 2:
        pytest.skip("numba's threading layer runs one parallel region at a time (workqueue)")
    matrix = read_depth_matrix(INPUTS / "simA.bincov.bed.gz")
    bed = read_bed(INPUTS / "exclude_list.bed")
    groups = cnmops.call_passes(cnmops.read_contigs(INPUTS / "chrom_file.fai"),
                                cnmops.read_contigs(INPUTS / "allo_file.fai"), 3, 10)
    passes = list(dict.fromkeys(p for g in groups.values() for p in g))
    for k in range(3):
        done = cnmops.run_passes(matrix, passes, INPUTS / "simA.ped", bed, tmp_path / str(k), backend="gpu",
                                 per_device=2)
        for p in passes:
            got = _no_date(done[p].read_text())
            assert got == _no_date((GOLD / "passes" / p.name / "cnMOPS.cnMOPS.gff").read_text()), (k, p.name)


@needs_golden
@pytest.mark.parametrize("prefix", list(CALLS))
@pytest.mark.parametrize("cnv", ["DEL", "DUP"])
def test_clean_outputs(calls, prefix, cnv):
    name = f"simA.{cnv}.{prefix}.bed.gz"
    assert _gunzip(calls[prefix] / name) == _gunzip(GOLD / "clean" / prefix / name)
    assert (calls[prefix] / f"{name}.tbi").is_file()
    if prefix == "large":
        pre = f"simA.{cnv}.large.prestitch.bed"
        assert (calls[prefix] / pre).read_text() == (GOLD / "clean" / prefix / pre).read_text()


@needs_golden
def test_workflow_interface(tmp_path):
    """cnMOPS_workflow.sh's interface on a sex pass's RD.txt, as CNSampleNormal calls it."""
    from gcnmops.gatksv.matrix import ped_samples, print_sv_evidence, read_depth_matrix, sex_columns

    m = print_sv_evidence(read_depth_matrix(INPUTS / "simA.bincov.bed.gz"), "chrX")
    m = sex_columns(m, ped_samples(INPUTS / "simA.ped", "2"), "chrX.2")
    rd = tmp_path / "chrX.2.RD.txt"
    rd.write_text("\n".join(m.lines()) + "\n")
    ex = str(INPUTS / "exclude_list.bed")
    r = subprocess.run([sys.executable, "-m", "gcnmops", "gatk-sv", "workflow", "-S", ex, "-x", ex, "-r", "10", "-o",
                        str(tmp_path), "-M", str(rd), "--backend", "cpu"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "STATUS | " in r.stdout and "REBINNING COVERAGE MATRIX..." in r.stdout
    gold = GOLD / "passes" / "chrX.2.r10"
    assert _gunzip(tmp_path / "cnMOPS.compressed_matrix.bed.gz") == _gunzip(gold / "cnMOPS.compressed_matrix.bed.gz")
    assert _no_date((tmp_path / "calls" / "cnMOPS.cnMOPS.gff").read_text()) == \
        _no_date((gold / "cnMOPS.cnMOPS.gff").read_text())
    assert (tmp_path / "GFFs.list").read_text() == f"{tmp_path}/calls/cnMOPS.cnMOPS.gff\n"


@needs_golden
def test_runcnmops_interface(tmp_path):
    """runcnMOPS.R's interface: a GFF, or status 1 with calcIntegerCopyNumbers' message (the empty rule)."""
    base = [sys.executable, "-m", "gcnmops", "gatk-sv", "runcnmops", "--backend", "cpu", "-I", "cnMOPS"]
    r = subprocess.run(base + [str(GOLD / "passes/chrY.1.r100/cnMOPS.compressed_matrix.bed.gz"), str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _no_date((tmp_path / "cnMOPS.cnMOPS.gff").read_text()) == \
        _no_date((GOLD / "passes/chrY.1.r100/cnMOPS.cnMOPS.gff").read_text())
    (tmp_path / "cnMOPS.cnMOPS.gff").unlink()
    r = subprocess.run(base + [str(GOLD / "passes/chrY.1.r1000/cnMOPS.compressed_matrix.bed.gz"), str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "No CNV regions in result object" in r.stderr
    assert not (tmp_path / "cnMOPS.cnMOPS.gff").exists()


def test_runcnmops_rules(tmp_path, capsys):
    """NA cells read as 0, median-0 samples excluded with the script's message, 0-based starts kept as they are."""
    from gcnmops.gatksv.matrix import read_depth_matrix
    from gcnmops.gatksv.rebin import raw_table
    from gcnmops.gatksv.runcnmops import count_data

    p = tmp_path / "m.bed"
    rows = ["#Chr\tStart\tEnd\ta\tb\tzero\tc"] + [f"chr1\t{i * 100}\t{(i + 1) * 100}\t{10 + i}\t{'NA' if i == 2 else 7}"
                                                  f"\t0\t{i % 5}" for i in range(6)]
    p.write_text("\n".join(rows) + "\n")
    data = count_data(raw_table(read_depth_matrix(p)))
    assert "\nEXCLUDING SAMPLES DUE TO NO COVERAGE:\nzero" == capsys.readouterr().out
    assert data.sample_names == ["a", "b", "c"]
    assert data.counts[2, 1] == 0.0  # NA -> 0
    assert list(data.ranges["start"][:2]) == [0, 100] and list(data.ranges["end"][:2]) == [100, 200]


def test_as_character_examples():
    assert as_character(-0.998507434913206) == "-0.998507434913206"
    assert as_character(-7.14226847429137e-05) == "-7.14226847429137e-05"
    assert as_character(8.0245013640008e-71) == "8.0245013640008e-71"
    assert as_character(0.0) == "0" and as_character(-0.0) == "0" and as_character(100000.0) == "1e+05"
    assert as_character(123456.0) == "123456" and as_character(0.0001) == "1e-04" and as_character(1 / 3) == \
        "0.333333333333333"


def test_as_character_fast_path_is_the_exact_one():
    """The decimal fast path of R's scientific() gives the long double steps' answer wherever it answers, and
    leaves near-ties, carries and the extreme exponents to them."""
    from gcnmops.exact import rformat

    rng = np.random.default_rng(11)
    vals = np.concatenate([rng.uniform(-1e3, 1e3, 20_000), 10.0 ** rng.uniform(-320, 308, 20_000),
                           np.concatenate([np.round(rng.uniform(0, 1e4, 2_000), d) for d in range(6)]),
                           rng.integers(0, 10 ** 6, 5_000) / 4.0])
    answered = 0
    for v in map(abs, map(float, vals)):
        if v == 0.0:
            continue
        fast = rformat._scientific_fast(v)
        if fast is not None:
            answered += 1
            assert fast == rformat._scientific_exact(v), repr(v)
    assert answered > 0.9 * len(vals)
    for near_tie in (12345678901234.25, 999999999999999.5, 99999999999999.95, 1e-300):  # a tie, carries, tiny
        assert rformat._scientific_fast(near_tie) is None


@pytest.mark.skipif(shutil.which("Rscript") is None, reason="needs R")
def test_as_character_vs_r(tmp_path):
    rng = np.random.default_rng(7)
    vals = list(rng.normal(size=200) * 10.0 ** rng.integers(-40, 40, 200)) + \
        [round(float(a), int(k)) for a, k in zip(rng.normal(size=100), rng.integers(0, 8, 100))] + \
        [1e15, 1e16, 99999.99999999999, 0.1 + 0.2, 123456789012345678.0, 1e-300]
    (tmp_path / "v.txt").write_text("\n".join(repr(float(v)) for v in vals))
    r = subprocess.run(["Rscript", "-e", f"writeLines(as.character(as.numeric(readLines('{tmp_path}/v.txt'))))"],
                       capture_output=True, text=True, check=True)
    assert [as_character(float(v)) for v in vals] == r.stdout.splitlines()


@pytest.mark.skipif(shutil.which("sort") is None, reason="needs GNU sort")
def test_version_sort_vs_gnu_sort():
    names = ["chr1", "chr10", "chr2", "chrX", "chrY", "chr1_KI270706v1_random", "chrUn_GL000195v1", "chrM", "1", "10",
             "2", "X", "chr01", "chr1.5", "a.b.tar.gz", "a.b", ".hidden", "chr~1", "HLA-A*01:01", "chrEBV", ""]
    r = subprocess.run(["sort", "-V"], input="\n".join(names) + "\n", capture_output=True, text=True, check=True,
                       env={"LC_ALL": "C"})
    assert shelltools.version_sorted(names) == r.stdout.splitlines()


@pytest.mark.skipif(shutil.which("bedtools") is None, reason="needs bedtools")
def test_rebin_vs_bedtools_map(tmp_path):
    """compress_cov's sums, '.' cells and window edges against bedtools map (cells bedtools reads oddly included)."""
    from gcnmops.gatksv.matrix import read_depth_matrix
    from gcnmops.gatksv.rebin import compress_cov

    rng = np.random.default_rng(5)
    odd = ["NA", ".", "1e3", "--5", "5-", "1.2.3", "x", "007", "12345678901"]
    lines = ["#Chr\tStart\tEnd\ts1\ts2"]
    for contig, n in (("chr2", 37), ("chr10", 23)):
        for i in range(n):
            cells = [str(int(v)) for v in rng.integers(0, 50, 2)]
            if rng.random() < 0.2:
                cells[int(rng.integers(0, 2))] = odd[int(rng.integers(0, len(odd)))]
            lines.append(f"{contig}\t{100 * i + 40}\t{100 * (i + 1) + 40}\t" + "\t".join(cells))
    p = tmp_path / "m.txt"
    p.write_text("\n".join(lines) + "\n")
    ours = list(compress_cov(read_depth_matrix(p), 3).lines())[1:]
    expect = []
    for contig in ("chr2", "chr10"):  # sort -V order
        rows = [ln for ln in lines[1:] if ln.split("\t")[0] == contig]
        lo, hi = int(rows[0].split("\t")[1]), int(rows[-1].split("\t")[2])
        (tmp_path / "a.bed").write_text("".join(f"{contig}\t{s}\t{s + 300}\n" for s in range(lo, hi + 1, 300)))
        (tmp_path / "b.bed").write_text("\n".join(rows) + "\n")
        r = subprocess.run(["bedtools", "map", "-c", "4,5", "-o", "sum", "-a", str(tmp_path / "a.bed"), "-b",
                            str(tmp_path / "b.bed")], capture_output=True, text=True, check=True)
        expect += [ln for ln in r.stdout.splitlines() if ln.split("\t")[3] != "."]
    assert ours == expect


def test_grep_words_and_bash_read():
    lines = [f"{k:6d}\t{f}" for k, f in enumerate(["#Chr", "Start", "End", "S.1", "S_2", "A-B", "5"], start=1)]
    assert shelltools.grep_words(lines, ["S_2"]) == [4]
    assert shelltools.grep_words(lines, ["S"]) == [3]  # 'S' is a word of 'S.1', not of 'S_2'
    assert shelltools.grep_words(lines, ["5"]) == [4, 6]  # the column number 5 matches too, as in the task
    assert shelltools.grep_words(lines, ["A"]) == [5]
    assert shelltools.grep_words(lines, ["x", ""]) == list(range(7))
    assert shelltools.bash_read("  a\\ b\t") == "a b"


@pytest.mark.parametrize("text", [False, True])
def test_rebinning_with_the_exclusion_equals_excluding_after(tmp_path, text):
    """compress_cov(..., bed=) (only the kept windows summed) gives exclude(compress_cov(...))'s table: bins, sums
    and how the cells are written, with plain-integer cells and with cells bedtools reads otherwise."""
    import pandas as pd

    from gcnmops.gatksv.matrix import read_depth_matrix
    from gcnmops.gatksv.rebin import compress_cov, exclude

    rng = np.random.default_rng(5)
    counts = rng.poisson(20, size=(400, 4)).astype(object)
    if text:
        counts[7, 0], counts[100, 2], counts[101, 0] = "NA", "2.5", "."
    rows = ["#Chr\tStart\tEnd\ta\tb\tc\td"] + [
        f"{'chr1' if i < 300 else 'chr2'}\t{(i % 300) * 100}\t{(i % 300) * 100 + 100}\t" + "\t".join(map(str, counts[i]))
        for i in range(400) if i not in (50, 51, 52, 53)]  # a gap: windows no bin overlaps
    p = tmp_path / "m.bed"
    p.write_text("\n".join(rows) + "\n")
    m = read_depth_matrix(p)
    assert bool(m.text) == text
    bed = pd.DataFrame({"chrom": ["chr1", "chr2", "chr1"], "start": [1000, 2500, 20_000],
                        "end": [2000, 2600, 20_001]})
    folded, after = compress_cov(m, 3, bed=bed), exclude(compress_cov(m, 3), bed)
    assert len(folded.start) < len(compress_cov(m, 3).start)
    for name in ("contig", "start", "end"):
        np.testing.assert_array_equal(getattr(folded, name), getattr(after, name))
    np.testing.assert_array_equal(folded.values, after.values)
    assert list(folded.lines()) == list(after.lines())


def test_awk_key_is_awk_equal():
    """Texts share an awk_key exactly when awk_equal says they are equal (numbers as numbers, blanks around a
    number ignored, strings as strings), so a sample's calls can be looked up instead of scanned for."""
    from gcnmops.gatksv.shelltools import awk_equal, awk_key

    texts = ["1", "1.0", " 1", "01", "+1", "1e0", ".5", "0.50", "-0", "0", "1e400", "2e400", "abc", "Abc", "1a",
             "NA", "nan", "inf", "", " ", "S_1", "1 ", "1\t"]
    for a in texts:
        for b in texts:
            assert (awk_key(a) == awk_key(b)) == awk_equal(a, b), (a, b)


def test_a_call_without_pysam_stops_before_reading(tmp_path, monkeypatch):
    """The clean outputs need pysam: a call says so before reading the matrix and running its passes (it used to
    say it after them, a whole call's work later)."""
    from gcnmops.errors import InputError
    from gcnmops.gatksv.cnmops import run_call

    monkeypatch.setitem(sys.modules, "pysam", None)
    with pytest.raises(InputError, match=r"needs pysam"):
        run_call(tmp_path / "absent.bed.gz", tmp_path / "c", tmp_path / "a", tmp_path / "p", tmp_path / "e", r1=3,
                 r2=10, batch="B", prefix="header", outdir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_contig_runs_and_overlap_on_interleaved_contigs():
    """Rows of a contig found from runs of equal names (one comparison per row) are the rows equal to it, in
    order, whether or not the contigs come in one run each; overlapping() is bedtools' overlap rule on them."""
    from gcnmops.gatksv.intervals import contig_runs, overlapping, rows_of

    rng = np.random.default_rng(5)
    names = np.array(["chr1", "chr2", "chrX", "10", "1e1"], dtype=object)
    chrom = names[np.repeat(rng.integers(0, 5, 40), rng.integers(1, 30, 40))]
    runs = contig_runs(chrom)
    for want in (["chr1"], ["chrX", "10"], ["nope"], []):
        np.testing.assert_array_equal(rows_of(runs, want), np.flatnonzero(np.isin(chrom, want)))
    start = rng.integers(0, 5000, len(chrom))
    end = start + rng.integers(0, 300, len(chrom))
    bed = pd.DataFrame({"chrom": ["chr1", "chrX", "chr1", "10", "chrY"], "start": [100, 0, 2000, 4000, 0],
                        "end": [400, 1000, 2000, 4500, 10]})
    expect = np.zeros(len(chrom), dtype=bool)
    for c, s, e in bed.itertuples(index=False):
        bs, be = (s - 1, e + 1) if s == e else (s, e)
        zs = np.where(start == end, start - 1, start)
        ze = np.where(start == end, end + 1, end)
        expect |= (chrom == c) & (bs < ze) & (be > zs)
    np.testing.assert_array_equal(overlapping(chrom, start, end, bed), expect)


def test_a_position_beyond_tabix_is_a_clear_error_with_nothing_left(tmp_path):
    """A clean output whose calls lie beyond 2^29 (a .tbi cannot index them, nor can GATK-SV's tabix): an
    InputError naming the limit, and no bgzipped file without its index."""
    pytest.importorskip("pysam")
    from gcnmops.errors import InputError
    from gcnmops.gatksv.files import bgzip

    gz = tmp_path / "b.DEL.bed.gz"
    with pytest.raises(InputError, match="536,870,911"):
        bgzip(gz, ["#chr\tstart\tend", "chr1\t600000000\t600001000"])
    assert not gz.exists() and not (tmp_path / "b.DEL.bed").exists()
    assert bgzip(gz, ["#chr\tstart\tend", "chr1\t500000000\t500001000"]).is_file()
