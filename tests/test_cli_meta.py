"""The command line's own options: --version, help text on every flag, --formats checked before any work."""
from __future__ import annotations

import subprocess
import sys
import time

import gcnmops
from gcnmops.cli import build_parser


def test_version():
    proc = subprocess.run([sys.executable, "-m", "gcnmops", "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == f"gcnmops {gcnmops.__version__}"


def test_misspelled_format_is_refused_before_any_work(tmp_path):
    out = tmp_path / "out"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gcnmops", "run", "--example", "-o", str(out), "--formats", "vfc"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and "did you mean 'vcf'" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
    assert time.perf_counter() - t0 < 30  # (issue: < 5 s on a quiet machine; this one is shared)


def test_quiet_run_prints_no_foreign_log_lines(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gcnmops", "run", "--example", "-o", str(tmp_path / "o"), "--backend",
                           "cpu", "--quiet"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0
    assert proc.stderr == "", proc.stderr  # nothing but gcnmops's own summary (stdout)


def test_every_flag_of_every_command_has_help_text():
    commands = build_parser()._subparsers._group_actions[0].choices
    undocumented = [(name, a.dest) for name, sub in commands.items() for a in sub._actions if not a.help]
    assert undocumented == []


def test_sigterm_while_writing_leaves_no_file(tmp_path):
    """SIGTERM during the write stage: exit 143, `error:`, no temporary and no new final file."""
    script = f"""
import os, signal, sys, time
from gcnmops.outputs import writers
from gcnmops.cli import main
real = writers.write_frame
def slow(*a, **k):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    return real(*a, **k)
writers.write_frame = slow
sys.exit(main(["run", "--example", "-o", {str(tmp_path / "out")!r}, "--backend", "cpu", "--quiet"]))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 143, proc.stderr
    assert proc.stderr.startswith("error: terminated (SIGTERM)") and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()  # the folder the run made is gone with its files


def test_an_output_folder_that_cannot_be_written_is_refused_before_any_work(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for out, fragment in ((a_file, "is an existing file"), (a_file / "below", "is a file")):
        proc = subprocess.run([sys.executable, "-m", "gcnmops", "run", "--example", "-o", str(out)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stderr.startswith("error:") and fragment in proc.stderr, proc.stderr
        assert "normalize" not in proc.stdout  # no analysis ran
    assert a_file.read_text() == "x"


# ------------------------------------------------------------------------------------------------ faults
def _main_script(patch: str, out, *args) -> list[str]:
    """A child interpreter that applies ``patch`` (Python source) and runs ``gcnmops run --example -o out``."""
    run = ["run", "--example", "-o", str(out), "--backend", "cpu", "--quiet", *args]
    return [sys.executable, "-c", f"import sys\n{patch}\nfrom gcnmops.cli import main\nsys.exit(main({run!r}))"]


def _left(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def test_signals_during_the_model_fit_stop_it_at_once(tmp_path):
    """Ctrl-C (SIGINT) and SIGTERM during a long EM fit (--cyc 100000: many minutes): the run stops within a second or
    two with `error:` and exit 130 / 143, and leaves no output folder."""
    import signal

    for sig, code, word in ((signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")):
        out = tmp_path / f"out_{code}"
        ready = tmp_path / f"fitting_{code}"
        patch = f"""
import pathlib
from gcnmops.model import cpu
real = cpu.run_queue
def flagged(*args, **kwargs):
    pathlib.Path({str(ready)!r}).touch()
    return real(*args, **kwargs)
cpu.run_queue = flagged
"""
        proc = subprocess.Popen(_main_script(patch, out, "--cyc", "100000"), stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.time() + 300
            while not ready.exists() and proc.poll() is None and time.time() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)  # inside the fit
            t0 = time.perf_counter()
            proc.send_signal(sig)
            err = proc.communicate(timeout=60)[1]
            stopped = time.perf_counter() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == code and err.startswith(f"error: {word}") and "Traceback" not in err, err
        assert stopped < 5.0, stopped  # ~1 s on a quiet machine (the exit included)
        assert not out.exists()


def test_a_full_disk_is_an_error_and_leaves_the_folder_as_it_was(tmp_path):
    """ENOSPC while writing (simulated in one writer thread): `error:` naming the folder and the full disk, exit
    2, no temporary file, and an earlier run's files in the folder left as they were."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "cnvs.tsv").write_text("an earlier run's calls\n")
    (out / ".gcnmops-files").write_text("cnvs.tsv\n")
    patch = """
import errno, os
from gcnmops.outputs import writers
real = writers.write_columns
def full(path, *a, **k):
    real(path, *a, **k)
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
writers.write_columns = full
"""
    proc = subprocess.run(_main_script(patch, out), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and proc.stderr.startswith("error: No space left") and "Traceback" not in proc.stderr
    assert repr(str(out)) in proc.stderr
    assert _left(out) == [".gcnmops-files", "cnvs.tsv"] and (out / "cnvs.tsv").read_text() == "an earlier run's calls\n"


def test_a_failing_plot_leaves_no_plots_and_no_half_set(tmp_path):
    """--report: plots and report.html belong to the run's batch; a plot that fails (here the third, as on a
    full disk) leaves no plots/ folder and none of the other files."""
    out = tmp_path / "out"
    patch = """
import errno
from gcnmops.report import plots
real = plots.plot_files
def failing(*a, **k):
    files = real(*a, **k)
    def full(path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    return files[:2] + [(files[2][0], full)] + files[3:]
plots.plot_files = failing
"""
    proc = subprocess.run(_main_script(patch, out, "--report"), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and proc.stderr.startswith("error: No space left"), proc.stderr
    assert not out.exists()


def test_a_folder_in_place_of_a_result_file_is_refused(tmp_path):
    out = tmp_path / "out"
    (out / "segmentation.tsv").mkdir(parents=True)
    proc = subprocess.run(_main_script("", out, "--formats", "tsv"), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "segmentation.tsv' is a folder" in proc.stderr and "Traceback" not in proc.stderr
    assert _left(out) == ["segmentation.tsv"]


def test_plots_and_report_are_replaced_with_the_set(tmp_path):
    """A run with --report, then one without into the same folder: the plots and report of the first are gone."""
    out = tmp_path / "out"
    first = subprocess.run(_main_script("", out, "--report", "--formats", "tsv"), capture_output=True, text=True,
                           timeout=600)
    assert first.returncode == 0, first.stderr
    names = (out / ".gcnmops-files").read_text().split()
    assert "report.html" in names and "plots/overview.png" in names and (out / "plots" / "overview.png").is_file()
    assert all((out / n).is_file() for n in names)
    second = subprocess.run(_main_script("", out, "--formats", "seg"), capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert not (out / "plots").exists() and not (out / "report.html").exists()
    assert _left(out) == sorted([".gcnmops-files", *(out / ".gcnmops-files").read_text().split()])


def _mount_tmpfs(folder, size: str) -> bool:
    import os

    folder.mkdir()
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True).returncode == 0


def test_a_really_full_disk(tmp_path):
    """The same on a 1 MB tmpfs (where this user may mount one): run and count stop with `error:`, exit 2."""
    small = tmp_path / "small"
    if not _mount_tmpfs(small, "1m"):
        import pytest

        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        proc = subprocess.run(_main_script("", small / "out"), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 2 and proc.stderr.startswith("error: No space left"), proc.stderr
        assert _left(small) == []
        from golden import GOLDEN_DIR

        bams = sorted(str(p) for p in (GOLDEN_DIR / "bam").glob("*.bam"))
        if bams:
            (small / "filler").write_bytes(b"\0" * (1024 * 1024 - 8192))
            proc = subprocess.run([sys.executable, "-m", "gcnmops", "count", *bams, "-o", str(small / "c.tsv"),
                                   "--quiet"], capture_output=True, text=True, timeout=600)
            assert proc.returncode == 2 and proc.stderr.startswith("error: No space left"), proc.stderr
            assert _left(small) == ["filler"]
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


def test_every_option_with_a_value_shows_its_default():
    """--help names the default of every option that takes a value (or says it is required)."""
    commands = build_parser()._subparsers._group_actions[0].choices
    silent = [(name, a.option_strings[0]) for name, sub in commands.items() for a in sub._actions
              if a.option_strings and a.nargs != 0 and not a.required and a.help != "==SUPPRESS=="
              and "default" not in a.help]
    assert silent == []


def test_threads_means_threads_everywhere():
    commands = build_parser()._subparsers._group_actions[0].choices
    for name in ("run", "count"):
        (threads,) = [a for a in commands[name]._actions if "--threads" in a.option_strings]
        assert "threads" in threads.help and threads.type is int
    count = commands["count"].parse_args(["a.bam", "-o", "c.tsv", "--workers", "3"])  # the former name
    assert count.threads == 3 and "--workers" not in commands["count"].format_help()
    (workers,) = [a for a in commands["batch"]._actions if "--workers" in a.option_strings]
    assert "processes" in workers.help


def test_the_temporaries_of_a_run_killed_outright_are_removed_by_the_next(tmp_path, results, left_by_a_killed_run):
    """SIGKILL (or the out-of-memory killer) leaves temporary files named for its process; the next run into the
    folder removes them, and only them: not a user's file of a similar name, not a live process's."""
    from gcnmops.files import temp_file
    from gcnmops.outputs.writers import write_result

    out = tmp_path / "out"
    (out / "plots").mkdir(parents=True)
    left = left_by_a_killed_run(out / "cnvs.tsv", out / "plots" / "overview.png")
    kept = [out / "notes.tmp", out / "my.tsv", out / "plots" / "mine.png", out / ".cnvs.tsv.k3_x9a0q.tmp",
            temp_file(out / "segmentation.tsv")]  # this process's: a live run's
    for path in kept[:-1]:
        path.write_text("x")
    assert all(p.exists() for p in left)
    write_result(results[1], out, formats=["seg"])
    assert not any(p.exists() for p in left) and all(p.exists() for p in kept)


def test_write_errors_name_the_folder_and_the_cause():
    import errno

    from gcnmops.io.atomic import output_error

    arrow = OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")  # no errno attribute
    assert str(output_error(arrow, "out")).startswith("No space left on the device of the output folder 'out'")
    assert "Read-only file system" in str(output_error(OSError(errno.EROFS, "Read-only file system"), "out"))
    failed = output_error(OSError(errno.EIO, "Input/output error", "out/.cnvs.tsv.gcnmops-7@h.abcd1234.tmp"), "out")
    assert str(failed) == "Writing into the output folder 'out' failed at 'cnvs.tsv': Input/output error. Nothing " \
                          "was written."


def test_gpu_warmup_cohorts_reach_both_segmentation_prepare_paths():
    """One GPU warm-up cohort has chromosomes longer than the device prepare takes (the host pass, compiled on
    the first BM-A-sized run otherwise: 5.4 s), the others short ones (the device kernel); every cohort can be
    written in every format (a VCF holds positions below 2^31)."""
    from gcnmops import cli
    from gcnmops.outputs.callfiles import VcfOptions
    from gcnmops.cuda.config import DEVICE_PREPARE_MAX_ROWS

    cohorts = cli._gpu_warmup_cohorts()
    assert [c.n_samples for c in cohorts] == list(cli.WARMUP_SAMPLES)
    longest = [max(e - f for _, f, e in c.blocks()) for c in cohorts]
    assert longest[0] > DEVICE_PREPARE_MAX_ROWS
    assert all(n <= DEVICE_PREPARE_MAX_ROWS for n in longest[1:])
    for c in cohorts:
        VcfOptions().checked(c.genomic_ranges())


def test_gpu_warmup_reaches_every_em_kernel_variant():
    """The GPU EM kernel is compiled per work buffer (a power of two of the samples up to EM_LOCAL_WORK_MAX, then one
    global-work variant): the warm-up's cohorts (and the example's) reach each one, so that a first run of a cohort
    of any size (a GATK-SV pass of 500 samples) compiles nothing."""
    from gcnmops import cli
    from gcnmops.example import example_cohort
    from gcnmops.model.gpu import KernelConfig

    cfg = KernelConfig()
    warmed = {cfg.resolve(9, n) for n in (*cli.WARMUP_SAMPLES, example_cohort()[0].n_samples)}
    assert {cfg.resolve(9, n) for n in range(1, 5001)} <= warmed
