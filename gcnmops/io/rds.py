"""R objects (``.rds`` files or live rpy2 objects) -> :class:`CountData`, through rpy2.

Accepted, as in ``cn.mops()``: a GRanges with one numeric metadata column per sample (coordinates
kept; a numeric matrix column in the metadata is taken as one sample per matrix column), a numeric
matrix (regions x samples; column names are the sample names; regions become row indices on
"undef"), a numeric vector (one region), and, for convenience, a data.frame laid out like a count
table (optional seqnames/start/end columns plus sample columns).

R numeric data are read through numpy views of R's memory (doubles zero-copy, integers with R's
NA mapped to NaN) and copied once, into the column-major float64 count matrix; bit64's integer64
numbers are converted to doubles in R first (exact up to 2^53; larger ones refused). rpy2 is started by
:mod:`gcnmops.io.rsession`, on first use: the rest of gcnmops works without R.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..data import CountData, make_count_data
from ..errors import InputError
from .columns import capitalized, count_data_from_array, count_data_from_columns
from .rsession import is_null, r_array, r_session

_R_NA_INTEGER = np.iinfo(np.int32).min

# One R function describing an object in plain pieces (vectors and strings) that Python can view.
_R_DESCRIBE = r"""
local({
  # bit64's integer64 keeps its integers' bits in a double vector: read as doubles they are ~1e-322; as doubles
  # they are exact up to 2^53 (a larger count is an error, as validate_counts makes it)
  from_integer64 <- function(x) {
    if (!inherits(x, "integer64")) return(x)
    if (!requireNamespace("bit64", quietly = TRUE))
      stop("it holds bit64::integer64 numbers and the R package bit64 is not installed", call. = FALSE)
    big <- bit64::as.integer64("9007199254740992")
    if (any(x > big, na.rm = TRUE))
      stop("it holds an integer64 count above 2^53, the largest whole number a double holds exactly", call. = FALSE)
    d <- dim(x); dn <- dimnames(x)
    v <- bit64::as.double.integer64(x)
    if (!is.null(d)) { dim(v) <- d; dimnames(v) <- dn }
    v
  }
  col_info <- function(x, nm) {
    if (methods::is(x, "Rle")) x <- S4Vectors::decode(x)
    x <- from_integer64(x)
    d <- dim(x)
    if (!is.null(d) && length(d) == 2L && !is.data.frame(x)) {
      cn <- colnames(x)
      if (is.null(cn)) cn <- paste0(nm, ".", seq_len(d[2L]))
      return(unlist(lapply(seq_len(d[2L]), function(k) col_info(x[, k, drop = TRUE], cn[k])),
                    recursive = FALSE))
    }
    if (is.factor(x)) return(list(list(name = nm, kind = "factor", value = as.character(x))))
    if (is.numeric(x) && (is.double(x) || is.integer(x)) && is.null(attr(x, "class")))
      return(list(list(name = nm, kind = typeof(x), value = x)))
    if (is.character(x)) return(list(list(name = nm, kind = "character", value = x)))
    list(list(name = nm, kind = paste(class(x), collapse = "/"), value = NULL))
  }
  columns <- function(df) {
    if (is.null(df) || ncol(df) == 0L) return(list())
    nms <- colnames(df)
    unlist(lapply(seq_len(ncol(df)), function(j) col_info(df[[j]], nms[j])), recursive = FALSE)
  }
  describe <- function(obj) {
    obj <- from_integer64(obj)
    if (isS4(obj)) {
      pkg <- attr(class(obj), "package")
      if (!is.null(pkg)) suppressWarnings(requireNamespace(pkg, quietly = TRUE))
      if (suppressWarnings(requireNamespace("GenomicRanges", quietly = TRUE)) &&
          methods::is(obj, "GRanges")) {
        sn <- GenomicRanges::seqnames(obj)
        return(list(kind = "GRanges",
                    seq_values = as.character(S4Vectors::runValue(sn)),
                    seq_lengths = S4Vectors::runLength(sn),
                    start = BiocGenerics::start(obj),
                    end = BiocGenerics::end(obj),
                    strands = unique(as.character(S4Vectors::runValue(BiocGenerics::strand(obj)))),
                    columns = columns(S4Vectors::mcols(obj))))
      }
      return(list(kind = "other", class = paste(class(obj), collapse = "/"),
                  package = if (is.null(pkg)) "" else pkg))
    }
    if (is.matrix(obj))
      return(list(kind = "matrix", type = typeof(obj), value = obj, colnames = colnames(obj)))
    if (is.data.frame(obj)) return(list(kind = "data.frame", columns = columns(obj)))
    if (is.numeric(obj) && is.null(dim(obj)) && (is.double(obj) || is.integer(obj)))
      return(list(kind = "vector", value = obj, names = names(obj)))
    list(kind = "other", class = paste(class(obj), collapse = "/"), package = "")
  }
  described <- function(obj) tryCatch(suppressPackageStartupMessages(suppressMessages(describe(obj))),
                                      error = function(e) list(kind = "refused", message = conditionMessage(e)))
  list(
    describe = described,
    read = function(path) {
      obj <- tryCatch(suppressPackageStartupMessages(suppressMessages(readRDS(path))),
                      error = function(e) e)
      if (!isS4(obj) && inherits(obj, "error")) return(list(kind = "error", message = conditionMessage(obj)))
      described(obj)
    })
})
"""

_helpers = None


def _r():
    """(R session, helper functions); InputError if rpy2/R is missing."""
    global _helpers
    session = r_session()
    if _helpers is None:
        with session.conversion():
            _helpers = session.ro.r(_R_DESCRIBE)
    return session, _helpers


def read_rds(path: str | os.PathLike, *, min_samples: int = 2) -> CountData:
    """Read a GRanges, numeric matrix, data.frame or numeric vector saved with ``saveRDS``."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"Count file not found: {p}")
    if p.stat().st_size == 0:
        raise InputError(f"Count file {p} is empty.")
    session, helpers = _r()
    with session.conversion():
        desc = helpers.rx2("read")(str(p.expanduser().resolve()))
        if _get_str(desc, "kind") == "error":
            raise InputError(
                f"Cannot read {p} as an R object (.rds written by saveRDS): {_get_str(desc, 'message')}. "
                "Is the file complete and really an .rds file?"
            )
        return _from_description(desc, source=str(p), min_samples=min_samples)


def count_data_from_r(obj: Any, *, min_samples: int = 2) -> CountData:
    """An rpy2 object (GRanges, numeric matrix, data.frame, numeric vector) -> CountData."""
    session, helpers = _r()
    with session.conversion():
        desc = helpers.rx2("describe")(obj)
        return _from_description(desc, source="the R object", min_samples=min_samples)


# --------------------------------------------------------------------------------------------
def _get(desc, name):
    return desc.rx2(name)


def _get_str(desc, name) -> str:
    v = desc.rx2(name)
    return "" if is_null(v) else str(v[0])


def _strings(v) -> list[str] | None:
    return None if is_null(v) else [str(s) for s in v]


def _fill_numeric(view: np.ndarray, out: np.ndarray) -> None:
    """Copy an R numeric view into ``out`` (float64), mapping R's integer NA to NaN."""
    out[...] = view
    if view.dtype.kind == "i":
        na = view == _R_NA_INTEGER
        if na.any():
            out[na] = np.nan


def _numeric_copy(view: np.ndarray) -> np.ndarray:
    out = np.empty(view.shape, dtype=np.float64, order="F")
    _fill_numeric(view, out)
    return out


def _column_values(col: Any):
    kind = _get_str(col, "kind")
    if kind in ("double", "integer"):
        v = r_array(_get(col, "value"))
        return v if kind == "double" else _numeric_copy(v)
    if kind in ("character", "factor"):
        return np.asarray(_strings(_get(col, "value")), dtype=object)
    return None


def _from_description(desc, *, source: str, min_samples: int) -> CountData:
    kind = _get_str(desc, "kind")
    if kind == "refused":
        raise InputError(f"Cannot read the counts of {source}: {_get_str(desc, 'message')}.")
    what = f"read count matrix of {source}"
    if kind == "GRanges":
        return _from_granges(desc, source, min_samples)
    if kind == "matrix":
        typ = _get_str(desc, "type")
        if typ not in ("double", "integer"):
            raise InputError(f"{capitalized(source)} is a {typ} matrix; read counts must be numeric.")
        counts = _numeric_copy(r_array(_get(desc, "value")))
        return make_count_data(counts, _strings(_get(desc, "colnames")), None, min_samples=min_samples, what=what)
    if kind == "vector":
        counts = _numeric_copy(r_array(_get(desc, "value")))
        names = _strings(_get(desc, "names"))
        if min_samples <= 1:
            return count_data_from_array(counts, min_samples=min_samples, what=what)
        return count_data_from_array(counts, min_samples=min_samples, sample_names=names, what=what)
    if kind == "data.frame":
        cols = _get(desc, "columns")
        if is_null(cols) or len(cols) == 0:
            raise InputError(f"{capitalized(source)} is a data.frame without columns.")
        names, values = [], []
        for col in cols:
            name = _get_str(col, "name")
            v = _column_values(col)
            if v is None:
                raise InputError(f"Column '{name}' of {source} is of class {_get_str(col, 'kind')}; "
                                 "count columns must be numeric.")
            names.append(name)
            values.append(v)
        return count_data_from_columns(names, values, source=source, min_samples=min_samples)
    cls = _get_str(desc, "class")
    pkg = _get_str(desc, "package")
    note = f" (is the R package {pkg} installed?)" if pkg and pkg != "GenomicRanges" else ""
    if pkg == "GenomicRanges":
        note = " (GenomicRanges could not be loaded in R: install it from Bioconductor)"
    raise InputError(
        f"{capitalized(source)} holds an R object of class {cls}{note}: GRanges object or read count matrix needed "
        "as input (a GRanges with one numeric metadata column per sample, or a numeric regions x samples matrix)."
    )


def _from_granges(desc, source: str, min_samples: int) -> CountData:
    strands = _strings(_get(desc, "strands")) or []
    if len(strands) > 1:
        raise InputError(
            f"The GRanges in {source} holds regions on more than one strand ({', '.join(strands)}); cn.mops needs "
            "all regions on one strand (count reads of both strands together, strand '*')."
        )
    cols = _get(desc, "columns")
    cols = [] if is_null(cols) else list(cols)
    if not cols:
        raise InputError(f"The GRanges in {source} has no metadata columns: give one numeric column of read counts "
                         "per sample (mcols(gr)).")
    if len(cols) == 1 and min_samples >= 2:
        raise InputError(
            "It is not possible to run cn.mops on only ONE sample: the GRanges in "
            f"{source} has a single metadata column. Give at least two samples, or use the single-sample method "
            "singlecn.mops (--method single; single_cn_mops() in Python, singlegcn.mops() in R)."
        )
    seq = np.repeat(np.asarray(_strings(_get(desc, "seq_values")), dtype=object),
                    r_array(_get(desc, "seq_lengths")).astype(np.int64))
    start = r_array(_get(desc, "start")).astype(np.int64)
    end = r_array(_get(desc, "end")).astype(np.int64)
    m = start.shape[0]
    counts = np.empty((m, len(cols)), dtype=np.float64, order="F")
    names = []
    for k, col in enumerate(cols):
        name = _get_str(col, "name")
        kind = _get_str(col, "kind")
        if kind not in ("double", "integer"):
            raise InputError(
                f"Metadata column '{name}' of the GRanges in {source} is {kind}, not numeric: every metadata column "
                "must hold one sample's read counts (remove other columns, e.g. mcols(gr)$name <- NULL)."
            )
        _fill_numeric(r_array(_get(col, "value")), counts[:, k])
        names.append(name)
    ranges = pd.DataFrame({"seqnames": seq.astype(str), "start": start, "end": end})
    return make_count_data(counts, names, ranges, min_samples=min_samples,
                           what=f"read count matrix of the GRanges in {source}")
