"""The model of a cohort in parts: rows x samples fitted (and later scored) together.

Without sex awareness there is one part, every row and every sample: cn.mops itself. With ``sex_aware=True`` (and
chrX/chrY rows outside the PARs, sex.py):

| part | rows | samples | classes |
| --- | --- | --- | --- |
| all | autosomes and PARs | every sample | cn.mops's (normal CN2) |
| female | chrX non-PAR | females | cn.mops's (normal CN2) |
| male | chrX and chrY non-PAR | males | fold changes relative to one copy: I / I[CN1] (normal CN1) |
| female_y | chrY non-PAR | females | none: CN0 for certain, sINI 0 (counts left as they are) |

Each modelled part is normalized (normalizeChromosomes on its rows and samples) and fitted by cn.mops's EM on its
own, so a male's single X is his normal class (sINI 0) and a loss or gain of it is called relative to one copy;
the class labels keep their meaning (CN1 = one copy) in every part. The autosomes' results are cn.mops's, bit for
bit, whatever the sex chromosomes hold (normalization is per chromosome and the model per region).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..data import CountData, chromosome_blocks
from ..errors import InputError
from ..model import fit
from ..model.estep import estep
from ..model.spec import ModelOutput, ModelSpec
from ..normalization import sample_coverage
from ..params import CnMopsParams
from ..pipeline.plan import RunPlan
from .normalize import NormState, cohort_state, normalized_against
from .sex import FEMALE, MALE, sex_rows

ALL = "all"


@dataclass(frozen=True)
class Part:
    """Rows ``rows`` (sorted int64 indices; None: every row) of the samples whose sex is in ``sexes`` (empty:
    every sample), with normal class ``main_class`` and the classes' fold changes I * ``fold_scale``; ``fixed``:
    the label every sample gets without a model."""

    name: str
    rows: np.ndarray | None
    sexes: tuple[str, ...]
    main_class: str
    fold_scale: float = 1.0
    fixed: str | None = None

    def takes(self, sex: str | None) -> bool:
        return not self.sexes or sex in self.sexes

    def spec(self, params: CnMopsParams) -> ModelSpec:
        folds = tuple(f * self.fold_scale for f in params.I)
        return ModelSpec.build(folds, params.classes, self.main_class, params.prior_impact, params.cyc,
                               params.min_read_count)

    def manifest(self) -> dict:
        return {"name": self.name, "sexes": list(self.sexes), "main_class": self.main_class,
                "fold_scale": self.fold_scale, "fixed": self.fixed}


@dataclass
class PartFit:
    """A part and its cohort fit: ``lam``, ``alpha`` (rows of the part, n) order F, the cohort's normalization
    ``norm`` of those rows and samples; all None for a fixed part or one without cohort samples."""

    part: Part
    lam: np.ndarray | None
    alpha: np.ndarray | None
    norm: NormState | None


def plan_parts(gr, params: CnMopsParams, sex_aware: bool, genome: str | None) -> list[Part]:
    """The parts of a run (module docstring)."""
    whole = [Part(ALL, None, (), params.main_class)]
    if not sex_aware:
        return whole
    if params.main_class != "CN2":
        raise InputError("sex_aware applies to diploid genomes (normal class CN2): not to haplocn.mops.")
    xm, ym = sex_rows(gr, genome)
    if not (xm.any() or ym.any()):
        warnings.warn("sex_aware: no chrX/chrY regions outside the pseudo-autosomal regions; every region is "
                      "modelled as cn.mops does.", RuntimeWarning, stacklevel=3)
        return whole
    I = np.asarray(params.I)  # noqa: E741 - cn.mops's name
    main = params.classes.index(params.main_class)
    one = np.flatnonzero(I == I[main] / 2)
    if one.size == 0:
        raise InputError("sex_aware needs a class of one copy (fold change half the normal class's, CN1 with "
                         "fold 0.5) among I/classes: it is a male's normal class on chrX and chrY.")
    zero = params.classes[int(np.argmin(I))]
    parts = [Part(ALL, np.flatnonzero(~(xm | ym)), (), params.main_class)]
    if xm.any():
        parts.append(Part(FEMALE, np.flatnonzero(xm), (FEMALE,), params.main_class))
    parts.append(Part(MALE, np.flatnonzero(xm | ym), (MALE,), params.classes[int(one[0])], I[main] / I[one[0]]))
    if ym.any():
        parts.append(Part("female_y", np.flatnonzero(ym), (FEMALE,), params.main_class, fixed=zero))
    return parts


def _columns(part: Part, sexes: list[str] | None, N: int) -> np.ndarray:
    if not part.sexes:
        return np.arange(N)
    return np.array([k for k in range(N) if part.takes(sexes[k])], dtype=np.int64)


def _whole(part: Part, cols: np.ndarray, N: int) -> bool:
    return part.rows is None and cols.size == N


def _take(x: np.ndarray, part: Part, cols: np.ndarray) -> np.ndarray:
    if _whole(part, cols, x.shape[1]):
        return x
    rows = slice(None) if part.rows is None else part.rows
    return np.asfortranarray(x[rows][:, cols])


def _blocks(chrom: np.ndarray, part: Part):
    return chromosome_blocks(chrom if part.rows is None else chrom[part.rows])


def _model_input(sub, normalized, cov, cols, plan: RunPlan):
    """(matrix the model sees, its coverages) of a part, by the run's rules (norm 0/1/2, the method's cov)."""
    return plan.model_input(sub, normalized), plan.model_cov(cov[cols])


class _Assembly:
    """The full (m, N) outputs filled part by part."""

    def __init__(self, m: int, n: int, N: int, keep_post: bool, single: bool):
        self.N = N
        self.single = single
        if not single:
            self.normalized = np.zeros((m, N), order="F")
            self.out = ModelOutput(lam=np.zeros((m, n), order="F"), alpha=np.zeros((m, n), order="F"),
                                   sini=np.zeros((m, N), order="F"), cn=np.zeros((m, N), np.int8, order="F"),
                                   ini=np.zeros(m), post=np.zeros((m, n, N), order="F") if keep_post else None)
            self.filled = np.zeros(m, dtype=bool)

    def put(self, part: Part, cols: np.ndarray, normalized: np.ndarray, o: ModelOutput) -> None:
        if self.single:
            self.normalized, self.out = normalized, o
            return
        rows = np.arange(self.normalized.shape[0]) if part.rows is None else part.rows
        ix = np.ix_(rows, cols)
        self.normalized[ix] = normalized
        self.out.sini[ix] = o.sini
        self.out.cn[ix] = o.cn
        self.out.ini[rows] += o.ini * (cols.size / self.N)
        if self.out.post is not None:
            self.out.post[np.ix_(rows, np.arange(self.out.post.shape[1]), cols)] = o.post
        new = ~self.filled[rows]  # the result's L/A: the first part's fit of each row
        if o.lam is not None and new.any():
            self.out.lam[rows[new]] = o.lam[new]
            self.out.alpha[rows[new]] = o.alpha[new]
            self.filled[rows[new]] = True

    def fixed(self, part: Part, cols: np.ndarray, sub: np.ndarray, params: CnMopsParams) -> None:
        n = len(params.classes)
        idx = params.classes.index(part.fixed)
        m_p = sub.shape[0]
        post = np.zeros((m_p, n, cols.size), order="F") if self.out.post is not None else None
        if post is not None:
            post[:, idx, :] = 1.0
        o = ModelOutput(lam=None, alpha=None, sini=np.zeros(sub.shape, order="F"),
                        cn=np.full(sub.shape, idx, np.int8, order="F"), ini=np.zeros(m_p), post=post)
        self.put(part, cols, sub, o)


def fit_parts(data: CountData, plan: RunPlan, parts: list[Part], sexes: list[str] | None):
    """Normalize and fit a cohort part by part under ``plan``: (normalizedData (m, N), cov (N,), ModelOutput
    (m, n, N), fits). The output's L/A hold each row's first fitted part (the female fit on chrX, the male one on
    chrY)."""
    params = plan.params
    x = data.counts
    m, N = x.shape
    chrom = data.chromosomes
    cov = sample_coverage(x) if plan.uses_coverage else np.ones(N)
    single = len(parts) == 1 and parts[0].rows is None
    acc = _Assembly(m, len(params.classes), N, params.return_posterior, single)
    fits = []
    for part in parts:
        cols = _columns(part, sexes, N)
        if cols.size == 0 or part.fixed:
            if cols.size:
                acc.fixed(part, cols, _take(x, part, cols), params)
            fits.append(PartFit(part, None, None, None))
            continue
        sub = _take(x, part, cols)
        names = [data.sample_names[k] for k in cols]
        state = cohort_state(sub, _blocks(chrom, part) if part.rows is not None else data.blocks(), params)
        normalized = normalized_against(sub, state, names)
        model_input, model_cov = _model_input(sub, normalized, cov, cols, plan)
        o = fit(model_input, model_cov, part.spec(params), keep_post=params.return_posterior, backend=plan.backend)
        acc.put(part, cols, normalized, o)
        fits.append(PartFit(part, o.lam, o.alpha, state))
    return acc.normalized, cov, acc.out, fits


def score_parts(x: np.ndarray, sample_names: list[str], sexes: list[str] | None, fits: list[PartFit],
                plan: RunPlan, cov: np.ndarray, n_fit: dict):
    """New samples ``x`` (m, J) scored against the cohort's part fits (normalized against each part's cohort,
    then the E-step with its parameters, each sample joining the class weights of the part's ``n_fit[name]``
    cohort samples, model/estep.py): (normalizedData (m, J), ModelOutput (m, n, J))."""
    params = plan.params
    m, J = x.shape
    single = len(fits) == 1 and fits[0].part.rows is None
    acc = _Assembly(m, len(params.classes), J, params.return_posterior, single)
    for pf in fits:
        part = pf.part
        cols = _columns(part, sexes, J)
        if cols.size == 0:
            continue
        sub = _take(x, part, cols)
        if part.fixed:
            acc.fixed(part, cols, np.asfortranarray(sub, dtype=np.float64), params)
            continue
        if pf.lam is None:
            raise InputError(f"The reference cohort has no {part.name} samples: the {part.name} part of the model "
                             f"(chrX/chrY outside the PARs) was not fitted, so {part.name} samples cannot be "
                             "called against it. Build the reference from a cohort with both sexes.")
        names = [sample_names[k] for k in cols]
        normalized = normalized_against(sub, pf.norm, names)
        model_input, model_cov = _model_input(sub, normalized, cov, cols, plan)
        o = estep(model_input, model_cov, pf.lam, pf.alpha, part.spec(params), keep_post=params.return_posterior,
                  n_fit=n_fit[part.name], backend=plan.backend)
        acc.put(part, cols, normalized, o)
    return acc.normalized, acc.out


__all__ = ["ALL", "Part", "PartFit", "plan_parts", "fit_parts", "score_parts"]
