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
from gcnmops.io import writers
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
