"""The cn.mops family by name (the rows of params.METHODS): entry points, the parameters each takes and their
checks, for the command line, the batch runner and the distributed pipeline."""
from __future__ import annotations

import difflib
from collections.abc import Callable

from ..errors import InputError
from ..params import METHODS, CnMopsParams, Method, ModelKind, canonical_method, method_spec
from ..result import CNVDetectionResult
from .cnmops import cn_mops, segment_arg_names
from .family import exome_cn_mops, haplo_cn_mops, reference_cn_mops, single_cn_mops

_ENTRY_POINTS = {fn.__name__: fn for fn in (cn_mops, exome_cn_mops, haplo_cn_mops, reference_cn_mops,
                                            single_cn_mops)}
#: arguments that say where to run (the batch and the distributed pipeline set them)
RUN_ARGS = {"backend", "devices"}


def entry_point(method) -> Callable[..., CNVDetectionResult]:
    """The entry point of ``method`` (our name or cn.mops's spelling)."""
    return _ENTRY_POINTS[method_spec(method).function]


def run_method(method, input, controls=None, *, backend: str = "auto", **params) -> CNVDetectionResult:
    """``method``'s entry point on ``input`` (referencecn.mops: the cases, with ``controls``) with ``params``."""
    fn = entry_point(method)
    if method_spec(method).model is ModelKind.REFERENCE:
        return fn(input, controls, backend=backend, **params)
    return fn(input, backend=backend, **params)


def parameter_defaults(method) -> dict:
    """Every named argument of the method's entry point (no data) with its default: the method's parameters,
    its options (referencecn.mops's ``verbose``) and the run arguments (``backend``, ``devices``)."""
    m = method_spec(method)
    out = {**m.parameter_defaults(), "backend": "auto", **m.options}
    if m.devices:
        out["devices"] = None
    return out


def check_parameters(method, params: dict, *, where: str = "", allow_run_args: bool = False) -> None:
    """InputError if ``params`` holds a name the method does not take (with the closest valid names)."""
    allowed = set(parameter_defaults(method)) | segment_arg_names(params.get("seg_algorithm", "fast"))
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


def build_params(method, params: dict) -> tuple[CnMopsParams, dict]:
    """(validated CnMopsParams as the method's entry point builds them, the method's options such as
    ``verbose``). ``params``: keyword arguments of the entry point (no data, backend or devices)."""
    m = method_spec(method)
    check_parameters(m.name, params)
    named = m.parameter_defaults()
    values = {k: v for k, v in params.items() if k in named}
    segment_args = {k: v for k, v in params.items() if k not in named and k not in m.options}
    options = {k: params.get(k, v) for k, v in m.options.items()}
    return m.params(segment_args=segment_args, **values), options

__all__ = ["METHODS", "Method", "canonical_method", "method_spec", "entry_point", "run_method",
           "parameter_defaults", "segment_arg_names", "check_parameters", "build_params", "RUN_ARGS"]
