"""What the stages pass along for a block of regions (pipeline.stages): its regions, what it needs of the whole
matrix, and its normalization; and the whole run's call tables gathered from its blocks (``BlockTables``)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..calls.cnvs import NO_CNV_MESSAGE
from ..calls.dispersion import ResidualCounts
from ..calls.quality import CallEvidence
from ..data import CountData
from ..model.spec import ModelOutput
from ..normalization.factors import coverage_ratios
from ..result import CNVDetectionResult, empty_cnvr, empty_segments

log = logging.getLogger("gcnmops")


@dataclass(frozen=True)
class Genome:
    """What a block needs of the whole matrix when it holds only some chromosomes: each sample's total count
    ``colsums`` (N,) (the normalization's zero-column check and size-factor fall-back; None: norm 0) and the
    coverages ``cov`` (N,) (norm 2's sample_coverage of the whole matrix; else ones). referencecn.mops: the
    cases' columns, then the controls' (N + Nc,)."""

    colsums: np.ndarray | None
    cov: np.ndarray


def column_totals(counts: np.ndarray, threads: int) -> np.ndarray:
    """Each column's sum of the (m, N) column-major ``counts``, as ``counts.sum(axis=0)`` makes it (numpy's
    pairwise sum of each contiguous column), the columns summed in ``threads`` threads."""
    if threads < 2 or counts.shape[1] < 2 or not counts.flags.f_contiguous:
        return counts.sum(axis=0)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(threads, counts.shape[1])) as pool:
        return np.array(list(pool.map(lambda k: counts[:, k].sum(), range(counts.shape[1]))), dtype=np.float64)


def genome_of(normalizes: bool, uses_coverage: bool, n_samples: int, colsums: np.ndarray | None = None,
              coverage_stats: np.ndarray | None = None) -> Genome:
    """The Genome of a run (``normalizes``, ``uses_coverage``: its plan's) from what its path computed over the
    whole matrix: each sample's total count ``colsums`` (N,) where it normalizes, and where it uses coverages each
    sample's coverage statistic ``coverage_stats`` (N,) (normalization.kernels.column_coverages), made into
    coverages as sample_coverage makes them; ones otherwise."""
    cov = coverage_ratios(coverage_stats) if uses_coverage else np.ones(n_samples)
    return Genome(colsums if normalizes else None, cov)


@dataclass
class Normalized:
    """A block normalized: ``normalized`` the normalizedData slot (m, N); ``model_input`` the matrix the model
    sees (m, N) float64 order F (host, or on the device in the resident GPU path); ``cov`` (N,) the coverages
    recorded in the result's params; ``controls`` (m, Nc) referencecn.mops's normalized controls."""

    normalized: np.ndarray
    model_input: object
    cov: np.ndarray
    controls: np.ndarray | None = None


@dataclass(frozen=True)
class BlockOut:
    """Host arrays a block's results are written into instead of new ones, each optional: ``model`` the model's
    (ModelOutput), ``normalized`` and ``individual`` (m, N) float64. Column-major, or rows of the whole run's
    column-major matrices (``x[b0:b1]``: cuda.runtime.rows_of_column_major), so results land in place."""

    model: ModelOutput | None = None
    normalized: np.ndarray | None = None
    individual: np.ndarray | None = None


@dataclass(frozen=True)
class Regions:
    """A block's regions: ``gr`` (seqnames, start, end), ``blocks`` (name, first row, end row) per chromosome,
    ``sample_names``, ``ranged`` (whether the input carried coordinates)."""

    gr: pd.DataFrame
    blocks: list[tuple[str, int, int]]
    sample_names: list[str]
    ranged: bool

    @classmethod
    def of(cls, data: CountData) -> "Regions":
        return cls(data.genomic_ranges(), data.blocks(), list(data.sample_names), data.ranges is not None)


class BlockTables:
    """The call tables of a run's blocks (whole chromosomes), gathered into the whole run's tables in block
    order (cn.mops orders them by chromosome, then sample, then start: block by block), with the evidence of their
calls' qualities (``call_evidence``). As a context manager it
    holds back the calls' per-block "No CNVs" message; ``tables()`` says it once for the run, where cn.mops would
    (it segments, ``segments``, and no block has a CNV)."""

    def __init__(self, n_blocks: int, sample_names: list[str], segments: bool):
        self.segmentation: list[pd.DataFrame | None] = [None] * n_blocks
        self.cnvs: list[pd.DataFrame | None] = [None] * n_blocks
        self.cnvr: list[pd.DataFrame | None] = [None] * n_blocks
        self.evidence: list[CallEvidence | None] = [None] * n_blocks
        self.residuals: ResidualCounts | None = None
        self.sample_names = list(sample_names)
        self.segments = segments
        self._quiet = _NoCnvFilter()

    def __enter__(self) -> "BlockTables":
        log.addFilter(self._quiet)
        return self

    def __exit__(self, *exc) -> None:
        log.removeFilter(self._quiet)

    def put(self, k: int, result: CNVDetectionResult) -> None:
        """Block ``k``'s tables (its result's segmentation, cnvs and cnvr) and its calls' evidence."""
        self.put_tables(k, result.segmentation, result.cnvs, result.cnvr, result.call_evidence)

    def put_tables(self, k: int, segmentation: pd.DataFrame, cnvs: pd.DataFrame, cnvr: pd.DataFrame,
                   evidence: CallEvidence | None) -> None:
        """Block ``k``'s tables and its calls' evidence, as a worker sent them."""
        self.segmentation[k], self.cnvs[k], self.cnvr[k] = segmentation, cnvs, cnvr
        if evidence is not None:  # the residuals' counts added up at once: one table held
            self.residuals = evidence.residuals if self.residuals is None else self.residuals + evidence.residuals
            evidence = replace(evidence, residuals=None)
        self.evidence[k] = evidence

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """(segmentation, cnvs, cnvr) of the whole run."""
        if self.segments and not any(c is not None and len(c) for c in self.cnvs):
            log.info(NO_CNV_MESSAGE)
        return (_concat(self.segmentation, empty_segments()), _concat(self.cnvs, empty_segments()),
                _concat(self.cnvr, empty_cnvr(self.sample_names)))


    def call_evidence(self) -> CallEvidence | None:
        """The calls' evidence of the whole run (``CallEvidence.join`` of the blocks'; None where a block has
        none)."""
        joined = CallEvidence.join(self.evidence)
        return None if joined is None else replace(joined, residuals=self.residuals)


class _NoCnvFilter(logging.Filter):
    """Holds back calls_from_segments' per-call "No CNVs" message (said once for the whole run instead)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != NO_CNV_MESSAGE


def _concat(parts: list[pd.DataFrame | None], empty: pd.DataFrame) -> pd.DataFrame:
    """The blocks' tables one after the other. Tables of the same columns and dtypes are joined column by column
    (pandas' concat tests every value of an object column for NA, a second per million rows: the CN column is
    None until integer copy numbers)."""
    parts = [p for p in parts if p is not None and len(p)]
    if not parts:
        return empty
    first = parts[0]
    if all(p.columns.equals(first.columns) and p.dtypes.equals(first.dtypes) for p in parts) and \
            first.columns.is_unique and all(isinstance(d, np.dtype) and d.kind in "biufO" for d in first.dtypes):
        return pd.DataFrame({c: np.concatenate([p[c].to_numpy() for p in parts]) for c in first.columns})
    return pd.concat(parts, ignore_index=True)


__all__ = ["Genome", "genome_of", "Normalized", "Regions", "BlockTables"]
