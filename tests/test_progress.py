"""The progress display: lines in a batch log (pipe), a bar on a terminal (pty) that log lines never break, ETA."""
import fcntl
import io
import os
import pty
import struct
import termios
import subprocess
import sys
import time
from pathlib import Path

from gcnmops import progress

REPO = Path(__file__).resolve().parents[1]


def test_a_pipe_gets_a_line_per_stage_and_lines_inside_long_stages(monkeypatch):
    monkeypatch.setattr(progress, "LINE_EVERY", 0.2)
    monkeypatch.setattr(progress, "QUIET_FOR", 0.0)
    out = io.StringIO()  # no terminal
    with progress.Progress({"read": 1, "model": 3, "write": 1}, stream=out) as bar:
        bar.advance("read")
        for k in range(5):
            bar.step(k + 1, 5)
            time.sleep(0.1)
        bar.advance("model")
        bar.advance("write")
    lines = out.getvalue().splitlines()
    done = [ln for ln in lines if " done [" in ln]
    assert [ln.split()[1] for ln in done] == ["read", "model", "write"]
    assert all(ln.startswith("gcnmops: ") and "elapsed 00:0" in ln for ln in lines)
    assert any(ln.startswith("gcnmops: model ") and "%" in ln for ln in lines)  # inside the stage
    assert "\r" not in out.getvalue()  # no bar


def test_a_short_run_says_nothing_in_a_pipe_and_a_long_one_from_quiet_for_on(monkeypatch):
    """A run shorter than QUIET_FOR (a cached example) prints no progress line; a longer one prints its stages
    from then on."""
    monkeypatch.setattr(progress, "QUIET_FOR", 0.3)
    out = io.StringIO()
    with progress.Progress({"read": 1, "model": 1, "write": 1}, stream=out) as bar:
        bar.advance("read")
        assert out.getvalue() == ""
        time.sleep(0.4)
        bar.advance("model")
        bar.advance("write")
    assert [ln.split()[1] for ln in out.getvalue().splitlines()] == ["model", "write"]


def test_quiet_prints_nothing():
    out = io.StringIO()
    with progress.Progress({"read": 1}, disable=True, stream=out) as bar:
        bar.advance("read")
    assert out.getvalue() == ""


def test_eta_from_measured_stage_rates(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    with progress.Progress({"read": 1, "normalize": 1, "model": 2, "write": 4}, stream=io.StringIO()) as bar:
        clock[0] = 30.0  # a slow start (reading, compiling): no ETA from it alone
        bar.advance("read")
        assert bar.eta() is None
        clock[0] = 31.0
        bar.advance("normalize")  # 1 s per weight; median of 30 and 1 per unit
        per_unit = (30.0 + 1.0) / 2 / (_UNITS := progress._UNITS / 8)
        assert abs(bar.eta() - per_unit * 6 * _UNITS) < 1e-6
        clock[0] = 33.0
        bar.step(1, 2)  # the running stage at its own rate: 2 s for half, 2 s to go
        assert abs(bar.eta() - (2.0 + per_unit * 4 * _UNITS)) < 1e-6


def test_log_lines_go_above_the_bar_on_a_terminal():
    script = (
        "import logging, sys, time\n"
        "from gcnmops import progress\n"
        "log = logging.getLogger('gcnmops'); h = logging.StreamHandler(); log.addHandler(h); log.propagate = False\n"
        "log.setLevel(logging.INFO)\n"
        "with progress.Progress({'read': 1, 'model': 2}) as bar:\n"
        "    bar.step(1, 2); time.sleep(0.05)\n"
        "    log.info('No usable CUDA GPU found: running the model on the CPU backend.')\n"
        "    bar.advance('read'); bar.step(1, 2); time.sleep(0.05)\n"
        "    bar.advance('model')\n"
        "log.info('after')\n"
    )
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal 100 columns wide
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=slave, cwd=REPO, env={**os.environ, "COLUMNS": "100"})
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=60) == 0
    os.close(master)
    text = b"".join(chunks).decode().replace("\r\n", "\n")  # the terminal's newlines
    assert "gcnmops read" in text and "%|" in text  # a bar was drawn
    # the line holding the message, as the terminal shows it (after the last carriage return), is the message
    lines = [ln.split("\r")[-1].replace("\x1b[A", "") for ln in text.split("\n")]
    assert "No usable CUDA GPU found: running the model on the CPU backend." in lines
    assert "after" in lines
    before = text[:text.index("No usable CUDA")]
    assert before.rstrip(" ").endswith("\r")  # the bar was cleared first
