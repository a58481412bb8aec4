"""Writers of a CNVDetectionResult: the calls as text (TSV, BED, VCF 4.2, IGV SEG), the per-region matrices as
Parquet (default) or TSV, params.json.

All or nothing: every file of one ``write_result`` call (the plots and report of ``run --plots --report``
included) is first written under a temporary name in the output folder; only when all of them are complete are
they renamed to their final names, with the folder's list of them (``.gcnmops-files``); then the files an earlier
run listed there that this one did not write are removed, so a folder never mixes two runs' files. A failure
anywhere (an exception, a full disk, Ctrl-C or SIGTERM) removes the temporary files and leaves the folder as it
was; a full disk or a folder that cannot be written is an InputError naming the folder
(``io.atomic.output_error``). A writer killed outright (SIGKILL) leaves temporary files (named for its process,
``files.temp_file``), which the next run into the folder removes (``remove_temporaries``). One run at a time
writes into a folder: a second one while the first lives is refused (``files.lock_folder``).

Always written: ``segmentation.tsv``, ``cnvs.tsv``, ``cnvr.tsv`` (cn.mops's columns; missing values ``NA``;
with call filters a last column ``filter``, ``callfiles.call_table``), ``params.json`` (with what the run left out
or filtered and each sample's QC flag), and for a run of ``gcnmops run`` (streamed too) or ``gcnmops call``
``sample_qc.tsv`` (``calls.qc``). The
formats (``FORMATS``; ``DEFAULT_FORMATS`` when none are named):

- ``parquet``: the per-region matrices ``normalized_data``, ``local_assessments``, ``individual_call``,
  ``integer_copy_number`` (labels, dictionary-encoded), ``ini_call``, ``params_L``, ``params_A`` (columns
  seqnames, start, end + one per sample/class), zstd-compressed, lossless; pandas, R (arrow) and DuckDB
  read them. Encodings per column (``parquet.parquet_options``): seqnames dictionary, start/end
  DELTA_BINARY_PACKED, continuous floats BYTE_STREAM_SPLIT, floats of few values dictionary, runs plain. Each
  file is encoded in parts of whole row groups on every core and joined into one file (``parquet.join_parquet``).
  At genome scale a few percent of the text's size and time.
- ``tsv`` / ``tsv.gz``: the same matrices as tab-separated text (gzip level 1), through Arrow's C++ CSV
  writer, several files at a time. Floats in the shortest form that reads back to the identical double;
  NaN as ``NA`` and infinities as ``Inf``/``-Inf`` (R's spellings).
- ``bed``: ``cnvs.bed`` and ``cnvr.bed``, BED9 (chrom, 0-based start, end, name = the sample / the samples with
  a CNV there, score = 10 x the call's phred quality, strand ``.``, thickStart, thickEnd, itemRgb: losses
  blue, gains red as in the plots; see ``callfiles.bed_cnvs``), sorted by chromosome (input order) and
  start, no header; with pysam also ``cnvs.bed.gz`` / ``cnvr.bed.gz`` (bgzip) + ``.tbi`` (``.csi`` beyond
  512 Mbp). The plain files are kept for tools that read plain BED (UCSC custom tracks, scripts).
- ``vcf``: ``cnvr.vcf.gz`` + ``cnvr.vcf.gz.tbi`` (``.csi`` beyond 512 Mbp), VCF 4.2 bgzipped and indexed by
  htslib (pysam), one record per CNV region with per-sample GT, CN, CNQ (see ``callfiles.vcf_table``); without
  pysam a plain ``cnvr.vcf``. ``write_result(..., vcf=VcfOptions(...))``: contig lengths from a .fai, REF bases from a
  FASTA, and one ``cnvr.<sample>.vcf.gz`` + index per sample (the regions it carries).
- ``seg``: ``segmentation.seg`` for IGV: ID, chrom, loc.start, loc.end, num.mark, seg.mean (the segment
  means of sINI), as DNAcopy writes it (by sample, then chromosome, then start).
- ``rds``: ``result.rds``, the R CNVDetectionResult (needs R, rpy2 and the gcn.mops R package).
- ``tracks`` (not by default; ``run --tracks``): per sample and window, for IGV / UCSC, ``tracks/<sample>.log2ratio
  .bedgraph.gz`` and ``tracks/<sample>.sini.bedgraph.gz`` (bedGraph: chrom, 0-based start, end, value;
  ``tracks.TRACKS``) + ``.tbi`` (``.csi`` beyond 512 Mbp); without pysam plain ``.bedgraph``.

``gcnmops.read_result(outdir)`` reads a written folder back into an equal result.
"""
from __future__ import annotations

import gzip
import json
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from ..compat import keep_numba_threads
from ..cuda.probe import Backend
from ..data import usable_cores
from ..errors import InputError
from ..files import lock_folder, remove_inside, remove_stale, umask, unlock_folder
from ..io.atomic import output_error, publish, signals_held, temp_beside
from ..io.columns import FrameColumns
from ..progress import ticker
from ..provenance import describe
from .bgzf import bgzip_file
from .callfiles import (VcfOptions, bed_cnvr, bed_cnvs, bed_max_position, call_table, have_pysam,
                        index_suffix, sample_vcf_name, tabix, vcf_max_position, write_vcf)
from .tracks import TRACKS, bedgraph, seg_table, track_matrices, track_name
from .formats import DEFAULT_FORMATS, FORMATS, check_formats
from .parquet import (PARQUET_PART_COLUMNS, encode_columns, encode_parquet, join_columns, join_parts, parquet_array,
                      parquet_options, parquet_table)

#: the per-region matrices (file stems), written by "parquet", "tsv" and "tsv.gz"
MATRICES = ("normalized_data", "local_assessments", "individual_call", "integer_copy_number", "ini_call",
            "params_L", "params_A")
#: the call tables (file stems), always written as TSV
TABLES = ("segmentation", "cnvs", "cnvr")
#: the list of the files of the last run written into a folder (hidden)
MANIFEST = ".gcnmops-files"
#: the folders below the output folder a run may write into (``plots.plot_files``)
SUBFOLDERS = ("plots", "tracks")
GZIP_LEVEL = 1  # the TSVs compress ~3x at level 1; higher levels cost several times the time for ~10% more


# -------------------------------------------------------------------------------------------------
# the all-or-nothing batch
# -------------------------------------------------------------------------------------------------

def remove_temporaries(folder) -> int:
    """Remove the temporaries that writers killed outright (SIGKILL, out of memory) left in ``folder`` and its
    ``SUBFOLDERS`` (``files.remove_stale``: only those of processes that have ended). Returns how many were
    removed."""
    folders = [Path(folder)] + [Path(folder) / sub for sub in SUBFOLDERS]
    return sum(remove_stale(f) for f in folders if f.is_dir() and not f.is_symlink())


class _Batch:
    """Files written under temporary names and renamed together by ``commit``, or all removed by ``abort``.

    Files are written by one thread per core (Arrow's writers and zlib release the GIL), except those staged
    with ``inline=True`` (anything calling into R: the embedded R must stay on the calling thread). Parts of
    a file (``submit``) run in the same pool. Jobs staged with ``waits=True`` have threads of their own, beside
    the pool: the job that writes a file's parts into it as they come (the file is written while the rest is
    encoded), and the call files (BED, VCF, SEG, the call tables: small files, made mostly in Python), which
    would otherwise queue behind every part of the matrices instead of being made while those are encoded.
    A name may hold one folder (``plots/overview.png``): the folder is made, and removed again by ``abort``
    when this batch made it."""

    def __init__(self, outdir: Path, workers: int | None = None, progress: bool = True):
        from concurrent.futures import ThreadPoolExecutor

        self.outdir = outdir
        self.staged: list[tuple[Path, Path]] = []
        self.folders: list[Path] = []  # made by this batch
        self.futures = []
        self.step = lambda: None
        if progress:
            self.follow_progress()
        self.workers = max(1, workers if workers is not None else usable_cores())
        same_threads = keep_numba_threads()  # the kernels a file needs (the calls' qualities) as the run's
        self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="gcnmops-write",
                                       initializer=same_threads)
        self.waiting = ThreadPoolExecutor(max_workers=32, thread_name_prefix="gcnmops-join", initializer=same_threads)
        self.memo: dict[str, tuple[object, object]] = {}  # shared(): key -> (source, value)

    def follow_progress(self) -> None:
        """Files completed from now on move the progress bar's current stage (one step per file)."""
        report = ticker(1.0)
        self.step = lambda: report(1.0 / max(1, len(self.staged)))

    def drop(self, name: str) -> None:
        """Remove the staged file ``name`` (once every job has ended): it is to be written again."""
        self.wait()
        path = self.outdir / name
        for tmp, final in [entry for entry in self.staged if entry[1] == path]:
            tmp.unlink(missing_ok=True)
            self.staged.remove((tmp, final))

    def shared(self, key: str, source, build: Callable[[], object]):
        """``build()``, made once per batch for the object ``source`` (held, so that no other object takes its id):
        what the files staged early and those of ``finish`` share, e.g. the regions' coordinates as Arrow arrays.
        Calling thread only."""
        held = self.memo.get(key)
        if held is None or held[0] is not source:
            held = self.memo[key] = (source, build())
        return held[1]

    def submit(self, fn: Callable, *args):
        """A job (a part of a file) in the batch's pool: its future."""
        return self.pool.submit(fn, *args)

    def write(self, name: str, write: Callable[[Path], None], inline: bool = False, waits: bool = False) -> Path:
        """Stage the file ``name`` (relative to the folder), written by ``write(tmp)``; returns its final path.
        An InputError at once when a folder stands where the file goes."""
        path = self.outdir / name
        if path.is_dir():
            raise InputError(f"{str(path)!r} is a folder, where gcnmops writes a file: move it away or write to "
                             "another folder (-o).")
        _check_no_link(self.outdir, path.parent)
        with signals_held():  # what is made on disk is recorded, for ``abort``, before a signal can unwind
            if path.parent != self.outdir and not path.parent.is_dir():
                path.parent.mkdir()
                self.folders.append(path.parent)
            tmp = temp_beside(path)
            self.staged.append((tmp, path))

        def write_and_report(t: Path) -> None:
            write(t)
            self.step()  # a progress bar moves per file (total: the files staged by then)

        if inline:
            write_and_report(tmp)
        else:
            self.futures.append((self.waiting if waits else self.pool).submit(write_and_report, tmp))
        return path

    def wait(self) -> None:
        """Wait for every file; re-raise the first failure (in submission order)."""
        for f in self.futures:
            f.result()

    def sizes(self) -> dict[Path, int]:
        """Bytes of every file staged and complete, by final path (after ``wait``)."""
        return {path: tmp.stat().st_size for tmp, path in self.staged}

    def abort(self) -> None:
        with signals_held():
            self.pool.shutdown(wait=True, cancel_futures=True)  # nothing may write after the clean-up
            self.waiting.shutdown(wait=True, cancel_futures=True)
            # a signal (Ctrl-C, SIGTERM) raised inside submit() can leave a started worker unknown to its pool
            for thread in threading.enumerate():
                if thread.name.startswith(("gcnmops-write", "gcnmops-join")) and \
                        thread is not threading.current_thread():
                    thread.join()
            for tmp, _ in self.staged:
                tmp.unlink(missing_ok=True)
            for folder in reversed(self.folders):
                if folder.is_dir() and not any(folder.iterdir()):
                    folder.rmdir()

    def commit(self) -> list[Path]:
        """Write the folder's manifest (this run's files), rename every file to its final name, then remove the
        files an earlier run listed that this run did not write: a folder never mixes two runs' files. Should a
        rename fail, the files not yet renamed are removed."""
        self.pool.shutdown(wait=True)
        self.waiting.shutdown(wait=True)
        manifest = self.outdir / MANIFEST
        old = manifest.read_text().split("\n") if manifest.is_file() else []
        names = sorted(path.relative_to(self.outdir).as_posix() for _, path in self.staged)
        self.write(MANIFEST, lambda t: t.write_text("".join(f"{n}\n" for n in names)), inline=True)
        mode = 0o666 & ~umask()
        published = 0
        try:
            for tmp, path in self.staged:
                publish(tmp, path, mode)
                published += 1
        except BaseException:
            for tmp, _ in self.staged[published:]:
                tmp.unlink(missing_ok=True)
            raise
        for name in set(old) - set(names) - {"", MANIFEST}:
            self._remove_earlier(name)
        return [path for _, path in self.staged if path.name != MANIFEST]

    def _remove_earlier(self, name: str) -> None:
        """Remove the file ``name`` of an earlier run's manifest (and its folder, when that is left empty), only
        where it lies inside the folder: no link followed, a regular file of this user's (``files.remove_inside``)."""
        remove_inside(self.outdir, name)


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


#: columns of a text table rendered at once at most: a wider one (a wide cohort's cnvr.tsv) is rendered a part of
#: its columns at a time and the parts' lines joined, so that only one part's Arrow arrays are held
TEXT_PART_COLUMNS = 1 << 14


def write_columns(path, names: list[str], columns, compress: bool = False, header: bool = True) -> None:
    """Tab-separated text of equally long columns (numpy arrays, pandas Series or Arrow arrays; a list, or a
    sequence that makes each when asked, ``io.columns.FrameColumns``), with a header line of ``names``
    (unquoted); gzip-compressed when ``compress``."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    head = ("\t".join(str(n) for n in names) + "\n").encode() if header else b""
    rows = len(columns[0]) if len(columns) else 0
    options = pacsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none", batch_size=65536)

    def table(part):
        arrays = [c if isinstance(c, (pa.Array, pa.ChunkedArray)) else _arrow_column(c) for c in part]
        return pa.Table.from_arrays(arrays, names=[f"c{i}" for i in range(len(arrays))])

    def open_out():
        return gzip.GzipFile(path, "wb", compresslevel=GZIP_LEVEL, mtime=0) if compress else open(path, "wb")

    try:
        with open_out() as fh:
            fh.write(head)
            if rows and len(columns) <= TEXT_PART_COLUMNS:
                pacsv.write_csv(table(columns), fh, options)
            elif rows:
                lines: list[list[bytes]] = [[] for _ in range(rows)]
                for a in range(0, len(columns), TEXT_PART_COLUMNS):
                    sink = pa.BufferOutputStream()
                    pacsv.write_csv(table(columns[a:a + TEXT_PART_COLUMNS]), sink, options)
                    for line, text in zip(lines, sink.getvalue().to_pybytes().split(b"\n")):
                        line.append(text)
                fh.write(b"".join(b"\t".join(line) + b"\n" for line in lines))
    except pa.ArrowInvalid:  # a string holding a tab, quote or newline: quote just those cells (CSV rules)
        _write_quoted(open_out, head, table(columns))


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
    write_columns(path, list(frame.columns), FrameColumns(frame), compress=compress, header=header)


def _gr_columns(gr: pd.DataFrame) -> list:
    return [gr["seqnames"], gr["start"], gr["end"]]


def _matrix_columns(matrix: np.ndarray) -> list:
    return [matrix[:, k] for k in range(matrix.shape[1])]


def _label_columns(cn_index: np.ndarray, classes: list[str]) -> list:
    """Copy-number labels straight from the int8 class indices (no per-cell Python strings; the indices of an
    order-F matrix's columns are not copied)."""
    import pyarrow as pa

    dictionary = pa.array([str(c) for c in classes], type=pa.string())
    # Arrow checks each column's indices (a tenth of a second at 6.9M x 15) unless told they are valid: here
    # one numpy pass over the matrix tells (invalid ones still get Arrow's check and its error)
    valid = cn_index.size == 0 or (int(cn_index.min()) >= 0 and int(cn_index.max()) < min(len(classes), 128))
    return [pa.DictionaryArray.from_arrays(pa.array(np.ascontiguousarray(cn_index[:, k], dtype=np.int8)),
                                           dictionary, safe=not valid) for k in range(cn_index.shape[1])]


# -------------------------------------------------------------------------------------------------
# write_result
# -------------------------------------------------------------------------------------------------

def check_output_folder(outdir) -> Path:
    """``outdir`` as a Path, if results can be written there: an existing folder, or one that can be created
    below an existing, writable folder. Checked before any work; an InputError says what is wrong."""
    outdir = Path(outdir)
    if outdir.exists() and not outdir.is_dir():
        raise InputError(f"The output folder {str(outdir)!r} is an existing file: give a folder name (-o).")
    parent = outdir
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"The output folder {str(outdir)!r} cannot be created: {str(parent)!r} is a file.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"The output folder {str(outdir)!r} cannot be written: no write permission in "
                         f"{str(parent)!r}.")
    for sub in SUBFOLDERS:
        _check_no_link(outdir, outdir / sub)
    return outdir


def _check_no_link(outdir: Path, folder: Path) -> None:
    """An InputError when ``folder``, below ``outdir``, is a symbolic link: files are written only inside the
    output folder."""
    if folder != outdir and folder.is_symlink():
        raise InputError(f"{str(folder)!r} is a symbolic link, where gcnmops writes files into a folder of its own "
                         f"inside {str(outdir)!r}: remove the link, or write to another folder (-o).")


#: more files of a write_result batch: extra(sizes) -> (name relative to the folder, write(tmp)) pairs
ExtraFiles = Callable[[dict], Iterable[tuple[str, Callable[[Path], None]]]]


def write_result(result, outdir, formats=None, extra: ExtraFiles | None = None,
                 vcf: VcfOptions | None = None) -> list[Path]:
    """Write ``result`` under ``outdir`` (created if needed): the call tables and params.json, and ``formats``
    (default ``DEFAULT_FORMATS``; ``vcf``: how the VCFs are written, ``callfiles.VcfOptions``); returns the paths
    written. ``extra`` (plots, a report): called once every other file is complete with their sizes (final path
    -> bytes, a dict that grows as the extra files are written), it yields more files of the same batch, each
    written when yielded, on the calling thread.

    All or nothing: on any error (a full disk, an interruption) no new file is left, temporary or final, and
    the folder is as it was; an OSError becomes an InputError naming the folder (``output_error``)."""
    return ResultWriter(outdir, formats).finish(result, extra=extra, vcf=vcf)


#: the per-region matrices the model alone determines: ``ResultWriter.stage_matrices`` writes them while the
#: segmentation runs
MODEL_MATRICES = ("normalized_data", "local_assessments", "ini_call", "params_L", "params_A")
#: the per-region matrix of the calls that integer copy numbers leave as it is: staged while those are made
CALL_MATRICES = ("individual_call",)
#: the formats that write the per-region matrices
_MATRIX_FORMATS = ("parquet", "tsv", "tsv.gz")


class ResultWriter:
    """``write_result`` in steps, so that files are written while the pipeline still runs: ``stage_matrices``
    (matrices of a part of a result, e.g. the model's; their files are encoded in the background), then ``finish``
    (every other file, then all renamed together) or ``abort`` (nothing left). The folder is checked, made and
    cleared of an earlier killed run's temporary files at once."""

    def __init__(self, outdir, formats=None):
        self.formats = check_formats(formats)
        self.outdir = Path(outdir)
        self.created = not self.outdir.exists()
        self.staged: dict[str, object] = {}  # matrix name -> the array its staged files hold
        self._lock: int | None = None
        self.batch: _Batch | None = None
        try:
            self.outdir.mkdir(parents=True, exist_ok=True)
            self._lock = lock_folder(self.outdir)  # before the clean-up: a live run's temporaries are its own
            remove_temporaries(self.outdir)  # of a run killed outright
            self.batch = _Batch(self.outdir, progress=False)
        except BaseException as err:
            self.abort()
            if isinstance(err, OSError):
                raise output_error(err, self.outdir) from None
            raise

    def _unlock(self) -> None:
        if self._lock is not None:
            unlock_folder(self.outdir, self._lock)
            self._lock = None

    def stage_matrices(self, part, names: tuple[str, ...] = MODEL_MATRICES) -> None:
        """Start writing the matrices ``names`` of ``part`` (a result still to be completed, e.g. the model's part,
        whose calls are still to come: only its regions and those matrices are read); returns at once."""
        try:
            for fmt in self.formats:
                if fmt in _MATRIX_FORMATS:
                    _MATRIX_WRITERS[fmt](part, self.batch, names)
        except BaseException:
            self.abort()
            raise
        self.staged.update({name: matrix_source(part, name) for name in names})

    def finish(self, result, extra: ExtraFiles | None = None, vcf: VcfOptions | None = None) -> list[Path]:
        """Write every file of ``result`` not staged yet (a staged matrix whose array ``result`` no longer holds
        is written again), wait, and rename all together; see ``write_result``."""
        batch = self.batch
        if not result.provenance:  # a result made outside run_and_write: what is known of it now
            result.provenance = describe(Backend.GPU if result.gpu_stats else None)
        try:
            try:
                batch.follow_progress()
                fresh = [name for name in MATRICES if self.staged.get(name) is not matrix_source(result, name)]
                for name in set(self.staged) & set(fresh):
                    for fmt in self.formats:
                        if fmt in _MATRIX_FORMATS:
                            batch.drop(name + _MATRIX_SUFFIX[fmt])
                if "vcf" in self.formats:  # the longest of the call files: started first
                    _WRITERS["vcf"](result, batch, vcf or VcfOptions())
                for name in TABLES:  # the call tables: own threads, as the call files
                    batch.write(f"{name}.tsv", lambda t, n=name: write_frame(t, call_table(result, n)), waits=True)
                if result.sample_qc is not None:
                    batch.write("sample_qc.tsv", lambda t: write_frame(t, result.sample_qc), waits=True)
                batch.write("params.json", lambda t: t.write_text(json.dumps(_params_json(result), indent=1)),
                            waits=True)
                for fmt in self.formats:
                    if fmt in _MATRIX_FORMATS:
                        _MATRIX_WRITERS[fmt](result, batch, fresh)
                    elif fmt != "vcf":
                        _WRITERS[fmt](result, batch)
                batch.wait()
                if extra is not None:
                    sizes = batch.sizes()
                    for name, write in extra(sizes):
                        path = batch.write(name, write, inline=True)
                        sizes[path] = batch.sizes()[path]
                written = batch.commit()
                self._unlock()
                return written
            except BaseException:
                self.abort()
                raise
        except OSError as err:
            raise output_error(err, self.outdir) from None

    def abort(self) -> None:
        """Remove every file staged; the folder this writer made goes too when it is left empty."""
        with signals_held():
            if self.batch is not None:
                self.batch.abort()
            self._unlock()
            if self.created and self.outdir.is_dir() and not any(self.outdir.iterdir()):
                self.outdir.rmdir()


#: the columns every per-region matrix file starts with
COORDINATES = ["seqnames", "start", "end"]


def matrix_columns(result, names=MATRICES) -> dict[str, tuple[list[str], list]]:
    """Each per-region matrix of ``result`` named in ``names`` (default all, MATRICES) as (column names,
    columns): seqnames, start, end + the columns of ``matrix_parts``."""
    coords = _gr_columns(result.gr)
    out = {}
    for name in names:
        labels, columns = matrix_parts(result, name)
        out[name] = (COORDINATES + labels, coords + columns(0, len(labels)))
    return out


def matrix_parts(result, name: str) -> tuple[list[str], Callable[[int, int], list]]:
    """The per-region matrix ``name`` of ``result`` after its coordinates: (column names, ``columns(a, b)``: its
    columns a to b - 1, made when asked for), one column per sample (per class for params_L/params_A;
    ``ini_call`` one column). Columns are numpy arrays, or Arrow dictionary arrays for the copy-number labels."""
    matrix = matrix_source(result, name)
    if name == "integer_copy_number":
        return list(result.sample_names), lambda a, b: _label_columns(matrix[:, a:b], result.classes)
    if name == "ini_call":
        return ["ini_call"], lambda a, b: [matrix][a:b]
    if name.startswith("params_"):
        matrix = np.asarray(matrix)
        return list(result.classes), lambda a, b: _matrix_columns(matrix[:, a:b])
    return list(result.sample_names), lambda a, b: _matrix_columns(matrix[:, a:b])


def matrix_source(result, name: str):
    """The array of ``result`` that the matrix file ``name`` holds (cn_index for integer_copy_number)."""
    if name.startswith("params_"):
        return result.params[name[len("params_"):]]
    return result.cn_index if name == "integer_copy_number" else getattr(result, name)


def _write_text_matrices(result, batch: _Batch, compress: bool, names=MATRICES) -> None:
    ext = ".tsv.gz" if compress else ".tsv"
    for name, (names, columns) in matrix_columns(result, names).items():
        coords = batch.shared("text coordinates", result.gr, lambda: [_arrow_column(c) for c in columns[:3]])
        batch.write(name + ext, lambda t, n=names, c=coords + columns[3:]: write_columns(t, n, c, compress))


def _write_parquet_matrices(result, batch: _Batch, names=MATRICES) -> None:
    """Each matrix file in parts of whole row groups encoded in parallel (``encode_parquet``), joined in order
    into the file by its own job (``join_parquet``) as the parts come; a wide one (one row group of more than
    PARQUET_PART_COLUMNS columns) in parts of columns (``_write_column_parts``)."""
    import pyarrow.parquet  # noqa: F401  (imported here: an import racing in the pool's threads can fail)

    rows = len(result.gr)
    per = _part_rows(rows, batch.workers, len(MATRICES))

    def coords() -> list:  # once for every file of the batch (the staged ones and those of ``finish``)
        return batch.shared("parquet coordinates", result.gr, lambda: parquet_coordinates(result.gr))

    for name in names:  # parts encoded while the next table is made
        labels, columns = matrix_parts(result, name)
        head = COORDINATES + labels
        if 0 < rows <= per and len(head) > PARQUET_PART_COLUMNS and len(set(head)) == len(head):
            _write_column_parts(batch, name + ".parquet", head, coords(), columns, rows)
            continue
        table = parquet_table(head, coords() + columns(0, len(labels)))
        options = parquet_options(table)
        parts = [batch.submit(encode_parquet, table.slice(a, per), options, per) for a in range(0, max(rows, 1), per)]
        batch.write(name + ".parquet", lambda t, j=(table, options, parts): join_parts(t, *j), waits=True)


def _write_column_parts(batch: _Batch, name: str, head: list[str], coords: list, columns, rows: int) -> None:
    """The matrix file ``name`` of one row group (``rows`` rows) and the columns ``head`` (coordinates ``coords``,
    then ``columns(a, b)`` of ``matrix_parts``) in parts of PARQUET_PART_COLUMNS columns, each made and encoded in
    the batch's pool (``encode_columns``: only a part's columns are held at a time), joined into the file as they
    come (``join_columns``)."""
    n = len(COORDINATES)

    def part(a: int, b: int):
        return encode_columns(head[a:b], coords[a:n] + columns(max(a - n, 0), b - n), rows)

    def whole():
        table = parquet_table(head, coords + columns(0, len(head) - n))
        return table, parquet_options(table)

    parts = [batch.submit(part, a, min(a + PARQUET_PART_COLUMNS, len(head)))
             for a in range(0, len(head), PARQUET_PART_COLUMNS)]
    batch.write(name, lambda t: join_columns(t, parts, whole), waits=True)


#: rows of a Parquet row group at most (Arrow's default); a matrix file is written in parts of one row group,
#: in parallel, and joined: parts of ``PARQUET_MIN_PART_ROWS`` rows at least, about four per core in all
PARQUET_ROW_GROUP = 1 << 20
PARQUET_MIN_PART_ROWS = 1 << 16


def _part_rows(rows: int, workers: int, files: int) -> int:
    """Rows per part: about four parts per core over all files (the pool stays busy to the end), within
    [PARQUET_MIN_PART_ROWS, PARQUET_ROW_GROUP]."""
    per_file = -(-4 * workers // max(1, files))
    return max(1, min(PARQUET_ROW_GROUP, max(PARQUET_MIN_PART_ROWS, -(-rows // per_file))))


def parquet_tables(result) -> dict:
    """The Arrow tables of ``matrix_columns`` (one per matrix file), sharing one copy of the coordinates."""
    return dict(_iter_parquet_tables(result))


def parquet_coordinates(gr: pd.DataFrame) -> list:
    """The columns seqnames, start, end of ``gr`` as Arrow arrays (``parquet_array``), as every matrix file holds
    them."""
    return [parquet_array(c) for c in _gr_columns(gr)]


def _iter_parquet_tables(result, names=MATRICES):
    """(name, table) of ``parquet_tables``, each table made when the iteration reaches it."""
    coords = parquet_coordinates(result.gr)
    for name in names:
        labels, columns = matrix_parts(result, name)
        yield name, parquet_table(COORDINATES + labels, coords + columns(0, len(labels)))




class _Staged:
    """A file of ``batch`` that later files of the same batch are made from (its compressed copy, its index).

    The batch's pool and its own threads (``waits``, as ``_Batch.write``) take jobs in submission order, so a job
    waiting on ``path()`` of a file staged before it in the same lane waits on a job that is running or done."""

    def __init__(self, batch: _Batch, name: str, write: Callable[[Path], None], waits: bool = False):
        import threading

        self.name = name
        self._tmp: Path | None = None
        self._done = threading.Event()

        def run(tmp: Path) -> None:
            try:
                write(tmp)
                self._tmp = tmp
            finally:
                self._done.set()

        batch.write(name, run, waits=waits)

    def path(self) -> Path:
        """The complete temporary file (waits for it)."""
        self._done.wait()
        if self._tmp is None:
            raise RuntimeError(f"{self.name} was not written")
        return self._tmp


# The call files are small and made mostly in Python: written on the batch's own threads (``_Batch``), beside
# the matrices' parts.

def _write_bed(result, batch: _Batch) -> None:
    ext = index_suffix(bed_max_position(result))
    for stem, frame in (("cnvs", bed_cnvs), ("cnvr", bed_cnvr)):
        plain = _Staged(batch, f"{stem}.bed", lambda t, f=frame: write_frame(t, f(result), header=False), waits=True)
        if have_pysam():
            gz = _Staged(batch, f"{stem}.bed.gz", lambda t, p=plain: bgzip_file(p.path(), t), waits=True)
            batch.write(f"{stem}.bed.gz.{ext}", lambda t, g=gz: tabix(g.path(), "bed", t, csi=ext == "csi"), waits=True)


def _write_vcf(result, batch: _Batch, options: VcfOptions = VcfOptions()) -> None:
    kw = options.vcf_kwargs()
    if not have_pysam():
        batch.write("cnvr.vcf", lambda t: write_vcf(result, t, compress=False, **kw), waits=True)
        return
    ext = index_suffix(vcf_max_position(result, **kw))
    vcf = _Staged(batch, "cnvr.vcf.gz", lambda t: write_vcf(result, t, **kw), waits=True)
    batch.write(f"cnvr.vcf.gz.{ext}", lambda t: tabix(vcf.path(), "vcf", t, csi=ext == "csi"), waits=True)
    for s in result.sample_names if options.per_sample else ():  # cnvr.<sample>.vcf.gz: its own CNVs
        one = _Staged(batch, sample_vcf_name(s), lambda t, s=s: write_vcf(result, t, own_calls_of=s, **kw),
                      waits=True)
        batch.write(f"{sample_vcf_name(s)}.{ext}", lambda t, one=one: tabix(one.path(), "vcf", t, csi=ext == "csi"),
                    waits=True)


def _write_tracks(result, batch: _Batch) -> None:
    """Per sample one bedGraph per TRACKS entry, bgzipped + tabix index where pysam is there (else plain)."""
    matrices = track_matrices(result)
    ext = index_suffix(bed_max_position(result))
    for j, s in enumerate(result.sample_names):
        for track in TRACKS:
            frame = lambda m=matrices[track], j=j: bedgraph(result, m[:, j])  # noqa: E731
            name = track_name(s, track)
            if not have_pysam():
                batch.write(name, lambda t, f=frame: write_frame(t, f(), header=False), waits=True)
                continue
            gz = _Staged(batch, name + ".gz", lambda t, f=frame: _write_bgzipped(t, f()), waits=True)
            batch.write(f"{name}.gz.{ext}", lambda t, g=gz: tabix(g.path(), "bed", t, csi=ext == "csi"), waits=True)


def _write_bgzipped(path: Path, frame: pd.DataFrame) -> None:
    """``frame`` as headerless text, bgzipped into ``path`` (through a temporary plain file beside it)."""
    plain = temp_beside(path)
    try:
        write_frame(plain, frame, header=False)
        bgzip_file(plain, path)
    finally:
        plain.unlink(missing_ok=True)


def _write_rds(result, batch: _Batch) -> None:
    from .robject import write_rds

    batch.write("result.rds", lambda t: write_rds(result, t), inline=True)


#: the matrix formats' writers: writer(result, batch, names of the matrices to write), and their files' suffixes
_MATRIX_WRITERS = {
    "parquet": _write_parquet_matrices,
    "tsv": lambda result, batch, names: _write_text_matrices(result, batch, compress=False, names=names),
    "tsv.gz": lambda result, batch, names: _write_text_matrices(result, batch, compress=True, names=names),
}
_MATRIX_SUFFIX = {"parquet": ".parquet", "tsv": ".tsv", "tsv.gz": ".tsv.gz"}

#: the other formats: format -> writer(result, batch) (vcf: also its VcfOptions); with _MATRIX_WRITERS one entry
#: per name of FORMATS
_WRITERS = {
    "bed": _write_bed,
    "vcf": _write_vcf,
    "seg": lambda result, batch: batch.write("segmentation.seg", lambda t: write_frame(t, seg_table(result)),
                                             waits=True),
    "rds": _write_rds,
    "tracks": _write_tracks,
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
    scalars.update({k: plain(v) for k, v in result.selection.items()})
    if result.sample_qc is not None:
        scalars["sampleQC"] = {row.sample: {"outlier": bool(row.outlier), "reasons": row.reasons.split(",")
                                            if row.reasons else [], "excluded": bool(row.excluded)}
                               for row in result.sample_qc.itertuples(index=False)}
    scalars["provenance"] = plain(result.provenance)
    return scalars
