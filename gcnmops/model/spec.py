"""Run-wide constants of the model and the container of its per-region outputs."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..exact.rstats import ld_sum


@dataclass(frozen=True)
class ModelSpec:
    """Per-run constants derived from the classes (shapes (n,), float64)."""

    folds: np.ndarray
    log2_folds: np.ndarray
    alpha_init: np.ndarray
    alpha_prior: np.ndarray
    prior_sum: float
    main_idx: int
    cyc: int
    min_read_count: float

    @classmethod
    def build(cls, folds, classes, main_class: str, prior_impact: float, cyc: int, min_read_count: float) -> "ModelSpec":
        folds = np.ascontiguousarray(folds, dtype=np.float64)
        classes = list(classes)
        if main_class not in classes:
            raise InputError(f"One element of classes must be {main_class}.")
        main_idx = classes.index(main_class)
        alpha_init = np.full(folds.size, 0.05)
        alpha_init[main_idx] = 0.6
        alpha_init /= ld_sum(alpha_init, folds.size)[0]  # R's sum(): a long double sum
        alpha_prior = np.zeros(folds.size)
        alpha_prior[main_idx] = prior_impact
        return cls(
            folds=folds,
            log2_folds=np.log2(folds),
            alpha_init=alpha_init,
            alpha_prior=alpha_prior,
            prior_sum=float(alpha_prior.sum()),
            main_idx=main_idx,
            cyc=int(cyc),
            min_read_count=float(min_read_count),
        )


@dataclass
class ModelOutput:
    """Per-region model results, all region-fastest (order F).

    ``lam``, ``alpha``: (m, n) float64; ``sini``: (m, N) float64; ``cn``: (m, N) int8 class indices;
    ``ini``: (m,) float64; ``post``: (m, n, N) float64 or None.
    """

    lam: np.ndarray
    alpha: np.ndarray
    sini: np.ndarray
    cn: np.ndarray
    ini: np.ndarray
    post: np.ndarray | None

    @classmethod
    def allocate(cls, m: int, n: int, N: int, keep_post: bool) -> "ModelOutput":
        return cls(
            lam=np.empty((m, n), order="F"),
            alpha=np.empty((m, n), order="F"),
            sini=np.empty((m, N), order="F"),
            cn=np.empty((m, N), dtype=np.int8, order="F"),
            ini=np.empty(m),
            post=np.empty((m, n, N), order="F") if keep_post else None,
        )

    def post_argument(self) -> np.ndarray:
        """The posteriors a CPU driver writes: ``post``, or where none are kept a placeholder that numba types as
        it types ``post`` (3-D, order F and not C: a (1, 1, 1) array is both and would make the driver compile,
        and cache, a second variant for runs with and without posteriors)."""
        return self.post if self.post is not None else np.empty((1, 2, 2), order="F")
