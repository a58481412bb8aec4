"""Read a folder written by ``write_result`` (``gcnmops run``) back into a CNVDetectionResult.

The matrices come from the Parquet files where present, else from the TSV (or .tsv.gz) files; the call
tables from their TSVs; the parameters from params.json with ``L`` and ``A`` from params_L / params_A.
Floats are stored losslessly in every format, so the result equals the one written, slot by slot
(posterior probabilities are not written and come back as None).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import UNDEF_CHROMOSOME
from ..errors import InputError
from ..result import SEGMENT_COLUMNS, SELECTION_KEYS, CNVDetectionResult
from .writers import MATRICES

_MATRIX_SUFFIXES = (".parquet", ".tsv", ".tsv.gz")


def _read_text(path: Path, dtypes: dict | None = None) -> pd.DataFrame:
    """A TSV written by the writers: NA is missing, floats read back to the identical double."""
    return pd.read_csv(path, sep="\t", float_precision="round_trip", keep_default_na=False, na_values=["NA"],
                       dtype=dtypes)


#: bytes and items a matrix file's Parquet footer may hold when read back (pyarrow's int32 limit)
FOOTER_LIMIT = 2**31 - 1


def _matrix_frame(folder: Path, name: str) -> pd.DataFrame:
    for suffix in _MATRIX_SUFFIXES:
        path = folder / (name + suffix)
        if path.exists():
            if suffix == ".parquet":
                import pyarrow.parquet as pq

                # a cohort of ~1M samples writes a footer beyond pyarrow's default limits (100 MB of thrift)
                return pq.read_table(path, thrift_string_size_limit=FOOTER_LIMIT,
                                     thrift_container_size_limit=FOOTER_LIMIT).to_pandas()
            return _read_text(path, {"seqnames": str})
    raise InputError(f"{folder} has no {name} matrix ({', '.join(name + s for s in _MATRIX_SUFFIXES)}): write the "
                     f"result with a matrix format (parquet, tsv or tsv.gz) to read it back.")


def _as_objects(column: pd.Series) -> np.ndarray:
    """Strings as Python str, missing values as None (the result's object columns); one str per distinct value."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    labels = np.array([str(u) for u in uniques] + [None], dtype=object)
    return labels[codes]  # code -1 (missing) picks the trailing None


def _table(folder: Path, name: str, sample_names: list[str]) -> pd.DataFrame:
    path = folder / f"{name}.tsv"
    if not path.exists():
        raise InputError(f"{path} is missing: is {folder} a folder written by gcnmops?")
    text_columns = ["seqnames", "sampleName", "CN"] if name != "cnvr" else ["seqnames", *sample_names]
    frame = _read_text(path, {c: str for c in text_columns})
    for c in text_columns:
        if c in frame:
            frame[c] = _as_objects(frame[c])
    for c in ("start", "end"):
        frame[c] = frame[c].astype(np.int64)
    for c in ("median", "mean"):
        if c in frame:
            frame[c] = frame[c].astype(np.float64)
    if name != "cnvr":
        frame = frame[SEGMENT_COLUMNS]
    return frame.reset_index(drop=True)


def _class_indices(labels: pd.DataFrame, classes: list[str]) -> np.ndarray:
    """(m, N) int8 indices into ``classes`` of the copy-number labels (Parquet's dictionary columns come as
    categoricals, text as strings): one look-up per distinct label and column, not per cell."""
    index = {c: k for k, c in enumerate(classes)}
    out = np.zeros(labels.shape, dtype=np.int8, order="F")
    for j, name in enumerate(labels.columns):
        column = pd.Categorical(labels[name])
        unknown = [str(c) for c in column.categories if str(c) not in index]
        if unknown or (column.codes < 0).any():
            raise InputError(f"integer_copy_number, sample {name!r}: labels {unknown or ['(missing)']} are not among the "
                             f"classes {classes} of params.json: the folder's files do not belong together.")
        lookup = np.array([index[str(c)] for c in column.categories], dtype=np.int8)
        out[:, j] = lookup[column.codes] if len(lookup) else 0
    return out


#: sample_qc.tsv's text columns: read as written ("" where a sample has no reasons; a sample named "NA" stays one)
_QC_TEXT = ("sample", "reasons", "sex")


def _sample_qc(path: Path) -> pd.DataFrame:
    """sample_qc.tsv as ``calls.qc.sample_qc`` made it: text columns verbatim, empty numbers NaN (on pandas 2 and 3,
    whose NA rules for converted columns differ)."""
    header = path.open().readline().rstrip("\n").split("\t")
    return pd.read_csv(path, sep="\t", keep_default_na=False, dtype={c: str for c in _QC_TEXT if c in header},
                       na_values={c: ["", "NA", "NaN", "nan"] for c in header if c not in _QC_TEXT})


def read_result(outdir: str | os.PathLike):
    """The CNVDetectionResult written under ``outdir`` by ``write_result`` / ``gcnmops run``; for a folder of a
    streamed run (``gcnmops run --stream``, ``gcnmops.run_streaming``) its StoredResult: the tables in memory,
    the matrices in ``matrices.zarr`` read on demand (``matrix(name)``; ``compute()`` loads them all).

    Parameters
    ----------
    outdir : path
        a folder holding params.json, the call tables and the per-region matrices (Parquet or TSV).

    Returns
    -------
    CNVDetectionResult or StoredResult
        equal to the result that was written (matrices float64, order F; labels as class indices).

    Raises
    ------
    InputError
        a missing or incomplete folder, naming the file to look at.
    """
    folder = Path(outdir)
    if not (folder / "params.json").is_file():
        raise InputError(f"{folder} holds no params.json: not a folder written by gcnmops (or not yet complete).")
    params = json.loads((folder / "params.json").read_text())
    samples = [str(s) for s in params.pop("sampleNames")]
    # what made the folder, what it left out and its sample QC: the result's, not cn.mops's params
    provenance = params.pop("provenance", None) or {}
    selection = {k: params.pop(k) for k in SELECTION_KEYS if k in params}
    params.pop("sampleQC", None)
    qc = _sample_qc(folder / "sample_qc.tsv") if (folder / "sample_qc.tsv").is_file() else None
    if "matrixStore" in params:  # a streamed run: the matrices in a Zarr store
        from .resultstore import open_stored_result

        tables = {name: _table(folder, name, samples) for name in ("segmentation", "cnvs", "cnvr")}
        return open_stored_result(folder, params, tables, samples).replace(provenance=provenance,
                                                                            selection=selection, sample_qc=qc)
    frames = {name: _matrix_frame(folder, name) for name in MATRICES}
    coords = frames["normalized_data"][["seqnames", "start", "end"]]
    gr = pd.DataFrame({"seqnames": _as_objects(coords["seqnames"]), "start": coords["start"].astype(np.int64),
                       "end": coords["end"].astype(np.int64)})

    def matrix(name: str, columns: list[str]) -> np.ndarray:
        return np.asfortranarray(frames[name][columns].to_numpy(dtype=np.float64))

    classes = [str(c) for c in params["classes"]]
    cn_index = _class_indices(frames["integer_copy_number"][samples], classes)
    params["cov"] = np.array([params["cov"][s] for s in samples], dtype=np.float64)
    params["L"] = matrix("params_L", classes)
    params["A"] = matrix("params_A", classes)
    return CNVDetectionResult(
        gr=gr, normalized_data=matrix("normalized_data", samples), local_assessments=matrix("local_assessments", samples),
        individual_call=matrix("individual_call", samples),
        ini_call=frames["ini_call"]["ini_call"].to_numpy(dtype=np.float64), cn_index=cn_index, posterior_probs=None,
        params=params, segmentation=_table(folder, "segmentation", samples), cnvs=_table(folder, "cnvs", samples),
        cnvr=_table(folder, "cnvr", samples), sample_names=samples,
        ranged=not (gr["seqnames"] == UNDEF_CHROMOSOME).all(), provenance=provenance, selection=selection,
        sample_qc=qc)


__all__ = ["read_result"]
