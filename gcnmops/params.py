"""Parameters of a cn.mops run: defaults of each method of the family and their validation."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from numbers import Real

from .errors import InputError

VERSION = "1.53.0"  # the cn.mops version whose behaviour we reproduce
NORM_TYPES = ("mean", "min", "median", "quant", "mode", "poisson")
SIZE_FACTORS = ("mean", "median", "quant", "mode")
DEFAULT_FOLDS = (0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4)
DEFAULT_CLASSES = tuple(f"CN{i}" for i in range(9))
#: haplocn.mops: the normal class is CN1
HAPLO_FOLDS = (0.025, 1, 2, 3, 4, 5, 6, 7, 8)
#: referencecn.mops (tumour vs normal): high copy numbers too
REFERENCE_FOLDS = (0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 8, 16, 32, 64)
REFERENCE_CLASSES = tuple(f"CN{i}" for i in (*range(9), 16, 32, 64, 128))
#: methods whose result params have no useMedian entry (they always use segment means)
NO_USE_MEDIAN = ("haplocn.mops", "referencecn.mops")
MAX_CLASSES = 64


@dataclass(frozen=True)
class CnMopsParams:
    """Everything cn.mops() takes besides the data (cn.mops names in snake_case)."""

    I: tuple[float, ...] = DEFAULT_FOLDS  # noqa: E741 - cn.mops's name
    classes: tuple[str, ...] = DEFAULT_CLASSES
    prior_impact: float = 1.0
    cyc: int = 20
    norm: int = 1
    norm_type: str = "poisson"
    size_factor: str = "mean"
    norm_qu: float = 0.25
    qu_size_factor: float = 0.75
    upper_threshold: float = 0.5
    lower_threshold: float = -0.9
    min_width: int = 3
    seg_algorithm: str = "fast"
    min_read_count: float = 5.0
    use_median: bool = False
    return_posterior: bool = False
    method: str = "cn.mops"
    main_class: str = "CN2"
    segment_args: dict = field(default_factory=dict)

    def validated(self) -> "CnMopsParams":
        """Return a normalized copy or raise InputError naming the offending parameter."""
        folds = _as_float_tuple(self.I, "I")
        if isinstance(self.classes, str) or not all(isinstance(c, str) for c in self.classes):
            raise InputError("classes must be a vector of strings (labels such as 'CN0', 'CN1', ...).")
        classes = tuple(self.classes)
        if len(folds) != len(classes):
            raise InputError(f"I and classes must have the same length ({len(folds)} folds, {len(classes)} classes).")
        if len(set(classes)) != len(classes):
            raise InputError("classes must be unique.")
        if len(classes) > MAX_CLASSES:
            raise InputError(f"At most {MAX_CLASSES} copy-number classes are supported.")
        if self.main_class not in classes:
            raise InputError(f"One element of classes must be {self.main_class}.")
        if any(f <= 0 for f in folds):
            raise InputError("Every fold change in I must be positive (use a small value such as 0.025 for CN0).")
        for name in ("prior_impact", "norm_qu", "qu_size_factor", "upper_threshold", "lower_threshold",
                     "min_width", "min_read_count", "cyc"):
            _require_number(getattr(self, name), name)
        if self.cyc < 1 or int(self.cyc) != self.cyc:
            raise InputError(f"cyc (number of EM cycles) must be a positive integer, got {self.cyc}.")
        if self.prior_impact < 0:
            raise InputError("prior_impact must be non-negative.")
        if self.min_width < 1:
            raise InputError("min_width must be at least 1 region.")
        norm = self.norm
        if isinstance(norm, bool):
            norm = int(norm)
        if norm not in (0, 1, 2):
            raise InputError(f"norm must be 0 (none), 1 (normalizeChromosomes) or 2 (coverage model), got {norm!r}.")
        if self.norm_type not in NORM_TYPES:
            raise InputError(f"norm_type must be one of {', '.join(NORM_TYPES)}; got {self.norm_type!r}.")
        if self.size_factor not in SIZE_FACTORS:
            raise InputError(f"size_factor must be one of {', '.join(SIZE_FACTORS)}; got {self.size_factor!r}.")
        if not 0 <= self.norm_qu <= 1 or not 0 <= self.qu_size_factor <= 1:
            raise InputError("norm_qu and qu_size_factor are quantiles and must lie in [0, 1].")
        if not isinstance(self.seg_algorithm, str):
            raise InputError("seg_algorithm must be a string ('fast' or 'DNAcopy').")
        if not isinstance(self.return_posterior, bool):
            raise InputError("return_posterior must be True or False.")
        return replace(self, I=folds, classes=classes, norm=int(norm), cyc=int(self.cyc),
                       min_width=int(self.min_width), prior_impact=float(self.prior_impact),
                       min_read_count=float(self.min_read_count), use_median=bool(self.use_median))

    @property
    def main_index(self) -> int:
        return self.classes.index(self.main_class)

    def r_params(self) -> dict:
        """The result's params list with cn.mops's names (without cov, L, A)."""
        out = {
            "method": self.method, "folds": list(self.I), "classes": list(self.classes),
            "priorImpact": self.prior_impact, "cyc": self.cyc, "normType": self.norm_type,
            "normQu": self.norm_qu, "upperThreshold": self.upper_threshold,
            "lowerThreshold": self.lower_threshold, "minWidth": self.min_width,
            "segAlgorithm": self.seg_algorithm, "minReadCount": self.min_read_count,
            "useMedian": self.use_median, "mainClass": self.main_class, "version": VERSION,
            "SegmentationParams": dict(self.segment_args),
        }
        if self.method in NO_USE_MEDIAN:
            del out["useMedian"]
        return out

    def as_dict(self) -> dict:
        return asdict(self)


def _require_number(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, Real) or math.isnan(value):
        raise InputError(f"{name} must be a single number, got {value!r}.")


def _as_float_tuple(values, name: str) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)):
        raise InputError(f"{name} must be numeric.")
    try:
        out = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be numeric.") from None
    if not out or not all(math.isfinite(v) for v in out):
        raise InputError(f"{name} must be a non-empty vector of finite numbers.")
    return out
