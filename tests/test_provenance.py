"""What made a result folder: params.json's ``provenance`` and the VCF header's ``##gcnmops*`` lines (version,
command line, date, backend, device, input fingerprints); the version written in one place."""
from __future__ import annotations

import datetime
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import gcnmops
from gcnmops import provenance
from gcnmops.example import example_cohort
from gcnmops.outputs.callfiles import provenance_lines

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_written_once():
    """pyproject reads gcnmops/version.py; CITATION.cff names the same version; nothing else writes one."""
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip("run from an installed package (scripts/check_wheel.sh): no checkout beside the tests")
    text = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in text and 'attr = "gcnmops.version.__version__"' in text
    assert not re.search(r'(?m)^version\s*=\s*"', text)
    assert re.search(r"(?m)^version: (\S+)$", (ROOT / "CITATION.cff").read_text()).group(1) == gcnmops.__version__
    assert re.search(rf"(?m)^## \[{re.escape(gcnmops.__version__)}\]", (ROOT / "CHANGELOG.md").read_text())


def test_fingerprint_of_small_and_large_files_and_folders(tmp_path):
    small = tmp_path / "small.tsv"
    small.write_bytes(b"a\tb\n1\t2\n")
    fp = provenance.fingerprint(small)
    assert fp["sha256"] == hashlib.sha256(small.read_bytes()).hexdigest() and fp["size"] == 8
    assert fp["path"] == str(small.absolute()) and fp["modified"].endswith("Z")

    big = tmp_path / "big.bin"
    data = bytearray(os.urandom(provenance.WHOLE_LIMIT + 12345))
    big.write_bytes(data)
    part = provenance.PART
    expected = hashlib.sha256(bytes(data[:part]) + bytes(data[-part:]) + str(len(data)).encode()).hexdigest()
    assert provenance.fingerprint(big)["sha256_head_tail"] == expected and "sha256" not in provenance.fingerprint(big)
    data[-1] ^= 1  # a change in the last MiB is seen
    big.write_bytes(data)
    assert provenance.fingerprint(big)["sha256_head_tail"] != expected

    store = tmp_path / "store.zarr"
    (store / "x").mkdir(parents=True)
    (store / "x" / "0.0").write_bytes(b"12345")
    before = provenance.fingerprint(store)
    assert before["size"] == 5 and len(before["sha256_listing"]) == 64
    (store / "x" / "0.1").write_bytes(b"6")
    assert provenance.fingerprint(store)["sha256_listing"] != before["sha256_listing"]
    assert provenance.fingerprint(tmp_path / "nothing")["missing"] is True


def test_describe_without_a_noted_command_names_this_process():
    saved = dict(provenance._COMMAND)
    try:
        provenance._COMMAND.clear()
        d = provenance.describe()
        assert d["gcnmops"] == gcnmops.__version__ and d["backend"] is None and d["inputs"] == []
        assert d["command"].split()[0] == Path(sys.argv[0]).name
    finally:
        provenance._COMMAND.update(saved)


def test_run_folder_says_what_made_it(tmp_path):
    """gcnmops run INPUT: params.json's provenance and the VCF header carry the version, the command line, the
    date (UTC), the backend, the device and the input's digest; read_result keeps it out of cn.mops's params."""
    data, _ = example_cohort(n_regions=600, n_samples=12)
    counts = tmp_path / "my counts.tsv"
    pd.concat([data.ranges, pd.DataFrame(data.counts, columns=data.sample_names)], axis=1).to_csv(
        counts, sep="\t", index=False)
    out = tmp_path / "out"
    t0 = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    proc = subprocess.run([sys.executable, "-m", "gcnmops", "run", str(counts), "-o", str(out), "--backend", "cpu",
                           "--quiet", "--formats", "tsv,vcf"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    p = json.loads((out / "params.json").read_text())["provenance"]
    assert p["gcnmops"] == gcnmops.__version__ and p["backend"] == "cpu" and p["device"]
    assert p["command"] == f"gcnmops run '{counts}' -o {out} --backend cpu --quiet --formats tsv,vcf"
    made = datetime.datetime.strptime(p["date"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    assert t0 <= made <= datetime.datetime.now(datetime.timezone.utc)
    assert [i["path"] for i in p["inputs"]] == [str(counts)]
    assert p["inputs"][0]["sha256"] == hashlib.sha256(counts.read_bytes()).hexdigest()

    vcf = out / "cnvr.vcf.gz" if (out / "cnvr.vcf.gz").exists() else out / "cnvr.vcf"  # plain text without pysam
    header = [line for line in (gzip.open if vcf.suffix == ".gz" else open)(vcf, "rt") if line.startswith("##")]
    assert f"##fileDate={made:%Y%m%d}\n" in header
    command = [line for line in header if line.startswith("##gcnmopsCommand=")]
    assert len(command) == 1 and f'Version="{gcnmops.__version__}"' in command[0]
    assert f'Date="{p["date"]}"' in command[0] and 'Backend="cpu"' in command[0]
    assert f"CommandLine=\"gcnmops run '{counts}' -o {out}" in command[0]
    inputs = [line for line in header if line.startswith("##gcnmopsInput=")]
    assert len(inputs) == 1 and f'Digest="sha256:{p["inputs"][0]["sha256"]}"' in inputs[0]
    if shutil.which("bcftools"):  # htslib reads the lines as structured header lines
        view = subprocess.run(["bcftools", "view", "-h", str(vcf)], capture_output=True, text=True)
        assert view.returncode == 0 and "##gcnmopsInput=<ID=input1" in view.stdout, view.stderr

    result = gcnmops.read_result(out)
    assert result.provenance == p and "provenance" not in result.params


def test_vcf_values_are_quoted_and_escaped():
    lines = provenance_lines({"gcnmops": "1", "date": "d", "command": 'gcnmops run "a\\b"\tc', "backend": None,
                              "inputs": []})
    assert lines == ['##gcnmopsCommand=<ID=gcnmops,Version="1",Date="d",CommandLine="gcnmops run \\"a\\\\b\\" c">']


def test_a_folder_read_back_keeps_its_run_entries_out_of_cn_mops_params(tmp_path):
    """params.json holds, beside cn.mops's parameters, what made the folder, what it left out and its sample QC:
    read back (in memory and streamed), they are the result's provenance / selection / sample_qc, and params holds
    nothing that is not a cn.mops parameter (R's params list is built from it, value by value)."""
    from gcnmops.io.store import save_count_data
    from gcnmops.outputs.results import read_result
    from gcnmops.pipeline.run import run_and_write
    from gcnmops.pipeline.streaming import run_streaming

    data = example_cohort()[0]
    run_and_write("cn.mops", data, tmp_path / "mem", backend="cpu", exclude_samples=[data.sample_names[0]])
    folders = ["mem"]
    try:  # a streamed folder where zarr (the dask extra) is installed
        import zarr  # noqa: F401
    except ImportError:
        pass
    else:
        save_count_data(data, tmp_path / "c.zarr")
        run_streaming(tmp_path / "c.zarr", tmp_path / "streamed", integer=False, formats=["seg"], backend="cpu")
        folders.append("streamed")
    for folder in folders:
        back = read_result(tmp_path / folder)
        result = back if isinstance(back, gcnmops.CNVDetectionResult) else back.compute()
        assert not any(isinstance(v, dict) for k, v in result.params.items() if k != "SegmentationParams"), folder
        assert "provenance" not in result.params and "sampleQC" not in result.params
        assert result.provenance.get("gcnmops") == gcnmops.__version__, folder
    mem = read_result(tmp_path / "mem")
    assert mem.selection == {"excludedSamples": [data.sample_names[0]]}
    assert mem.sample_qc is not None and len(mem.sample_qc) == len(data.sample_names)
    assert mem.sample_qc["reasons"].map(type).eq(str).all()  # "" where none: the VCF header writes them
    mem.write(tmp_path / "again", formats=["vcf"])
