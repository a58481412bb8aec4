"""From sINI to calls: per-sample segmentation, individual calls, CNVs, CNV regions, integer copy numbers.

Row indices inside this module are 0-based global rows of the (regions x samples) matrices unless
named ``*_rel`` (1-based, relative to a chromosome, as the segmentation reports them).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numba import njit, prange

from ..cuda.probe import Backend
from ..errors import InputError
from ..result import cnvr_frame, empty_cnvr, empty_segments
from ..segmentation import segment_blocks
from ..segmentation.dnacopy import MAX_MIN_WIDTH, dnacopy_segments, segment_args_for_r

log = logging.getLogger("gcnmops")

NO_CNV_MESSAGE = 'No CNVs detected. Try changing "normalization", "priorImpact" or "thresholds".'
#: below this many regions cn.mops does not segment
MIN_REGIONS_TO_SEGMENT = 6


@dataclass
class Calls:
    """individual_call: (m, N) float64 order F; segmentation, cnvs, cnvr: DataFrames."""

    individual_call: np.ndarray
    segmentation: pd.DataFrame
    cnvs: pd.DataFrame
    cnvr: pd.DataFrame


def call_cnvs(sini: np.ndarray, gr: pd.DataFrame, blocks: list[tuple[str, int, int]], sample_names: list[str],
              upper_threshold: float, lower_threshold: float, min_width: int, use_median: bool,
              segment_args: dict | None = None, *, seg_algorithm: str = "fast", backend: Backend = Backend.CPU,
              device_values=None, timings: dict | None = None, genome_regions: int | None = None,
              individual_out: np.ndarray | None = None) -> Calls:
    """Segment every sample's sINI per chromosome and call CNVs as cn.mops does.

    ``sini``: (m, N) order F; ``gr``: m rows seqnames/start/end; ``blocks``: (name, first, end) per
    chromosome in order of appearance. ``seg_algorithm`` "fast" (on ``backend``; GPU: ``device_values`` the
    device-resident sINI, ``timings`` its sub-stage seconds, see ``segmentation.segment_blocks``) or "DNAcopy"
    (``call_cnvs_dnacopy``). ``genome_regions``: the regions of the whole matrix when ``sini`` holds some of its
    chromosomes: cn.mops segments only a matrix of MIN_REGIONS_TO_SEGMENT regions or more (else ``no_calls``).
    ``individual_out``: (m, N) float64 the individual calls are written into (``fill_by_segment``'s ``out``).
    """
    m, n_samples = sini.shape
    if (m if genome_regions is None else genome_regions) < MIN_REGIONS_TO_SEGMENT:
        return no_calls(sini, sample_names)
    if seg_algorithm == "DNAcopy":
        return call_cnvs_dnacopy(sini, gr, blocks, sample_names, upper_threshold, lower_threshold, min_width,
                                 use_median, segment_args)
    seg = segment_blocks(sini, [(b, e) for _, b, e in blocks], backend=backend, device_values=device_values,
                         timings=timings, min_seg=min_width, **(segment_args or {}))
    return calls_from_segments(seg, gr, blocks, sample_names, upper_threshold, lower_threshold, min_width,
                               use_median, m=m, n_samples=n_samples, individual_out=individual_out)


def no_calls(sini: np.ndarray, sample_names: list[str]) -> Calls:
    """cn.mops's answer where it does not segment: individual calls = sINI, no segments, CNVs or regions."""
    return Calls(np.array(sini, order="F"), empty_segments(), empty_segments(), empty_cnvr(sample_names))


def calls_from_segments(seg: pd.DataFrame, gr: pd.DataFrame, blocks, sample_names, upper_threshold,
                        lower_threshold, min_width, use_median, *, m: int, n_samples: int,
                        individual_out: np.ndarray | None = None) -> Calls:
    """Individual calls, segmentation, CNVs and CNV regions from a segment table (block, sample, start,
    end relative to the block, 1-based, mean, median) of any segmentation algorithm."""
    block = seg["block"].to_numpy()
    sample = seg["sample"].to_numpy()
    first = np.array([b for _, b, _ in blocks])[block]
    row_start = first + seg["start"].to_numpy() - 1
    row_end = first + seg["end"].to_numpy() - 1
    mean = seg["mean"].to_numpy(dtype=np.float64)
    median = seg["median"].to_numpy(dtype=np.float64)
    stat = median if use_median else mean

    individual = fill_by_segment(stat, sample, row_start, row_end, m, n_samples, out=individual_out)

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


def fill_by_segment(stat, sample, row_start, row_end, m: int, n_samples: int,
                    out: np.ndarray | None = None) -> np.ndarray:
    """(m, N) matrix whose column k holds, for every row, ``stat`` of the sample-k segment covering it: ``out``
    (any (m, N) float64 array, e.g. rows of a larger one) or a new order-F one."""
    if int(np.sum(row_end - row_start + 1)) != m * n_samples:
        raise RuntimeError("segments do not tile every sample's regions")  # internal invariant
    if out is None:
        out = np.empty((m, n_samples), order="F")
    elif out.shape != (m, n_samples) or out.dtype != np.float64:
        raise ValueError(f"out must be a float64 array of shape {(m, n_samples)}")
    _fill(np.ascontiguousarray(stat, dtype=np.float64), np.ascontiguousarray(sample, dtype=np.int64),
          np.ascontiguousarray(row_start, dtype=np.int64), np.ascontiguousarray(row_end, dtype=np.int64), out)
    return out


@njit(parallel=True, cache=True)
def _fill(stat, sample, row_start, row_end, out):
    for r in prange(stat.shape[0]):
        k = sample[r]
        v = stat[r]
        for i in range(row_start[r], row_end[r] + 1):
            out[i, k] = v


def _cnv_regions(block, row_start, row_end, names, gr_start, gr_end, sample_names) -> pd.DataFrame:
    """Union of CNV segments per chromosome on row indices (overlapping or adjacent rows merge)."""
    order = np.lexsort((row_start, block))
    block, row_start, row_end, names = block[order], row_start[order], row_end[order], names[order]
    run_end = np.maximum.accumulate(row_end)  # global rows grow with the block, so no reset is needed
    new = np.ones(block.size, dtype=bool)
    new[1:] = (block[1:] != block[:-1]) | (row_start[1:] > run_end[:-1] + 1)
    starts = row_start[new]
    ends = np.maximum.reduceat(row_end, np.flatnonzero(new))
    return cnvr_frame(names[new], gr_start[starts], gr_end[ends], sample_names)


def call_cnvs_dnacopy(sini: np.ndarray, gr: pd.DataFrame, blocks: list[tuple[str, int, int]],
                      sample_names: list[str], upper_threshold: float, lower_threshold: float, min_width: int,
                      use_median: bool, segment_args: dict | None = None, *, seed: int | None = None) -> Calls:
    """The calls of cn.mops's segAlgorithm "DNAcopy" (see the module docstring); ``call_cnvs`` decides first
    whether to segment at all.

    ``segment_args`` go to ``DNAcopy::segment`` (alpha, nperm, p_method, kmax, nmin, eta, trim,
    undo_splits, undo_prune, undo_SD, verbose); a ``seed`` entry there is taken as ``seed``.
    """
    args = dict(segment_args or {})
    seed = args.pop("seed", seed)
    m, n_samples = np.shape(sini)
    if min_width > MAX_MIN_WIDTH:
        log.info('For DNAcopy the maximum "minWidth" is 5. Resetting "minWidth" to 5.')
    width = min(int(min_width), MAX_MIN_WIDTH)
    if width < 2:
        raise InputError(f"seg_algorithm='DNAcopy' needs min_width >= 2 (DNAcopy's min.width is 2..5), "
                         f"got {min_width}.")
    segment_args_for_r(args)  # validate before the (slow) boundary and segmentation
    seg = dnacopy_segments(sini, blocks, width, seed=seed, segment_args=args)
    return calls_from_segments(seg, gr, blocks, sample_names, upper_threshold, lower_threshold, width, use_median,
                               m=m, n_samples=n_samples)
