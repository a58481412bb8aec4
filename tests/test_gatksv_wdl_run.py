"""workflows/wdl/CNMOPS.wdl run end to end by ``miniwdl run`` on a tiny batch, with the no-container test backend
(workflows/wdl/testing/miniwdl_local.py, registered by an entry point): its outputs are the files that
``gcnmops gatk-sv cnmops`` writes when run directly, byte for byte."""
from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("WDL")  # miniwdl
ROOT = Path(__file__).resolve().parents[1]
CNMOPS = ROOT / "workflows" / "wdl" / "CNMOPS.wdl"
PLUGIN = ROOT / "workflows" / "wdl" / "testing"
CALLS = {"header": dict(r1=3, r2=10, min_size=None, stitch=False),
         "large": dict(r1=1000, r2=100, min_size=200_000, stitch=True)}


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> dict[str, Path]:
    """A small GATK-SV batch made by benchmarks/bench_gatksv.py: the CNMOPS.wdl call's File inputs."""
    spec = importlib.util.spec_from_file_location("bench_gatksv", ROOT / "benchmarks" / "bench_gatksv.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    folder = tmp_path_factory.mktemp("batch")
    bench.make_batch(folder, 10_000, 8, seed=3, threads=2)
    files = {opt[2:].replace("-", "_"): path for opt, path in bench.batch_paths(folder).items()}
    files["bincov_matrix_index"] = folder / "batch.bincov.bed.gz.tbi"  # unused by the task
    files["ref_dict"] = folder / "ref.dict"  # unused by the task
    for name in ("bincov_matrix_index", "ref_dict"):
        files[name].write_bytes(b"")
    return files


def _env(tmp: Path) -> dict[str, str]:
    """The environment of ``miniwdl run``: the local backend registered and selected, this checkout's gcnmops."""
    info = tmp / "plugin" / "miniwdl_local-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: miniwdl-local\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[miniwdl.plugin.container_backend]\nlocal = miniwdl_local:LocalContainer\n")
    path = [str(tmp / "plugin"), str(PLUGIN), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)),
                PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
                MINIWDL__SCHEDULER__CONTAINER_BACKEND="local", MINIWDL__CALL_CACHE__GET="false",
                MINIWDL__CALL_CACHE__PUT="false")


@pytest.mark.parametrize("prefix", list(CALLS))
def test_miniwdl_run_writes_what_gatksv_cnmops_writes(batch, tmp_path, prefix):
    call = CALLS[prefix]
    inputs = {k: str(v) for k, v in batch.items()}
    inputs |= {"r1": str(call["r1"]), "r2": str(call["r2"]), "batch": "B", "prefix": prefix,
               "samples": [line.split("\t")[1] for line in batch["ped_file"].read_text().splitlines()],
               "stitch_and_clean_large_events": call["stitch"], "backend": "cpu", "linux_docker": "unused",
               "sv_pipeline_docker": "unused", "cnmops_docker": "gcnmops:test"}
    if call["min_size"] is not None:
        inputs["min_size"] = call["min_size"]
    (tmp_path / "inputs.json").write_text(json.dumps(inputs))
    r = subprocess.run([sys.executable, "-m", "WDL", "run", str(CNMOPS), "-i", str(tmp_path / "inputs.json"),
                        "--dir", str(tmp_path / "runs"), "-o", str(tmp_path / "outputs.json")],
                       env=_env(tmp_path), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    outputs = json.loads((tmp_path / "outputs.json").read_text())["outputs"]
    assert set(outputs) == {f"CNMOPS.{k}" for k in ("Del", "Dup", "Del_idx", "Dup_idx")}

    direct = tmp_path / "direct"
    argv = [sys.executable, "-m", "gcnmops", "gatk-sv", "cnmops", "--bincov-matrix", inputs["bincov_matrix"],
            "--chrom-file", inputs["chrom_file"], "--allo-file", inputs["allo_file"], "--ped-file",
            inputs["ped_file"], "--exclude-list", inputs["exclude_list"], "--r1", inputs["r1"], "--r2", inputs["r2"],
            "--batch", "B", "--prefix", prefix, "--backend", "cpu", "-o", str(direct)]
    if call["min_size"] is not None:
        argv += ["--min-size", str(call["min_size"])]
    if call["stitch"]:
        argv.append("--stitch-and-clean-large-events")
    subprocess.run(argv, check=True, cwd=ROOT, env=_env(tmp_path / "d"), capture_output=True)
    for key, name in (("Del", f"B.DEL.{prefix}.bed.gz"), ("Dup", f"B.DUP.{prefix}.bed.gz"),
                      ("Del_idx", f"B.DEL.{prefix}.bed.gz.tbi"), ("Dup_idx", f"B.DUP.{prefix}.bed.gz.tbi")):
        got = Path(outputs[f"CNMOPS.{key}"])
        assert got.name == name
        assert got.read_bytes() == (direct / name).read_bytes(), name
    calls = gzip.decompress((direct / f"B.DEL.{prefix}.bed.gz").read_bytes()) + \
        gzip.decompress((direct / f"B.DUP.{prefix}.bed.gz").read_bytes())
    assert calls.count(b"\n") > 0  # the batch's planted CNVs are called: the comparison is not of empty files
    work = next((tmp_path / "runs").glob("*/call-GcnmopsCNMOPS/work"))
    gffs = sorted(work.glob("passes/*/cnMOPS.cnMOPS.gff"))
    assert [g.parent.name for g in gffs] == sorted(p.name for p in (direct / "passes").iterdir())
    for g in gffs:
        assert g.read_bytes() == (direct / "passes" / g.parent.name / g.name).read_bytes(), g.parent.name


def test_local_backend_retries_in_a_fresh_work_dir(tmp_path):
    """A task failing once is run again (maxRetries) in a fresh work directory, its inputs linked again, and its
    stdout is the second attempt's."""
    marker = tmp_path / "failed-once"
    (tmp_path / "in.txt").write_text("42\n")
    (tmp_path / "retry.wdl").write_text(f"""version 1.0
task t {{
  input {{ File f }}
  command <<<
    set -e
    touch leftover
    if [ ! -e {marker} ]; then touch {marker}; exit 3; fi
    cat ~{{f}}
    echo done > result.txt
  >>>
  output {{ String out = read_string(stdout()) + " " + read_string("result.txt") }}
  runtime {{ docker: "ignored:latest" maxRetries: 1 }}
}}
""")
    r = subprocess.run([sys.executable, "-m", "WDL", "run", str(tmp_path / "retry.wdl"), f"f={tmp_path / 'in.txt'}",
                        "--dir", str(tmp_path / "runs"), "-o", str(tmp_path / "outputs.json")],
                       env=_env(tmp_path), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    assert json.loads((tmp_path / "outputs.json").read_text())["outputs"] == {"t.out": "42 done"}
    run = next(p for p in (tmp_path / "runs").iterdir() if p.name != "_LAST")
    assert (run / "work.failed1" / "leftover").exists() and (run / "work" / "leftover").exists()
