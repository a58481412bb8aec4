"""The sample QC of a streamed run: ``calls.qc.sample_qc`` with the values the in-memory run gives, bit for bit,
without the whole matrix in memory.

What a window needs of its own row is gathered block by block (each window's median normalized count over the
samples, ``calls.qc.window_medians``: (m,) floats). What needs a sample's whole column (its median count, the
spreads of its log2 ratios and sINI) is read back once every block is done, a group of sample columns at a time:
the counts from the count store, the normalized data and sINI from the result store (where ``--keep`` drops them
they are written there all the same, as scratch the store removes when it is published: ``QC_MATRICES``). The
columns hold the in-memory matrix's values in its order, so every statistic is computed on the same numbers.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pandas as pd

from ..calls.qc import column_spreads, coverage_qc, log2_ratios, sample_qc, window_medians
from ..cuda.probe import Backend, as_backend
from ..io.store import CountStore
from ..outputs.resultstore import ResultStore

#: the result store's matrices the sample QC reads back
QC_MATRICES = ("normalized_data", "local_assessments")


class StreamQC:
    """A streamed run's sample QC: ``put`` each block's result, then ``table``."""

    def __init__(self, m: int):
        self.medians = np.full(m, np.nan)

    def put(self, a: int, b: int, result) -> None:
        """Rows a:b's window medians, from their block's ``result``."""
        self.medians[a:b] = window_medians(result.normalized_data)

    def table(self, result, store: CountStore, rstore: ResultStore, width: int,
              backend: Backend = Backend.CPU) -> pd.DataFrame:
        """``calls.qc.sample_qc`` of ``result`` (its call tables and params; every block ``put``) with the coverage
        of ``store``'s counts and the spreads of ``rstore``'s QC_MATRICES (on ``backend``), read by groups of
        ``width`` samples (``qc_width``; the result store's chunks as wide: each read once)."""
        return qc_by_columns(result, list(store.sample_names), width, self.medians,
                             lambda c0, c1: store.columns(c0, c1, np.float64, "F"),
                             lambda c0, c1: rstore.columns("normalized_data", c0, c1, "F"),
                             lambda c0, c1: rstore.columns("local_assessments", c0, c1, "F"), backend)


def qc_width(m: int, n: int, group_bytes: int) -> int:
    """Samples per group of the sample QC's column reads on a matrix of ``m`` regions x ``n`` samples: as many as
    ``group_bytes`` of float64 columns hold, and at least as many as numba's threads (its statistics run in
    parallel over a group's columns), at most ``n``."""
    return max(1, min(n, max(numba.get_num_threads(), group_bytes // max(1, 8 * m))))


def qc_by_columns(result, names: list[str], width: int, medians: np.ndarray, counts, normalized, sini,
                  backend: Backend = Backend.CPU) -> pd.DataFrame:
    """``calls.qc.sample_qc`` of ``result`` from its matrices read a group of ``width`` sample columns at a time:
    ``counts(c0, c1)``, ``normalized(c0, c1)``, ``sini(c0, c1)`` those columns (m, c1 - c0) of the read counts,
    normalized data and sINI; ``medians`` (m,) every window's ``window_medians``; the spreads on ``backend``."""
    coverage, spreads = [], np.empty((len(names), 6))
    groups = [(c, min(len(names), c + width)) for c in range(0, len(names), width)]

    def read(c0: int, c1: int) -> tuple:  # in the layout the kernels take (column-major float64; readers that
        # give it, as the stores' do chunk by chunk in threads, are not copied again)
        return tuple(np.asfortranarray(f(c0, c1), dtype=np.float64) for f in (counts, normalized, sini))

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
            coverage.append(coverage_qc(x, names[c0:c1]))
            ratios = log2_ratios(y, medians)
            del x, y
            if behind is not None:
                behind.result()
            behind = spreader.submit(spread, c0, c1, ratios, s) if on_device else spread(c0, c1, ratios, s)
            del ratios, s
        if behind is not None:
            behind.result()
    return sample_qc(result, pd.concat(coverage, ignore_index=True), (), spreads)


__all__ = ["StreamQC", "QC_MATRICES", "qc_width", "qc_by_columns"]
