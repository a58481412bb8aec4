"""Read counts from BAM and CRAM files: cn.mops's getReadCountsFromBAM and getSegmentReadCountsFromBAM.

``count_reads(bam_files, window=25000)`` counts reads in fixed windows of every reference;
``count_reads(bam_files, regions=...)`` counts them in the user's regions. Both return a
:class:`gcnmops.data.CountData` ready for :func:`gcnmops.cn_mops` (the rule is in
:mod:`gcnmops.alignments.bam`). CRAM files are read through pysam (htslib) against the reference FASTA they were
compressed with (``reference=``). ``write_counts`` writes a count table in the format its name says
(``COUNT_FORMATS``), one that :func:`gcnmops.read_counts` and ``gcnmops run`` read.
"""
from __future__ import annotations

import logging
import os
import zipfile
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..data import CountData, make_count_data
from ..errors import InputError
from .bam import INFLATER_NAME, count_bam_native, count_bam_pysam, default_threads, make_pool, read_bam_header
from .bamheader import BamHeader, is_cram, read_cram_header
from .regions import bam_windows, make_plan, read_regions

ENGINES = ("native", "pysam")
#: count table formats ``write_counts`` writes, by the end of the file name (``gcnmops run`` reads each)
COUNT_FORMATS = (".tsv", ".tsv.gz", ".parquet", ".npz")
log = logging.getLogger("gcnmops")


def count_reads(
    bam_files: str | os.PathLike | Sequence[str | os.PathLike],
    sample_names: Sequence[str] | None = None,
    ref_seq_names: str | Sequence[str] | None = None,
    window: int = 25000,
    regions: str | os.PathLike | pd.DataFrame | None = None,
    min_mapq: int = 1,
    threads: int | None = None,
    *,
    reference: str | os.PathLike | None = None,
    engine: str = "native",
    progress: bool = True,
    workers: int | None = None,
) -> CountData:
    """Count the reads of each BAM or CRAM file in windows (getReadCountsFromBAM) or regions
    (getSegmentReadCountsFromBAM).

    Parameters
    ----------
    bam_files : path or sequence of paths
        BAM or CRAM files (told apart by their content); all headers must list the same references and
        lengths.
    sample_names : sequence of str, optional
        one per file; default the file names without ``.bam`` / ``.cram``.
    ref_seq_names : str or sequence of str, optional
        references to count (window mode), in output order; default all of the first header, in header order.
    window : int, default 25000
        window length WL in bp (cn.mops's windows, quirks included: a reference of length L <= WL is the one
        window [0, L]; if L is a multiple of WL the last base is left out).
    regions : path or DataFrame, optional
        count into these regions instead of windows: a BED file (0-based, half-open), a table file or
        DataFrame with seqnames/start/end (1-based, closed). Each read counts in every region holding its
        position. Output rows follow the given order.
    min_mapq : int, default 1
        reads with a lower mapping quality are not counted (cn.mops: 1). Unmapped reads never count;
        duplicates, secondary and supplementary alignments do.
    threads : int, optional
        threads decompressing the files (default: all CPUs available).
    reference : path, optional
        the FASTA (indexed, or in a writable folder) the CRAM files were compressed against; needed by CRAM
        input, unused by BAM.
    engine : {"native", "pysam"}, default "native"
        the built-in parallel BAM reader, or pysam (slower reference path); CRAM files are always read
        through pysam.
    progress : bool, default True
        show a progress bar (stderr) over the bytes of all files.
    workers : int, optional
        the former name of ``threads`` (deprecated).

    Returns
    -------
    CountData
        counts float64 (regions x files, order F), ranges seqnames/start/end (1-based, closed).

    Raises
    ------
    InputError
        a missing or damaged file, different headers, a CRAM without ``reference``, a bad argument.
    """
    if workers is not None:
        warnings.warn("count_reads(workers=...) is now threads=...", DeprecationWarning, stacklevel=2)
        threads = workers if threads is None else threads
    paths = _paths(bam_files)
    if engine not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}.")
    if isinstance(min_mapq, bool) or not isinstance(min_mapq, (int, np.integer)) or min_mapq < 0:
        raise InputError(f"min_mapq must be a non-negative integer, not {min_mapq!r}.")
    n_threads = default_threads() if threads is None else int(threads)
    if n_threads < 1:
        raise InputError(f"threads must be at least 1, not {threads!r}.")
    cram = [is_cram(p) for p in paths]
    if any(cram) and reference is None:
        raise InputError(f"{paths[cram.index(True)]} is a CRAM file: its reads are stored against a reference "
                         "genome; give the FASTA it was compressed with (--reference FASTA, or reference=...).")

    if engine == "native" and INFLATER_NAME == "zlib" and not all(cram):
        log.info("Inflating BAM blocks with zlib; pip install deflate (or 'gcnmops[bam]') to count ~2x faster.")
    headers = [read_cram_header(p, reference) if c else read_bam_header(p) for p, c in zip(paths, cram)]
    header = headers[0]
    if not header.references:
        raise InputError(f"{paths[0]} lists no reference sequences (an unaligned BAM?): nothing to count.")
    for h in headers[1:]:
        _same_header(header, h)

    if regions is not None:
        if ref_seq_names is not None:
            raise InputError("Give either regions or ref_seq_names: regions name their own references.")
        ranges = read_regions(regions)
    else:
        names = _ref_names(header, ref_seq_names)
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
            raise InputError(f"window must be a positive integer (bp), not {window!r}.")
        ranges = bam_windows(header, int(window), names)
    plan = make_plan(header, ranges)

    names_out = list(sample_names) if sample_names is not None else [_sample_name(p) for p in paths]
    if len(names_out) != len(paths):
        raise InputError(f"{len(names_out)} sample names given for {len(paths)} BAM files.")

    counts = np.empty((len(ranges), len(paths)), dtype=np.float64, order="F")
    from tqdm import tqdm

    total = sum(p.stat().st_size for p in paths)
    pool = make_pool(n_threads) if engine == "native" and not all(cram) else None
    try:
        with tqdm(total=total, unit="B", unit_scale=True, desc="counting reads", disable=not progress,
                  leave=False) as bar:
            for j, p in enumerate(paths):
                bar.set_postfix_str(p.name)
                if engine == "native" and not cram[j]:
                    elementary = count_bam_native(p, header, plan, min_mapq=int(min_mapq), pool=pool,
                                                  n_threads=n_threads, on_bytes=bar.update)
                else:
                    elementary = count_bam_pysam(p, header, plan, min_mapq=int(min_mapq), n_threads=n_threads,
                                                 reference=reference if cram[j] else None)
                    bar.update(p.stat().st_size)
                counts[:, j] = plan.region_counts(elementary)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return make_count_data(counts, names_out, ranges, min_samples=1, what="read counts")


def _paths(bam_files) -> list[Path]:
    if isinstance(bam_files, (str, os.PathLike)):
        bam_files = [bam_files]
    paths = [Path(p) for p in bam_files]
    if not paths:
        raise InputError("No BAM files given.")
    for p in paths:
        if not p.exists():
            raise InputError(f"BAM/CRAM file not found: {p}")
        if p.is_dir():
            raise InputError(f"{p} is a directory, not a BAM or CRAM file.")
        if not os.access(p, os.R_OK):
            raise InputError(f"BAM/CRAM file {p} is not readable (permissions).")
    return paths


def _sample_name(path: Path) -> str:
    name = path.name
    for ext in (".bam", ".cram"):
        if name.lower().endswith(ext) and len(name) > len(ext):
            return name[:-len(ext)]
    return name


def _ref_names(header: BamHeader, ref_seq_names) -> list[str]:
    if ref_seq_names is None:
        return list(header.references)
    names = [ref_seq_names] if isinstance(ref_seq_names, str) else [str(n) for n in ref_seq_names]
    if not names:
        raise InputError("ref_seq_names is empty: name at least one reference, or leave it out for all.")
    known = set(header.references)
    unknown = [n for n in names if n not in known]
    if unknown:
        shown = ", ".join(header.references[:8]) + (", ..." if len(header.references) > 8 else "")
        raise InputError(f"Reference(s) {', '.join(unknown)} not in the BAM header (it has {shown}).")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"ref_seq_names lists {', '.join(dup)} more than once.")
    return names


def _same_header(first: BamHeader, other: BamHeader) -> None:
    if first.references == other.references and first.lengths == other.lengths:
        return
    a, b = first.targets(), other.targets()
    if set(a) != set(b):
        only_a = sorted(set(a) - set(b))[:5]
        only_b = sorted(set(b) - set(a))[:5]
        what = "; ".join(s for s in (f"only in {first.path}: {', '.join(only_a)}" if only_a else "",
                                     f"only in {other.path}: {', '.join(only_b)}" if only_b else "") if s)
        raise InputError(f"The BAM files list different references ({what}); all must be aligned to the same "
                         "reference genome.")
    diff = [n for n in a if a[n] != b[n]]
    if diff:
        n = diff[0]
        raise InputError(f"The BAM files give reference {n} different lengths ({a[n]} in {first.path}, {b[n]} in "
                         f"{other.path}); all must be aligned to the same reference genome.")
    raise InputError(f"The BAM files list the same references in a different order ({first.path} vs {other.path}); "
                     "cn.mops requires identical headers.")


def count_format(path: str | os.PathLike) -> str:
    """The format of the count table ``path`` (one of COUNT_FORMATS, by the end of its name), checked before any
    counting: InputError for another name, or a folder that does not exist or cannot be written."""
    path = Path(path)
    name = path.name.lower()
    fmt = next((ext for ext in sorted(COUNT_FORMATS, key=len, reverse=True)
                if name.endswith(ext) and len(name) > len(ext)), None)
    if fmt is None:
        raise InputError(f"Cannot tell the format of the count table {path} from its name: end it with "
                         f"{', '.join(COUNT_FORMATS[:-1])} or {COUNT_FORMATS[-1]} (all read by gcnmops run).")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"Output folder {folder} does not exist.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"Output folder {folder} is not writable (permissions).")
    if path.is_dir():
        raise InputError(f"{path} is a folder; name the count table to write.")
    return fmt


def write_counts(data: CountData, path: str | os.PathLike) -> Path:
    """Write counts atomically in the format the name ends with (``count_format``): ``.tsv`` / ``.tsv.gz``
    (seqnames, start, end, one column per sample; gzip for .gz), ``.parquet`` (the same columns; zstd) or
    ``.npz`` (``counts`` regions x samples, ``sample_names``, ``seqnames``, ``start``, ``end``; uncompressed,
    read in place). Whole-number counts are written as integers. :func:`gcnmops.read_counts` reads each back
    (coordinates 1-based, closed)."""
    from ..io.atomic import atomic_write

    path = Path(path)
    fmt = count_format(path)
    frame = data.genomic_ranges()
    counts = data.counts
    as_int = bool(np.all(counts == np.round(counts))) and (counts.size == 0 or np.abs(counts).max() < 2 ** 62)
    values = counts.astype(np.int64) if as_int else counts
    if fmt == ".npz":
        arrays = dict(counts=values, sample_names=np.asarray(data.sample_names, dtype=str),
                      seqnames=frame["seqnames"].astype(str).to_numpy(dtype=str),
                      start=frame["start"].to_numpy(np.int64), end=frame["end"].to_numpy(np.int64))

        def write(tmp: Path) -> None:
            # np.savez's layout (stored .npy members), with the archive closed on errors too: np.savez leaves
            # it to the garbage collector, which on a full disk printed "Exception ignored ... Traceback"
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
                for name, array in arrays.items():
                    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, array, allow_pickle=False)
        return atomic_write(path, write)
    body = pd.DataFrame(values, columns=data.sample_names)
    frame = pd.concat([frame, body], axis=1)
    if fmt == ".parquet":
        return atomic_write(path, lambda tmp: frame.to_parquet(tmp, index=False, compression="zstd"))
    compression = "gzip" if fmt == ".tsv.gz" else None
    return atomic_write(path, lambda tmp: frame.to_csv(tmp, sep="\t", index=False, compression=compression,
                                                      float_format="%.17g"))
