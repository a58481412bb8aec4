"""The workflow modules run end to end: the Snakemake workflow (count -> run -> per-sample VCFs) on simulated
BAMs, and the CWL tool of ``gcnmops run`` under ``cwltool --no-container``. Each is skipped where its runner is
not installed (``pip install snakemake cwltool``: the ``workflows`` extra)."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gcnmops
from gcnmops.example import example_cohort

ROOT = Path(__file__).resolve().parents[1]
#: the planted CNVs of the simulated BAMs: sample -> (chromosome, start, end (1-based), copy number)
PLANTED = {"S2": ("chr1", 100_001, 160_000, 0), "S5": ("chr2", 50_001, 110_000, 4)}
REFS = [("chr1", 400_000), ("chr2", 300_000)]
WINDOW = 5000


def _runner(name: str) -> str:
    """The runner's executable: beside this interpreter (its venv), else on PATH; the test is skipped without."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install {name})")
    return found


def _gcnmops_command(tmp_path: Path) -> Path:
    """An executable ``gcnmops`` that runs this checkout's package with this interpreter (what pip's entry point
    is in an installed environment), in a folder of its own to put on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "gcnmops"
    script.write_text(f"#!/bin/sh\nPYTHONPATH={str(ROOT)!r}${{PYTHONPATH:+:$PYTHONPATH}} exec {sys.executable!r} "
                      f"-m gcnmops \"$@\"\n")
    script.chmod(0o755)
    return script


def _write_bams(folder: Path) -> dict[str, str]:
    """Eight indexed BAMs with ~120 reads per 5-kb window (Poisson), the PLANTED CNVs scaling their reads."""
    pysam = pytest.importorskip("pysam")
    folder.mkdir()
    rng = np.random.default_rng(7)
    header = {"HD": {"VN": "1.6", "SO": "coordinate"}, "SQ": [{"SN": n, "LN": ln} for n, ln in REFS]}
    bams = {}
    for k in range(1, 9):
        name = f"S{k}"
        path = folder / f"{name}.bam"
        with pysam.AlignmentFile(str(path), "wb", header=header) as out:
            for ref_id, (chrom, length) in enumerate(REFS):
                n = rng.poisson(120 * length / WINDOW * rng.uniform(0.9, 1.1))
                pos = np.sort(rng.integers(0, length - 50, n))
                if name in PLANTED and PLANTED[name][0] == chrom:
                    _, start, end, cn = PLANTED[name]
                    inside = (pos >= start - 1) & (pos < end)
                    keep = ~inside | (rng.random(n) < cn / 2)
                    extra = pos[inside] if cn > 2 else pos[:0]  # a duplication: the region's reads again
                    pos = np.sort(np.concatenate([pos[keep], extra]))
                for i, p in enumerate(pos):
                    a = pysam.AlignedSegment(out.header)
                    a.query_name, a.flag, a.reference_id, a.reference_start = f"{chrom}_{i}", 0, ref_id, int(p)
                    a.mapping_quality, a.cigarstring = 60, "50M"
                    a.query_sequence, a.query_qualities = "A" * 50, pysam.qualitystring_to_array("I" * 50)
                    out.write(a)
        pysam.index(str(path))
        bams[name] = str(path)
    return bams


def _vcf_records(path: Path) -> list[list[str]]:
    with gzip.open(path, "rt") as f:
        return [line.rstrip("\n").split("\t") for line in f if not line.startswith("#")]


def _info(record: list[str]) -> dict[str, str]:
    return dict(kv.split("=", 1) if "=" in kv else (kv, "") for kv in record[7].split(";"))


def test_snakemake_workflow_counts_calls_and_writes_a_vcf_per_sample(tmp_path):
    snakemake = _runner("snakemake")
    gcnmops_cmd = _gcnmops_command(tmp_path)
    bams = _write_bams(tmp_path / "bams")
    config = {"samples": bams, "outdir": str(tmp_path / "results"), "window": WINDOW,
              "run_args": "--backend cpu", "gcnmops": str(gcnmops_cmd)}
    (tmp_path / "config.json").write_text(json.dumps(config))
    proc = subprocess.run([snakemake, "-s", str(ROOT / "workflows" / "snakemake" / "Snakefile"), "--cores", "2",
                           "--configfile", str(tmp_path / "config.json"), "--directory", str(tmp_path)],
                          capture_output=True, text=True, timeout=1800)
    logs = "".join(p.read_text() for p in (tmp_path / "results" / "logs").glob("*.log")) if proc.returncode else ""
    assert proc.returncode == 0, proc.stderr[-4000:] + logs[-4000:]

    results = tmp_path / "results"
    counts = gcnmops.read_counts(str(results / "counts.tsv.gz"))
    assert counts.sample_names == list(bams) and counts.counts.shape == (sum(n for _, n in REFS) // WINDOW, 8)
    params = json.loads((results / "cnmops" / "params.json").read_text())
    assert params["provenance"]["inputs"][0]["path"] == str((results / "counts.tsv.gz").absolute())
    for sample in bams:
        vcf = results / "cnmops" / f"cnvr.{sample}.vcf.gz"
        records = _vcf_records(vcf)
        if sample not in PLANTED:
            continue
        chrom, start, end, cn = PLANTED[sample]
        hits = [r for r in records if r[0] == chrom and int(r[1]) < end and int(_info(r)["END"]) > start]
        assert hits, f"{sample}: the planted CN{cn} on {chrom}:{start}-{end} is not in {vcf.name}"
        fmt = dict(zip(hits[0][8].split(":"), hits[0][9].split(":")))
        assert (int(fmt["CN"]) < 2) == (cn < 2) and int(fmt["CN"]) != 2, (sample, hits[0])  # a loss or a gain
        assert _info(hits[0])["SVTYPE"] in (("DEL", "CNV") if cn < 2 else ("DUP", "CNV"))

    again = subprocess.run([snakemake, "-s", str(ROOT / "workflows" / "snakemake" / "Snakefile"), "--cores", "2",
                            "--configfile", str(tmp_path / "config.json"), "--directory", str(tmp_path), "-n"],
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_cwl_tool_runs_gcnmops_run(tmp_path):
    cwltool = _runner("cwltool")
    tool = ROOT / "workflows" / "cwl" / "gcnmops-run.cwl"
    gcnmops_cmd = _gcnmops_command(tmp_path)
    validate = subprocess.run([cwltool, "--validate", str(tool)], capture_output=True, text=True, timeout=600)
    assert validate.returncode == 0, validate.stderr[-3000:]

    data, _ = example_cohort(n_regions=800, n_samples=10, seed=3)
    counts = tmp_path / "counts.tsv"
    pd.concat([data.ranges, pd.DataFrame(data.counts, columns=data.sample_names)], axis=1).to_csv(
        counts, sep="\t", index=False)
    job = {"counts": {"class": "File", "path": str(counts)}, "backend": "cpu", "per_sample_vcf": True,
           "min_width": 3, "extra_args": ["--norm-type", "poisson"]}
    (tmp_path / "job.json").write_text(json.dumps(job))
    env = dict(os.environ, PATH=f"{gcnmops_cmd.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([cwltool, "--no-container", "--outdir", str(tmp_path / "out"), str(tool),
                           str(tmp_path / "job.json")], capture_output=True, text=True, timeout=1800, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    outputs = json.loads(proc.stdout)
    assert Path(outputs["results"]["path"]).is_dir()
    params = json.loads(Path(outputs["params"]["path"]).read_text())
    assert params["provenance"]["command"].startswith("gcnmops run -o gcnmops_out --quiet")
    assert params["provenance"]["inputs"][0]["sha256"] == gcnmops.provenance.fingerprint(counts)["sha256"]
    assert params["normType"] == "poisson" and params["minWidth"] == 3
    cnvs = pd.read_csv(outputs["cnvs"]["path"], sep="\t")
    assert len(cnvs) > 0
    samples = sorted(Path(f["path"]).name for f in outputs["sample_vcfs"])
    assert samples == sorted(f"cnvr.{s}.vcf.gz" for s in data.sample_names)
    assert outputs["vcf"]["secondaryFiles"][0]["basename"] == "cnvr.vcf.gz.tbi"
