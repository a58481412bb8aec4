"""The sample QC of a streamed run: ``calls.qc.sample_qc`` with the values the in-memory run gives, bit for bit,
without the whole matrix in memory.

What a window needs of its own row is gathered block by block (each window's median normalized count over the
samples, ``calls.qc.window_medians``: (m,) floats), and so is each sample's coverage: its counts are tallied as
each block is read (``calls.spreads.tally_counts``: every whole count below TALLY_BINS one by one, the sums, the
zeros), which gives its total, zeros and median count exactly, unless a count is not a whole number or a median
lies beyond the tally. What needs a sample's whole column (the spreads of its log2 ratios and sINI; its counts
where the tally cannot stand for them) is read back once every block is done, a group of sample columns at a
time: the counts from the count store, the normalized data and sINI from the result store (where ``--keep``
drops them they are written there all the same, as scratch the store removes when it is published:
``QC_MATRICES``). The columns hold the in-memory matrix's values in its order, so every statistic is computed on
the same numbers.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pandas as pd

from ..calls.qc import column_spreads, coverage_frame, coverage_qc, log2_ratios, sample_qc, window_medians
from ..calls.spreads import TALLY_BINS, tally_counts, tally_medians
from ..cuda.probe import Backend, as_backend
from ..io.store import CountStore
from ..outputs.resultstore import ResultStore

#: the result store's matrices the sample QC reads back
QC_MATRICES = ("normalized_data", "local_assessments")


class CoverageTally:
    """Each sample's coverage (``calls.qc.coverage_qc``: total, median count, zeros) from its read counts tallied
    block by block (``calls.spreads.tally_counts``), the blocks in any order: ``tally`` a block's counts here, or
    ``merge`` the tally of a block made elsewhere (``of_block``, a Dask task), then ``coverage``."""

    def __init__(self, m: int, N: int):
        self.m = m
        self._hist = np.zeros((N, TALLY_BINS), np.int32)  # 16 KiB a sample
        self._zeros = np.zeros(N, np.int64)
        self._flags = np.zeros((N, 2), bool)
        self._totals: dict[int, np.ndarray] = {}
        self._rows = 0
        self._lock = threading.Lock()

    @staticmethod
    def of_block(counts: np.ndarray) -> tuple:
        """The tally of one block's read counts (rows, N): (hist, zeros, flags, totals) for ``merge``; ``hist``
        only up to its last count seen (a block's result goes over the network)."""
        N = counts.shape[1]
        hist, zeros, flags = np.zeros((N, TALLY_BINS), np.int32), np.zeros(N, np.int64), np.zeros((N, 2), bool)
        totals = tally_counts(counts, hist, zeros, flags)
        seen = np.flatnonzero(hist.any(axis=0))
        return np.ascontiguousarray(hist[:, :seen[-1] + 1 if seen.size else 0]), zeros, flags, totals

    def tally(self, a: int, counts: np.ndarray) -> None:
        """The read counts of the block of rows from ``a`` (its whole rows, (rows, N)) into the tally; blocks in
        any order, from any thread."""
        with self._lock:
            self._totals[a] = tally_counts(counts, self._hist, self._zeros, self._flags)
            self._rows += counts.shape[0]

    def merge(self, a: int, rows: int, tally: tuple) -> None:
        """``of_block``'s tally of the ``rows`` rows from ``a`` into this one."""
        hist, zeros, flags, totals = tally
        with self._lock:
            self._hist[:, :hist.shape[1]] += hist
            self._zeros += zeros
            self._flags |= flags
            self._totals[a] = totals
            self._rows += rows

    def coverage(self, names: list[str]) -> pd.DataFrame | None:
        """``calls.qc.coverage_qc`` of every tallied row (all of them), the same numbers; None where the tally
        cannot give them: a count it could not hold (the totals added block by block are the row-order sums
        only for whole counts, below 2^53 in all) or a median beyond its bins."""
        if self._flags[:, 1].any() or self._rows != self.m:
            return None
        totals = np.zeros(len(names))
        for a in sorted(self._totals):
            totals = totals + self._totals[a]
        if (totals >= 2.0 ** 53).any():
            return None
        medians = tally_medians(self._hist, self._flags[:, 0], self.m)
        return None if medians is None else coverage_frame(names, totals, medians, self._zeros, self.m)


class StreamQC:
    """A streamed run's sample QC: ``tally`` each block's counts as they are read and ``put`` its result, then
    ``table``."""

    def __init__(self, m: int, N: int):
        self.medians = np.full(m, np.nan)
        self.counts = CoverageTally(m, N)

    def tally(self, a: int, counts: np.ndarray) -> None:
        """The read counts of the block of rows from ``a`` into the samples' coverage (``CoverageTally.tally``)."""
        self.counts.tally(a, counts)

    def put(self, a: int, b: int, result) -> None:
        """Rows a:b's window medians, from their block's ``result``."""
        self.medians[a:b] = window_medians(result.normalized_data)

    def table(self, result, store: CountStore, rstore: ResultStore, width: int,
              backend: Backend = Backend.CPU) -> pd.DataFrame:
        """``calls.qc.sample_qc`` of ``result`` (its call tables and params; every block ``put``) with the coverage
        of ``store``'s counts and the spreads of ``rstore``'s QC_MATRICES (on ``backend``), read by groups of
        ``width`` samples (``qc_width``; the result store's chunks as wide: each read once)."""
        names = list(store.sample_names)
        return qc_by_columns(result, names, width, self.medians,
                             lambda c0, c1: store.columns(c0, c1, np.float64, "F"),
                             lambda c0, c1: rstore.columns("normalized_data", c0, c1, "F"),
                             lambda c0, c1: rstore.columns("local_assessments", c0, c1, "F"), backend,
                             self.counts.coverage(names))


def qc_width(m: int, n: int, group_bytes: int) -> int:
    """Samples per group of the sample QC's column reads on a matrix of ``m`` regions x ``n`` samples: as many as
    ``group_bytes`` of float64 columns hold, and at least as many as numba's threads (its statistics run in
    parallel over a group's columns), at most ``n``."""
    return max(1, min(n, max(numba.get_num_threads(), group_bytes // max(1, 8 * m))))


def qc_by_columns(result, names: list[str], width: int, medians: np.ndarray, counts, normalized, sini,
                  backend: Backend = Backend.CPU, coverage: pd.DataFrame | None = None) -> pd.DataFrame:
    """``calls.qc.sample_qc`` of ``result`` from its matrices read a group of ``width`` sample columns at a time
    (``column_stats``, the same arguments)."""
    coverage, spreads = column_stats(names, width, medians, counts, normalized, sini, backend, coverage)
    return sample_qc(result, coverage, (), spreads)


def column_stats(names: list[str], width: int, medians: np.ndarray, counts, normalized, sini,
                 backend: Backend = Backend.CPU, coverage: pd.DataFrame | None = None) -> tuple[pd.DataFrame,
                                                                                               np.ndarray]:
    """What ``calls.qc.sample_qc`` takes of the matrices of the samples ``names``: their coverage
    (``calls.qc.coverage_qc``) and their (len(names), 6) spreads (``calls.qc.column_spreads`` of their log2 ratios,
    then of their sINI), read a group of ``width`` sample columns at a time: ``counts(c0, c1)``,
    ``normalized(c0, c1)``, ``sini(c0, c1)`` those columns (m, c1 - c0) of the read counts, normalized data and
    sINI; ``medians`` (m,) every window's ``window_medians``; the spreads on ``backend``. ``coverage``: the
    samples' coverage where the caller has it (the counts are then not read)."""
    known = coverage is not None
    coverage, spreads = [coverage] if known else [], np.empty((len(names), 6))
    groups = [(c, min(len(names), c + width)) for c in range(0, len(names), width)]

    def read(c0: int, c1: int) -> tuple:  # in the layout the kernels take (column-major float64; readers that
        # give it, as the stores' do chunk by chunk in threads, are not copied again)
        return tuple(None if f is None else np.asfortranarray(f(c0, c1), dtype=np.float64)
                     for f in (None if known else counts, normalized, sini))

    def spread(c0: int, c1: int, ratios: np.ndarray, s: np.ndarray) -> None:
        spreads[c0:c1] = column_spreads(ratios, s, backend)

    # on the GPU backend the spreads of a group are computed on the device while the host makes the next group's
    # coverage and log2 ratios (three groups held at most); on the CPU they take every core in turn (numba's
    # workqueue threading layer takes one parallel call at a time)
    on_device = as_backend(backend) is Backend.GPU
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gcnmops-qc-read") as reader, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="gcnmops-qc-spread") as spreader:
        ahead = reader.submit(read, *groups[0]) if groups else None
        behind = None
        for k, (c0, c1) in enumerate(groups):  # the next group read while this one is summarized
            x, y, s = ahead.result()
            ahead = reader.submit(read, *groups[k + 1]) if k + 1 < len(groups) else None
            if not known:
                coverage.append(coverage_qc(x, names[c0:c1]))
            ratios = log2_ratios(y, medians)
            del x, y
            if behind is not None:
                behind.result()
            behind = spreader.submit(spread, c0, c1, ratios, s) if on_device else spread(c0, c1, ratios, s)
            del ratios, s
        if behind is not None:
            behind.result()
    return pd.concat(coverage, ignore_index=True), spreads


__all__ = ["StreamQC", "CoverageTally", "QC_MATRICES", "qc_width", "qc_by_columns", "column_stats"]
