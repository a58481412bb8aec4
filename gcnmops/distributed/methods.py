"""The cn.mops family by name: entry points, their parameters and defaults (shared by the distributed
pipeline and the batch runner; no Dask needed to import this module)."""
from __future__ import annotations

import difflib
import inspect

from ..errors import InputError
from ..params import CnMopsParams

#: our method names (as ``run --method``) -> the single-process entry point (module gcnmops)
METHODS = {"cn.mops": "cn_mops", "exome": "exome_cn_mops", "haplo": "haplo_cn_mops",
           "reference": "reference_cn_mops", "single": "single_cn_mops"}
#: other spellings accepted: cn.mops's function names
ALIASES = {"cnmops": "cn.mops", "cn_mops": "cn.mops", "exomecn.mops": "exome", "haplocn.mops": "haplo",
           "referencecn.mops": "reference", "singlecn.mops": "single"}
#: arguments that are data, not parameters
DATA_ARGS = {"input", "cases", "controls", "x"}
#: arguments that say where to run (the batch and the distributed pipeline set them)
RUN_ARGS = {"backend", "devices"}


def canonical_method(name) -> str:
    """``name`` as a key of METHODS (cn.mops's spellings accepted); InputError naming the choices."""
    key = str(name).strip()
    key = ALIASES.get(key, ALIASES.get(key.lower(), key))
    if key not in METHODS:
        raise InputError(f"Unknown method {name!r}: use one of {', '.join(METHODS)} "
                         "(or exomecn.mops, haplocn.mops, referencecn.mops, singlecn.mops).")
    return key


def entry_point(method: str):
    import gcnmops

    return getattr(gcnmops, METHODS[canonical_method(method)])


def _named(fn) -> dict:
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is not p.empty}


def _takes_extra(fn) -> bool:
    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())


def parameter_defaults(method: str) -> dict:
    """Every named parameter of the method's entry point with its default (exome: its own over cn_mops's)."""
    import gcnmops

    fn = entry_point(method)
    out = _named(gcnmops.cn_mops) if canonical_method(method) == "exome" else {}
    out.update(_named(fn))
    return {k: v for k, v in out.items() if k not in DATA_ARGS}


def segment_arg_names() -> set[str]:
    """Extra keyword arguments the methods pass to the segmentation (cn.mops's ``...``)."""
    from ..segmentation.cpu import segment

    return set(inspect.signature(segment).parameters) - {"x", "min_seg"}


def check_parameters(method: str, params: dict, *, where: str = "", allow_run_args: bool = False) -> None:
    """InputError if ``params`` holds a name the method does not take (with the closest valid names)."""
    allowed = set(parameter_defaults(method)) | segment_arg_names()
    if not allow_run_args:
        allowed -= RUN_ARGS
    bad = [k for k in params if k not in allowed]
    if not bad:
        return
    hints = []
    for k in bad:
        if k in RUN_ARGS:
            hints.append(f"{k!r} (a run option: the batch's --backend/--devices, distributed.cn_mops's backend=)")
            continue
        close = difflib.get_close_matches(k, sorted(allowed), n=1)
        hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    prefix = f"{where}: " if where else ""
    raise InputError(f"{prefix}unknown parameter(s) for method {canonical_method(method)}: {', '.join(hints)}. "
                     f"Valid: {', '.join(sorted(allowed))}.")


def build_params(method: str, params: dict) -> tuple[CnMopsParams, dict]:
    """(validated CnMopsParams as the method's entry point builds them, the remaining run arguments such as
    ``verbose``). ``params``: keyword arguments of the entry point (no data, backend or devices)."""
    method = canonical_method(method)
    check_parameters(method, params)
    named = parameter_defaults(method)
    seg_names = segment_arg_names()
    values = dict(named)
    values.update({k: v for k, v in params.items() if k in named})
    segment_args = {k: v for k, v in params.items() if k in seg_names and k not in named}
    common = {k: values[k] for k in ("I", "classes", "prior_impact", "cyc", "norm", "norm_type", "size_factor",
                                     "norm_qu", "qu_size_factor", "upper_threshold", "lower_threshold",
                                     "min_width", "seg_algorithm", "min_read_count", "return_posterior")}
    if method in ("cn.mops", "exome"):
        p = CnMopsParams(**common, use_median=values["use_median"], segment_args=segment_args)
    elif method == "haplo":
        p = CnMopsParams(**common, use_median=False, method="haplocn.mops", main_class="CN1",
                         segment_args=segment_args)
    else:
        p = CnMopsParams(**common, use_median=False, method="referencecn.mops", main_class="CN2",
                         segment_args=segment_args)
    extra = {k: values[k] for k in ("verbose",) if k in values}
    return p.validated(), extra


__all__ = ["METHODS", "canonical_method", "entry_point", "parameter_defaults", "segment_arg_names",
           "check_parameters", "build_params"]
