"""A progress bar for long runs that moves inside stages, with an ETA (tqdm, on stderr).

The faces (CLI, batch) open a ``Progress`` over weighted stages; the stages themselves report how far they
are with ``tick(done, total)`` (a chromosome normalized, a chunk of regions fitted, a file written), which
moves the bar within the current stage. Outside a ``Progress`` (the Python API, R) ``tick`` does nothing.

On a terminal, log lines (gcnmops's and the root logger's) are printed above the bar, which is redrawn below
them. Where stderr is no terminal (a batch job's log, a pipe) there is no bar: one line per finished stage and,
inside a stage, one every ``LINE_EVERY`` seconds, each with the elapsed time, once the run has lasted
``QUIET_FOR`` seconds (a shorter run says nothing). The ETA adds the running stage's
rest at its own measured rate and the later stages' weights at the median seconds per weight of the stages
finished so far (at least two: none before), so that a slow start (reading, compiling) is not extrapolated.
"""
from __future__ import annotations

import logging
import statistics
import sys
import threading
import time
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

#: bar units per run
_UNITS = 1000
#: seconds between progress lines inside a stage where stderr is no terminal
LINE_EVERY = 10.0
#: seconds a run goes on before it prints progress lines where stderr is no terminal
QUIET_FOR = 10.0
_CURRENT: ContextVar["Progress | None"] = ContextVar("gcnmops_progress", default=None)


class Progress:
    """Context manager: a bar over ``stages`` (name -> relative weight, in order), closed without a trace."""

    def __init__(self, stages: dict[str, float], disable: bool = False, stream=None) -> None:
        total = sum(stages.values()) or 1.0
        self._share = {name: w / total * _UNITS for name, w in stages.items()}
        self._order = list(stages)
        self._stage = 0
        self._base = 0.0  # units of the stages finished
        self._shown = 0.0
        self._fraction = 0.0  # of the running stage
        self._lock = threading.Lock()
        self._stream = sys.stderr if stream is None else stream
        terminal = bool(getattr(self._stream, "isatty", lambda: False)())
        self._lines = not disable and not terminal  # progress lines instead of a bar
        self._t0 = self._stage_t0 = time.monotonic()
        self._seconds_per_unit: list[float] = []  # of the finished stages
        self._bar = tqdm(total=_UNITS, disable=disable or not terminal, leave=False, dynamic_ncols=True,
                         file=self._stream, bar_format="{desc} {percentage:3.0f}%|{bar}| [{elapsed}<{postfix}]")
        self._bar.set_description_str(self._label(0))
        self._bar.set_postfix_str("?", refresh=False)
        self._token = None
        self._exits = ExitStack()
        self._stop = threading.Event()

    def _label(self, k: int) -> str:
        return f"gcnmops {self._order[k]:<12s}" if k < len(self._order) else "gcnmops done        "

    def _move_to(self, units: float) -> None:
        if units > self._shown:
            self._bar.set_postfix_str(self._eta_text(), refresh=False)
            self._bar.update(units - self._shown)
            self._shown = units

    def eta(self) -> float | None:
        """Seconds left (module docstring), None before two stages are finished."""
        if len(self._seconds_per_unit) < 2 or self._stage >= len(self._order):
            return None if self._stage < len(self._order) else 0.0
        per_unit = statistics.median(self._seconds_per_unit)
        share = self._share[self._order[self._stage]]
        in_stage = time.monotonic() - self._stage_t0
        rest = (in_stage * (1 - self._fraction) / self._fraction if self._fraction >= 0.05
                else max(share * per_unit - in_stage, 0.0))
        return rest + per_unit * sum(self._share[n] for n in self._order[self._stage + 1:])

    def _eta_text(self) -> str:
        eta = self.eta()
        return "?" if eta is None else tqdm.format_interval(eta)

    def _line(self, text: str) -> None:
        if time.monotonic() - self._t0 < QUIET_FOR:
            return
        elapsed = tqdm.format_interval(time.monotonic() - self._t0)
        eta = self.eta()
        self._stream.write(f"gcnmops: {text} [elapsed {elapsed}" + ("" if eta is None else
                                                                   f", ETA {tqdm.format_interval(eta)}") + "]\n")
        self._stream.flush()

    def _heartbeat(self) -> None:
        while not self._stop.wait(LINE_EVERY):
            with self._lock:
                if self._stage < len(self._order):
                    self._line(f"{self._order[self._stage]} {100 * self._fraction:.0f}%")

    def step(self, done: float, total: float, stage: int | None = None) -> None:
        """The current stage is ``done`` / ``total`` complete (``stage``: only if it is still that stage's index)."""
        if total <= 0 or self._stage >= len(self._order) or stage not in (None, self._stage):
            return
        with self._lock:
            self._fraction = min(1.0, done / total)
            share = self._share[self._order[self._stage]]
            self._move_to(self._base + share * self._fraction)

    def current_stage(self) -> int:
        """The index of the running stage."""
        return self._stage

    def advance(self, stage: str) -> None:
        """``stage`` is finished (stages not reported are skipped over)."""
        with self._lock:
            if stage in self._order[self._stage:]:
                now = time.monotonic()
                skipped = 0.0
                while self._order[self._stage] != stage:
                    skipped += self._share[self._order[self._stage]]
                    self._stage += 1
                share = self._share[stage] + skipped
                if share > 0:
                    self._seconds_per_unit.append((now - self._stage_t0) / share)
                self._base += share
                self._stage += 1
                self._stage_t0, self._fraction = now, 0.0
                self._move_to(self._base)
                self._bar.set_description_str(self._label(self._stage))
                if self._lines:
                    self._line(f"{stage} done")

    def __enter__(self) -> "Progress":
        self._token = _CURRENT.set(self)
        if not self._bar.disable:  # log lines above the bar, never into it
            loggers = [lg for lg in (logging.getLogger("gcnmops"), logging.getLogger()) if any(
                isinstance(h, logging.StreamHandler) and h.stream in (sys.stdout, sys.stderr) for h in lg.handlers)]
            self._exits.enter_context(logging_redirect_tqdm(loggers))
        if self._lines:
            heartbeat = threading.Thread(target=self._heartbeat, name="gcnmops-progress", daemon=True)
            heartbeat.start()
            self._exits.callback(heartbeat.join)
            self._exits.callback(self._stop.set)
        return self

    def __exit__(self, *exc) -> None:
        _CURRENT.reset(self._token)
        self._exits.close()
        self._bar.close()


def stage_done(stage: str) -> None:
    """Report that ``stage`` finished to the open ``Progress`` (if any)."""
    bar = _CURRENT.get()
    if bar is not None:
        bar.advance(stage)


def tick(done: float, total: float) -> None:
    """Report progress of the running stage to the open ``Progress`` (if any); cheap, thread-safe."""
    bar = _CURRENT.get()
    if bar is not None:
        bar.step(done, total)


def ticker(total: float):
    """A callable ``step(n=1)`` that reports ``n`` more of ``total`` units done (for loops over items) of the stage
    running when it was made: once that stage is over its steps no longer move the bar."""
    state = {"done": 0.0}
    lock = threading.Lock()
    bar = _CURRENT.get()
    stage = None if bar is None else bar.current_stage()

    def step(n: float = 1.0) -> None:
        if bar is None:
            return
        with lock:
            state["done"] += n
            done = state["done"]
        bar.step(done, total, stage)

    return step


@contextmanager
def timed_stage(timings: dict, name: str):
    """Adds the block's wall-clock seconds to ``timings[name]`` and moves an open progress bar past the stage."""
    t0 = time.perf_counter()
    yield
    timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0
    stage_done(name)
