"""Read counts from BAM files: cn.mops's getReadCountsFromBAM and getSegmentReadCountsFromBAM.

``count_reads(bam_files, window=25000)`` counts reads in fixed windows of every reference;
``count_reads(bam_files, regions=...)`` counts them in the user's regions. Both return a
:class:`gcnmops.data.CountData` ready for :func:`gcnmops.cn_mops` (the rule is in
:mod:`gcnmops.io.bam`).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..data import CountData, make_count_data
from ..errors import InputError
from .bam import (INFLATER_NAME, BamHeader, bam_windows, count_bam_native, count_bam_pysam, default_threads, make_plan, make_pool, read_bam_header, read_regions)

ENGINES = ("native", "pysam")
log = logging.getLogger("gcnmops")


def count_reads(
    bam_files: str | os.PathLike | Sequence[str | os.PathLike],
    sample_names: Sequence[str] | None = None,
    ref_seq_names: str | Sequence[str] | None = None,
    window: int = 25000,
    regions: str | os.PathLike | pd.DataFrame | None = None,
    min_mapq: int = 1,
    workers: int | None = None,
    *,
    engine: str = "native",
    progress: bool = True,
) -> CountData:
    """Count the reads of each BAM file in windows (getReadCountsFromBAM) or regions
    (getSegmentReadCountsFromBAM).

    Parameters
    ----------
    bam_files: one path or several; all headers must list the same references and lengths.
    sample_names: one per file; default the file names without ``.bam``.
    ref_seq_names: references to count (window mode), in output order; default all of the first
        header, in header order.
    window: window length WL in bp (cn.mops's windows, quirks included: a reference of length
        L <= WL is the one window [0, L]; if L is a multiple of WL the last base is left out).
    regions: count into these regions instead of windows: a BED file (0-based, half-open), a table
        file or DataFrame with seqnames/start/end (1-based, closed). Each read counts in every region
        holding its position. Output rows follow the given order.
    min_mapq: reads with a lower mapping quality are not counted (cn.mops: 1). Unmapped reads never
        count; duplicates, secondary and supplementary alignments do.
    workers: threads inflating BAM blocks (default: all CPUs available).
    engine: ``"native"`` (built-in parallel BAM reader) or ``"pysam"`` (slower reference path).
    progress: show a progress bar (stderr) over the bytes of all files.

    Returns a CountData: counts float64 (regions x files, order F), ranges seqnames/start/end.
    """
    paths = _paths(bam_files)
    if engine not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}.")
    if isinstance(min_mapq, bool) or not isinstance(min_mapq, (int, np.integer)) or min_mapq < 0:
        raise InputError(f"min_mapq must be a non-negative integer, not {min_mapq!r}.")
    n_threads = default_threads() if workers is None else int(workers)
    if n_threads < 1:
        raise InputError(f"workers must be at least 1, not {workers!r}.")

    if engine == "native" and INFLATER_NAME == "zlib":
        log.info("Inflating BAM blocks with zlib; pip install deflate (or 'gcnmops[bam]') to count ~2x faster.")
    headers = [read_bam_header(p) for p in paths]
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
    pool = make_pool(n_threads) if engine == "native" else None
    try:
        with tqdm(total=total, unit="B", unit_scale=True, desc="counting reads", disable=not progress,
                  leave=False) as bar:
            for j, p in enumerate(paths):
                bar.set_postfix_str(p.name)
                if engine == "native":
                    elementary = count_bam_native(p, header, plan, min_mapq=int(min_mapq), pool=pool,
                                                  n_threads=n_threads, on_bytes=bar.update)
                else:
                    elementary = count_bam_pysam(p, header, plan, min_mapq=int(min_mapq), n_threads=n_threads)
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
            raise InputError(f"BAM file not found: {p}")
        if p.is_dir():
            raise InputError(f"{p} is a directory, not a BAM file.")
        if not os.access(p, os.R_OK):
            raise InputError(f"BAM file {p} is not readable (permissions).")
    return paths


def _sample_name(path: Path) -> str:
    name = path.name
    return name[:-4] if name.lower().endswith(".bam") else name


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


def write_counts(data: CountData, path: str | os.PathLike) -> Path:
    """Write counts as TSV (seqnames, start, end, one integer column per sample), atomically; a
    ``.gz`` name is gzip-compressed. :func:`gcnmops.read_counts` reads it back."""
    from .writers import atomic_write

    path = Path(path)
    if path.parent and not path.parent.exists():
        raise InputError(f"Output folder {path.parent} does not exist.")
    frame = data.genomic_ranges()
    counts = data.counts
    as_int = np.all(counts == np.round(counts)) and (counts.size == 0 or np.abs(counts).max() < 2 ** 62)
    body = pd.DataFrame(counts.astype(np.int64) if as_int else counts, columns=data.sample_names)
    frame = pd.concat([frame, body], axis=1)
    compression = "gzip" if path.name.lower().endswith(".gz") else None
    return atomic_write(path, lambda tmp: frame.to_csv(tmp, sep="\t", index=False, compression=compression,
                                                      float_format="%.17g"))
