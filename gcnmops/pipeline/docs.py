"""The parameter sections of the family's docstrings, written once: cn.mops's meaning of every parameter (the
parameter table, ``params.PARAMETERS``) with each method's own default from the method table (``params.METHODS``).

``documented(method)`` fills the ``{parameters}`` field of a function's numpy-style docstring with a
``Parameters`` entry per argument of its signature (and ``{returns}`` with the Returns and Raises sections),
so ``help(gcnmops.haplo_cn_mops)`` shows haplocn.mops's defaults and ``help(gcnmops.cn_mops)`` cn.mops's.
"""
from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable

from ..params import KINDS, METHODS, PARAMETERS

#: the arguments every method adds to cn.mops's
RUNTIME: dict[str, tuple[str, str]] = {
    "backend": ("{\"auto\", \"cpu\", \"gpu\"}, default \"auto\"", "where the model runs: \"auto\" takes a usable "
                "CUDA GPU, else the CPU (said in one log line); the results are the same."),
    "devices": ("int, list of int or \"all\", optional", "GPU backend: the device(s); several (\"all\": every GPU) "
                "each run a group of whole chromosomes through every stage (one chromosome: its rows split for the "
                "model). Default: device 0."),
    "verbose": ("int, default 1", "1: log the method's note (cn.mops's message about its defaults); 0: quiet."),
    "segment_args": ("keyword arguments", "more arguments of the segmentation (cn.mops's ``...``), e.g. "
                     "``alpha``, ``seg_median_t``."),
}


#: the Returns and Raises sections of every entry point
RETURNS = """Returns
    -------
    CNVDetectionResult
        cn.mops's result slots: ``gr``, ``normalized_data``, ``local_assessments`` (sINI), ``individual_call``,
        ``ini_call``, ``segmentation``, ``cnvs``, ``cnvr`` (copy-number labels after
        :func:`gcnmops.calc_integer_copy_numbers`), ``params``; ``result.write(folder)`` writes the files and
        ``result.to_frame(name)`` gives a matrix as a labelled DataFrame.

    Raises
    ------
    InputError
        a bad input or parameter, with a message naming the fix."""


def _entry(head: str, text: str) -> list[str]:
    return [head] + textwrap.wrap(text, 110, initial_indent="    ", subsequent_indent="    ")


def parameter_section(method: str, names: list[str]) -> str:
    """The numpy-style ``Parameters`` entries of ``names`` (model parameters with ``method``'s defaults, then
    the runtime arguments), indented for a function's docstring."""
    defaults = METHODS[method].parameter_defaults()
    lines = []
    for name in names:
        if name in PARAMETERS:
            p = PARAMETERS[name]
            default = defaults.get(name)
            shown = ", ".join(str(v) for v in default) if isinstance(default, (list, tuple)) else repr(default)
            lines += _entry(f"{name} : {KINDS[p.kind][0]}, default {shown}", f"cn.mops's ``{p.r_name}``: "
                            f"{p.described}")
        elif name in RUNTIME:
            kind, meaning = RUNTIME[name]
            lines += _entry(f"**{name}" if name == "segment_args" else f"{name} : {kind}", meaning)
        elif name == "kwargs":
            lines += _entry("**kwargs", "any other argument of :func:`gcnmops.cn_mops`, with cn.mops's default.")
    return "\n    ".join(lines)


def documented(method: str) -> Callable[[Callable], Callable]:
    """Decorator: ``{parameters}`` in the function's docstring becomes ``parameter_section`` of its arguments,
    ``{returns}`` the RETURNS sections."""
    def decorate(fn: Callable) -> Callable:
        names = [p for p in inspect.signature(fn).parameters if p not in ("input", "cases", "controls", "x")]
        fn.__doc__ = fn.__doc__.replace("{parameters}", parameter_section(method, names)).replace("{returns}",
                                                                                                  RETURNS)
        return fn

    return decorate


__all__ = ["documented", "parameter_section", "RUNTIME", "RETURNS"]
