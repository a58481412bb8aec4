"""The cn.mops family by name, as the distributed pipeline uses it: the method table (params.METHODS) and the
parameter checks of pipeline.methods (no Dask needed to import this module)."""
from __future__ import annotations

from ..params import METHODS, canonical_method, method_spec
from ..pipeline.methods import (RUN_ARGS, build_params, check_parameters, entry_point, parameter_defaults,
                                segment_arg_names)

__all__ = ["METHODS", "canonical_method", "method_spec", "entry_point", "parameter_defaults", "segment_arg_names",
           "check_parameters", "build_params", "RUN_ARGS"]
