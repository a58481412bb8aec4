"""The WDL drop-in for GATK-SV's CNMOPS.wdl (workflows/wdl/CNMOPS.wdl): passes `miniwdl check`, has the inputs and
outputs of GATK-SV's workflow, and its command is one `gcnmops gatk-sv cnmops` call the command line accepts, with
the workflow's inputs in the right options."""
from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

WDL = pytest.importorskip("WDL")  # miniwdl
CNMOPS = Path(__file__).resolve().parents[1] / "workflows" / "wdl" / "CNMOPS.wdl"
#: GATK-SV's CNMOPS.wdl (commit ba2531c): its workflow's inputs and outputs, with their types
GATKSV_INPUTS = {
    "r1": "String", "r2": "String", "batch": "String", "bincov_matrix": "File", "chrom_file": "File",
    "bincov_matrix_index": "File", "ped_file": "File", "exclude_list": "File", "allo_file": "File", "ref_dict": "File",
    "samples": "Array[String]", "prefix": "String", "min_size": "Int?", "stitch_and_clean_large_events": "Boolean?",
    "linux_docker": "String", "sv_pipeline_docker": "String", "cnmops_docker": "String",
    "runtime_attr_sample10": "RuntimeAttr?", "runtime_attr_sample3": "RuntimeAttr?", "runtime_attr_ped": "RuntimeAttr?",
    "runtime_attr_clean": "RuntimeAttr?"}
GATKSV_OUTPUTS = {"Del": "File", "Dup": "File", "Del_idx": "File", "Dup_idx": "File"}


def test_miniwdl_check_passes_strictly():
    r = subprocess.run([sys.executable, "-m", "WDL", "check", "--strict", "--suppress", "CommandShellCheck",
                        str(CNMOPS)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_same_interface_as_gatksv():
    wf = WDL.load(str(CNMOPS)).workflow
    inputs = {b.name: str(b.value.type) for b in wf.available_inputs}
    assert {k: inputs.get(k) for k in GATKSV_INPUTS} == GATKSV_INPUTS
    required = {b.name for b in wf.required_inputs}
    gatksv_required = {k for k, t in GATKSV_INPUTS.items() if not t.endswith("?")} - {"stitch_and_clean_large_events"}
    assert required <= gatksv_required  # a GATK-SV call needs no new input
    assert {b.name: str(b.value) for b in wf.effective_outputs} == GATKSV_OUTPUTS


def _command(values: dict) -> list[str]:
    task = WDL.load(str(CNMOPS)).tasks[0]
    env = WDL.Env.Bindings()
    for d in task.inputs:
        v = values.get(d.name)
        if v is None:
            env = env.bind(d.name, WDL.Value.Null())
        elif isinstance(v, bool):
            env = env.bind(d.name, WDL.Value.Boolean(v))
        elif isinstance(v, int):
            env = env.bind(d.name, WDL.Value.Int(v))
        else:
            env = env.bind(d.name, (WDL.Value.File if isinstance(d.type, WDL.Type.File) else WDL.Value.String)(v))
    text = task.command.eval(env, WDL.StdLib.Base("1.0")).value
    lines = [line for line in text.replace("\\\n", " ").splitlines() if line.strip()]
    assert lines[0].strip() == "set -euo pipefail" and len(lines) == 2, text
    return shlex.split(lines[1])


@pytest.mark.parametrize("large", [False, True])
def test_the_command_is_one_gatksv_cnmops_call(large):
    from gcnmops.cli import build_parser

    values = dict(r1="1000" if large else "3", r2="100" if large else "10", batch="B", bincov_matrix="m.bed.gz",
                  chrom_file="chroms.fai", allo_file="allos.fai", ped_file="b.ped", exclude_list="x.bed",
                  prefix="large" if large else "header", min_size=500000 if large else None,
                  stitch_and_clean_large_events=large, docker="img", gpu_type="t4", gpu_count=1, backend="auto")
    argv = _command(values)
    assert argv[0] == "gcnmops"
    args = build_parser().parse_args(argv[1:])
    assert (args.command, args.gatksv_command) == ("gatk-sv", "cnmops")
    got = {k: getattr(args, k) for k in ("bincov_matrix", "chrom_file", "allo_file", "ped_file", "exclude_list",
                                         "r1", "r2", "batch", "prefix", "min_size", "stitch_and_clean_large_events",
                                         "backend", "outdir")}
    assert got == {"bincov_matrix": "m.bed.gz", "chrom_file": "chroms.fai", "allo_file": "allos.fai",
                   "ped_file": "b.ped", "exclude_list": "x.bed", "r1": int(values["r1"]), "r2": int(values["r2"]),
                   "batch": "B", "prefix": values["prefix"], "min_size": values["min_size"],
                   "stitch_and_clean_large_events": large, "backend": "auto", "outdir": "."}
