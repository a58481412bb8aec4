"""``gcnmops batch``: manifests, dispatch to worker processes, failures, interruption and resume."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gcnmops
from gcnmops.pipeline.batch import (Experiment, format_summary, make_slots, parameter_name, parse_value, python_process_env, read_manifest, read_status, run_batch)
from gcnmops.alignments.counting import write_counts
from gcnmops.data import make_count_data
from gcnmops.errors import InputError
from gcnmops.example import example_cohort

REPO = Path(__file__).resolve().parents[1]
N_EXPERIMENTS = 20
FAILING = "exp07"


def _cohort_file(path: Path, seed: int, n_regions: int, zero_sample: bool = False) -> Path:
    data, _ = example_cohort(n_regions=n_regions, n_samples=8, seed=seed, n_cnvs=2)
    if zero_sample:  # a sample without reads: cn.mops stops ("Zero columns in readcount matrix")
        counts = data.counts.copy()
        counts[:, 3] = 0
        data = make_count_data(counts, data.sample_names, data.ranges)
    return write_counts(data, path)


@pytest.fixture(scope="module")
def cohort_dir(tmp_path_factory) -> Path:
    """20 small count files of different sizes (exp07 has a sample without reads) and a TSV manifest."""
    d = tmp_path_factory.mktemp("batch_inputs")
    rows = []
    for k in range(N_EXPERIMENTS):
        name = f"exp{k:02d}"
        _cohort_file(d / f"{name}.tsv", seed=k + 1, n_regions=200 + 37 * ((k * 7) % N_EXPERIMENTS),
                     zero_sample=name == FAILING)
        method = "exome" if k % 5 == 4 else "cn.mops"
        params = "min_width=4" if k % 3 == 0 else ""
        rows.append(f"{name}\t{name}.tsv\t{method}\t{'' if k % 2 else 10}\t{params}")
    (d / "manifest.tsv").write_text("# twenty experiments\nid\tinput\tmethod\tpriorImpact\tparams\n"
                                    + "\n".join(rows) + "\n")
    return d


# ------------------------------------------------------------------------------------------------ manifests
def test_manifest_values_and_names():
    assert parse_value("10") == 10 and parse_value("0.5") == 0.5 and parse_value("TRUE") is True
    assert parse_value("0.025,0.5,1") == [0.025, 0.5, 1] and parse_value("CN0,CN1") == ["CN0", "CN1"]
    assert parse_value("poisson") == "poisson"
    assert [parameter_name(n) for n in ("priorImpact", "segMedianT", "I", "min_width", "cyc")] == \
        ["prior_impact", "seg_median_t", "I", "min_width", "cyc"]


def test_manifest_tsv_and_yaml_agree(cohort_dir, tmp_path):
    tsv = tmp_path / "m.tsv"
    tsv.write_text("id\tinput\tmethod\tnormType\tparams\n"
                   f"a\t{cohort_dir / 'exp00.tsv'}\tcn.mops\tmedian\tI=0.025,0.5,1,1.5,2 classes=CN0,CN1,CN2,CN3,CN4\n"
                   f"b\t{cohort_dir / 'exp01.tsv'}\thaplocn.mops\t\tcyc=5;upper_threshold=0.7\n")
    yaml_text = f"""
defaults:
  params: {{cyc: 5}}
experiments:
  - id: a
    input: {cohort_dir / 'exp00.tsv'}
    method: cn.mops
    normType: median
    params: {{I: [0.025, 0.5, 1, 1.5, 2], classes: [CN0, CN1, CN2, CN3, CN4]}}
  - id: b
    input: {cohort_dir / 'exp01.tsv'}
    method: haplo
    params: {{upper_threshold: 0.7}}
"""
    pytest.importorskip("yaml")
    (tmp_path / "m.yaml").write_text(yaml_text)
    a_tsv, b_tsv = read_manifest(tsv)
    a_yml, b_yml = read_manifest(tmp_path / "m.yaml")
    assert a_tsv.params == {"norm_type": "median", "I": [0.025, 0.5, 1, 1.5, 2],
                            "classes": ["CN0", "CN1", "CN2", "CN3", "CN4"]}
    assert b_tsv.method == "haplo" and b_tsv.params == {"cyc": 5, "upper_threshold": 0.7}
    assert a_yml.params == dict(a_tsv.params, cyc=5) and b_yml.params == b_tsv.params
    assert (a_yml.input, b_yml.method) == (a_tsv.input, "haplo")


@pytest.mark.parametrize("text,message", [
    ("id\tinput\tparams\nx\tx.tsv\t\n", "lacks column(s) method"),
    ("id\tinput\tmethod\nx\tmissing.tsv\tcn.mops\n", "input file"),
    ("id\tinput\tmethod\nx\texp00.tsv\tcnmopz\n", "Unknown method 'cnmopz'"),
    ("id\tinput\tmethod\tprior_impcat\nx\texp00.tsv\tcn.mops\t2\n", "did you mean 'prior_impact'"),
    ("id\tinput\tmethod\tparams\nx\texp00.tsv\tcn.mops\tdevices=0\n", "run option"),
    ("id\tinput\tmethod\tcyc\nx\texp00.tsv\tcn.mops\t-1\n", "cyc must be a whole number of EM cycles"),
    ("id\tinput\tmethod\nx\texp00.tsv\tcn.mops\nx\texp01.tsv\tcn.mops\n", "already used at line 2"),
    ("id\tinput\tmethod\na/b\texp00.tsv\tcn.mops\n", "cannot name a folder"),
    ("id\tinput\tmethod\nSummary.tsv\texp00.tsv\tcn.mops\n", "the batch's own summary file"),
    (f"id\tinput\tmethod\n{'x' * 256}\texp00.tsv\tcn.mops\n", "256 characters long: at most 128"),
    ("id\tinput\tmethod\nx\texp00.tsv\treference\n", "needs a controls file"),
])
def test_manifest_errors(cohort_dir, tmp_path, text, message):
    m = cohort_dir / f"bad_{abs(hash(text)) % 10**8}.tsv.manifest"
    m.write_text(text)
    with pytest.raises(InputError, match=None) as err:
        read_manifest(m)
    assert message in str(err.value), str(err.value)


def test_manifest_lists_every_problem(cohort_dir):
    m = cohort_dir / "two_bad.manifest"
    m.write_text("id\tinput\tmethod\nx\tnope.tsv\tcn.mops\ny\texp00.tsv\tfoo\n")
    with pytest.raises(InputError) as err:
        read_manifest(m)
    assert "2 problem(s)" in str(err.value) and "line 2" in str(err.value) and "line 3" in str(err.value)


def test_slots_one_device_per_worker():
    gpus = make_slots(devices=[0, 3])
    assert [(s.name, s.env["CUDA_VISIBLE_DEVICES"], s.backend) for s in gpus] == [("gpu0", "0", "gpu"),
                                                                                  ("gpu3", "3", "gpu")]
    cpus = make_slots(workers=2)
    assert [s.backend for s in cpus] == ["cpu", "cpu"]
    assert cpus[0].env["GCNMOPS_NUMBA_THREADS"] == str(max(1, (os.cpu_count() or 1) // 2))


# ------------------------------------------------------------------------------------------------ runs
def _mtimes(outdir: Path, ids) -> dict:
    return {i: {f.name: f.stat().st_mtime_ns for f in (outdir / i).iterdir()} for i in ids}


def test_batch_interrupt_resume_and_summary(cohort_dir, tmp_path):
    """20 experiments on 2 worker processes, largest first; the batch is stopped after 8 (the running ones
    are killed, as by Ctrl-C), then resumed from the command line: finished experiments are not run again,
    the rest complete, the failing one is reported without stopping the others."""
    experiments = read_manifest(cohort_dir / "manifest.tsv")
    assert len(experiments) == N_EXPERIMENTS
    out = tmp_path / "out"
    lines: list[str] = []
    first = run_batch(experiments, out, workers=2, stop_after=8, echo=lines.append, formats=["tsv", "bed"])
    finished = first[first["status"].isin(["done", "failed"])]
    # 8 finished, plus those of the 2 running ones that completed while the batch was being stopped
    assert 8 <= len(finished) <= 10 and (first["status"] == "interrupted").sum() == N_EXPERIMENTS - len(finished)
    by_size = [e.id for e in sorted(experiments, key=lambda e: -e.size)]
    assert set(finished["id"]) <= set(by_size[:10])  # dispatched largest first
    assert (out / "summary.tsv").exists() and "stopped" in lines[-1]
    done_first = list(first.loc[first["status"] == "done", "id"])
    for i in done_first:
        assert read_status(out, i)["state"] == "done"
    before = _mtimes(out, done_first)
    logs_before = {i: (out / i / "log.txt").read_text() for i in done_first}

    env = python_process_env()  # (this process may have R embedded: its LD_LIBRARY_PATH)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "gcnmops", "batch", str(cohort_dir / "manifest.tsv"), "-o", str(out),
                           "--workers", "2", "--formats", "tsv,bed"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]  # one experiment failed
    summary = pd.read_csv(out / "summary.tsv", sep="\t", keep_default_na=False)
    assert list(summary["id"]) == [e.id for e in experiments]  # manifest order
    status = dict(zip(summary["id"], summary["status"]))
    assert status[FAILING] == "failed"
    assert all(status[i] == "skipped" for i in done_first)
    assert all(s == "done" for i, s in status.items() if i not in done_first and i != FAILING), status
    assert "Zero columns" in summary.set_index("id").loc[FAILING, "error"]
    assert _mtimes(out, done_first) == before  # not run again: nothing rewritten
    assert {i: (out / i / "log.txt").read_text() for i in done_first} == logs_before
    assert "Traceback" in (out / FAILING / "log.txt").read_text()
    assert "1 failed" in proc.stdout and "skipped" in proc.stdout

    # every experiment's outputs are those of a direct run
    for exp in experiments[:3]:
        ref = gcnmops.calc_integer_copy_numbers(getattr(gcnmops, {"cn.mops": "cn_mops", "exome": "exome_cn_mops"}[
            exp.method])(str(exp.input), backend="cpu", **exp.params))
        cnvs = pd.read_csv(out / exp.id / "cnvs.tsv", sep="\t", dtype={"seqnames": str})
        assert len(cnvs) == len(ref.cnvs) and list(cnvs["CN"]) == list(ref.cnvs["CN"])
        row = summary.set_index("id").loc[exp.id]
        assert (int(row["regions"]), int(row["samples"]), int(row["cnvs"])) == (ref.summary()["regions"], 8,
                                                                                len(ref.cnvs))
        assert (out / exp.id / "cnvs.bed").exists()

    # a third run has nothing to do
    third = run_batch(experiments, out, workers=2, echo=lines.append)
    assert set(third["status"]) == {"skipped", "failed"} and "failed" in format_summary(third)


def test_batch_cli_ctrl_c(cohort_dir, tmp_path):
    """Ctrl-C (SIGINT) stops a command-line batch: running experiments are stopped, the summary is written,
    exit status 130; experiments finished before keep their status."""
    import signal
    import time

    out = tmp_path / "out"
    env = python_process_env()
    env["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "gcnmops", "batch", str(cohort_dir / "manifest.tsv"), "-o",
                             str(out), "--workers", "1", "--formats", "tsv"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None and not any(
                (read_status(out, f.parent.name) or {}).get("state") == "done" for f in out.glob("*/status.json")):
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    summary = pd.read_csv(out / "summary.tsv", sep="\t", keep_default_na=False)
    done = set(summary.loc[summary["status"] == "done", "id"])
    stopped = summary.loc[summary["status"].isin(["interrupted", "not run"]), "id"]
    assert done and len(stopped) and set(summary["status"]) <= {"done", "failed", "interrupted", "not run"}
    assert all(read_status(out, i)["state"] == "done" for i in done)
    assert not any(read_status(out, i) for i in stopped)  # nothing half-finished is marked


def test_batch_reruns_changed_experiments(cohort_dir, tmp_path):
    exp = Experiment(id="one", input=cohort_dir / "exp01.tsv", method="cn.mops", params={})
    out = tmp_path / "out"
    assert list(run_batch([exp], out, echo=lambda s: None)["status"]) == ["done"]
    assert list(run_batch([exp], out, echo=lambda s: None)["status"]) == ["skipped"]
    changed = Experiment(id="one", input=exp.input, method="cn.mops", params={"cyc": 5})
    assert list(run_batch([changed], out, echo=lambda s: None)["status"]) == ["done"]
    assert read_status(out, "one")["fingerprint"] == changed.fingerprint()
    assert (out / "one" / "log.txt").read_text().count("=== ") == 4  # two attempts, start and end lines
    assert json.loads((out / "one" / "status.json").read_text())["cnvs"] >= 0


@pytest.mark.gpu
def test_batch_on_gpus(cohort_dir, tmp_path):
    """One worker per GPU (CUDA_VISIBLE_DEVICES), the GPU backend; the same calls as the CPU."""
    experiments = [e for e in read_manifest(cohort_dir / "manifest.tsv") if e.id != FAILING][:6]
    out = tmp_path / "gpu"
    summary = run_batch(experiments, out, devices="all", echo=lambda s: None, formats=["tsv"])
    assert set(summary["status"]) == {"done"}
    assert all(str(w).startswith("gpu") for w in summary["worker"])
    for exp in experiments:
        ref = gcnmops.cn_mops(str(exp.input), backend="cpu", **exp.params) if exp.method == "cn.mops" else \
            gcnmops.exome_cn_mops(str(exp.input), backend="cpu", **exp.params)
        cnvs = pd.read_csv(out / exp.id / "cnvs.tsv", sep="\t", dtype={"seqnames": str})
        assert len(cnvs) == len(ref.cnvs)
        assert np.array_equal(cnvs["start"].to_numpy(), ref.cnvs["start"].to_numpy())


def _children(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            stat = (d / "stat").read_text() if d.name.isdigit() else ""
        except OSError:
            continue
        if stat and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_workers_exit_when_the_batch_process_is_killed(cohort_dir, tmp_path):
    """SIGKILL of the batch process (no chance to stop its workers): the worker stops its experiment at once
    (within one EM cycle) instead of finishing it and then waiting forever for the next."""
    import signal
    import time

    out = tmp_path / "out"
    manifest = tmp_path / "m.tsv"
    manifest.write_text(f"id\tinput\tmethod\tcyc\nlong\t{cohort_dir / 'exp00.tsv'}\tcn.mops\t100000\n"
                        f"next\t{cohort_dir / 'exp01.tsv'}\tcn.mops\t\n")
    env = python_process_env()
    env["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "gcnmops", "batch", str(manifest), "-o", str(out), "--workers",
                             "1", "--quiet"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and "params" not in ((out / "long" / "log.txt").read_text()
                                                           if (out / "long" / "log.txt").exists() else ""):
            time.sleep(0.05)
        time.sleep(1.0)  # into the fit
        workers = _children(proc.pid)
        assert workers and proc.poll() is None
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.05)
    assert not any(_alive(w) for w in workers)
    assert "terminated" in (out / "long" / "log.txt").read_text()
    assert not (out / "long" / "status.json").exists() and not list(out.rglob("*.tmp"))


def test_a_rerun_removes_the_temporary_files_of_a_killed_attempt(cohort_dir, tmp_path, left_by_a_killed_run):
    out = tmp_path / "out"
    (out / "exp01").mkdir(parents=True)
    (stale,) = left_by_a_killed_run(out / "exp01" / "cnvs.tsv")
    stale.write_text("half a file")
    exp = Experiment(id="exp01", input=cohort_dir / "exp01.tsv", method="cn.mops")
    run_batch([exp], out, workers=1, formats=["tsv"], echo=lambda line: None)
    assert read_status(out, "exp01")["state"] == "done" and not list(out.rglob("*.tmp"))


def test_batch_cli_a_file_in_place_of_an_experiment_folder_then_a_clean_run(cohort_dir, tmp_path):
    """A file where an experiment's folder goes: `error:` and exit 2 before any work. Then a run: its workers are
    stopped at the end without a word on stderr."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "exp01").write_text("not a folder")
    manifest = tmp_path / "m.tsv"
    manifest.write_text(f"id\tinput\tmethod\nexp01\t{cohort_dir / 'exp01.tsv'}\tcn.mops\n")
    env = python_process_env()
    env["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "gcnmops", "batch", str(manifest), "-o", str(out), "--formats", "seg", "--quiet"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "'exp01' is a file" in proc.stderr
    (out / "exp01").unlink()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-3000:]
    assert read_status(out, "exp01")["state"] == "done"
