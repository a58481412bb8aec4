"""The parameter sections of the family's docstrings, written once: cn.mops's meaning of every parameter (spec
section 1) with each method's own default from the method table (``params.METHODS``).

``documented(method)`` fills the ``{parameters}`` field of a function's numpy-style docstring with a
``Parameters`` entry per argument of its signature (and ``{returns}`` with the Returns and Raises sections),
so ``help(gcnmops.haplo_cn_mops)`` shows haplocn.mops's defaults and ``help(gcnmops.cn_mops)`` cn.mops's.
"""
from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable

from ..params import METHODS

#: name -> (type, cn.mops's name, meaning); the argument ``input`` is described by each function itself
MEANINGS: dict[str, tuple[str, str, str]] = {
    "I": ("sequence of float", "I", "expected fold change of each copy-number class relative to the normal class "
          "(CN2; haplocn.mops CN1); the model's Poisson means are lambda x I."),
    "classes": ("sequence of str", "classes", "labels of the classes, one per fold change (\"CN0\" ... \"CN8\"); "
                "integer copy numbers are read from the digits."),
    "prior_impact": ("float", "priorImpact", "weight of the Dirichlet prior on the normal class: larger values "
                     "make the model call fewer CNVs."),
    "cyc": ("int", "cyc", "EM cycles per region."),
    "norm": ("int", "norm", "0: no normalization; 1: normalize the counts per chromosome "
             "(normalize_chromosomes); 2: model the raw counts with per-sample coverage factors."),
    "norm_type": ("str", "normType", "normalization: \"poisson\", \"mean\", \"median\", \"quant\", \"mode\" or "
                  "\"min\" (see normalize_chromosomes)."),
    "size_factor": ("str", "sizeFactor", "how a sample's size factor is taken: \"mean\", \"median\", \"quant\" or "
                    "\"mode\"."),
    "norm_qu": ("float", "normQu", "quantile of normType \"quant\", in (0, 1)."),
    "qu_size_factor": ("float", "quSizeFactor", "quantile of sizeFactor \"quant\", in (0, 1)."),
    "upper_threshold": ("float", "upperThreshold", "a segment whose mean (median with use_median) of the local "
                        "assessments (sINI, log2 fold) is at or above this is a gain."),
    "lower_threshold": ("float", "lowerThreshold", "a segment whose mean (median) is at or below this is a loss."),
    "min_width": ("int", "minWidth", "fewest consecutive regions of a CNV (also the segmentation's minSeg)."),
    "seg_algorithm": ("str", "segAlgorithm", "\"fast\" (cn.mops's own segmentation) or \"DNAcopy\" (R's DNAcopy "
                      "through rpy2; the fast one with a warning where R cannot be reached)."),
    "min_read_count": ("float", "minReadCount", "regions where every sample has at most this many reads are not "
                       "modelled (the normal class's answer)."),
    "use_median": ("bool", "useMedian", "call CNVs on segment medians instead of means."),
    "return_posterior": ("bool", "returnPosterior", "keep the posterior probabilities (regions x classes x "
                         "samples, float64) in ``result.posterior_probs``."),
}
#: the arguments every method adds to cn.mops's
RUNTIME: dict[str, tuple[str, str]] = {
    "backend": ("{\"auto\", \"cpu\", \"gpu\"}, default \"auto\"", "where the model runs: \"auto\" takes a usable "
                "CUDA GPU, else the CPU (said in one log line); the results are the same."),
    "devices": ("int, list of int or \"all\", optional", "GPU backend: the device(s); \"all\" splits the regions "
                "across every GPU. Default: device 0."),
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
        if name in MEANINGS:
            kind, r_name, meaning = MEANINGS[name]
            default = defaults.get(name)
            shown = ", ".join(str(v) for v in default) if isinstance(default, (list, tuple)) else repr(default)
            lines += _entry(f"{name} : {kind}, default {shown}", f"cn.mops's ``{r_name}``: {meaning}")
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


__all__ = ["documented", "parameter_section", "MEANINGS", "RUNTIME", "RETURNS"]
