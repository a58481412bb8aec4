"""The pipeline's stages after the model on the GPU backend: segmentation with the statistic on the GPU
(segment_gpu.py), then the calls exactly as calls.call_cnvs makes them.

``call_cnvs_gpu`` is ``calls.call_cnvs`` with ``segment_columns`` replaced by ``segment_columns_gpu`` (same
arguments, identical tables); mops.assemble_result routes here when the backend resolves to "gpu".
Normalization stays on the CPU (benchmarks/RESULTS.md, "Whole pipeline on the GPU", has the measurements).
"""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd
from numba import njit, prange

from .calls import (MIN_REGIONS_TO_SEGMENT, NO_CNV_MESSAGE, Calls, _cnv_regions, _fill_by_segment, empty_cnvr,
                    empty_segments)
from .segment_gpu import segment_columns_gpu

log = logging.getLogger("gcnmops")

#: the last call_cnvs_gpu's stage seconds and counts (candidates, recomputed positions); for benchmarks
LAST_STATS: dict = {}


def call_cnvs_gpu(sini: np.ndarray, gr: pd.DataFrame, blocks: list[tuple[str, int, int]], sample_names: list[str],
                  upper_threshold: float, lower_threshold: float, min_width: int, use_median: bool,
                  segment_args: dict | None = None) -> Calls:
    """``calls.call_cnvs`` with the segmentation's statistic on the GPU (identical result)."""
    m, n_samples = sini.shape
    if m < MIN_REGIONS_TO_SEGMENT:
        return Calls(np.array(sini, order="F"), empty_segments(), empty_segments(), empty_cnvr(sample_names))
    stats: dict = {}
    seg = segment_columns_gpu(sini, [(b, e) for _, b, e in blocks], min_seg=min_width, timings=stats,
                              **(segment_args or {}))
    LAST_STATS.clear()
    LAST_STATS.update(stats)
    block = seg["block"].to_numpy()
    sample = seg["sample"].to_numpy()
    first = np.array([b for _, b, _ in blocks])[block]
    row_start = first + seg["start"].to_numpy() - 1
    row_end = first + seg["end"].to_numpy() - 1
    mean = seg["mean"].to_numpy(dtype=np.float64)
    median = seg["median"].to_numpy(dtype=np.float64)
    stat = median if use_median else mean

    individual = fill_by_segment(stat, sample, row_start, row_end, m, n_samples)

    gr_start = gr["start"].to_numpy()
    gr_end = gr["end"].to_numpy()
    names = np.array([name for name, _, _ in blocks], dtype=object)[block]
    samples = np.asarray(sample_names, dtype=object)[sample]
    segmentation = pd.DataFrame({
        "seqnames": names, "start": gr_start[row_start], "end": gr_end[row_end], "sampleName": samples,
        "median": median, "mean": mean, "CN": None,
    })
    is_cnv = ((stat >= upper_threshold) | (stat <= lower_threshold)) & (row_end - row_start + 1 >= min_width)
    if not is_cnv.any():
        log.info(NO_CNV_MESSAGE)
        return Calls(individual, segmentation, empty_segments(), empty_cnvr(sample_names))
    cnvs = segmentation[is_cnv].reset_index(drop=True)
    cnvr = _cnv_regions(block[is_cnv], row_start[is_cnv], row_end[is_cnv], names[is_cnv], gr_start, gr_end,
                        sample_names)
    return Calls(individual, segmentation, cnvs, cnvr)


@njit(parallel=True, cache=True)
def _fill(stat, sample, row_start, row_end, out):
    for r in prange(stat.shape[0]):
        k = sample[r]
        v = stat[r]
        for i in range(row_start[r], row_end[r] + 1):
            out[i, k] = v


def fill_by_segment(stat, sample, row_start, row_end, m: int, n_samples: int) -> np.ndarray:
    """calls._fill_by_segment in parallel over segments (the same (m, N) order-F matrix)."""
    if int(np.sum(row_end - row_start + 1)) != m * n_samples:
        return _fill_by_segment(stat, sample, row_start, row_end, m, n_samples)  # raises as the CPU does
    out = np.empty((m, n_samples), order="F")
    _fill(np.ascontiguousarray(stat, dtype=np.float64), np.ascontiguousarray(sample, dtype=np.int64),
          np.ascontiguousarray(row_start, dtype=np.int64), np.ascontiguousarray(row_end, dtype=np.int64), out)
    return out


__all__ = ["call_cnvs_gpu", "fill_by_segment", "LAST_STATS"]
