"""CNVDetectionResult: everything cn.mops returns, as numpy arrays and pandas tables.

Matrices are float64 (regions x samples), column-major (region-fastest), the layout of R
matrices; copy-number labels are kept as int8 class indices (``cn_index``) and turned into
strings on demand.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from .data import region_names as row_names_of

SEGMENT_COLUMNS = ["seqnames", "start", "end", "sampleName", "median", "mean", "CN"]


def empty_segments() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in zip(
        SEGMENT_COLUMNS, [object, np.int64, np.int64, object, np.float64, np.float64, object])})


def cnvr_frame(seqnames, start, end, sample_names: list[str], labels=None) -> pd.DataFrame:
    """CNV regions: seqnames, start, end + one object column of copy-number labels per sample (``labels``:
    (regions, samples) array, or a list of per-sample columns; None: every label missing), built at once."""
    n = len(start)
    columns = {"seqnames": np.asarray(seqnames, dtype=object), "start": np.asarray(start, dtype=np.int64),
               "end": np.asarray(end, dtype=np.int64)}
    for k, s in enumerate(sample_names):
        if labels is None:
            columns[s] = np.full(n, None, dtype=object)
        else:
            columns[s] = np.asarray(labels[:, k] if isinstance(labels, np.ndarray) else labels[k], dtype=object)
    return pd.DataFrame(columns)


def empty_cnvr(sample_names: list[str]) -> pd.DataFrame:
    return cnvr_frame([], [], [], sample_names)


class ResultCounts:
    """``classes`` and ``summary()`` of a result with cn.mops's slots (in memory or in a store)."""

    @property
    def classes(self) -> list[str]:
        return list(self.params["classes"])

    def summary(self) -> dict:
        """Counts for a one-screen report."""
        return {
            "regions": int(self.local_assessments.shape[0]),
            "samples": len(self.sample_names),
            "chromosomes": int(self.gr["seqnames"].nunique()),
            "segments": len(self.segmentation),
            "cnvs": len(self.cnvs),
            "cnv_regions": len(self.cnvr),
        }


@dataclass(repr=False)
class CNVDetectionResult(ResultCounts):
    """cn.mops's CNVDetectionResult slots in snake_case.

    gr: DataFrame (m rows) seqnames, start, end. normalized_data, local_assessments (sINI),
    individual_call: (m, N) float64. ini_call: (m,). cn_index: (m, N) int8 indices into
    ``params['classes']`` (see ``integer_copy_number``). posterior_probs: (m, n, N) or None.
    params: cn.mops's params list (cn.mops names) incl. ``cov`` (N,), ``L`` and ``A`` (m, n).
    segmentation, cnvs: DataFrames with SEGMENT_COLUMNS; cnvr: seqnames, start, end + one column
    per sample (copy-number labels, None before integer copy numbers). timings: seconds per stage.
    gpu_stats: the GPU backend's sub-stage seconds and counts (norm_*, model_*, seg_*; empty on the CPU).
    """

    gr: pd.DataFrame
    normalized_data: np.ndarray
    local_assessments: np.ndarray
    individual_call: np.ndarray
    ini_call: np.ndarray
    cn_index: np.ndarray
    posterior_probs: np.ndarray | None
    params: dict
    segmentation: pd.DataFrame
    cnvs: pd.DataFrame
    cnvr: pd.DataFrame
    sample_names: list[str]
    ranged: bool = True
    timings: dict = field(default_factory=dict)
    gpu_stats: dict = field(default_factory=dict)

    @property
    def region_names(self) -> list[str]:
        """cn.mops's row names ("chr_start_end") for ranged input; empty for a bare matrix (built on demand)."""
        return row_names_of(self.gr) if self.ranged else []

    @property
    def integer_copy_number(self) -> np.ndarray:
        """(m, N) array of class labels ("CN0", ...) of each region's expected copy number."""
        return np.asarray(self.classes, dtype=object)[self.cn_index]

    def __repr__(self) -> str:
        s = self.summary()
        integer = "integer copy numbers" if self.has_integer_copy_numbers() else "no integer copy numbers yet"
        return (f"<CNVDetectionResult {self.params.get('method', 'cn.mops')}: {s['regions']:,} regions x "
                f"{s['samples']} samples on {s['chromosomes']} chromosome(s); {s['segments']:,} segments, "
                f"{s['cnvs']:,} CNVs, {s['cnv_regions']:,} CNV regions; {integer}>")

    def _repr_html_(self) -> str:
        import html

        s = self.summary()
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k.replace('_', ' '))}</th><td>{v:,}</td></tr>"
                       for k, v in s.items())
        return (f"<b>CNVDetectionResult</b> ({html.escape(str(self.params.get('method', 'cn.mops')))})"
                f"<table>{rows}</table>")

    def has_integer_copy_numbers(self) -> bool:
        """True once calc_integer_copy_numbers has labelled the CNV regions (cnvr holds labels, not None)."""
        labels = self.cnvr[[s for s in self.sample_names if s in self.cnvr.columns]]
        return bool(len(labels)) and bool(labels.notna().to_numpy().any())

    def replace(self, **changes) -> "CNVDetectionResult":
        """A new result with some slots replaced (arrays are shared, not copied)."""
        return replace(self, **changes)

    def write(self, outdir, formats=None) -> list:
        """Write the result's tables and matrices under ``outdir``; returns the paths written."""
        from .io.writers import write_result

        return write_result(self, outdir, formats=formats)
