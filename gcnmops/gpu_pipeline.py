"""The pipeline's stages after the model on the GPU backend: segmentation with the statistic on the GPU
(segment_gpu.py), then the calls exactly as calls.call_cnvs makes them.

mops.assemble_result routes here when the backend resolves to "gpu". Normalization stays on the CPU
except for the default poisson/mean path (normalize_gpu.py); benchmarks/RESULTS.md, "Whole pipeline on
the GPU", has the measurements.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .calls import Calls, call_cnvs
from .segment_gpu import segment_columns_gpu

#: the last call_cnvs_gpu's stage seconds and counts (candidates, recomputed positions); for benchmarks
LAST_STATS: dict = {}


def call_cnvs_gpu(sini: np.ndarray, gr: pd.DataFrame, blocks: list[tuple[str, int, int]], sample_names: list[str],
                  upper_threshold: float, lower_threshold: float, min_width: int, use_median: bool,
                  segment_args: dict | None = None) -> Calls:
    """``calls.call_cnvs`` with the segmentation's statistic on the GPU (identical result)."""
    stats: dict = {}

    def segmenter(values, blocks, **kwargs):
        return segment_columns_gpu(values, blocks, timings=stats, **kwargs)

    calls = call_cnvs(sini, gr, blocks, sample_names, upper_threshold, lower_threshold, min_width, use_median,
                      segment_args, segmenter=segmenter)
    LAST_STATS.clear()
    LAST_STATS.update(stats)
    return calls


__all__ = ["call_cnvs_gpu", "LAST_STATS"]
