"""The R session: the one place rpy2 is started, and the generic R <-> numpy pieces every R user needs.

:func:`r_session` imports rpy2 (embedding R, or attaching to the R that runs this Python) once and
returns what callers use: rpy2's ``rinterface``, ``robjects``, ``openrlib`` and its conversion contexts.
When rpy2 or R is missing it raises :class:`~gcnmops.errors.InputError` with one install hint
(:data:`INSTALL_HINT`), whichever feature asked (.rds files, R objects, segAlgorithm "DNAcopy", the R
package gcn.mops).

Zero-copy views: :func:`r_array` is a writable numpy array over an R vector's memory (no copy), kept
alive by the R object it views. Small builders and readers (:func:`int_vector`, :func:`as_scalar`,
:func:`element`, ...) turn plain values into R vectors and back. rpy2 is imported on first use only:
the rest of gcnmops works without R.
"""
from __future__ import annotations

import logging
import warnings
from functools import lru_cache
from typing import Any, Callable, NamedTuple

import numpy as np

from ..errors import InputError

#: what to install when rpy2 or R cannot be loaded (the one hint every R feature gives)
INSTALL_HINT = ("gcnmops's R features (.rds files, R objects, segAlgorithm 'DNAcopy', the R package gcn.mops) need "
                "R and the Python package rpy2 3.5.x: pip install 'gcnmops[r]' (or pip install 'rpy2>=3.5,<3.6'), "
                "with R installed (R on the PATH or R_HOME set).")


class RSession(NamedTuple):
    """rpy2's modules for a started R."""

    ri: Any  # rpy2.rinterface
    ro: Any  # rpy2.robjects
    openrlib: Any  # rpy2.rinterface_lib.openrlib
    localconverter: Callable  # rpy2.robjects.conversion.localconverter

    def converter(self, numpy: bool = False):
        """rpy2's default converter (R objects stay rpy2 objects), or with numpy2ri (numpy arrays <-> R)."""
        if not numpy:
            return self.ro.default_converter
        from rpy2.robjects import numpy2ri

        return self.ro.default_converter + numpy2ri.converter

    def conversion(self, numpy: bool = False):
        """A context in which :meth:`converter` applies (rpy2's ``localconverter``)."""
        return self.localconverter(self.converter(numpy))


@lru_cache(maxsize=1)
def r_session() -> RSession:
    """rpy2 and R, started once; :class:`InputError` (with :data:`INSTALL_HINT`) when either is missing."""
    rpy2_log = logging.getLogger("rpy2.rinterface_lib.embedded")
    old_level = rpy2_log.level
    try:
        with warnings.catch_warnings():
            # inside an R session (R -> reticulate -> Python) rpy2 attaches to the running R and says so,
            # as a warning and as a log line: expected here, not news for the user
            warnings.filterwarnings("ignore", message="R was initialized outside of rpy2")
            rpy2_log.setLevel(logging.ERROR)
            import rpy2.rinterface as ri
            import rpy2.robjects as ro
            from rpy2.rinterface_lib import openrlib
            from rpy2.robjects.conversion import localconverter
    except Exception as e:  # ImportError, or R itself not found / failing to start
        raise InputError(f"R through rpy2 is not available ({type(e).__name__}: {e}). {INSTALL_HINT}") from None
    finally:
        rpy2_log.setLevel(old_level)
    return RSession(ri, ro, openrlib, localconverter)


def is_null(x) -> bool:
    """True for None and R's NULL."""
    ri = r_session().ri
    return x is None or x is ri.NULL or getattr(x, "typeof", None) == ri.RTYPES.NILSXP


# --------------------------------------------------------------------------------------------
# zero-copy views of R vectors
# --------------------------------------------------------------------------------------------
class _RMemory:
    """Owner of an R vector's data for numpy: keeps the rpy2 proxy (and so the R object) alive as
    long as any numpy view of it exists (numpy's ``base`` chain ends here)."""

    def __init__(self, sexp, address: int, shape: tuple, typestr: str, itemsize: int):
        self.sexp = sexp
        strides, step = [], itemsize
        for d in shape:  # column-major, as R stores arrays
            strides.append(step)
            step *= max(d, 1)
        self.__array_interface__ = {"shape": tuple(shape), "typestr": typestr, "strides": tuple(strides),
                                    "data": (address, False), "version": 3}


def _r_type_info(sexp):
    session = r_session()
    openrlib = session.openrlib
    t = sexp.typeof
    rt = session.ri.RTYPES
    if t == rt.REALSXP:
        return openrlib.rlib.REAL, "<f8", 8
    if t == rt.INTSXP:
        return openrlib.rlib.INTEGER, "<i4", 4
    if t == rt.LGLSXP:
        return openrlib.rlib.LOGICAL, "<i4", 4
    if t == rt.RAWSXP:
        return openrlib.rlib.RAW, "|u1", 1
    raise TypeError(f"no numeric view of an R vector of type {t}")


def _r_shape(sexp) -> tuple:
    dims = sexp.do_slot("dim") if "dim" in list(sexp.list_attrs()) else None
    if dims is None:
        return (len(sexp),)
    return tuple(int(d) for d in dims)


def r_address(sexp) -> int:
    """Address of the first element of an R numeric/integer/logical/raw vector (its DATAPTR)."""
    openrlib = r_session().openrlib
    getptr, _, _ = _r_type_info(sexp)
    if len(sexp) == 0:
        return 0
    return int(openrlib.ffi.cast("uintptr_t", getptr(sexp.__sexp__._cdata)))


def r_array(sexp) -> np.ndarray:
    """A writable numpy view of an R double/integer/logical/raw vector, matrix or array: no copy.

    Shape and column-major (``order="F"``) layout follow R's ``dim``; dtype float64 / int32 / int32
    (logical) / uint8. Writing to the view writes R's memory, which R sees at once. The view keeps
    the R object alive. Integer NA is INT_MIN, as in R.
    """
    _, typestr, itemsize = _r_type_info(sexp)
    shape = _r_shape(sexp)
    if len(sexp) == 0:
        return np.empty(shape, dtype=np.dtype(typestr), order="F")
    return np.asarray(_RMemory(sexp, r_address(sexp), shape, typestr, itemsize))


# --------------------------------------------------------------------------------------------
# R values <-> Python values
# --------------------------------------------------------------------------------------------
def as_strings(sexp) -> list[str] | None:
    """An R character vector -> list of str (NA -> None); NULL -> None."""
    if is_null(sexp):
        return None
    return [None if s is r_session().ri.NA_Character else str(s) for s in sexp]


def as_scalar(sexp):
    """An R length-1 vector -> Python scalar (NA -> None); longer vectors -> list."""
    ri = r_session().ri
    if is_null(sexp):
        return None
    vals = list(sexp)
    out = []
    for v in vals:
        if v is ri.NA_Character or v is ri.NA_Logical or v is ri.NA_Integer or v is ri.NA_Real:
            out.append(None)
        elif isinstance(v, (bool, np.bool_)):
            out.append(bool(v))
        else:
            out.append(v)
    return out[0] if len(out) == 1 else out


def element(env_or_list, name):
    """Element ``name`` of an R environment or named list (None when absent or NULL)."""
    ri = r_session().ri
    if env_or_list.typeof == ri.RTYPES.ENVSXP:
        try:
            v = env_or_list.find(name, wantfun=False)
        except KeyError:
            return None
        # find() also searches enclosing environments; bridge environments have the empty env as parent
    else:
        names = list(env_or_list.names) if not is_null(env_or_list.names) else []
        if name not in names:
            return None
        v = env_or_list[names.index(name)]
    return None if is_null(v) else v


def int_vector(a) -> Any:
    """An R integer vector holding ``a``."""
    ri = r_session().ri
    a = np.ascontiguousarray(a, dtype=np.int32)
    return ri.IntSexpVector.from_memoryview(memoryview(a)) if a.size else ri.IntSexpVector([])


def double_vector(a) -> Any:
    """An R double vector holding ``a``."""
    ri = r_session().ri
    a = np.ascontiguousarray(a, dtype=np.float64)
    return ri.FloatSexpVector.from_memoryview(memoryview(a)) if a.size else ri.FloatSexpVector([])


def string_vector(values) -> Any:
    """An R character vector of ``values`` (None -> NA)."""
    ri = r_session().ri
    return ri.StrSexpVector([ri.NA_Character if v is None else str(v) for v in values])


__all__ = ["r_session", "RSession", "INSTALL_HINT", "r_array", "r_address", "is_null", "as_strings", "as_scalar",
           "element", "int_vector", "double_vector", "string_vector"]
