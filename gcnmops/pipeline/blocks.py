"""What the stages pass along for a block of regions (pipeline.stages): its regions, what it needs of the whole
matrix, and its normalization."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..data import CountData


@dataclass(frozen=True)
class Genome:
    """What a block needs of the whole matrix when it holds only some chromosomes: each sample's total count
    ``colsums`` (N,) (the normalization's zero-column check and size-factor fall-back; None: norm 0) and the
    coverages ``cov`` (N,) (norm 2's sample_coverage of the whole matrix; else ones). referencecn.mops: the
    cases' columns, then the controls' (N + Nc,)."""

    colsums: np.ndarray | None
    cov: np.ndarray


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


__all__ = ["Genome", "Normalized", "Regions"]
