"""Tracks for genome browsers (IGV, UCSC) from a CNVDetectionResult: per window, each sample's log ratio and
sINI as bedGraph (``track_matrices``, ``bedgraph``; the writers bgzip and index them), and per segment the IGV SEG
``segmentation.seg`` (``seg_table``)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..calls.qc import log2_ratios
from ..calls.quality import window_index
from .callfiles import _chrom_rank, file_stem


# -------------------------------------------------------------------------------------------------
# per-window tracks (bedGraph)
# -------------------------------------------------------------------------------------------------

#: the per-window tracks of each sample: name -> what it holds
TRACKS = {"log2ratio": "log2((x + 1) / (m + 1)), x the normalized count, m the cohort's median (calls.qc)",
          "sini": "sINI, the model's posterior-weighted log2 fold change (local_assessments)"}


def track_name(sample, track: str) -> str:
    """The file of a sample's track: ``tracks/<sample>.<track>.bedgraph`` (``file_stem``; .gz when bgzipped)."""
    return f"tracks/{file_stem(sample)}.{track}.bedgraph"


def track_matrices(result) -> dict[str, np.ndarray]:
    """Each of TRACKS as an (m, N) matrix of ``result``."""
    return {"log2ratio": log2_ratios(result.normalized_data), "sini": np.asarray(result.local_assessments)}


def bedgraph(result, values: np.ndarray) -> pd.DataFrame:
    """A bedGraph of one sample's per-window ``values`` (m,): chrom, 0-based start, end, value, in gr's order
    (chromosomes together, starts increasing: as tabix needs); windows without a finite value left out."""
    keep = np.isfinite(values)
    gr = result.gr
    return pd.DataFrame({"chrom": gr["seqnames"].astype(str).to_numpy()[keep],
                         "start": gr["start"].to_numpy(np.int64)[keep] - 1,
                         "end": gr["end"].to_numpy(np.int64)[keep], "value": np.asarray(values, np.float64)[keep]})


# -------------------------------------------------------------------------------------------------
# IGV SEG
# -------------------------------------------------------------------------------------------------

def seg_table(result) -> pd.DataFrame:
    """IGV SEG: ID, chrom, loc.start, loc.end, num.mark, seg.mean (segment means of sINI), ordered by
    sample (result's order), chromosome (gr's order), start."""
    seg = result.segmentation.reset_index(drop=True)
    num = np.zeros(len(seg), dtype=np.int64)
    windows = window_index(result)
    seg_chrom = seg["seqnames"].astype(str).to_numpy()
    for chrom in pd.unique(seg_chrom):
        idx = np.flatnonzero(seg_chrom == chrom)
        num[idx] = windows.overlap_counts(chrom, seg["start"].to_numpy()[idx], seg["end"].to_numpy()[idx])
    if len(seg):
        sample_rank = pd.Index(result.sample_names).get_indexer(seg["sampleName"].to_numpy())
        order = np.lexsort((seg["start"].to_numpy(), _chrom_rank(result, seg_chrom), sample_rank))
    else:
        order = np.arange(0)
    seg, num = seg.iloc[order], num[order]
    return pd.DataFrame({"ID": seg["sampleName"].astype(str).to_numpy(),
                         "chrom": seg["seqnames"].astype(str).to_numpy(),
                         "loc.start": seg["start"].to_numpy(np.int64), "loc.end": seg["end"].to_numpy(np.int64),
                         "num.mark": num, "seg.mean": seg["mean"].to_numpy(float)})
