"""``gcnmops gatk-sv workflow BINCOVS``: the matrix built from per-sample binCov files as makeMatrix.sh builds it
(against bedtools unionbedg and the script's own pipeline), and the workflow's files from it equal to the ``-M``
run on the same matrix and to the goldens."""
from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gcnmops.errors import InputError

pytest.importorskip("pysam")
_GOLDEN = Path(os.environ.get("GCNMOPS_GOLDEN_DIR", Path(__file__).resolve().parents[2] / "shared" / "golden"))
GOLD = _GOLDEN / "gatksv" / "simA"
if not GOLD.is_dir():
    GOLD = Path("/work/shared/golden/gatksv/simA")
needs_golden = pytest.mark.skipif(not GOLD.is_dir(), reason="GATK-SV goldens not found")
needs_bedtools = pytest.mark.skipif(shutil.which("bedtools") is None, reason="needs bedtools")

# makeMatrix.sh's commands (GATK-SV src/WGD/bin/makeMatrix.sh, -r and sort branch), run as the oracle
MAKE_MATRIX = r"""
set -e
bedtools unionbedg -header \
  -names $( while read ID cov; do echo "${ID}"; done < ${SAMPLES} | paste -s -d\  ) \
  -i $( while read ID cov; do echo "${cov}"; done < ${SAMPLES} | paste -s -d\  ) | \
  sed -e 's/chrom/Chr/g' -e 's/start/Start/g' -e 's/end/End/g' > ${OUTFILE}
if [ ${RESTRICT} != "0" ]; then
  head -n1 ${OUTFILE} > ${OUTFILE}2
  sed '1d' ${OUTFILE} | bedtools intersect -v -wa -a - -b ${RESTRICT} >> ${OUTFILE}2
  mv ${OUTFILE}2 ${OUTFILE}
fi
cat <( head -n1 ${OUTFILE} | awk '{ print "#"$0 }' ) \
  <( sed '1d' ${OUTFILE} | sort -Vk1,1 -k2,2n -k3,3n | uniq ) > ${OUTFILE}2
mv ${OUTFILE}2 ${OUTFILE}
"""


def _gunzip(path: Path) -> str:
    with gzip.open(path, "rt") as fh:
        return fh.read()


def _no_date(text: str) -> str:
    return "".join(line for line in text.splitlines(True) if not line.startswith("##date "))


def _script_matrix(tmp: Path, samples: Path, restrict: str = "0") -> list[str]:
    out = tmp / "script.matrix.bed"
    subprocess.run(["bash", "-c", MAKE_MATRIX], check=True, cwd=tmp, stdin=subprocess.DEVNULL,
                   env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "SAMPLES": str(samples), "OUTFILE": str(out),
                        "RESTRICT": restrict})
    return out.read_text().splitlines()


def _write(path: Path, lines: list[str], gz: bool = False) -> Path:
    text = "".join(line + "\n" for line in lines)
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


@needs_bedtools
def test_make_matrix_vs_script(tmp_path):
    """Bins that differ between samples, a contig one sample lacks, gaps, cells written oddly, headers, gzip,
    names the script's sed rewrites, version-sorted contigs, and -r RESTRICT."""
    from gcnmops.gatksv.makematrix import make_matrix

    rng = np.random.default_rng(3)
    lines = []
    for k, name in enumerate(["s_end", "start2", "x", "chromo"]):
        rows = [] if k % 2 else [f"#Chr\tStart\tEnd\t{name}"]
        for contig in ("chr10", "chr2", "chrX") if k != 2 else ("chr10", "chr2"):
            edges = np.unique(np.r_[0, rng.choice(np.arange(50, 3000, 50), 25, replace=False)])
            for a, b in zip(edges[:-1], edges[1:]):
                if rng.random() < 0.15:
                    continue  # a gap
                cell = str(int(rng.integers(0, 60)))
                cell = {0: "NA", 1: "3.5"}.get(int(rng.integers(0, 30)), cell)
                rows.append(f"{contig}\t{a}\t{b}\t{cell}")
        path = _write(tmp_path / (f"{name}.bed.gz" if k == 1 else f"{name}.bed"), rows, gz=k == 1)
        lines.append(f"{name}\t{path}")
    listed = _write(tmp_path / "bincovs.txt", lines)
    (tmp_path / "restrict.bed").write_text("chr2\t100\t260\nchrX\t0\t1000\n")
    for restrict in (None, tmp_path / "restrict.bed"):
        ours = list(make_matrix(listed, restrict=restrict).lines())
        assert ours == _script_matrix(tmp_path, listed, str(restrict or 0))
    assert ours[0] == "#Chr\tStart\tEnd\ts_End\tStart2\tx\tChro"  # sed's rewrites, as the script does
    same = [f"{n}\t{tmp_path / 'x.bed'}" for n in ("a", "b", "c")]
    listed = tmp_path / "no_newline.txt"
    listed.write_text("\n".join(same))  # bash's read drops the last line
    assert make_matrix(listed).samples == ["a", "b"] == _script_matrix(tmp_path, listed)[0].split("\t")[3:]


def test_make_matrix_refuses_unsorted(tmp_path):
    from gcnmops.gatksv.makematrix import make_matrix

    a = _write(tmp_path / "a.bed", ["chr1\t100\t200\t5", "chr1\t0\t100\t5"])
    listed = _write(tmp_path / "l.txt", [f"a\t{a}"])
    with pytest.raises(InputError, match="sort -k1,1 -k2,2n"):
        make_matrix(listed)
    b = _write(tmp_path / "b.bed", ["chr2\t0\t100\t5", "chr1\t0\t100\t5"])
    c = _write(tmp_path / "c.bed", ["chr1\t0\t100\t5", "chr2\t0\t100\t5"])
    with pytest.raises(InputError, match="same order"):
        make_matrix(_write(tmp_path / "l3.txt", [f"b\t{b}", f"c\t{c}"]))
    with pytest.raises(InputError, match="sample ID and the path"):
        make_matrix(_write(tmp_path / "l2.txt", ["a"]))


@needs_golden
@pytest.mark.parametrize("blacklist", [False, True])
def test_workflow_bincovs(tmp_path, blacklist):
    """A sex pass (chrY, males, rebin 10) from per-sample binCov files: every file equals the -M run's on the same
    matrix; with -x (which touches no contig end on chrY) the compressed matrix and GFF equal the golden pass."""
    from gcnmops.gatksv.intervals import overlapping, read_bed
    from gcnmops.gatksv.matrix import ped_samples, print_sv_evidence, read_depth_matrix, sex_columns

    inputs = GOLD / "inputs"
    m = print_sv_evidence(read_depth_matrix(inputs / "simA.bincov.bed.gz"), "chrY")
    m = sex_columns(m, ped_samples(inputs / "simA.ped", "1"), "chrY.1")
    rd = _write(tmp_path / "chrY.1.RD.txt", list(m.lines()))
    listed = []
    for j, name in enumerate(m.samples):
        one = m.take(slice(None), [j])
        rows = list(one.lines())
        rows = rows if j % 3 == 0 else rows[1:]  # some with CollectSVEvidence's header, some bare (binCov.py)
        listed.append(f"{name}\t{_write(tmp_path / f'{name}.bed.gz', rows, gz=j % 2 == 0)}")
    bincovs = _write(tmp_path / "bincovs.txt", listed)
    ex = str(inputs / "exclude_list.bed")
    opts = ["-S", ex, "-f", "-r", "10"] + (["-x", ex] if blacklist else [])
    base = [sys.executable, "-m", "gcnmops", "gatk-sv", "workflow", "--backend", "cpu"] + opts
    runs = {}
    for how, extra in (("bincovs", [str(bincovs)]), ("matrix", ["-M", str(rd), str(bincovs)])):
        out = tmp_path / how
        r = subprocess.run(base + ["-o", str(out)] + extra, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert ("GENERATING COVERAGE MATRIX..." in r.stdout) == (how == "bincovs")
        runs[how] = out
    a, b = runs["bincovs"], runs["matrix"]
    raw = rd.read_text().splitlines(True)
    if blacklist:  # makeMatrix.sh -r: the bins overlapping the list go before rebinning
        bed = read_bed(ex)
        raw = raw[:1] + [line for line, hit in zip(raw[1:], overlapping(m.contig, m.start, m.end, bed)) if not hit]
    assert _gunzip(a / "cnMOPS.raw_matrix.bed.gz") == "".join(raw)
    assert (a / "cnMOPS.raw_matrix.bed.gz.tbi").is_file()
    assert _gunzip(a / "cnMOPS.compressed_matrix.bed.gz") == _gunzip(b / "cnMOPS.compressed_matrix.bed.gz")
    gff = (a / "calls" / "cnMOPS.cnMOPS.gff").read_text()
    assert gff == (b / "calls" / "cnMOPS.cnMOPS.gff").read_text().replace(str(b), str(a))
    assert (a / "samples.list").read_text() == "".join(f"{n}\n" for n in m.samples)
    for cnv in ("DEL", "DUP"):
        for name in m.samples:
            f = f"calls/{name}/{name}.cnMOPS.{cnv}.bed.gz"
            assert _gunzip(a / f) == _gunzip(b / f)
    if blacklist:
        gold = GOLD / "passes" / "chrY.1.r10"
        assert _gunzip(a / "cnMOPS.compressed_matrix.bed.gz") == _gunzip(gold / "cnMOPS.compressed_matrix.bed.gz")
        assert _no_date(gff) == _no_date((gold / "cnMOPS.cnMOPS.gff").read_text())
