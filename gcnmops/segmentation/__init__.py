"""Stage 3, segmentation of each sample's sINI per chromosome: cn.mops's "fast" algorithm on the CPU (cpu)
and on the device (gpu), and segAlgorithm "DNAcopy" through R (dnacopy).

The fast algorithm's per-position arithmetic (prefix sums, candidate test, window statistic) is one
``register_jitable`` source in kernels, compiled by both the CPU driver and the CUDA kernels; the host passes
before and after the statistic (cleaning, eps/thresholds/variance, local maxima, breakpoints, merging, segment
values) are in host, the argument checks and output assembly in interface. ``segment_blocks`` is the stage's
entry for every path: it dispatches on the resolved backend.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..cuda.probe import Backend, as_backend
from .cpu import segment, segment_columns, segment_columns_arrays


def segment_blocks(values: np.ndarray, blocks, *, backend: Backend = Backend.CPU, device_values=None,
                   timings: dict | None = None, **args) -> pd.DataFrame:
    """``cpu.segment_columns`` of ``values`` (m, N) over ``blocks`` ((first, end) rows per chromosome) on
    ``backend``: the same DataFrame (block, sample, start, end, mean, median). GPU: ``device_values`` the
    device-resident copy of ``values`` if there is one (read instead of copying ``values`` in), ``timings`` the
    sub-stage seconds and counts (seg_*). ``args``: ``segment``'s (alpha, min_seg, eps, ...)."""
    if as_backend(backend) is Backend.GPU:
        from .gpu import segment_columns_gpu

        return segment_columns_gpu(values, blocks, timings=timings, device_values=device_values, **args)
    return segment_columns(values, blocks, **args)


__all__ = ["segment", "segment_blocks", "segment_columns", "segment_columns_arrays"]
