"""A progress bar for long runs that moves inside stages, with an ETA (tqdm, on stderr).

The faces (CLI, batch) open a ``Progress`` over weighted stages; the stages themselves report how far they
are with ``tick(done, total)`` (a chromosome normalized, a chunk of regions fitted, a file written), which
moves the bar within the current stage. Outside a ``Progress`` (the Python API, R) ``tick`` does nothing.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar

from tqdm import tqdm

#: bar units per run
_UNITS = 1000
_CURRENT: ContextVar["Progress | None"] = ContextVar("gcnmops_progress", default=None)


class Progress:
    """Context manager: a bar over ``stages`` (name -> relative weight, in order), closed without a trace."""

    def __init__(self, stages: dict[str, float], disable: bool = False) -> None:
        total = sum(stages.values()) or 1.0
        self._share = {name: w / total * _UNITS for name, w in stages.items()}
        self._order = list(stages)
        self._stage = 0
        self._base = 0.0  # units of the stages finished
        self._shown = 0.0
        self._lock = threading.Lock()
        # disable=None: no bar where stderr is not a terminal (logs, pipes)
        self._bar = tqdm(total=_UNITS, disable=True if disable else None, leave=False, dynamic_ncols=True,
                         bar_format="{desc} {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]")
        self._bar.set_description_str(self._label(0))
        self._token = None

    def _label(self, k: int) -> str:
        return f"gcnmops {self._order[k]:<12s}" if k < len(self._order) else "gcnmops done        "

    def _move_to(self, units: float) -> None:
        if units > self._shown:
            self._bar.update(units - self._shown)
            self._shown = units

    def step(self, done: float, total: float, stage: int | None = None) -> None:
        """The current stage is ``done`` / ``total`` complete (``stage``: only if it is still that stage's index)."""
        if total <= 0 or self._stage >= len(self._order) or stage not in (None, self._stage):
            return
        with self._lock:
            share = self._share[self._order[self._stage]]
            self._move_to(self._base + share * min(1.0, done / total))

    def current_stage(self) -> int:
        """The index of the running stage."""
        return self._stage

    def advance(self, stage: str) -> None:
        """``stage`` is finished (stages not reported are skipped over)."""
        with self._lock:
            if stage in self._order[self._stage:]:
                while self._order[self._stage] != stage:
                    self._base += self._share[self._order[self._stage]]
                    self._stage += 1
                self._base += self._share[stage]
                self._stage += 1
                self._move_to(self._base)
                self._bar.set_description_str(self._label(self._stage))

    def __enter__(self) -> "Progress":
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _CURRENT.reset(self._token)
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
