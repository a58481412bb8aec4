"""RunPlan: one run of the cn.mops family decided once, from the method, its parameters, the input's size and the
resolved backend; and cn.mops's rules between the stages, each written here once. Every path (in memory on the CPU
or the GPU, streaming, Dask, case mode, the R bridge) builds a plan and asks it, instead of deciding again.

The rules:

- what the model sees for ``norm`` 0/1/2 (``normalizes``, ``model_input``, ``uses_coverage``): norm 0 the raw
  counts (normalizedData = the counts); norm 1 the normalized counts; norm 2 the raw counts with each sample's
  coverage (``sample_coverage`` of the whole matrix), normalizedData still the normalized counts;
- what coverages the model sees (``model_cov``): haplocn.mops records them but its model sees 1 (the method row's
  ``cov_in_model``);
- the model step (``spec``): cn.mops's EM, or the one-step model with its likelihood floor, lambda per region from
  the controls (``reference_lambda``) or per chromosome from the one sample (``single_lambda``);
- whether cn.mops segments at all (``segments``: the whole matrix has MIN_REGIONS_TO_SEGMENT regions or more);
- the ``cnvr`` slot's shape before integer copy numbers (``method_cnvr``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from ..calls.cnvs import MIN_REGIONS_TO_SEGMENT
from ..cuda.probe import Backend, resolve_backend
from ..exact.rstats import r_median
from ..model.onestep import LAMBDA_FLOOR, REFERENCE_FLOOR, SINGLE_FLOOR, OneStepSpec, row_means
from ..model.spec import ModelSpec
from ..params import CnMopsParams, Method, ModelKind

#: the likelihood floor of each one-step model
_ONE_STEP_FLOOR = {ModelKind.REFERENCE: REFERENCE_FLOOR, ModelKind.SINGLE: SINGLE_FLOOR}


@dataclass(frozen=True)
class RunPlan:
    """A run: ``method`` (its row of params.METHODS), validated ``params``, the resolved ``backend`` and
    ``n_regions``, the regions of the whole matrix (a block of it may be smaller)."""

    method: Method
    params: CnMopsParams
    backend: Backend
    n_regions: int

    @classmethod
    def build(cls, method: Method, params: CnMopsParams, backend: str | Backend, n_regions: int) -> "RunPlan":
        """The plan of a run; ``backend`` "auto" / "cpu" / "gpu" (or a Backend) resolved here."""
        return cls(method, params, resolve_backend(backend), int(n_regions))

    # ------------------------------------------------------------------ normalization -> model
    @property
    def norm(self) -> int:
        """cn.mops's ``norm`` as the run applies it: singlecn.mops normalizes nothing (its normalization
        parameters are dummies), so 0 there."""
        return 0 if self.kind is ModelKind.SINGLE else self.params.norm

    @property
    def normalizes(self) -> bool:
        """Whether the counts are normalized (norm 1 and 2); norm 0: normalizedData is the counts."""
        return self.norm != 0

    @property
    def uses_coverage(self) -> bool:
        """norm 2: the model sees the raw counts with each sample's coverage (sample_coverage of the whole
        matrix); otherwise every coverage is 1."""
        return self.norm == 2

    def model_input(self, counts, normalized):
        """The matrix the model sees (host or device arrays alike): the normalized counts for norm 1, the raw
        counts for norm 0 and 2."""
        return normalized if self.norm == 1 else counts

    def model_cov(self, cov: np.ndarray) -> np.ndarray:
        """The coverages the model sees: the recorded ``cov`` (N,), or ones where the method's model does not see
        them (haplocn.mops)."""
        return cov if self.method.cov_in_model else np.ones(np.shape(cov)[0])

    # ------------------------------------------------------------------ the model step
    @property
    def kind(self) -> ModelKind:
        return self.method.model

    @cached_property
    def spec(self) -> ModelSpec | OneStepSpec:
        """The model's settings (``model_spec``)."""
        return model_spec(self.method, self.params)

    # ------------------------------------------------------------------ model -> segmentation -> calls
    @property
    def segments(self) -> bool:
        """Whether cn.mops segments at all: the whole matrix has MIN_REGIONS_TO_SEGMENT regions or more."""
        return self.n_regions >= MIN_REGIONS_TO_SEGMENT

    def method_cnvr(self, cnvr: pd.DataFrame, cnvs: pd.DataFrame, sample_names) -> pd.DataFrame:
        """The ``cnvr`` slot as the method's cn.mops function returns it before integer copy numbers."""
        return method_cnvr(self.method, cnvr, cnvs, sample_names)


def model_spec(method: Method, p: CnMopsParams) -> ModelSpec | OneStepSpec:
    """The model's settings: cn.mops's EM, or the one-step model with the method's likelihood floor."""
    if method.model is ModelKind.EM:
        return ModelSpec.build(p.I, p.classes, p.main_class, p.prior_impact, p.cyc, p.min_read_count)
    return OneStepSpec.build(p.I, p.classes, p.prior_impact, _ONE_STEP_FLOOR[method.model], p.min_read_count)


def reference_lambda(controls_normalized: np.ndarray) -> np.ndarray:
    """referencecn.mops's lambda per region (m,): the mean of the normalized controls (m, Nc), floored at
    LAMBDA_FLOOR."""
    return np.maximum(row_means(controls_normalized), LAMBDA_FLOOR)


def single_lambda(counts: np.ndarray) -> float:
    """singlecn.mops's lambda of one chromosome from its counts (rows,): the median of the positive counts, 0 for
    a chromosome without reads (its regions take the short-cut answer)."""
    positive = counts[counts > 0]
    return r_median(positive) if positive.size else 0.0


def method_cnvr(method: Method, cnvr: pd.DataFrame, cnvs: pd.DataFrame, sample_names) -> pd.DataFrame:
    """The ``cnvr`` slot as the method's cn.mops function returns it (before integer copy numbers): one column
    per sample; haplocn.mops's columns named ``CN.<sample>``; singlecn.mops's the CNVs themselves."""
    if method.cnvr == "CN.":
        return cnvr.rename(columns={s: f"CN.{s}" for s in sample_names})
    if method.cnvr == "cnvs":
        return cnvs.copy()
    return cnvr


__all__ = ["RunPlan", "model_spec", "reference_lambda", "single_lambda", "method_cnvr"]
