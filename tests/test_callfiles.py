"""Call files (BED, VCF, SEG) as the tools people use read them: bedtools, tabix, bcftools, vcftools'
vcf-validator, pysam, cyvcf2. Each test that needs a tool skips where it is missing (scripts/setup.sh installs
bcftools, tabix, vcftools and bedtools; pysam comes with the [bam] and [test] extras; pip install cyvcf2).
"""
from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

import gcnmops
from gcnmops.errors import InputError
from gcnmops.calls import dispersion, quality
from gcnmops.outputs import bgzf, callfiles, pipes
from gcnmops.outputs.writers import write_result
from golden import array, case_names, manifest, table

try:
    import pysam
except ImportError:  # pragma: no cover - optional
    pysam = None
try:
    import cyvcf2
except ImportError:  # pragma: no cover - optional
    cyvcf2 = None

needs_pysam = pytest.mark.skipif(pysam is None, reason="pysam not installed (pip install pysam)")
TOOLS = {name: shutil.which(name) for name in ("bedtools", "bcftools", "tabix", "vcf-validator")}


def needs(tool):
    return pytest.mark.skipif(TOOLS[tool] is None, reason=f"{tool} not installed (scripts/setup.sh, apt-get)")


def run(tool, *args) -> str:
    """stdout of a tool that must succeed and print nothing on stderr but vcf-validator's reference note."""
    proc = subprocess.run([TOOLS[tool], *map(str, args)], capture_output=True, text=True)
    assert proc.returncode == 0, f"{tool} {args}: {proc.stderr}"
    err = [ln for ln in proc.stderr.splitlines() if ln.strip() and "'reference' not present" not in ln]
    assert not err, f"{tool} {args}: {proc.stderr}"
    return proc.stdout


def lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


@pytest.fixture(scope="module")
def written(results, tmp_path_factory):
    out = tmp_path_factory.mktemp("calls")
    write_result(results[1], out, formats=["bed", "vcf", "seg"])
    return out


@pytest.fixture(scope="module")
def written_raw(results, tmp_path_factory):
    out = tmp_path_factory.mktemp("calls_raw")
    write_result(results[0], out, formats=["bed", "vcf"])
    return out


def _bed(path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", header=None, dtype={0: str, 3: str, 8: str}, keep_default_na=False)


def _non_normal_cells(r, main="CN2") -> list[tuple[int, str]]:
    """(cnvr row, sample) of every CNV-region cell whose copy number is not the normal one."""
    return [(i, s) for i in range(len(r.cnvr)) for s in r.sample_names if r.cnvr[s].iat[i] != main]


def _records(path):
    with pysam.VariantFile(str(path)) as vcf:
        return vcf.header.copy(), list(vcf)


# ------------------------------------------------------------------------------------------------ window index
def _random_regions(rng) -> pd.DataFrame:
    """Regions of five kinds of chromosome: a tiling in order (kept as views), windows in start order whose ends
    step back (nested ones, equal starts), windows in no order, a chromosome in two blocks of rows, one window."""
    parts = []
    n = int(rng.integers(20, 60))
    s = np.arange(n) * 1000 + 1
    parts.append(("tiled", s, s + 999))
    s = np.sort(rng.integers(1, 30_000, n))
    s[5:8] = s[5]  # equal starts
    parts.append(("nested", s, s + rng.integers(0, 4000, n)))
    s = rng.integers(1, 30_000, n)
    parts.append(("shuffled", s, s + rng.integers(0, 4000, n)))
    s = np.arange(n) * 700 + 1
    parts.append(("split", s[: n // 2], s[: n // 2] + 999))
    parts.append(("single", np.array([500]), np.array([1499])))
    parts.append(("split", s[n // 2:], s[n // 2:] + 999))
    return pd.DataFrame({"seqnames": np.concatenate([[c] * len(a) for c, a, _ in parts]),
                         "start": np.concatenate([a for _, a, _ in parts]),
                         "end": np.concatenate([b for _, _, b in parts])})


@pytest.mark.parametrize("seed", range(5))
def test_window_index_matches_a_scan_of_every_window(seed):
    """The windows overlapping a range (rows by start, ties by row; counts), from the index of the BED, VCF and SEG
    writers, equal a scan of every window, whatever the windows' order, nesting and blocks."""
    rng = np.random.default_rng(seed)
    gr = _random_regions(rng)
    index = quality._Windows(gr)
    chrom, start, end = gr["seqnames"].to_numpy(), gr["start"].to_numpy(), gr["end"].to_numpy()
    assert index.by_chrom["tiled"].rows is None and index.by_chrom["nested"].rows is None  # views of gr's rows
    assert index.by_chrom["shuffled"].rows is not None and index.by_chrom["split"].rows is not None
    assert index.lengths() == {c: int(end[chrom == c].max()) for c in pd.unique(chrom)}
    queries = []
    for c in [*pd.unique(chrom), "absent"]:
        q_start = rng.integers(-2000, 40_000, 200)
        q_end = q_start + rng.integers(0, 6000, 200)
        q_end[:20] = q_start[:20]  # single bases
        counts = index.overlap_counts(c, q_start, q_end)
        for a, b, k in zip(q_start, q_end, counts):
            hit = np.flatnonzero((chrom == c) & (start <= b) & (end >= a))
            expect = hit[np.argsort(start[hit], kind="stable")]
            assert k == hit.size
            assert np.array_equal(index.rows(c, int(a), int(b)), expect)
            queries.append((c, a, b, expect))
    # every range at once, the chromosomes interleaved: the same rows in the ranges' order
    order = rng.permutation(len(queries))
    sets = index.row_sets(*(np.array([queries[i][j] for i in order]) for j in range(3)))
    assert len(sets) == len(queries)
    for i, rows in zip(order, sets):
        assert rows.dtype == np.int64 and np.array_equal(rows, queries[i][3])


# ------------------------------------------------------------------------------------------------ BED
def test_bed_files_are_bed9_sorted_with_the_plots_colours(written, results):
    r = results[1]
    cnvs = _bed(written / "cnvs.bed")
    assert cnvs.shape == (len(r.cnvs), 9)  # BED9: no extra columns (mean, median, CN are in cnvs.tsv)
    assert (cnvs[1] == cnvs[6]).all() and (cnvs[2] == cnvs[7]).all()  # thickStart/End = the CNV
    assert (cnvs[1] < cnvs[2]).all() and (cnvs[1] >= 0).all() and (cnvs[5] == ".").all()
    assert cnvs[4].between(0, 1000).all() and cnvs[4].dtype.kind == "i"
    mine = set(zip(cnvs[0], cnvs[1] + 1, cnvs[2], cnvs[3]))  # 0-based half-open starts
    assert mine == set(zip(r.cnvs["seqnames"], r.cnvs["start"], r.cnvs["end"], r.cnvs["sampleName"]))
    # losses blue, gains red: the plots' colours
    cn = cnvs.merge(r.cnvs.assign(s0=r.cnvs["start"] - 1), left_on=[0, 1, 2, 3],
                    right_on=["seqnames", "s0", "end", "sampleName"])["CN"]
    assert len(cn) == len(cnvs)
    expected = np.where(cn.isin(["CN0", "CN1"]), callfiles.LOSS_RGB,
                        np.where(cn.isin(["CN3", "CN4"]), callfiles.GAIN_RGB, callfiles.OTHER_RGB))
    assert (cnvs[8].to_numpy() == expected).all()
    assert {callfiles.LOSS_RGB, callfiles.GAIN_RGB} <= set(cnvs[8])
    for name in ("cnvs.bed", "cnvr.bed"):
        bed = _bed(written / name)
        chrom_rank = bed[0].map({c: i for i, c in enumerate(pd.unique(r.gr["seqnames"]))})
        assert chrom_rank.is_monotonic_increasing
        for _, g in bed.groupby(0):
            assert g[1].is_monotonic_increasing


def test_bed_colours_are_those_of_the_plots():
    from matplotlib.colors import to_rgb

    from gcnmops.report import plots

    def rgb(c):
        return ",".join(str(round(255 * v)) for v in to_rgb(c))

    assert (callfiles.GAIN_RGB, callfiles.LOSS_RGB, callfiles.OTHER_RGB) == (rgb(plots.GAIN), rgb(plots.LOSS),
                                                                             rgb(plots.OTHER))


def test_cnvr_bed_names_the_carriers(written, results):
    r = results[1]
    cnvr = _bed(written / "cnvr.bed")
    cnvs = _bed(written / "cnvs.bed")
    assert cnvr.shape == (len(r.cnvr), 9)
    for _, row in cnvr.iterrows():
        inside = cnvs[(cnvs[0] == row[0]) & (cnvs[1] < row[2]) & (cnvs[2] > row[1])]
        assert row[3].split(",") == list(dict.fromkeys(sorted(inside[3], key=r.sample_names.index)))
        assert row[4] == inside[4].max()
        colours = set(inside[8])
        assert row[8] == (colours.pop() if len(colours) == 1 else callfiles.OTHER_RGB)


@needs_pysam
def test_bed_is_bgzipped_and_tabix_indexed(written):
    for name in ("cnvs.bed", "cnvr.bed"):
        gz = written / f"{name}.gz"
        assert (written / f"{name}.gz.tbi").stat().st_size > 0
        assert gz.read_bytes()[:4] == b"\x1f\x8b\x08\x04"  # BGZF (gzip with the extra field)
        with pysam.TabixFile(str(gz)) as tbx:
            got = [ln for c in tbx.contigs for ln in tbx.fetch(c)]
        assert got == (written / name).read_text().splitlines()  # same lines as the plain file, by region


@needs_pysam
def test_htslib_writes_through_a_pipe_the_same_bytes(written, results, tmp_path, monkeypatch):
    """tabix (.tbi and .csi), written by htslib into a pipe (no fdatasync), gives the bytes htslib writes into the
    file itself (FD_FOLDER missing: the fallback), beside the BGZF files and VCFs made without htslib."""
    def files(folder):
        folder.mkdir()
        bgzf.bgzip_file(written / "cnvs.bed", folder / "cnvs.bed.gz")
        callfiles.tabix(folder / "cnvs.bed.gz", "bed", folder / "cnvs.bed.gz.tbi")
        callfiles.tabix(folder / "cnvs.bed.gz", "bed", folder / "cnvs.bed.gz.csi", csi=True)
        callfiles.write_vcf(results[1], folder / "cnvr.vcf.gz")
        callfiles.write_vcf(results[0], folder / "raw.vcf", compress=False)
        callfiles.write_sample_vcfs(results[1], folder, samples=results[1].sample_names[:2])
        return {p.name: p.read_bytes() for p in folder.iterdir()}

    piped = files(tmp_path / "piped")
    monkeypatch.setattr(pipes, "FD_FOLDER", tmp_path / "no-such-folder")
    assert piped == files(tmp_path / "direct") and len(piped) == 9
    assert piped["cnvs.bed.gz"] == (written / "cnvs.bed.gz").read_bytes()


@needs_pysam
def test_bgzip_of_a_large_file_ends(tmp_path):
    """A file of incompressible lines, many rounds of BGZF blocks on the writer's threads, is bgzipped in a child
    (killed after 120 s: a hang fails) and its bytes are the plain file's."""
    plain = tmp_path / "big.bed"
    rng = np.random.default_rng(3)
    plain.write_text("".join(f"chr1\t{i}\t{i + 1}\t{rng.integers(1 << 62)}\n" for i in range(120_000)))
    child = ("import sys; from gcnmops.outputs import bgzf; "
             "bgzf.bgzip_file(sys.argv[1], sys.argv[2])")
    subprocess.run([sys.executable, "-c", child, str(plain), str(tmp_path / "big.bed.gz")], check=True, timeout=120,
                   cwd=Path(__file__).resolve().parents[1])
    assert gzip.decompress((tmp_path / "big.bed.gz").read_bytes()) == plain.read_bytes()


def test_a_failing_copy_or_writer_through_a_pipe_raises_its_error(tmp_path):
    """The copy's own error (a folder that is missing: the full disk's case) is the one raised, and a writer's
    error is raised as it is; neither waits forever."""
    def write(name):
        with open(name, "wb") as fh:
            for _ in range(64):
                fh.write(b"x" * (1 << 16))  # more than a pipe holds

    pipes.through_pipe(write, tmp_path / "ok")
    assert (tmp_path / "ok").stat().st_size == 64 << 16
    with pytest.raises(FileNotFoundError):
        pipes.through_pipe(write, tmp_path / "missing" / "file")

    def broken(name):
        with open(name, "wb") as fh:
            fh.write(b"part")
            raise ValueError("writer failed (test)")

    with pytest.raises(ValueError, match="writer failed"):
        pipes.through_pipe(broken, tmp_path / "broken")


@needs("tabix")
def test_tabix_queries_the_bed(written, results):
    r = results[1]
    first = r.cnvr.iloc[0]
    out = lines(run("tabix", written / "cnvs.bed.gz", f"{first['seqnames']}:{first['start']}-{first['end']}"))
    carriers = r.cnvs[(r.cnvs["seqnames"] == first["seqnames"]) & (r.cnvs["start"] <= first["end"])
                      & (r.cnvs["end"] >= first["start"])]
    assert len(out) == len(carriers) and all(len(ln.split("\t")) == 9 for ln in out)


@needs("bedtools")
def test_bedtools_reads_both_beds(written, results):
    r = results[1]
    for suffix in ("", ".gz"):
        a, b = written / f"cnvr.bed{suffix}", written / f"cnvs.bed{suffix}"
        counts = lines(run("bedtools", "intersect", "-a", a, "-b", b, "-c"))  # the user's failing command
        assert len(counts) == len(r.cnvr)
        assert sum(int(ln.split("\t")[-1]) for ln in counts) == len(r.cnvs)  # every CNV in one region
        for path in (a, b):
            assert len(lines(run("bedtools", "sort", "-i", path))) == len(_bed(path))
            merged = lines(run("bedtools", "merge", "-i", path))  # refuses unsorted input
            assert len(merged) == len(r.cnvr)  # the CNVs merge into the CNV regions


# ------------------------------------------------------------------------------------------------ VCF
@needs_pysam
def test_vcf_records(written, results):
    r = results[1]
    assert not (written / "cnvr.vcf").exists()  # bgzipped only
    header, records = _records(written / "cnvr.vcf.gz")
    assert header.version == "VCFv4.2"
    assert list(header.samples) == r.sample_names
    lengths = r.gr.groupby("seqnames", sort=False)["end"].max()
    assert {c: header.contigs[c].length for c in header.contigs} == lengths.to_dict()  # contigs WITH length
    assert {"SVTYPE", "END", "SVLEN", "IMPRECISE", "CIPOS", "CIEND"} <= set(header.info)
    assert [(f, header.formats[f].type) for f in ("GT", "CN", "CNQ")] == [("GT", "String"), ("CN", "Integer"),
                                                                         ("CNQ", "Float")]
    assert "NoCarrier" in header.filters
    assert len(records) == len(r.cnvr)
    for rec in records:
        reg = r.cnvr.iloc[int(rec.id[4:]) - 1]
        assert (rec.chrom, rec.pos, rec.stop) == (reg["seqnames"], reg["start"] - 1, reg["end"])  # padding base
        assert rec.ref == "N" and rec.qual is not None
        cns = [rec.samples[s]["CN"] for s in r.sample_names]
        assert cns == [int(reg[s][2:]) for s in r.sample_names]
        gts = [rec.samples[s]["GT"] for s in r.sample_names]
        assert gts == [(0, 0) if c == 2 else (0, 1) if abs(c - 2) == 1 else (1, 1) for c in cns]
        cnq = [rec.samples[s]["CNQ"] for s in r.sample_names]
        assert all(isinstance(q, float) and 0 <= q <= 99 and abs(q * 10 - round(q * 10)) < 1e-3 for q in cnq)
        carriers = [q for q, c in zip(cnq, cns) if c != 2]
        # QUAL: the carriers' best call quality, at least their genotype quality (a CN is one class of its side)
        assert rec.qual >= max(carriers) if carriers else rec.qual == 0
        assert list(rec.filter) == (["PASS"] if carriers else ["NoCarrier"])
        loss, gain = any(c < 2 for c in cns), any(c > 2 for c in cns)
        svtype = rec.info["SVTYPE"]
        assert svtype == ("CNV" if loss and gain else "DEL" if loss else "DUP") and rec.alts == (f"<{svtype}>",)
        assert rec.info["SVLEN"] == (-1 if svtype == "DEL" else 1) * (reg["end"] - reg["start"] + 1)
        assert rec.info["IMPRECISE"] is True
        on = r.gr[(r.gr["seqnames"] == reg["seqnames"]) & (r.gr["start"] <= reg["end"]) & (r.gr["end"] >= reg["start"])]
        w0, w1 = (int(on["end"].iat[j] - on["start"].iat[j] + 1) for j in (0, -1))  # breakpoints: +-a window
        assert rec.info["CIPOS"] == (-w0, w0)
        assert rec.info["CIEND"] == (-w1, min(w1, int(lengths[reg["seqnames"]] - reg["end"])))


@needs_pysam
def test_vcf_is_bgzipped_and_indexed(written, results):
    r = results[1]
    assert (written / "cnvr.vcf.gz.tbi").stat().st_size > 0
    with pysam.VariantFile(str(written / "cnvr.vcf.gz")) as vcf:
        for _, reg in r.cnvr.iterrows():  # opens by region through the index
            hits = [rec.id for rec in vcf.fetch(reg["seqnames"], reg["start"] - 1, reg["start"])]
            assert hits and all(h.startswith("cnvr") for h in hits)


@needs("bcftools")
def test_bcftools_alt_genotypes_are_the_non_normal_cells(written, results):
    r = results[1]
    vcf = written / "cnvr.vcf.gz"
    cells = _non_normal_cells(r)
    assert cells
    alt = lines(run("bcftools", "query", "-i", 'GT="alt"', "-f", "[%ID\t%SAMPLE\t%GT\t%CN\n]", vcf))
    got = sorted((int(ln.split("\t")[0][4:]) - 1, ln.split("\t")[1]) for ln in alt)
    assert got == sorted(cells)  # exactly the non-normal cells of result.cnvr
    assert all(ln.split("\t")[3] != "2" for ln in alt)
    records = {i for i, _ in cells}
    assert len(lines(run("bcftools", "view", "-H", "-i", 'GT="alt"', vcf))) == len(records)
    for s in r.sample_names:  # the user's per-sample query
        n = len(lines(run("bcftools", "view", "-H", "-s", s, "-c1", vcf)))
        assert n == sum(1 for _, t in cells if t == s), s
    every = lines(run("bcftools", "query", "-f", "%QUAL\t%FILTER[\t%GT:%CN:%CNQ]\n", vcf))
    assert len(every) == len(r.cnvr)
    for ln in every:  # every record has QUAL, and every sample GT, CN and CNQ
        fields = ln.split("\t")
        assert fields[0] != "." and fields[1] in ("PASS", "NoCarrier")
        assert all("." not in cell.split(":") for cell in fields[2:])
    run("bcftools", "index", "-n", vcf)  # the index bcftools reads


@needs("vcf-validator")
def test_vcf_validator_passes(written, written_raw):
    for path in (written / "cnvr.vcf.gz", written_raw / "cnvr.vcf.gz"):
        run("vcf-validator", path)


@pytest.mark.skipif(cyvcf2 is None, reason="cyvcf2 not installed (pip install cyvcf2)")
def test_cyvcf2_reads_genotypes(written, results):
    r = results[1]
    vcf = cyvcf2.VCF(str(written / "cnvr.vcf.gz"))
    assert vcf.samples == r.sample_names
    n = 0
    for rec in vcf:
        reg = r.cnvr.iloc[int(rec.ID[4:]) - 1]
        cn = np.array([int(reg[s][2:]) for s in r.sample_names])
        expected = np.where(cn == 2, 0, np.where(np.abs(cn - 2) == 1, 1, 3))  # HOM_REF, HET, HOM_ALT
        assert (rec.gt_types == expected).all()
        assert (rec.format("CN").ravel() == cn).all()
        n += 1
    assert n == len(r.cnvr)
    assert len(list(vcf(f"{r.cnvr['seqnames'].iat[0]}:{r.cnvr['start'].iat[0]}-{r.cnvr['end'].iat[0]}"))) >= 1


@needs_pysam
def test_vcf_before_integer_copy_numbers(written_raw, results):
    raw = results[0]
    _, recs = _records(written_raw / "cnvr.vcf.gz")
    assert len(recs) == len(raw.cnvr)
    pairs = set()
    for rec in recs:
        reg = raw.cnvr.iloc[int(rec.id[4:]) - 1]
        inside = raw.cnvs[(raw.cnvs["seqnames"] == reg["seqnames"]) & (raw.cnvs["start"] <= reg["end"])
                          & (raw.cnvs["end"] >= reg["start"])]
        for s in raw.sample_names:
            cell = rec.samples[s]
            assert cell["CN"] is None and 0 <= cell["CNQ"] <= 99  # "." = unknown copy number
            assert cell["GT"] == ((0, 1) if s in set(inside["sampleName"]) else (0, 0))  # from the CNV calls
            if cell["GT"] == (0, 1):
                pairs.add((rec.id, s))
        expect = ("CNV" if (inside["mean"] < 0).any() and (inside["mean"] > 0).any()
                  else "DEL" if (inside["mean"] < 0).any() else "DUP")
        assert rec.info["SVTYPE"] == expect and rec.qual is not None and list(rec.filter) == ["PASS"]
    assert len(pairs) == len(raw.cnvs.drop_duplicates(["seqnames", "start", "end", "sampleName"]))
    if TOOLS["bcftools"]:
        alt = lines(run("bcftools", "query", "-i", 'GT="alt"', "-f", "[%ID\t%SAMPLE\n]", written_raw / "cnvr.vcf.gz"))
        assert len(alt) == len(pairs)


@needs_pysam
def test_vcf_with_fractional_labels(results, tmp_path):
    raw = results[0]
    frac_cnvr = raw.cnvr.copy()
    for s in raw.sample_names:
        frac_cnvr[s] = "CN2.0"
    frac_cnvr[raw.sample_names[0]] = "CN3.4"
    callfiles.write_vcf(raw.replace(cnvr=frac_cnvr), tmp_path / "frac.vcf.gz")
    header, recs = _records(tmp_path / "frac.vcf.gz")
    assert header.formats["FCN"].type == "Float"
    rec = recs[0]
    first = rec.samples[raw.sample_names[0]]
    assert first["FCN"] == pytest.approx(3.4) and first["CN"] == 3 and first["GT"] == (0, 1)
    assert rec.samples[raw.sample_names[1]]["GT"] == (0, 0) and rec.info["SVTYPE"] == "DUP"


@needs_pysam
def test_a_region_at_base_one_is_at_pos_one(results, tmp_path):
    r = results[1]
    cnvr = r.cnvr.iloc[:1].copy()
    cnvr["start"] = 1
    cnvr["end"] = int(r.gr["end"].iat[2])
    cnvr[r.sample_names] = "CN2"
    cnvr[r.sample_names[0]] = "CN1"
    one = r.replace(cnvr=cnvr)
    path = tmp_path / "one.vcf.gz"
    callfiles.write_vcf(one, path)
    _, (rec,) = _records(path)
    assert (rec.pos, rec.ref, rec.stop) == (1, "N", cnvr["end"].iat[0])  # POS 1 with the first base as REF
    assert rec.info["CIPOS"][0] == 0 and rec.samples[r.sample_names[0]]["GT"] == (0, 1)
    assert rec.info["SVLEN"] == -(cnvr["end"].iat[0] - 1)  # END - POS
    if TOOLS["vcf-validator"]:
        run("vcf-validator", path)
    if TOOLS["bcftools"]:
        assert lines(run("bcftools", "query", "-f", "%POS\t%END\n", path)) == [f"1\t{cnvr['end'].iat[0]}"]


def test_a_file_the_pipe_may_not_hold_whole_is_written_directly(tmp_path):
    """htslib's last flush holds Python's lock, so a file goes through the pipe only where the pipe holds it whole;
    a larger one (a wide cohort's VCF: a header line per sample) is written directly, never waiting on a copy
    that cannot run."""
    names = []

    def write(text):
        return lambda name: names.append(name) or Path(name).write_text(text)

    pipes.through_pipe(write("large"), tmp_path / "large", pipes.PIPE_BYTES)
    pipes.through_pipe(write("small"), tmp_path / "small", 100)
    assert names[0] == str(tmp_path / "large") and names[1] != str(tmp_path / "small")
    assert (tmp_path / "large").read_text() == "large" and (tmp_path / "small").read_text() == "small"


@needs_pysam
def test_haploid_normal_class_gives_haploid_genotypes(results, tmp_path):
    r = results[1]
    cnvr = r.cnvr.iloc[:1].copy()
    labels = ["CN0", "CN1", "CN2", "CN3"]
    for k, s in enumerate(r.sample_names):
        cnvr[s] = labels[k % 4]
    haplo = r.replace(cnvr=cnvr, params={**r.params, "mainClass": "CN1"})
    callfiles.write_vcf(haplo, tmp_path / "h.vcf.gz")
    _, (rec,) = _records(tmp_path / "h.vcf.gz")
    gts = [rec.samples[s]["GT"] for s in r.sample_names]
    assert gts == [(0,) if labels[k % 4] == "CN1" else (1,) for k in range(len(r.sample_names))]
    assert rec.info["SVTYPE"] == "CNV"  # losses (CN0) and gains (CN2, CN3) in one region


def _model_qualities(r, rows, k):
    """(log posterior of each class, the normal class's index, the sample's dispersion) of sample k over ``rows``,
    from the model
    written out here in full: Poisson log-likelihoods under cov * L, over the dispersion, alpha prior."""
    lam, alpha = np.asarray(r.params["L"]), np.asarray(r.params["A"])
    x, cov = r.normalized_data[:, k], np.asarray(r.params["cov"])[k]
    main = r.classes.index(r.params["mainClass"])
    mu = cov * lam
    resid = (r.normalized_data[:, k] - mu[:, main]) ** 2 / mu[:, main]
    # the dispersion: the lower median squared residual, down to its bin's edge (7 mantissa bits), over the
    # chi-square median, within [1, 1e4]
    chi2 = 0.454936423119572
    lower_median = np.sort(resid[np.isfinite(resid)])[(np.isfinite(resid).sum() - 1) // 2]

    def edge(v):
        return float(((np.array(v, dtype=np.float64).view(np.int64) >> 45) << 45).view(np.float64))

    phi = max(1.0, min(edge(lower_median), edge(chi2 * 1e4)) / chi2)
    loglik = np.array([(x[rows] * np.log(mu[rows, i]) - mu[rows, i]).sum() for i in range(len(r.classes))]) / phi
    prior = np.maximum(alpha[rows].mean(axis=0), 1 / len(r.sample_names))
    lp = np.log(prior / prior.sum()) + loglik
    return lp - logsumexp(lp), main, phi


def _locus(r, rows, k):
    """The locus dispersion of sample k over ``rows`` written out here in full: per window the lower median of the
    other samples' squared residuals against the normal class, their mean over the windows, over the chi-square
    median and the sample's dispersion, at least 1."""
    lam, x, cov = np.asarray(r.params["L"]), r.normalized_data, np.asarray(r.params["cov"])
    main = r.classes.index(r.params["mainClass"])
    meds = []
    for w in rows:
        mu = cov * lam[w, main]
        z = np.array([(x[w, j] - mu[j]) ** 2 / mu[j] for j in range(x.shape[1]) if j != k and mu[j] > 0
                      and np.isfinite(x[w, j])])
        if z.size:
            meds.append(np.sort(z)[(z.size - 1) // 2])
    phi = _model_qualities(r, rows, k)[2]
    return max(1.0, float(np.mean(meds)) / 0.454936423119572 / phi) if meds else 1.0


def _calibrated(log_error, d=1.0):
    """The calibrated quality of the model's error probability and locus dispersion d, the map written out here
    in full."""
    r = max(-10 * log_error / np.log(10), 0.0) / d
    c = quality.CALIBRATION
    error = (10 ** (-(c.q0 + c.scale * r ** c.power) / 10)
             + 10 ** (-c.tail_q / 10) * d ** c.locus_power / (1 + r / c.tail_r))
    return min(99.0, round(-10 * np.log10(error), 1))


@needs_pysam
def test_qualities_are_the_models_posteriors(results, tmp_path):
    """CNQ of every sample of a region and QUAL (the carriers' best call quality) from the posterior of the model
    recomputed here; the per-sample VCF's QUAL / CNQ are the CNV's call / genotype qualities."""
    r = results[1]
    callfiles.write_vcf(r, tmp_path / "a.vcf.gz")
    header, recs = _records(tmp_path / "a.vcf.gz")
    assert "Poisson likelihoods" in header.formats["CNQ"].description
    folds = np.asarray(r.params["folds"])
    checked = 0
    for rec in recs[:5]:
        reg = r.cnvr.iloc[int(rec.id[4:]) - 1]
        rows = np.flatnonzero((r.gr["seqnames"] == reg["seqnames"]).to_numpy() & (r.gr["start"] <= reg["end"]).to_numpy()
                              & (r.gr["end"] >= reg["start"]).to_numpy())
        calls = []
        for k, s in enumerate(r.sample_names):
            lp, main, _ = _model_qualities(r, rows, k)
            d = _locus(r, rows, k)
            c = r.classes.index(reg[s])
            assert rec.samples[s]["CNQ"] == pytest.approx(_calibrated(logsumexp(np.delete(lp, c)), d), abs=1e-4), s
            if c != main:
                side = np.sign(folds - folds[main]) == np.sign(folds[c] - folds[main])
                calls.append(_calibrated(logsumexp(lp[~side]), d))
            checked += 1
        assert rec.qual == pytest.approx(max(calls) if calls else 0, abs=1e-4)
    assert checked


def test_dispersion_counts_are_sparse_and_add_up_over_blocks():
    """The residuals' counts hold one entry per sample and bin that has a window (a wide cohort's take a few bytes
    per sample, not a row of every bin); counts of blocks of windows add up to those of all of them, and the
    dispersion is the lower median's bin edge over the chi-square median, as written out here."""
    rng = np.random.default_rng(7)
    m, n = 40, 3000
    x = rng.poisson(rng.uniform(5, 200, n), (m, n)).astype(float)
    x[rng.random((m, n)) < 0.05] = np.nan
    mu = np.tile(rng.uniform(5, 200, (1, n)), (m, 1))
    mu[:3, :7] = 0.0  # no expectation: left out
    whole = dispersion.residual_counts(x, mu)
    assert whole.keys.size <= m * n and whole.keys.nbytes + whole.counts.nbytes <= 16 * m * n
    joined = dispersion.residual_counts(x[:13], mu[:13]) + dispersion.residual_counts(x[13:], mu[13:])
    assert np.array_equal(joined.keys, whole.keys) and np.array_equal(joined.counts, whole.counts)
    with np.errstate(invalid="ignore", divide="ignore"):
        r2 = (x - mu) ** 2 / mu
    chi2 = 0.454936423119572
    for k in range(0, n, 97):
        v = np.sort(r2[:, k][np.isfinite(r2[:, k]) & (mu[:, k] > 0)])
        low = min(max(v[(v.size - 1) // 2], chi2), chi2 * 1e4)
        edge = float(((np.array(low).view(np.int64) >> 45) << 45).view(np.float64))
        assert dispersion.dispersion(whole)[k] == max(1.0, edge / chi2)
    wide = dispersion.residual_counts(x[:2], mu[:2])
    assert wide.keys.nbytes + wide.counts.nbytes <= 16 * 2 * n


def test_the_calibration_is_monotone_and_bounded():
    """Q never falls as the model's phred score r rises (for any locus dispersion D), never rises with D (for any
    r), stays within 0-99 with one decimal (r 0 to infinity), and is the map's error in phred: about half of the
    calls without evidence are false."""
    r = np.concatenate([np.linspace(0, 1e5, 200_001), [1e6, 1e12, 1e300, np.finfo(np.float64).max]])
    previous = None
    for d in (1.0, 1.3, 2.0, 5.0, 40.0, 1e6):
        q = quality.calibrate(r, locus=np.full(r.size, d))
        assert q.dtype == np.float64 and (np.diff(q) >= 0).all() and q.min() >= 0 and q.max() <= 99
        assert np.array_equal(q, np.round(q, quality.Q_DECIMALS))
        if previous is not None:
            assert (q <= previous).all()
        previous = q
    assert quality.calibrate(np.array([1e300]))[0] == 99
    q0 = quality.calibrate(np.array([0.0]))[0]
    assert 2 <= q0 <= 4 and quality.calibrate(np.array([1e4]))[0] > quality.calibrate(np.array([1e3]))[0]
    assert np.array_equal(quality.calibrate(np.array([50.0])), quality.calibrate(np.array([50.0]), locus=np.ones(1)))
    assert np.array_equal(quality._phred_log(np.array([0.0, -np.inf, np.nan])), [q0, 99, q0])


def test_locus_medians_leave_the_sample_out(monkeypatch):
    """Each sample's locus median is the lower median of the other samples' squared residuals (cells without a
    finite count or expectation left out), so a sample's own reads never change it: more reads away from the
    normal level move only the model's score r, and the quality with it (never down)."""
    rng = np.random.default_rng(11)
    m, n = 40, 9
    mu = rng.uniform(20, 200, (m, n))
    x = rng.poisson(mu * rng.uniform(0.7, 1.4, (m, 1))).astype(float)
    x[rng.random((m, n)) < 0.1] = np.nan
    mu[rng.random((m, n)) < 0.05] = 0.0
    x[5] = np.nan  # a window without any count
    x[6, 1:] = np.nan  # one count only: the others have none
    med = dispersion.locus_medians(x, mu)
    for w in range(m):
        for k in range(n):
            z = np.array([(x[w, j] - mu[w, j]) ** 2 / mu[w, j] for j in range(n)
                          if j != k and mu[w, j] > 0 and np.isfinite(x[w, j])])
            want = np.sort(z)[(z.size - 1) // 2] if z.size else np.nan
            assert np.array_equal(med[w, k], want, equal_nan=True), (w, k)
    more = x.copy()
    more[:, 4] = more[:, 4] * 3 + 50
    assert np.array_equal(dispersion.locus_medians(more, mu)[:, 4], med[:, 4], equal_nan=True)
    # the sums over sets of windows: each set's own windows in order, a group of sets at a time
    sets = [np.array([3, 4, 5]), np.array([], np.int64), np.array([10]), np.arange(m)]
    sums, counts = dispersion.set_locus_sums(lambda rows: med[rows], sets, None, n)
    for i, rows in enumerate(sets):
        ok = np.isfinite(med[rows])
        assert np.array_equal(counts[i], ok.sum(axis=0))
        assert np.allclose(sums[i], np.where(ok, med[rows], 0).sum(axis=0))
    one, c_one = dispersion.set_locus_sums(lambda rows: med[rows], sets, np.array([2, 0, 7, 4]), n)
    assert np.array_equal(one, sums[np.arange(4), [2, 0, 7, 4]]) and np.array_equal(c_one, counts[np.arange(4), [2, 0, 7, 4]])
    monkeypatch.setattr(dispersion, "_CELLS", 4 * n)  # sets larger than the bound: a few windows at a time
    parts, c_parts = dispersion.set_locus_sums(lambda rows: med[rows], sets, None, n)
    assert np.allclose(parts, sums) and np.array_equal(c_parts, counts)
    parts, c_parts = dispersion.set_locus_sums(lambda rows: med[rows], sets, np.array([2, 0, 7, 4]), n)
    assert np.allclose(parts, one) and np.array_equal(c_parts, c_one)


def test_a_clear_duplication_gets_a_high_quality():
    """A 1.5x duplication of 10 windows of ~1,125 reads against ~750 (4 samples), and a het deletion beside it:
    both QUAL >= 30; shorter or weaker evidence gives lower qualities."""
    import gcnmops

    rng = np.random.default_rng(0)
    m, n = 600, 4
    lam = np.full((m, n), 750.0)
    lam[200:210, 0] *= 1.5
    lam[400:410, 1] *= 0.5
    x = rng.poisson(lam)
    frame = pd.DataFrame({"seqnames": "chr1", "start": np.arange(m) * 10000 + 1, "end": (np.arange(m) + 1) * 10000})
    for k in range(n):
        frame[f"S{k}"] = x[:, k]
    r = gcnmops.calc_integer_copy_numbers(gcnmops.cn_mops(frame, backend="cpu"))
    q, directions = quality.call_qualities(r)
    by_sample = dict(zip(r.cnvs["sampleName"], zip(q, directions)))
    assert by_sample["S0"][1] == "gain" and by_sample["S0"][0] >= 30
    assert by_sample["S1"][1] == "loss" and by_sample["S1"][0] >= 30
    evidence = quality.Evidence(r)
    main = evidence.main_idx
    gain = r.classes.index("CN3")
    qs = [evidence.qualities([np.arange(200, 200 + w)], np.array([[0]]), np.array([[gain]]), np.array([[1]])).call[0, 0]
          for w in (1, 2, 4, 10)]
    assert qs == sorted(qs) and qs[0] < qs[-1]  # more windows of the same evidence: higher quality
    assert main != gain


@needs_pysam
def test_reference_fai_gives_the_contig_lengths(results, tmp_path):
    r = results[1]
    fai = tmp_path / "ref.fa.fai"
    fai.write_text("chr1\t248956422\t6\t60\t61\nchr2\t242193529\t253404903\t60\t61\nchrM\t16569\t1\t60\t61\n")
    callfiles.write_vcf(r, tmp_path / "f.vcf.gz", reference_fai=fai)
    header, recs = _records(tmp_path / "f.vcf.gz")
    assert {c: header.contigs[c].length for c in header.contigs} == {"chr1": 248956422, "chr2": 242193529,
                                                                     "chrM": 16569}
    assert len(recs) == len(r.cnvr)
    assert any(str(rec).startswith("##reference=file://") for rec in header.records)
    fai.write_text("chr1\t248956422\t6\t60\t61\n")
    with pytest.raises(InputError, match="chr2"):
        callfiles.write_vcf(r, tmp_path / "g.vcf.gz", reference_fai=fai)


@needs_pysam
def test_per_sample_vcfs_hold_the_samples_own_cnvs(results, tmp_path):
    """Each record of a sample's VCF is one of its CNVs: POS + 1 .. END its own range (0 bases outside its calls),
    CN its integer copy number, INFO CNVR the cohort region holding it; CNVs of the normal copy number are left
    out; every non-normal CNV of the sample is there."""
    r = results[1]
    paths = callfiles.write_sample_vcfs(r, tmp_path / "per_sample")
    assert [p.name for p in paths] == [f"cnvr.{s}.vcf.gz" for s in r.sample_names]
    cnvs = r.cnvs.reset_index(drop=True)
    cnvr = r.cnvr.reset_index(drop=True)
    for s, path in zip(r.sample_names, paths):
        assert path.with_name(path.name + ".tbi").exists()
        header, recs = _records(path)
        assert list(header.samples) == [s]
        own = cnvs[(cnvs["sampleName"] == s) & (cnvs["CN"] != "CN2")]
        assert sorted(int(rec.id[3:]) - 1 for rec in recs) == sorted(own.index)
        for rec in recs:
            row = cnvs.loc[int(rec.id[3:]) - 1]
            start = rec.pos + 1 if rec.pos > 1 else 1  # POS is the padding base before the CNV
            assert (rec.chrom, start, rec.stop) == (row["seqnames"], row["start"], row["end"])
            assert rec.samples[s]["CN"] == int(row["CN"][2:]) and rec.samples[s]["GT"] != (0, 0)
            assert rec.alts == (("<DEL>",) if int(row["CN"][2:]) < 2 else ("<DUP>",))
            region = cnvr.loc[int(rec.info["CNVR"][4:]) - 1]
            assert region["start"] <= row["start"] and row["end"] <= region["end"]
            i = int(rec.id[3:]) - 1
            assert list(rec.filter) == ["PASS"] and rec.qual == pytest.approx(quality.call_qualities(r)[0][i],
                                                                              abs=1e-4)
            assert rec.samples[s]["CNQ"] == pytest.approx(quality.genotype_qualities(r)[i], abs=1e-4)


@needs_pysam
def test_long_contigs_get_csi_indexes(results, tmp_path):
    r = results[1]
    shift = 600_000_000  # beyond .tbi's 2^29
    moved = r.replace(gr=r.gr.assign(start=r.gr["start"] + shift, end=r.gr["end"] + shift),
                      cnvr=r.cnvr.assign(start=r.cnvr["start"] + shift, end=r.cnvr["end"] + shift),
                      cnvs=r.cnvs.assign(start=r.cnvs["start"] + shift, end=r.cnvs["end"] + shift),
                      segmentation=r.segmentation.assign(start=r.segmentation["start"] + shift,
                                                         end=r.segmentation["end"] + shift))
    names = {p.name for p in write_result(moved, tmp_path, formats=["bed", "vcf"])}
    assert {"cnvr.vcf.gz.csi", "cnvs.bed.gz.csi", "cnvr.bed.gz.csi"} <= names and not any(
        n.endswith(".tbi") for n in names)
    reg = moved.cnvr.iloc[0]
    with pysam.VariantFile(str(tmp_path / "cnvr.vcf.gz")) as vcf:
        assert [rec.id for rec in vcf.fetch(reg["seqnames"], reg["start"] - 1, reg["start"])] == ["cnvr1"]
    if TOOLS["bcftools"]:
        out = lines(run("bcftools", "view", "-H", "-r", f"{reg['seqnames']}:{reg['start']}", tmp_path / "cnvr.vcf.gz"))
        assert len(out) == 1


def test_contigs_beyond_32_bit_positions_are_refused_for_the_vcf(results, tmp_path):
    r = results[1]
    shift = 1 << 31
    moved = r.replace(gr=r.gr.assign(start=r.gr["start"] + shift, end=r.gr["end"] + shift),
                      cnvr=r.cnvr.assign(start=r.cnvr["start"] + shift, end=r.cnvr["end"] + shift))
    with pytest.raises(InputError, match="32-bit.*leave vcf out of --formats"):
        write_result(moved, tmp_path / "out", formats=["vcf"])
    assert not (tmp_path / "out").exists()
    with pytest.raises(InputError, match="32-bit.*leave vcf out of --formats"):  # the CLI's check before any work
        callfiles.VcfOptions().checked(moved.gr)
    callfiles.VcfOptions().checked(r.gr)


@needs_pysam
def test_without_pysam_plain_bed_and_vcf_with_the_same_records(results, tmp_path, monkeypatch, written):
    r = results[1]
    monkeypatch.setattr(callfiles, "pysam", None)
    names = {p.name for p in write_result(r, tmp_path, formats=["bed", "vcf"])}
    assert {"cnvs.bed", "cnvr.bed", "cnvr.vcf"} <= names and not any(".gz" in n for n in names)
    assert (tmp_path / "cnvs.bed").read_text() == (written / "cnvs.bed").read_text()
    monkeypatch.undo()
    _, plain = _records(tmp_path / "cnvr.vcf")
    _, gz = _records(written / "cnvr.vcf.gz")
    assert [str(a) for a in plain] == [str(b) for b in gz]


def test_a_run_without_cnvs_writes_header_only_files(tmp_path):
    data = pd.DataFrame({"seqnames": "chr1", "start": np.arange(200) * 100 + 1, "end": np.arange(1, 201) * 100,
                         "a": 100.0, "b": 100.0, "c": 100.0})
    r = gcnmops.cn_mops(data, backend="cpu")
    assert len(r.cnvr) == 0
    paths = write_result(r, tmp_path)
    names = {p.name for p in paths}
    assert (tmp_path / "cnvs.bed").read_text() == "" and (tmp_path / "cnvr.bed").read_text() == ""
    if pysam is None:
        assert (tmp_path / "cnvr.vcf").read_text().splitlines()[-1].startswith("#CHROM")
        return
    assert {"cnvs.bed.gz", "cnvs.bed.gz.tbi", "cnvr.bed.gz", "cnvr.bed.gz.tbi", "cnvr.vcf.gz",
            "cnvr.vcf.gz.tbi"} <= names
    header, recs = _records(tmp_path / "cnvr.vcf.gz")
    assert recs == [] and list(header.samples) == ["a", "b", "c"] and header.contigs["chr1"].length == 20000
    with pysam.VariantFile(str(tmp_path / "cnvr.vcf.gz")) as vcf:
        assert list(vcf.fetch("chr1")) == []
    with pysam.TabixFile(str(tmp_path / "cnvs.bed.gz")) as tbx:
        assert list(tbx.contigs) == []
    if TOOLS["bcftools"]:
        assert lines(run("bcftools", "view", "-H", tmp_path / "cnvr.vcf.gz")) == []
    if TOOLS["vcf-validator"]:
        run("vcf-validator", tmp_path / "cnvr.vcf.gz")
    if TOOLS["bedtools"]:
        assert run("bedtools", "intersect", "-a", tmp_path / "cnvr.bed", "-b", tmp_path / "cnvs.bed", "-c") == ""


# ------------------------------------------------------------------------------------------------ SEG
def test_seg_loads_with_igv_columns(written, results):
    r = results[1]
    seg = pd.read_csv(written / "segmentation.seg", sep="\t", dtype={"chrom": str}, float_precision="round_trip")
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


# ------------------------------------------------------------------------------------------------ run's VCF options
def _fasta(path, lengths: dict, seed=0):
    """A FASTA of random bases (some N and R), one line per contig."""
    rng = np.random.default_rng(seed)
    bases = np.frombuffer(b"ACGTNR", dtype="S1")
    with open(path, "wb") as fh:
        for c, n in lengths.items():
            fh.write(f">{c}\n".encode() + bases[rng.choice(6, n, p=[.24, .24, .24, .24, .02, .02])].tobytes() + b"\n")
    return path


@needs_pysam
def test_reference_fasta_gives_ref_bases_and_contigs_and_per_sample_vcfs(results, tmp_path):
    from gcnmops.outputs.callfiles import VcfOptions

    r = results[1]
    lengths = {c: int(r.gr["end"][r.gr["seqnames"] == c].max()) + 1000 for c in pd.unique(r.gr["seqnames"])}
    fasta = _fasta(tmp_path / "ref.fa", {**lengths, "chrUn": 500})
    out = tmp_path / "out"
    names = {p.name for p in write_result(r, out, formats=["vcf"], vcf=VcfOptions(reference=str(fasta),
                                                                                   per_sample=True))}
    header, recs = _records(out / "cnvr.vcf.gz")
    assert {c: header.contigs[c].length for c in header.contigs} == {**lengths, "chrUn": 500}
    assert any(str(h).strip() == f"##reference=file://{fasta.resolve()}" for h in header.records)
    with pysam.FastaFile(str(fasta)) as fa:
        for rec in recs:
            base = fa.fetch(rec.chrom, rec.pos - 1, rec.pos).upper()
            assert rec.ref == (base if base in "ACGT" else "N"), (rec.id, base)
    assert {rec.ref for rec in recs} - {"N"}  # real bases, not only N
    cnvs = r.cnvs.reset_index(drop=True)
    for s in r.sample_names:
        name = f"cnvr.{s}.vcf.gz"
        assert {name, name + ".tbi"} <= names
        _, mine = _records(out / name)  # the sample's own CNVs, REF from the FASTA too
        assert sorted(int(rec.id[3:]) - 1 for rec in mine) == \
            sorted(cnvs.index[(cnvs["sampleName"] == s) & (cnvs["CN"] != "CN2")])
        with pysam.FastaFile(str(fasta)) as fa:
            assert all(rec.ref == (b if (b := fa.fetch(rec.chrom, rec.pos - 1, rec.pos).upper()) in "ACGT" else "N")
                       for rec in mine)
        if TOOLS["vcf-validator"]:
            run("vcf-validator", out / name)
        if TOOLS["bcftools"]:
            assert len(lines(run("bcftools", "view", "-H", "-i", 'GT="alt"', out / name))) == len(mine)
    if TOOLS["vcf-validator"]:
        run("vcf-validator", out / "cnvr.vcf.gz")
    fai = tmp_path / "ref.fa.fai"  # --reference-fai wins over the FASTA's lengths
    fai.write_text("".join(f"{c}\t{n + 5}\t1\t60\t61\n" for c, n in lengths.items()))
    write_result(r, tmp_path / "o2", formats=["vcf"], vcf=VcfOptions(reference_fai=str(fai), reference=str(fasta)))
    header, _ = _records(tmp_path / "o2" / "cnvr.vcf.gz")
    assert {c: header.contigs[c].length for c in header.contigs} == {c: n + 5 for c, n in lengths.items()}


@needs_pysam
def test_run_refuses_a_reference_without_the_chromosomes_before_the_model(results, tmp_path, capsys):
    from gcnmops.cli import main

    r = results[1]
    counts = tmp_path / "counts.tsv"
    r.gr.assign(**{s: np.rint(r.normalized_data[:, k]) for k, s in enumerate(r.sample_names)}).to_csv(
        counts, sep="\t", index=False)
    other = _fasta(tmp_path / "other.fa", {"chrX": 1000})
    for extra, fragment in ((["--reference", str(tmp_path / "none.fa")], "not found"),
                            (["--reference", str(other)], "not in"),
                            (["--reference-fai", str(tmp_path / "none.fai")], "Cannot read the FASTA index"),
                            (["--threads", "0"], "--threads must be between 1")):
        assert main(["run", str(counts), "-o", str(tmp_path / "out"), "--quiet", "--backend", "cpu", *extra]) == 2
        captured = capsys.readouterr()
        assert captured.err.startswith("error:") and fragment in captured.err, captured.err
        assert "segments" not in captured.out and not (tmp_path / "out").exists()
    fasta = _fasta(tmp_path / "ref.fa", {c: int(r.gr["end"][r.gr["seqnames"] == c].max())
                                         for c in pd.unique(r.gr["seqnames"])})
    assert main(["run", str(counts), "-o", str(tmp_path / "out"), "--quiet", "--backend", "cpu", "--threads", "1",
                 "--reference", str(fasta), "--per-sample-vcf", "--formats", "vcf"]) == 0
    assert (tmp_path / "out" / f"cnvr.{r.sample_names[0]}.vcf.gz.tbi").exists()


# ------------------------------------------------------------------------------------------------ real data
@needs_pysam
@pytest.mark.skipif("exome_exomecn" not in case_names(), reason="golden exome case not found")
def test_real_exome_counts_through_the_tools(tmp_path):
    """exomecn.mops on the golden real exome counts (1000 Genomes, chr22): both BEDs through bedtools, the VCF
    through vcf-validator and bcftools (GT="alt" is exactly the non-normal cells; QUAL, GT, CN, CNQ everywhere)."""
    gr = table("exome_exomecn", "input_ranges")[["seqnames", "start", "end"]]
    counts = array("exome_exomecn", "input_counts")
    names = manifest("exome_exomecn")["sampleNames"]
    r = gcnmops.calc_integer_copy_numbers(gcnmops.exome_cn_mops(gr.assign(**{s: counts[:, k] for k, s in
                                                                              enumerate(names)}), backend="cpu"))
    assert len(r.cnvr) > 0
    write_result(r, tmp_path, formats=["bed", "vcf"])
    vcf = tmp_path / "cnvr.vcf.gz"
    header, recs = _records(vcf)
    assert len(recs) == len(r.cnvr) and all(rec.qual is not None for rec in recs)
    assert all(rec.samples[s]["GT"] is not None and rec.samples[s]["CN"] is not None and rec.samples[s]["CNQ"]
               is not None for rec in recs for s in names)
    if TOOLS["vcf-validator"]:
        run("vcf-validator", vcf)
    if TOOLS["bcftools"]:
        alt = {tuple(ln.split("\t")) for ln in lines(run("bcftools", "query", "-i", 'GT="alt"', "-f",
                                                         "[%ID\t%SAMPLE\n]", vcf))}
        assert alt == {(f"cnvr{i + 1}", s) for i, s in _non_normal_cells(r)}
    if TOOLS["bedtools"]:
        for bed in ("cnvs.bed", "cnvr.bed"):
            assert len(lines(run("bedtools", "merge", "-i", tmp_path / bed))) >= 1
        counts_per_region = lines(run("bedtools", "intersect", "-a", tmp_path / "cnvr.bed", "-b",
                                      tmp_path / "cnvs.bed", "-c"))
        assert len(counts_per_region) == len(r.cnvr) and all(int(ln.split("\t")[-1]) > 0 for ln in counts_per_region)


def test_vcf_cells_are_written_as_htslib_writes_numbers():
    """The FORMAT text of a column of cells (looked up for one-decimal qualities, formatted once per distinct value
    otherwise) is %g of each value, '.' where missing."""
    v = np.array([[36.1, 0.0, 99.0, 1e-9, np.nan, 12.35, -0.0, 100.5, 7.0]])
    assert callfiles._cells_text("CNQ", v).tolist() == [[f"{x:g}" if x == x else "." for x in v[0]]]
    assert callfiles._cells_text("CN", np.array([[None, 2, 3, 2]], dtype=object)).tolist() == [[".", "2", "3", "2"]]
    fcn = np.array([[None, 1.5, 2.0, np.nan]], dtype=object)
    assert callfiles._cells_text("FCN", fcn).tolist() == [[".", "1.5", "2", "."]]
    gt = callfiles._objects([(0, 0), (0, 1), (1,), (1, 1)])[np.array([[0, 1, 2, 3, 0]])]
    assert callfiles._cells_text("GT", gt).tolist() == [["0/0", "0/1", "1", "1/1", "0/0"]]


def test_model_rows_are_the_windows_own_whichever_rows_are_asked():
    """The qualities' model arrays (calls.setsums): a window is usable where every class has a finite positive
    lambda (any memory order, tiles of windows), and a window's lambda, log lambda and alpha are the same bits
    whichever other rows are asked with it, and numpy's on the whole matrix."""
    from gcnmops.calls.setsums import MODEL_TILE, model_rows, usable_windows

    rng = np.random.default_rng(3)
    m, n = 2 * MODEL_TILE + 77, 5
    lam = rng.gamma(2.0, 30.0, (m, n))
    alpha = rng.random((m, n))
    for value in (0.0, -1.0, np.nan, np.inf):
        lam[rng.integers(0, m, 40), rng.integers(0, n, 40)] = value
    alpha[rng.integers(0, m, 40), rng.integers(0, n, 40)] = np.nan
    expected = (np.isfinite(lam) & (lam > 0)).all(axis=1)
    for order in "CF":
        assert np.array_equal(usable_windows(np.asarray(lam, order=order)), expected)
    ok = expected[:, None]
    whole = (np.where(ok, lam, 0.0), np.log(np.where(ok, lam, 1.0)), np.where(np.isfinite(alpha), alpha, 0.0))
    for rows in (np.arange(m), np.sort(rng.choice(m, 500, replace=False)), np.array([m - 1])):
        got = model_rows(np.asfortranarray(lam), np.asfortranarray(alpha), expected, rows)
        for a, b in zip(got, whole):
            assert a.flags.c_contiguous and np.array_equal(a.view(np.uint64), b[rows].view(np.uint64))
