"""Writers of a CNVDetectionResult: the calls as text (TSV, BED, VCF 4.3, IGV SEG), the per-region matrices as
Parquet (default) or TSV, params.json.

Atomic: every file of one ``write_result`` call is first written under a temporary name in the output
folder; only when all of them are complete are they renamed to their final names. A failure anywhere
(an exception, a full disk) removes the temporary files and leaves no new final file behind.

Always written: ``segmentation.tsv``, ``cnvs.tsv``, ``cnvr.tsv`` (cn.mops's columns; missing values ``NA``)
and ``params.json``. The formats (``FORMATS``; ``DEFAULT_FORMATS`` when none are named):

- ``parquet``: the per-region matrices ``normalized_data``, ``local_assessments``, ``individual_call``,
  ``integer_copy_number`` (labels, dictionary-encoded), ``ini_call``, ``params_L``, ``params_A`` (columns
  seqnames, start, end + one per sample/class), zstd-compressed, lossless; pandas, R (arrow) and DuckDB
  read them. At genome scale a few percent of the text's size and time.
- ``tsv`` / ``tsv.gz``: the same matrices as tab-separated text (gzip level 1), through Arrow's C++ CSV
  writer, several files at a time. Floats in the shortest form that reads back to the identical double;
  NaN as ``NA`` and infinities as ``Inf``/``-Inf`` (R's spellings).
- ``bed``: ``cnvs.bed`` BED9+3 (chrom, 0-based start, end, name = sample, score 0, strand ``.``,
  thickStart, thickEnd, itemRgb: red losses / blue gains / grey unknown; then mean, median, CN) and
  ``cnvr.bed`` BED4 (name = the samples with a CNV there, comma separated). Sorted by chromosome (in the
  order of the input) and start, as tabix needs; no header.
- ``vcf``: ``cnvr.vcf``, VCF 4.3, one record per CNV region (see ``vcf_text``); sorted like the BED.
- ``seg``: ``segmentation.seg`` for IGV: ID, chrom, loc.start, loc.end, num.mark, seg.mean (the segment
  means of sINI), as DNAcopy writes it (by sample, then chromosome, then start).
- ``rds``: ``result.rds``, the R CNVDetectionResult (needs R, rpy2 and the gcn.mops R package).

``gcnmops.read_result(outdir)`` reads a written folder back into an equal result.
"""
from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..progress import ticker
from .callfiles import bed_cnvr, bed_cnvs, seg_table, vcf_text

#: every output format (the module docstring says what each writes)
FORMATS = ("parquet", "tsv", "tsv.gz", "bed", "vcf", "seg", "rds")
#: written when no formats are named
DEFAULT_FORMATS = ("parquet", "bed", "vcf", "seg")
#: the per-region matrices (file stems), written by "parquet", "tsv" and "tsv.gz"
MATRICES = ("normalized_data", "local_assessments", "individual_call", "integer_copy_number", "ini_call",
            "params_L", "params_A")
#: the call tables (file stems), always written as TSV
TABLES = ("segmentation", "cnvs", "cnvr")
PARQUET_COMPRESSION = "zstd"
GZIP_LEVEL = 1  # the TSVs compress ~3x at level 1; higher levels cost several times the time for ~10% more


# -------------------------------------------------------------------------------------------------
# atomic files
# -------------------------------------------------------------------------------------------------

def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temp_beside(path: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return Path(tmp)


def _publish(tmp: Path, path: Path, mode: int) -> None:
    os.chmod(tmp, mode)  # mkstemp creates 0600; give the file the permissions open() would
    os.replace(tmp, path)


def atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path`` and rename it to ``path`` on success."""
    path = Path(path)
    tmp = _temp_beside(path)
    try:
        write(tmp)
        _publish(tmp, path, 0o666 & ~_umask())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


class _Batch:
    """Files written under temporary names and renamed together by ``commit``, or all removed by ``abort``.

    Files are written by a few threads (Arrow's CSV writer and zlib release the GIL), except those staged
    with ``inline=True`` (anything calling into R: the embedded R must stay on the calling thread)."""

    def __init__(self, outdir: Path, workers: int | None = None):
        from concurrent.futures import ThreadPoolExecutor

        self.outdir = outdir
        self.staged: list[tuple[Path, Path]] = []
        self.futures = []
        report = ticker(1.0)
        self.step = lambda: report(1.0 / max(1, len(self.staged)))
        n = workers if workers is not None else min(4, os.cpu_count() or 1)
        self.pool = ThreadPoolExecutor(max_workers=max(1, n), thread_name_prefix="gcnmops-write")

    def write(self, name: str, write: Callable[[Path], None], inline: bool = False) -> None:
        path = self.outdir / name
        tmp = _temp_beside(path)
        self.staged.append((tmp, path))

        def write_and_report(t: Path) -> None:
            write(t)
            self.step()  # a progress bar moves per file (total: the files staged by then)

        if inline:
            write_and_report(tmp)
        else:
            self.futures.append(self.pool.submit(write_and_report, tmp))

    def wait(self) -> None:
        """Wait for every file; re-raise the first failure (in submission order)."""
        for f in self.futures:
            f.result()

    def abort(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)  # nothing may write after the clean-up
        for tmp, _ in self.staged:
            tmp.unlink(missing_ok=True)

    def commit(self) -> list[Path]:
        self.pool.shutdown(wait=True)
        mode = 0o666 & ~_umask()
        for tmp, path in self.staged:
            _publish(tmp, path, mode)
        return [path for _, path in self.staged]


# -------------------------------------------------------------------------------------------------
# fast delimited text
# -------------------------------------------------------------------------------------------------

def _arrow_column(values):
    """An Arrow array whose CSV rendering is what R would read back: NA for missing values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, pd.Series):
        values = values.to_numpy()
    arr = np.asarray(values)
    kind = arr.dtype.kind
    if kind in "iu":
        return pa.array(arr)
    if kind == "f":
        arr = arr.astype(np.float64, copy=False)
        out = pa.array(arr, from_pandas=False)
        finite = np.isfinite(arr)
        if finite.all():
            return out
        text = pc.cast(out, pa.string())
        special = np.where(np.isnan(arr), "NA", np.where(arr > 0, "Inf", "-Inf"))
        return pc.if_else(pa.array(finite), text, pa.array(special.astype(object), type=pa.string()))
    if kind == "b":
        return pa.array(np.where(arr, "TRUE", "FALSE").astype(object), type=pa.string())
    codes, uniques = pd.factorize(pd.Series(arr, dtype=object), use_na_sentinel=True)
    labels = [str(u) for u in uniques] + ["NA"]
    codes = np.where(codes < 0, len(labels) - 1, codes).astype(np.int32)
    return pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(labels, type=pa.string()))


def write_columns(path, names: list[str], columns: list, compress: bool = False, header: bool = True) -> None:
    """Tab-separated text of equally long columns (numpy arrays, pandas Series or Arrow arrays), with a
    header line of ``names`` (unquoted); gzip-compressed when ``compress``."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    arrays = [c if isinstance(c, (pa.Array, pa.ChunkedArray)) else _arrow_column(c) for c in columns]
    table = pa.Table.from_arrays(arrays, names=[f"c{i}" for i in range(len(arrays))])
    head = ("\t".join(str(n) for n in names) + "\n").encode() if header else b""

    def open_out():
        return gzip.GzipFile(path, "wb", compresslevel=GZIP_LEVEL, mtime=0) if compress else open(path, "wb")

    try:
        with open_out() as fh:
            fh.write(head)
            if table.num_rows:
                pacsv.write_csv(table, fh, pacsv.WriteOptions(include_header=False, delimiter="\t",
                                                               quoting_style="none", batch_size=65536))
    except pa.ArrowInvalid:  # a string holding a tab, quote or newline: quote just those cells (CSV rules)
        _write_quoted(open_out, head, table)


def _write_quoted(open_out, head: bytes, table) -> None:
    """Slow path of ``write_columns``: every cell rendered by Arrow, quoted by Python's csv where needed."""
    import csv
    import io

    import pyarrow as pa
    import pyarrow.compute as pc

    cols = [pc.cast(c, pa.string()).to_pylist() for c in table.columns]
    with open_out() as fh:
        fh.write(head)
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="")
        csv.writer(text, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL).writerows(zip(*cols))
        text.flush()
        text.detach()


def write_frame(path, frame: pd.DataFrame, compress: bool = False, header: bool = True) -> None:
    """``write_columns`` of a DataFrame's columns."""
    write_columns(path, list(frame.columns), [frame[c] for c in frame.columns], compress=compress, header=header)


def _gr_columns(gr: pd.DataFrame) -> list:
    return [gr["seqnames"], gr["start"], gr["end"]]


def _matrix_columns(matrix: np.ndarray) -> list:
    return [matrix[:, k] for k in range(matrix.shape[1])]


def _label_columns(cn_index: np.ndarray, classes: list[str]) -> list:
    """Copy-number labels straight from the int8 class indices (no per-cell Python strings)."""
    import pyarrow as pa

    dictionary = pa.array([str(c) for c in classes], type=pa.string())
    return [pa.DictionaryArray.from_arrays(pa.array(np.ascontiguousarray(cn_index[:, k], dtype=np.int32)),
                                           dictionary) for k in range(cn_index.shape[1])]


# -------------------------------------------------------------------------------------------------
# write_result
# -------------------------------------------------------------------------------------------------

def check_formats(formats) -> tuple[str, ...]:
    """The formats to write (``DEFAULT_FORMATS`` for None), validated: an InputError names unknown ones."""
    if formats is None:
        return DEFAULT_FORMATS
    formats = tuple(dict.fromkeys(str(f).strip().lower() for f in formats if str(f).strip()))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        import difflib

        hints = [f"'{u}' (did you mean '{m[0]}'?)" if (m := difflib.get_close_matches(u, FORMATS, n=1)) else f"'{u}'"
                 for u in unknown]
        raise InputError(f"Unknown output format {', '.join(hints)}; choose from {', '.join(FORMATS)}.")
    if not formats:
        raise InputError(f"No output format named; choose from {', '.join(FORMATS)}.")
    return formats


def write_result(result, outdir, formats=None) -> list[Path]:
    """Write ``result`` under ``outdir`` (created if needed): the call tables and params.json, and ``formats``
    (default ``DEFAULT_FORMATS``); returns the paths written. All or nothing: on any error no new file is
    left under a final name."""
    formats = check_formats(formats)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    batch = _Batch(outdir)
    try:
        for name in TABLES:
            batch.write(f"{name}.tsv", lambda t, n=name: write_frame(t, getattr(result, n)))
        batch.write("params.json", lambda t: t.write_text(json.dumps(_params_json(result), indent=1)))
        for fmt in formats:
            _WRITERS[fmt](result, batch)
        batch.wait()
    except BaseException:
        batch.abort()
        raise
    return batch.commit()


def matrix_columns(result) -> dict[str, tuple[list[str], list]]:
    """Each per-region matrix of ``result`` as (column names, columns): seqnames, start, end + one column per
    sample (per class for params_L/params_A; ``ini_call`` one column). Columns are numpy arrays, or Arrow
    dictionary arrays for the copy-number labels."""
    gr = result.gr
    head = ["seqnames", "start", "end"]
    coords = _gr_columns(gr)
    samples = list(result.sample_names)
    out = {name: (head + samples, coords + _matrix_columns(matrix))
           for name, matrix in (("normalized_data", result.normalized_data),
                                ("local_assessments", result.local_assessments),
                                ("individual_call", result.individual_call))}
    out["integer_copy_number"] = (head + samples, coords + _label_columns(result.cn_index, result.classes))
    out["ini_call"] = (head + ["ini_call"], coords + [result.ini_call])
    for key in ("L", "A"):
        out[f"params_{key}"] = (head + result.classes, coords + _matrix_columns(np.asarray(result.params[key])))
    return out


def _write_text_matrices(result, batch: _Batch, compress: bool) -> None:
    ext = ".tsv.gz" if compress else ".tsv"
    for name, (names, columns) in matrix_columns(result).items():
        batch.write(name + ext, lambda t, n=names, c=columns: write_columns(t, n, c, compress))


def _write_parquet_matrices(result, batch: _Batch) -> None:
    for name, (names, columns) in matrix_columns(result).items():
        batch.write(name + ".parquet", lambda t, n=names, c=columns: write_parquet(t, n, c))


def write_parquet(path, names: list[str], columns: list) -> None:
    """A Parquet file (zstd) of equally long columns: numpy arrays (float64 and integers kept as they are,
    strings dictionary-encoded) or Arrow arrays."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = []
    for c in columns:
        if isinstance(c, (pa.Array, pa.ChunkedArray)):
            arrays.append(c)
            continue
        values = c.to_numpy() if isinstance(c, pd.Series) else np.asarray(c)
        if values.dtype.kind in "iuf":
            arrays.append(pa.array(values))
        else:
            codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
            arrays.append(pa.DictionaryArray.from_arrays(
                pa.array(codes.astype(np.int32), mask=codes < 0), pa.array([str(u) for u in uniques], pa.string())))
    table = pa.Table.from_arrays(arrays, names=[str(n) for n in names])
    pq.write_table(table, path, compression=PARQUET_COMPRESSION)


def _write_bed(result, batch: _Batch) -> None:
    batch.write("cnvs.bed", lambda t: write_frame(t, bed_cnvs(result), header=False))
    batch.write("cnvr.bed", lambda t: write_frame(t, bed_cnvr(result), header=False))


def _write_rds(result, batch: _Batch) -> None:
    from .robject import write_rds

    batch.write("result.rds", lambda t: write_rds(result, t), inline=True)


#: format -> writer(result, batch); one entry per name of FORMATS
_WRITERS = {
    "parquet": _write_parquet_matrices,
    "tsv": lambda result, batch: _write_text_matrices(result, batch, compress=False),
    "tsv.gz": lambda result, batch: _write_text_matrices(result, batch, compress=True),
    "bed": _write_bed,
    "vcf": lambda result, batch: batch.write("cnvr.vcf", lambda t: t.write_text(vcf_text(result))),
    "seg": lambda result, batch: batch.write("segmentation.seg", lambda t: write_frame(t, seg_table(result))),
    "rds": _write_rds,
}


def _params_json(result) -> dict:
    def plain(v):
        if isinstance(v, np.ndarray):
            return v.tolist()
        if isinstance(v, (np.generic,)):
            return v.item()
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    scalars = {k: plain(v) for k, v in result.params.items() if k not in ("L", "A", "cov")}
    scalars["cov"] = dict(zip(result.sample_names, np.asarray(result.params["cov"], float).tolist()))
    scalars["sampleNames"] = list(result.sample_names)
    return scalars
