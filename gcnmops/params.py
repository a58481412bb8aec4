"""Parameters of a cn.mops run: defaults of each method of the family and their validation."""
from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from numbers import Real
from types import MappingProxyType

import numpy as np

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
        _warn_normal_fold(folds, classes, self.main_class)
        for name in ("prior_impact", "norm_qu", "qu_size_factor", "upper_threshold", "lower_threshold",
                     "min_width", "min_read_count", "cyc"):
            _require_number(getattr(self, name), name)
        for p in PARAMETERS.values():
            if p.bounds is not None:
                p.check_range(getattr(self, p.name))
        if self.prior_impact < 0:
            raise InputError("prior_impact must be non-negative.")
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
        return replace(self, I=folds, classes=classes, norm=int(norm), cyc=int(self.cyc),
                       min_width=int(self.min_width), prior_impact=float(self.prior_impact),
                       min_read_count=float(self.min_read_count),
                       use_median=as_bool(self.use_median, "use_median"),
                       return_posterior=as_bool(self.return_posterior, "return_posterior"))

    def r_params(self) -> dict:
        """The result's params list with cn.mops's names (without cov, L, A): the PARAMETERS with a
        ``result_name``, in the table's order, between the method and the normal class."""
        values = {p.result_name: getattr(self, p.name) for p in PARAMETERS.values() if p.result_name is not None}
        values.update(folds=list(self.I), classes=list(self.classes))
        if self.method in NO_USE_MEDIAN:
            del values["useMedian"]
        return {"method": self.method, **values, "mainClass": self.main_class, "version": VERSION,
                "SegmentationParams": dict(self.segment_args)}


@dataclass(frozen=True)
class Parameter:
    """One of cn.mops's parameters: the ONE row every face reads (the Python keyword, the CLI flag and its help,
    the R bridge's and the batch manifests' cn.mops names, the docstrings' Parameters sections).

    ``name``: ours, CnMopsParams's field and the Python keyword (snake_case); ``r_name``: cn.mops's (R's argument,
    camelCase); ``kind``: its value, a key of KINDS ("floats": a vector of numbers, "strings": a vector of
    labels); ``meaning``: what it does (in cn.mops's terms); ``choices``: its allowed values, where a set is
    (checked by CnMopsParams.validated); ``result_name``: its name in the result's params list (cn.mops's
    ``folds`` for ``I``), None where that list does not hold it; ``bounds``: (least, most) an "int" may be
    (checked by CnMopsParams.validated: a value beyond them would overflow or run without end) and ``unit``
    what it counts, for the message."""

    name: str
    r_name: str
    kind: str
    meaning: str
    choices: tuple = ()
    result_name: str | None = None
    bounds: tuple[int, int] | None = None
    unit: str = ""

    def check_range(self, value) -> None:
        """InputError unless ``value`` is a whole number within ``bounds``."""
        low, high = self.bounds
        if not low <= value <= high or int(value) != value:
            raise InputError(f"{self.name} must be a whole number of {self.unit} from {low:,} to {high:,}, "
                             f"got {value!r}.")

    @property
    def flag(self) -> str:
        """The command line's flag: ``--prior-impact`` for ``prior_impact`` (``--I`` for ``I``)."""
        return "--" + self.name.replace("_", "-")

    @property
    def described(self) -> str:
        """The meaning, with the choices where the parameter has a set of them."""
        if not self.choices:
            return self.meaning
        return f"{self.meaning} One of {', '.join(repr(c) if isinstance(c, str) else str(c) for c in self.choices)}."


def comma_floats(text: str) -> list[float]:
    """A vector of numbers as the command line writes it: "0.025,0.5,1"."""
    return [float(v) for v in text.split(",")]


def comma_strings(text: str) -> list[str]:
    """A vector of labels as the command line writes it: "CN0, CN1" (spaces around commas dropped)."""
    return [v.strip() for v in text.split(",")]


def device_list(text: str) -> str | list[int]:
    """GPUs as the command line names them: "all", or ids "0,2"."""
    return "all" if text == "all" else [int(v) for v in text.split(",")]


#: a parameter's kind -> (its type in the docstrings, the command line's parser of its value; None: a switch)
KINDS: dict[str, tuple[str, object]] = {
    "floats": ("sequence of float", comma_floats), "strings": ("sequence of str", comma_strings),
    "float": ("float", float), "int": ("int", int), "str": ("str", str), "bool": ("bool", None),
}


def _parameter(name, r_name, kind, meaning, choices=(), in_result=True, bounds=None, unit="") -> Parameter:
    return Parameter(name, r_name, kind, meaning, tuple(choices),
                     ("folds" if name == "I" else r_name) if in_result else None, bounds, unit)


#: the most EM cycles a run may ask for (cn.mops's default is 20; the EM settles long before)
MAX_CYC = 100_000
#: the most regions a CNV may be required to span (the segmentation indexes regions with 32-bit integers)
MAX_MIN_WIDTH = 2**31 - 1


#: cn.mops's parameters (spec section 1), by our name, in cn.mops's order: THE table of their names, kinds and
#: meanings; the CLI's flags, the R bridge's name mapping, parameter_name and the docstrings are built from it
PARAMETERS: dict[str, Parameter] = {p.name: p for p in (
    _parameter("I", "I", "floats", "expected fold change of each copy-number class relative to the normal class "
               "(CN2; haplocn.mops CN1); the model's Poisson means are lambda x I."),
    _parameter("classes", "classes", "strings", "labels of the classes, one per fold change (\"CN0\" ... \"CN8\"); "
               "integer copy numbers are read from the digits."),
    _parameter("prior_impact", "priorImpact", "float", "weight of the Dirichlet prior on the normal class: larger "
               "values make the model call fewer CNVs."),
    _parameter("cyc", "cyc", "int", "EM cycles per region.", bounds=(1, MAX_CYC), unit="EM cycles"),
    _parameter("norm", "norm", "int", "0: no normalization; 1: normalize the counts per chromosome "
               "(normalize_chromosomes); 2: model the raw counts with per-sample coverage factors.", (0, 1, 2),
               in_result=False),
    _parameter("norm_type", "normType", "str", "normalization (see normalize_chromosomes).", NORM_TYPES),
    _parameter("size_factor", "sizeFactor", "str", "how a sample's size factor is taken.", SIZE_FACTORS,
               in_result=False),
    _parameter("norm_qu", "normQu", "float", "quantile of normType \"quant\", in (0, 1)."),
    _parameter("qu_size_factor", "quSizeFactor", "float", "quantile of sizeFactor \"quant\", in (0, 1).",
               in_result=False),
    _parameter("upper_threshold", "upperThreshold", "float", "a segment whose mean (median with use_median) of the "
               "local assessments (sINI, log2 fold) is at or above this is a gain."),
    _parameter("lower_threshold", "lowerThreshold", "float", "a segment whose mean (median) is at or below this is "
               "a loss."),
    _parameter("min_width", "minWidth", "int", "fewest consecutive regions of a CNV (also the segmentation's "
               "minSeg).", bounds=(1, MAX_MIN_WIDTH), unit="regions"),
    _parameter("seg_algorithm", "segAlgorithm", "str", "\"fast\" (cn.mops's own segmentation) or \"DNAcopy\" (R's "
               "DNAcopy through rpy2; the fast one with a warning where R cannot be reached)."),
    _parameter("min_read_count", "minReadCount", "float", "regions where every sample has at most this many reads "
               "are not modelled (the normal class's answer)."),
    _parameter("use_median", "useMedian", "bool", "call CNVs on segment medians instead of means."),
    _parameter("return_posterior", "returnPosterior", "bool", "keep the posterior probabilities (regions x classes "
               "x samples, float64) in ``result.posterior_probs``.", in_result=False),
)}
#: the same rows by cn.mops's names (priorImpact -> prior_impact's row)
BY_R_NAME: dict[str, Parameter] = {p.r_name: p for p in PARAMETERS.values()}


#: CnMopsParams fields an entry point does not take (the method table sets them)
_SET_BY_METHOD = ("method", "main_class", "segment_args")
TUMOR_NORMAL_NOTE = 'NOTE: The default parameters are adjusted for "tumor-vs-normal"!'
SINGLE_NORM_NOTE = "Normalization is not applicable for singlecn.mops! Normalization parameters are only dummies."


class ModelKind(StrEnum):
    """A method's model step: cn.mops's EM per region (EM), the one-step model with lambda per region from the
    controls (REFERENCE) or per chromosome from the one sample (SINGLE)."""

    EM = "em"
    REFERENCE = "reference"
    SINGLE = "single"


@dataclass(frozen=True, eq=False)
class Method:
    """One member of the cn.mops family: its names, defaults, model and result shape (see METHODS).

    ``name``: ours (``run --method``, batch manifests, ``distributed.cn_mops(method=)``); ``function``: the
    gcnmops entry point; ``aliases``: other accepted spellings (cn.mops's function names). ``result_method``:
    ``params['method']`` of the result (singlecn.mops says "referencecn.mops", as cn.mops). ``model``: "em"
    (cn.mops's EM), "reference" (one-step model, lambda from the controls) or "single" (one-step model, lambda
    per chromosome). ``main_class``: the normal class. ``defaults``: CnMopsParams defaults the method changes.
    ``use_median``: whether it takes ``use_median`` (else segment means). ``cov_in_model``: whether the model
    sees the coverages (haplocn.mops: 1 inside the model, the coverages only recorded). ``devices``: whether it
    takes ``devices=`` (several GPUs). ``min_samples``: samples its input needs. ``options``: its other
    arguments with their defaults (not parameters of the result). ``note``: a message it logs (unless
    ``verbose=0``). ``cnvr``: its ``cnvr`` before integer copy numbers: "samples" (one column per sample),
    "CN." (``CN.<sample>`` columns) or "cnvs" (the CNVs themselves).
    """

    name: str
    function: str
    aliases: tuple[str, ...]
    result_method: str
    model: ModelKind
    main_class: str = "CN2"
    defaults: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    use_median: bool = True
    cov_in_model: bool = True
    devices: bool = False
    min_samples: int = 2
    options: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    note: str | None = None
    cnvr: str = "samples"

    def parameter_defaults(self) -> dict:
        """Every parameter the entry point takes (CnMopsParams's names) with the method's default."""
        out = {}
        for f in fields(CnMopsParams):
            if f.name in _SET_BY_METHOD or (f.name == "use_median" and not self.use_median):
                continue
            out[f.name] = f.default
        out.update(self.defaults)
        return out

    def params(self, segment_args: dict | None = None, **values) -> CnMopsParams:
        """The validated CnMopsParams of a run of this method: ``values`` (CnMopsParams's names) over the
        method's defaults; InputError naming a bad value."""
        unknown = set(values) - set(self.parameter_defaults())
        if unknown:
            raise InputError(f"{self.function}() got unexpected parameter(s) {', '.join(sorted(unknown))}.")
        merged = {**self.defaults, **values}
        if not self.use_median:
            merged["use_median"] = False
        return CnMopsParams(**merged, method=self.result_method, main_class=self.main_class,
                            segment_args=dict(segment_args or {})).validated()


def _method(name, function, aliases, result_method, model, defaults=None, options=None, **kw) -> Method:
    return Method(name, function, tuple(aliases), result_method, ModelKind(model), defaults=MappingProxyType(defaults or {}),
                  options=MappingProxyType(options or {}), **kw)


#: the cn.mops family, by our method name: THE table every entry point, the CLI, the batch runner and the
#: distributed pipeline read (their parameters' names are PARAMETERS)
METHODS: dict[str, Method] = {m.name: m for m in (
    _method("cn.mops", "cn_mops", ("cnmops", "cn_mops"), "cn.mops", "em", devices=True),
    _method("exome", "exome_cn_mops", ("exomecn.mops",), "cn.mops", "em", devices=True,
            defaults=dict(prior_impact=10.0, lower_threshold=-0.8, min_width=5, min_read_count=1.0)),
    _method("haplo", "haplo_cn_mops", ("haplocn.mops",), "haplocn.mops", "em", main_class="CN1",
            defaults=dict(I=HAPLO_FOLDS, upper_threshold=0.6, min_read_count=1.0), use_median=False,
            cov_in_model=False, cnvr="CN."),
    _method("reference", "reference_cn_mops", ("referencecn.mops",), "referencecn.mops", "reference",
            defaults=dict(I=REFERENCE_FOLDS, classes=REFERENCE_CLASSES, min_width=4, seg_algorithm="DNAcopy",
                          min_read_count=1.0), use_median=False, min_samples=1, options=dict(verbose=1),
            note=TUMOR_NORMAL_NOTE),
    _method("single", "single_cn_mops", ("singlecn.mops",), "referencecn.mops", "single",
            defaults=dict(min_read_count=1.0), use_median=False, min_samples=1, note=SINGLE_NORM_NOTE,
            cnvr="cnvs"),
)}


def method_spec(name) -> Method:
    """The METHODS entry of ``name`` (ours or cn.mops's spelling); InputError naming the choices."""
    key = str(name).strip()
    if key in METHODS:
        return METHODS[key]
    for m in METHODS.values():
        if key in m.aliases or key.lower() in m.aliases:
            return m
    raise InputError(f"Unknown method {name!r}: use one of {', '.join(METHODS)} "
                     "(or exomecn.mops, haplocn.mops, referencecn.mops, singlecn.mops).")


def canonical_method(name) -> str:
    """``name`` as a key of METHODS (cn.mops's spellings accepted); InputError naming the choices."""
    return method_spec(name).name


def parameter_name(name: str) -> str:
    """Our keyword for a parameter name: snake_case as is, cn.mops's names through the PARAMETERS table
    (priorImpact -> prior_impact), other camelCase names (the segmentation's) converted (segMedianT ->
    seg_median_t); ``I`` stays ``I``."""
    name = name.strip()
    if name in BY_R_NAME:
        return BY_R_NAME[name].name
    if "_" in name or name.islower():
        return name
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


#: R's spellings of TRUE and FALSE (as.logical on strings)
R_TRUE = ("TRUE", "true", "True", "T")
R_FALSE = ("FALSE", "false", "False", "F")


def as_bool(value, name: str) -> bool:
    """A logical parameter: True/False (numpy's too), 1/0, or a string R reads as logical (TRUE/FALSE, T/F,
    true/false, True/False; surrounding spaces ignored); anything else is an InputError (bool("FALSE") would
    be True)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str):
        t = value.strip()
        if t in R_TRUE:
            return True
        if t in R_FALSE:
            return False
    elif isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise InputError(f"{name} must be TRUE or FALSE (R's spellings T/F, true/false, True/False are accepted), "
                     f"got {value!r}.")


def _warn_normal_fold(folds, classes, main_class: str) -> None:
    """cn.mops runs with a normal class whose fold change is not 1 (it checks only that the class exists), but
    its calls are then relative to the wrong class: say so."""
    fold = folds[classes.index(main_class)]
    if fold != 1:
        where = "I has no fold change 1" if 1.0 not in folds else f"fold change 1 is class {classes[folds.index(1.0)]}"
        warnings.warn(
            f"The normal class {main_class} has fold change {fold:g} in I ({where}); cn.mops runs with this, but "
            f"calls every region relative to it. Give {main_class} the fold change 1 (I and classes pair up "
            "in order) unless this is intended.", RuntimeWarning, stacklevel=4)


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
