"""What a run leaves out before the model (``--exclude BED``: windows; ``--exclude-samples auto|LIST``: samples) and
the per-sample QC of its result (``calls.qc``), for ``run_and_write``."""
from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pandas as pd

from ..calls.qc import coverage_qc, excluded_samples, outlier_reasons, sample_qc
from ..compat import InThisThread, keep_numba_threads, run_threads, threadsafe_parallel
from ..cuda.probe import Backend
from ..data import CountData, Validated
from ..errors import InputError
from ..io import read_counts
from ..io.exclude import exclude_rows
from ..params import method_spec

log = logging.getLogger("gcnmops")


class Selection:
    """The cases' read-count QC before anything is left out (``coverage``; given as a Future where it is made
    beside the model), and what was left out."""

    def __init__(self, coverage: pd.DataFrame | Future, excluded: list[str] | None = None,
                 exclude_bed: str | None = None, excluded_windows: int = 0):
        self._coverage = coverage
        self.excluded = list(excluded or [])
        self.exclude_bed = exclude_bed
        self.excluded_windows = excluded_windows

    @property
    def coverage(self) -> pd.DataFrame:
        """``calls.qc.coverage_qc`` of the cases as given (waited for where it is made beside the model)."""
        if isinstance(self._coverage, Future):
            self._coverage = self._coverage.result()
        return self._coverage

    def entries(self) -> dict:
        """The result's ``selection`` entries of what was left out (none where nothing was asked)."""
        out: dict = {}
        if self.excluded:
            out["excludedSamples"] = list(self.excluded)
        if self.exclude_bed is not None:
            out.update(excludeBed=str(self.exclude_bed), excludedWindows=int(self.excluded_windows))
        return out

    def qc(self, result, medians: np.ndarray | None = None, backend: Backend = Backend.CPU,
           spreads: np.ndarray | None = None) -> pd.DataFrame:
        """``calls.qc.sample_qc`` of ``result`` (its samples those left in; log2 ratios against ``medians``; the
        spreads on ``backend``, or ``spreads``: ``calls.qc.sample_spreads`` made earlier)."""
        return sample_qc(result, self.coverage, self.excluded, spreads=spreads, medians=medians, backend=backend)


def counts_qc(result, data: CountData, medians: np.ndarray | None = None) -> pd.DataFrame:
    """``calls.qc.sample_qc`` of ``result`` against the read counts ``data`` of its samples (nothing excluded;
    log2 ratios against ``medians``, default the samples' window medians)."""
    return Selection(coverage_qc(data.counts, data.sample_names)).qc(result, medians)


def _count_data(obj, min_samples: int) -> CountData:
    if isinstance(obj, Validated):
        return obj.data
    return read_counts(obj, min_samples=min_samples)


def _subset(data: CountData, rows: np.ndarray | None, cols: list[int] | None) -> Validated:
    counts = data.counts if rows is None else data.counts[rows]
    counts = counts if cols is None else counts[:, cols]
    names = list(data.sample_names) if cols is None else [data.sample_names[j] for j in cols]
    ranges = data.ranges if rows is None or data.ranges is None else data.ranges.iloc[rows].reset_index(drop=True)
    return Validated(CountData(np.asfortranarray(counts), names, ranges))


def _beside(fn, *args) -> Future:
    """``fn(*args)`` on a thread of its own (the caller's numba thread count): its Future; on this thread at once
    where the run has one thread or numba's threading layer takes one parallel region at a time
    (``compat.threadsafe_parallel``)."""
    if run_threads() <= 1 or not threadsafe_parallel():
        return InThisThread().submit(fn, *args)
    pool = ThreadPoolExecutor(1, thread_name_prefix="gcnmops-coverage", initializer=keep_numba_threads())
    try:
        return pool.submit(fn, *args)
    finally:
        pool.shutdown(wait=False)


def select(method, input, controls=None, *, exclude=None, exclude_samples=None):
    """(cases, controls, Selection): ``input`` and ``controls`` (paths or data, read here) as ``data.Validated``
    with the windows overlapping the BED ``exclude`` removed from both and the samples ``exclude_samples`` names
    (``calls.qc.excluded_samples``: "auto" or names) removed from the cases; each removal logged. InputError
    where nothing would be left to model."""
    spec = method_spec(method)
    data = _count_data(input, spec.min_samples)
    if exclude_samples is None:  # needed by the sample QC only, after the model: made beside it
        selection = Selection(_beside(coverage_qc, data.counts, data.sample_names))
        names: list[str] = []
    else:
        selection = Selection(coverage_qc(data.counts, data.sample_names))
        names = excluded_samples(exclude_samples, selection.coverage)
    rows = None
    if exclude is not None:
        hit = exclude_rows(data.ranges, exclude)
        if hit.all():
            raise InputError(f"--exclude {exclude} covers every window of the counts: nothing is left to model.")
        rows = np.flatnonzero(~hit)
        selection.exclude_bed, selection.excluded_windows = str(exclude), int(hit.sum())
        log.info(f"--exclude {exclude}: {int(hit.sum()):,} of {len(hit):,} windows removed before the model")
    cols = None
    if names:
        cols = [j for j, s in enumerate(data.sample_names) if s not in set(names)]
        if len(cols) < spec.min_samples:
            raise InputError(f"--exclude-samples would leave {len(cols)} sample(s); method {spec.name} needs at "
                             f"least {spec.min_samples}.")
        reasons = dict(zip(selection.coverage["sample"], outlier_reasons(selection.coverage)))
        log.info("--exclude-samples: " + ", ".join(f"{s} ({','.join(reasons[s]) or 'named'})" for s in names)
                 + f" removed before the model; {len(cols)} samples left")
        selection.excluded = names
    elif exclude_samples is not None:
        log.info("--exclude-samples auto: no sample is an outlier of its read counts; all are modelled")
    cases = _subset(data, rows, cols) if rows is not None or cols is not None else Validated(data)
    if controls is not None and rows is not None:
        controls = _subset(_count_data(controls, 1), rows, None)
    return cases, controls, selection


__all__ = ["Selection", "select", "counts_qc"]
