"""The Python side of the segmentation drivers (segmentation/cpu.py, segmentation/gpu.py): argument checks and
cn.mops's clamping (``resolve_params``, ``checked_columns``), the cleaning messages, and the output arrays and
table (``output_arrays``, ``label_tasks``, ``segment_frame``)."""
from __future__ import annotations

import logging
import math
from numbers import Real

import numpy as np
import pandas as pd

from ..cuda.runtime import rows_of_column_major
from ..errors import InputError
from .host import DIRTY_INF, DIRTY_NAN

log = logging.getLogger("gcnmops")

#: floor of cyberWeight inside the statistic
CYBER_FLOOR = 0.01

INF_MESSAGE = "Infinite values were replaced by the largest / smallest finite value before segmentation."
NA_MESSAGE = "NA values were replaced by 0 before segmentation."

#: the columns of ``segment_columns``'s table
SEGMENT_KEYS = ("block", "sample", "start", "end", "mean", "median")


def _number(value, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Real, np.number)):
        arr = np.asarray(value) if not isinstance(value, (str, bytes)) else None
        if arr is not None and arr.shape in ((), (1,)) and arr.dtype.kind in "iuf":
            return float(arr.reshape(()))
        raise InputError(f"{name} must be numeric, got {value!r}.")
    v = float(value)
    if math.isnan(v):
        raise InputError(f"{name} must be numeric, got NaN.")
    return v


def _median_thresholds(seg_median_t) -> tuple[bool, bool, float, float]:
    """(default_t, no_merge, t_hi, t_lo) of segMedianT: None (each vector's +-2 sd), one number t (+-|t|) or a
    pair (upper, lower); (0, 0) disables merging."""
    if seg_median_t is None:
        return True, False, 0.0, 0.0
    tv = np.asarray(seg_median_t, dtype=object).ravel()
    vals = [_number(v, "segMedianT (seg_median_t)") for v in tv]
    if len(vals) == 1:
        t_hi, t_lo = abs(vals[0]), -abs(vals[0])
    elif len(vals) == 2:
        t_hi, t_lo = vals
    else:
        raise InputError(f"seg_median_t must be one number or a pair (upper, lower), got {seg_median_t!r}.")
    return False, t_hi == 0.0 and t_lo == 0.0, t_hi, t_lo


def resolve_params(alpha, seg_median_t, min_seg, eps, delta, max_int, cyber_weight) -> dict:
    """Validate and clamp as cn.mops does; returns the keyword arguments of the compiled drivers."""
    alpha = _number(alpha, "alpha")
    min_seg = _number(min_seg, "minSeg (min_seg)")
    delta = _number(delta, "delta")
    max_int = _number(max_int, "maxInt (max_int)")
    cyber_weight = _number(cyber_weight, "cyberWeight (cyber_weight)")
    if alpha <= 0.0:
        raise InputError(f"alpha must be > 0 (a quantile level in (0, 1) or a number of breakpoints >= 1), "
                         f"got {alpha!r}.")
    if math.isinf(alpha):
        raise InputError("alpha must be finite.")
    for name, v in (("min_seg", min_seg), ("delta", delta), ("max_int", max_int)):
        if math.isinf(v):
            raise InputError(f"{name} must be finite.")
    min_seg = int(min_seg)
    if min_seg < 2:
        min_seg = 2
    max_int = int(max_int)
    if max_int < min_seg + 5:
        max_int = min_seg + 5
    delta = int(delta)
    if cyber_weight < 0:
        cyber_weight = 0.0
    w = max(cyber_weight, CYBER_FLOOR)
    if eps is None:
        eps_given, eps_v = False, 0.0
    else:
        eps_given, eps_v = True, _number(eps, "eps")
    default_t, no_merge, t_hi, t_lo = _median_thresholds(seg_median_t)
    return dict(alpha=alpha, t_hi=float(t_hi), t_lo=float(t_lo), default_t=default_t, no_merge=no_merge,
                min_seg=min_seg, eps=float(eps_v), eps_given=eps_given, delta=delta, max_int=max_int, w=float(w))


def checked_columns(values, blocks, keep_rows: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``values`` as a float64 (m, N) order-F matrix and the blocks' first rows and end rows (int64), or
    InputError. ``keep_rows``: float64 rows of a column-major matrix (``x[r0:r1]``, each column contiguous) are
    kept as they are, not copied."""
    values = np.asarray(values)
    if values.ndim == 1:
        values = values.reshape(-1, 1)
    if values.ndim != 2:
        raise InputError("values must be a (regions x samples) matrix.")
    if values.dtype.kind not in "iuf":
        raise InputError("values must be numeric.")
    if not (keep_rows and values.dtype == np.float64 and rows_of_column_major(values)):
        values = np.asarray(values, dtype=np.float64, order="F")
    blocks = list(blocks)
    firsts = np.array([int(b[0]) for b in blocks], dtype=np.int64)
    ends = np.array([int(b[1]) for b in blocks], dtype=np.int64)
    if ((firsts < 0) | (ends > values.shape[0]) | (ends < firsts)).any():
        raise InputError("blocks must be (first_row, end_row_exclusive) pairs within the matrix.")
    return values, firsts, ends


def report_cleaning(dirty: np.ndarray) -> None:
    """Log cn.mops's messages for vectors whose Inf (DIRTY_INF) or NaN (DIRTY_NAN) values were replaced."""
    if (dirty & DIRTY_INF).any():
        log.info(INF_MESSAGE)
    if (dirty & DIRTY_NAN).any():
        log.info(NA_MESSAGE)


def output_arrays(counts: np.ndarray) -> tuple[np.ndarray, dict]:
    """(offsets, out): where each task's segments start in the output (offsets[task], total last) and the
    empty start, end, mean, median arrays."""
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    total = int(offsets[-1])
    out = dict(start=np.empty(total, dtype=np.int64), end=np.empty(total, dtype=np.int64),
               mean=np.empty(total, dtype=np.float64), median=np.empty(total, dtype=np.float64))
    return offsets, out


def label_tasks(out: dict, counts: np.ndarray, N: int) -> dict:
    """``out`` with each segment's block and sample (task = block * N + sample, ``counts`` segments each)."""
    task = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    out["block"] = task // N
    out["sample"] = task % N
    return out


def segment_frame(out: dict, keys=SEGMENT_KEYS) -> pd.DataFrame:
    """The segment table of an output dict (columns ``keys``)."""
    return pd.DataFrame({k: out[k] for k in keys})


__all__ = ["CYBER_FLOOR", "INF_MESSAGE", "NA_MESSAGE", "SEGMENT_KEYS", "resolve_params", "checked_columns",
           "report_cleaning", "output_arrays", "label_tasks", "segment_frame"]
