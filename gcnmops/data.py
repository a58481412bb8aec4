"""CountData: the read-count matrix with its regions and sample names, validated.

Counts are float64, shape (regions, samples), column-major (region-fastest), exactly the
memory order of an R matrix.
"""
from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import InputError

log = logging.getLogger("gcnmops")

UNDEF_CHROMOSOME = "undef"


@dataclass
class CountData:
    """Read counts of m regions x N samples.

    ``counts``: float64 (m, N), order F. ``ranges``: DataFrame with ``seqnames, start, end``
    (1-based, closed, as in R) or None for a bare matrix (regions are then row indices on the
    pseudo-chromosome "undef"). ``sample_names``: N unique strings.
    """

    counts: np.ndarray
    sample_names: list[str]
    ranges: pd.DataFrame | None = None

    @property
    def n_regions(self) -> int:
        return self.counts.shape[0]

    @property
    def n_samples(self) -> int:
        return self.counts.shape[1]

    @property
    def chromosomes(self) -> np.ndarray:
        """Chromosome name of every row, shape (m,), dtype object."""
        if self.ranges is None:  # one string object (np.full would make one per row): compared by object
            return np.repeat(np.array([UNDEF_CHROMOSOME], dtype=object), self.n_regions)
        return self.ranges["seqnames"].to_numpy(dtype=object)

    def blocks(self) -> list[tuple[str, int, int]]:
        """``chromosome_blocks`` of the rows (name, first_row, end_row_exclusive), computed once per ``ranges``
        object (one pass over the m chromosome names)."""
        key = (id(self.ranges), self.n_regions)
        cached = self.__dict__.get("_blocks")
        if cached is None or cached[0] != key:
            chrom = self.chromosomes if self.ranges is None else self.ranges["seqnames"]
            self._keep_blocks(chromosome_blocks(chrom))
        return self.__dict__["_blocks"][1]

    def _keep_blocks(self, blocks: list[tuple[str, int, int]]) -> None:
        """Cache ``blocks`` as the chromosome blocks of the current ``ranges``."""
        self.__dict__["_blocks"] = ((id(self.ranges), self.n_regions), blocks)

    def rows(self, a: int, b: int, copy: bool = True) -> "CountData":
        """Regions a:b (whole chromosomes) as a CountData of their own, ranges renumbered from 0: counts copied
        column-major, or with ``copy=False`` a view of these rows (column-major rows of the matrix, for a
        consumer that copies them itself, e.g. straight to a GPU)."""
        ranges = None if self.ranges is None else self.ranges.iloc[a:b].reset_index(drop=True)
        counts = self.counts[a:b]
        return CountData(np.asfortranarray(counts) if copy else counts, list(self.sample_names), ranges)

    def genomic_ranges(self) -> pd.DataFrame:
        """The ``gr`` table: seqnames, start, end for every region (row indices for a matrix).

        When ``ranges`` is exactly that table (as ``make_count_data`` builds it) this is a shallow copy: the
        columns are shared, not copied (the result shares its matrices with the data in the same way)."""
        if self.ranges is not None:
            r = self.ranges
            if list(r.columns) == ["seqnames", "start", "end"] and isinstance(r.index, pd.RangeIndex) \
                    and r.index.start == 0 and r.index.step == 1:
                return r.copy(deep=False)
            return r[["seqnames", "start", "end"]].reset_index(drop=True)
        idx = np.arange(1, self.n_regions + 1, dtype=np.int64)
        return pd.DataFrame({"seqnames": UNDEF_CHROMOSOME, "start": idx, "end": idx})


@dataclass(frozen=True)
class Validated:
    """A CountData as :func:`make_count_data` returned it, unchanged since, that our own code (the command line)
    hands to an entry point: ``read_counts`` takes it as it is instead of validating every count and region
    again. Not for users: a CountData built or changed by hand is validated by every entry
    point."""

    data: CountData


def region_names(gr: pd.DataFrame) -> list[str]:
    """cn.mops's row names of ranged input: "chr_start_end" for every row of ``gr``."""
    return (gr["seqnames"].astype(str) + "_" + gr["start"].astype(str) + "_" + gr["end"].astype(str)).tolist()


#: the largest read count accepted: whole numbers above 2^53 are not all representable in float64 (the counts'
#: type, as R's doubles), so 2^53 + 1 would silently become 2^53
MAX_COUNT = 2 ** 53
#: the largest region coordinate accepted (float64-exact, as the counts)
MAX_POSITION = 2 ** 53
#: characters that break the tab-separated, BED and VCF outputs when they occur in a name
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: a chromosome name every output can hold: the contig ID of the VCF (4.3) and SAM specifications, but not starting
#: with '#' (a comment or header line in BED, VCF and the tab-separated outputs)
_CONTIG = re.compile(r"[0-9A-Za-z!$%&+./:;?@^_|~-][0-9A-Za-z!#$%&*+./:;=?@^_|~-]*")


def validate_counts(values: np.ndarray, what: str = "read count matrix", *, sample_names=None,
                    ranges=None) -> np.ndarray:
    """Return ``values`` as a float64 (m, N) column-major matrix after cn.mops's count checks (and ours: no
    complex numbers, no masked values, no count above :data:`MAX_COUNT`). ``sample_names`` and ``ranges``
    (optional) only name the offending cell in a message."""
    check_count_type(values, what)
    arr = np.asarray(values)
    check_count_type(arr, what)  # a list of complex numbers
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise InputError(f"The {what} contains non-numeric values; every count must be a number.")
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise InputError(f"The {what} must be two-dimensional (regions x samples), got {arr.ndim} dimensions.")
    if arr.shape[0] == 0:
        raise InputError(f"The {what} has no regions (rows).")
    clean = _float64_if_clean(arr)  # the conversion and every check below in one parallel pass
    if clean is not None:
        return clean
    problems = count_problems(arr)
    if problems:
        raise count_error(problems, what, sample_names, ranges)
    return np.asarray(arr, dtype=np.float64, order="F")


def count_problems(arr: np.ndarray) -> dict[str, tuple[int, int, int, object]]:
    """The cells of a numeric (m, N) matrix that fail cn.mops's count checks, by check in the order
    ``validate_counts`` applies them ("too_large" first for integers, before float64 would round them; "nonfinite",
    "negative", "too_large"): {check: (how many, row, column, value) of the first such cell in row-major order}.
    The problems of a matrix read in pieces are those of the pieces, merged by ``merge_count_problems``."""
    out: dict = {}
    checks = [("too_large", lambda a: a > MAX_COUNT)] if arr.dtype.kind in "iu" else []
    checks += [("nonfinite", lambda a: ~np.isfinite(a)), ("negative", lambda a: a < 0),
               ("too_large", lambda a: a > MAX_COUNT)]
    for name, test in checks:
        bad = test(arr)
        if name not in out and bad.any():
            r, c = np.argwhere(bad)[0]
            out[name] = (int(bad.sum()), int(r), int(c), arr[r, c])
    return out


def merge_count_problems(parts: list[tuple[int, int, dict]]) -> dict[str, tuple[int, int, int, object]]:
    """The ``count_problems`` of a matrix from those of its pieces: (first row, first column, problems) each."""
    out: dict = {}
    for r0, c0, problems in parts:
        for name, (n, r, c, value) in problems.items():
            first = (r0 + r, c0 + c, value)
            if name in out:
                total, *seen = out[name]
                first = min(tuple(seen), first, key=lambda cell: cell[:2])
                n += total
            out[name] = (n, *first)
    return out


def count_error(problems: dict, what: str, sample_names=None, ranges=None) -> InputError:
    """The InputError of the first of ``count_problems``' checks that failed (its count, its first cell)."""
    integers = any(np.asarray(p[3]).dtype.kind in "iu" for p in problems.values())
    order = ("too_large", "negative") if integers else ("nonfinite", "negative", "too_large")
    name = next(k for k in order if k in problems)
    n, r, c, value = problems[name]
    cell = _cell(r, c, sample_names, ranges)
    if name == "nonfinite":
        return InputError(f"Read counts must be finite: the {what} holds {n} NaN/Inf value(s), the first at {cell}.")
    if name == "negative":
        return InputError(f"Read counts must be non-negative: the {what} holds {n} negative value(s), the first at "
                          f"{cell}.")
    shown = str(int(value)) if np.asarray(value).dtype.kind in "iu" else f"{float(value):.17g}"
    return InputError(
        f"Count {shown} in the {what} at {cell} exceeds 2^53 ({MAX_COUNT}), the largest whole number a float64 count "
        f"holds exactly ({n} such value(s)); cn.mops cannot model such counts: check the input (an overflow, or a "
        "wrong column?) or scale the counts down."
    )


#: matrices of fewer cells are converted and checked in one go; larger ones in blocks, on every core
_PARALLEL_CELLS = 1 << 21
#: (rows, columns) of the tiles a row block is converted in: 512 KB of float64 (more rows for fewer columns)
_TILE = (512, 128)
#: cells of the pieces a float64 column-major matrix (used as it is, not converted) is checked in: 32 MB
_PIECE_CELLS = 1 << 22
#: the bits of float64 2^53 (MAX_COUNT) read as an unsigned integer: a float64 lies in [+0, 2^53] exactly when its
#: bits, so read, are at most this (the sign bit makes every negative number and -0.0 larger, and +inf and NaN lie
#: above every finite number)
_MAX_COUNT_BITS = int(np.array(float(MAX_COUNT)).view(np.uint64))


def _within_limits(values: np.ndarray) -> bool:
    """True if every value of ``values`` (any shape and strides; native float64, or integers compared before any
    conversion) lies in [0, MAX_COUNT]: one reduction (a maximum of the values read as unsigned integers), not a
    minimum and a maximum. A -0.0 fails here (validate_counts' own checks accept it: the answer is the same)."""
    if values.size == 0:
        return True
    if values.dtype.kind == "u":
        return int(values.max()) <= MAX_COUNT
    unsigned = values.view(values.dtype.str.replace("f", "u").replace("i", "u"))  # byte order kept
    if values.dtype.kind == "f":
        return int(unsigned.max()) <= _MAX_COUNT_BITS
    signed_max = (1 << (8 * values.dtype.itemsize - 1)) - 1  # negative integers read as unsigned lie above it
    return int(unsigned.max()) <= min(signed_max, MAX_COUNT)


def _float64_if_clean(arr: np.ndarray) -> np.ndarray | None:
    """``np.asarray(arr, dtype=np.float64, order="F")`` (``arr`` itself when it is one already) if every count is
    finite, >= 0 and <= MAX_COUNT (integers compared before the conversion rounds them), else None: then
    ``validate_counts``' own checks find the first bad cell and say what is wrong (a -0.0 also takes that way).

    One pass, on every core (numpy releases the GIL): a native float64 column-major matrix is checked in pieces of
    _PIECE_CELLS of its memory, one reduction each (``_within_limits``); any other is converted in row blocks of a
    few MB, a row-major one tile by tile, each float tile checked while it is in cache (integers: each block before
    it is converted), instead of a conversion and four passes over the whole matrix."""
    m, n = arr.shape
    ints = arr.dtype.kind in "iu"
    if arr.size < _PARALLEL_CELLS:
        out = np.asarray(arr, dtype=np.float64, order="F")
        return out if _within_limits(arr if ints else out) else None
    from concurrent.futures import ThreadPoolExecutor

    if arr.dtype == np.float64 and arr.dtype.isnative and arr.flags.f_contiguous:
        flat = arr.ravel(order="F")  # a view: its memory in order

        def piece(a: int) -> bool:
            return _within_limits(flat[a:a + _PIECE_CELLS])

        starts = range(0, flat.size, _PIECE_CELLS)
        with ThreadPoolExecutor(max_workers=max(1, min(usable_cores(), len(starts)))) as pool:
            return arr if all(list(pool.map(piece, starts))) else None
    out = np.empty((m, n), dtype=np.float64, order="F")
    rows = max(4096, (1 << 20) // n)
    # a column-major source is copied in whole columns of the block (nothing to transpose)
    tile_rows = rows if arr.flags.f_contiguous else max(_TILE[0], (_TILE[0] * _TILE[1]) // n)

    def block(i: int) -> bool:
        src = arr[i:i + rows]
        if ints and not _within_limits(src):
            return False
        for r in range(0, src.shape[0], tile_rows):  # tile by tile: a row-major source's transposing copy stays
            r1 = min(src.shape[0], r + tile_rows)      # in cache (column by column, 1,000 samples: 5-7x slower)
            for c in range(0, n, _TILE[1]):
                tile = out[i + r:i + r1, c:c + _TILE[1]]
                tile[...] = src[r:r1, c:c + _TILE[1]]
                if not ints and not _within_limits(tile):
                    return False
        return True

    with ThreadPoolExecutor(max_workers=max(1, min(usable_cores(), -(-m // rows)))) as pool:
        ok = all(list(pool.map(block, range(0, m, rows))))
    return out if ok else None


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), for the thread pools of reading and writing."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_count_type(values, what: str) -> None:
    """Counts numpy would convert with a loss: masked arrays (the mask ignored), complex numbers (the imaginary
    part dropped)."""
    if np.ma.isMaskedArray(values):
        masked = np.ma.getmaskarray(values)
        if masked.any():
            at = ", ".join(str(int(k) + 1) for k in np.argwhere(masked)[0])
            raise InputError(
                f"The {what} is a masked array with {int(masked.sum())} masked value(s) (the first at "
                f"[{at}], 1-based); cn.mops has no missing counts: fill them (arr.filled(0)) or drop those "
                "regions, then pass a plain array."
            )
    dtype = getattr(values, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind == "c":
        raise InputError(
            f"The {what} holds complex numbers (dtype {dtype}); read counts must be real: pass arr.real if the "
            "imaginary parts are all 0."
        )


def _cell(r: int, c: int, sample_names, ranges) -> str:
    """'region 3 (chr1:2001-3000), sample 2 ('NA002')': a cell of the count matrix, for messages."""
    region = f"region {r + 1}"
    try:
        if ranges is not None:
            region += f" ({ranges['seqnames'].iloc[r]}:{ranges['start'].iloc[r]}-{ranges['end'].iloc[r]})"
    except (KeyError, IndexError, AttributeError, TypeError):
        pass
    sample = f"sample {c + 1}"
    if sample_names is not None and c < len(sample_names) and sample_names[c] is not None:
        sample += f" ({str(sample_names[c])!r})"
    return f"{region}, {sample}"


def check_names(names, kind: str = "Sample name") -> None:
    """InputError for a name with a control character (a tab or newline corrupts the tab-separated, BED and
    VCF outputs) or an empty name; a chromosome name (``kind`` "Chromosome name") must also be a contig ID of the
    VCF and SAM specifications (``check_contig``)."""
    for k, name in enumerate(names):
        if not str(name).strip():
            if kind == "Sample name":
                raise InputError(f"Sample name {k + 1} is empty; give every sample a name (or none at all, for "
                                 "Sample_1, Sample_2, ...).")
            raise InputError(f"A {kind.lower()} is empty ({str(name)!r}); give every region a {kind.lower()}.")
        hit = _CONTROL.search(str(name))
        if hit:
            char = {"\t": "a tab", "\n": "a newline", "\r": "a carriage return"}.get(
                hit.group(), f"the control character {hit.group()!r}")
            raise InputError(f"{kind} {str(name)!r} contains {char}, which would corrupt the tab-separated and "
                             "VCF outputs: rename it.")
        if kind == "Chromosome name":
            check_contig(str(name))


def check_contig(name: str) -> None:
    """InputError unless ``name`` is a contig ID the VCF (4.3) and SAM specifications accept that does not start
    with '#': letters, digits and ``!#$%&*+./:;=?@^_|~-`` (ASCII only), not starting with ``*``, ``=`` or ``#``."""
    if _CONTIG.fullmatch(name):
        return
    bad = next((c for c in name if not _CONTIG.fullmatch("a" + c)), None)
    why = (f"starts with {name[0]!r}" if bad is None else
           f"contains {'a space' if bad == ' ' else repr(bad)}" + (" (not ASCII)" if ord(bad) > 127 else ""))
    raise InputError(f"Chromosome name {name!r} {why}: the VCF and BED outputs cannot hold it (VCF contig IDs are "
                     "letters, digits and !#$%&*+./:;=?@^_|~-, not starting with *, = or #). Rename the "
                     "chromosome in the input (and in the BAM/CRAM header, for counting).")


def _default_sample_names(n: int) -> list[str]:
    return [f"Sample_{k + 1}" for k in range(n)]


def make_count_data(
    counts: np.ndarray,
    sample_names: list[str] | None = None,
    ranges: pd.DataFrame | None = None,
    *,
    min_samples: int = 2,
    what: str = "read count matrix",
    owned_ranges: bool = False,
) -> CountData:
    """Validate counts, names and ranges and bring the rows of each chromosome together.

    Rows of one chromosome must be contiguous (cn.mops cuts the matrix per chromosome); if they are
    not, rows are stably regrouped by chromosome in order of first appearance, with a warning. Rows whose
    starts decrease within a chromosome are sorted by start (:func:`sorted_within_chromosomes`).
    ``owned_ranges``: ``ranges`` was made for this call (by a reader) and nothing else holds it: its columns may
    become the data's without a copy (:func:`validate_ranges`).
    """
    arr = validate_counts(counts, what, sample_names=sample_names, ranges=ranges)
    m, n = arr.shape
    if n < min_samples:
        raise InputError(
            "It is not possible to run cn.mops on only ONE sample: give at least two samples (columns), or use "
            "the single-sample method singlecn.mops (--method single; single_cn_mops() in Python, "
            "singlegcn.mops() in R)."
            if min_samples == 2
            else f"The {what} needs at least {min_samples} samples, got {n}."
        )
    if sample_names is None or all(s is None for s in sample_names):
        names = _default_sample_names(n)
    else:
        names = [str(s) for s in sample_names]
        if len(names) != n:
            raise InputError(f"{len(names)} sample names given for {n} sample columns.")
        dup = sorted(s for s, k in Counter(names).items() if k > 1)
        if dup:
            raise InputError(f"Sample names must be unique; duplicated: {', '.join(dup)}.")
        check_names(names)
    blocks = None
    if ranges is not None:
        ranges = validate_ranges(ranges, m, owned=owned_ranges)
        blocks = chromosome_blocks(ranges["seqnames"])
        if not rows_grouped(blocks):
            log.warning("Rows of a chromosome were not contiguous: regrouping rows by chromosome.")
            codes, _ = pd.factorize(ranges["seqnames"].to_numpy(dtype=object))
            order = np.argsort(codes, kind="stable")
            ranges = ranges.iloc[order].reset_index(drop=True)
            arr = np.asarray(arr[order], order="F")
            blocks = None
        ranges, arr, blocks = sorted_within_chromosomes(ranges, arr, blocks)
    data = CountData(counts=arr, sample_names=names, ranges=ranges)
    if blocks is not None:
        data._keep_blocks(blocks)  # already computed for the contiguity check
    return data


def validate_ranges(ranges: pd.DataFrame, m: int, *, owned: bool = False) -> pd.DataFrame:
    """seqnames (strings), start and end (int64) of m regions: whole numbers in [0, 2^53], end >= start.
    Overlapping and identical regions are kept, as cn.mops keeps them (each is a row of its own).

    The result shares no memory with ``ranges`` unless ``owned``: the caller made ``ranges`` for this call and
    keeps nothing of it (a reader), so its seqnames column is taken as it is (a copy costs ~50 ms per 7 M rows)."""
    missing = [c for c in ("seqnames", "start", "end") if c not in ranges.columns]
    if missing:
        raise InputError(f"Region table lacks column(s) {', '.join(missing)} (need seqnames, start, end).")
    if len(ranges) != m:
        raise InputError(f"{len(ranges)} regions given for a count matrix of {m} rows; they must match.")
    out = pd.DataFrame({"seqnames": _seqnames(ranges["seqnames"], copy=not owned),
                        **{col: coordinates(ranges[col], col) for col in ("start", "end")}},
                       copy=False)  # each column made here: no copy into one block
    ends_early = (out["end"] < out["start"]).to_numpy()
    if ends_early.any():
        i = int(np.argmax(ends_early))
        raise InputError(
            f"Region {i + 1} ({out['seqnames'][i]}:{out['start'][i]}-{out['end'][i]}) ends before it starts "
            f"(end {out['end'][i]} < start {out['start'][i]}; {int(ends_early.sum())} such region(s)): are the "
            "start and end columns swapped?"
        )
    return out


def coordinates(values, col: str, where=None) -> np.ndarray:
    """A coordinate column as int64: whole numbers in [0, MAX_POSITION], else InputError naming the first bad
    row (``where(i)``: how to name row i; default 'region i + 1')."""
    where = where or (lambda i: f"region {i + 1}")
    s = values if isinstance(values, pd.Series) else pd.Series(np.asarray(values))
    if isinstance(s.dtype, np.dtype) and s.dtype.kind in "iu":
        v = s.to_numpy()
        if v.size and (v.min() < 0 or v.max() > MAX_POSITION):
            i = int(np.argmax((v < 0) | (v > MAX_POSITION)))
            _bad_position(col, v[i], str(v[i]), where(i))
        return v.astype(np.int64)
    num = pd.to_numeric(s.astype(object) if not pd.api.types.is_numeric_dtype(s.dtype) else s, errors="coerce")
    v = num.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = np.isnan(v)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"Region column '{col}' must hold integer coordinates; found {s.iloc[i]!r} at {where(i)}.")
    out_of_range = (v < 0) | (v > MAX_POSITION)
    if out_of_range.any():
        i = int(np.argmax(out_of_range))
        raw = s.iloc[i]
        _bad_position(col, v[i], raw if isinstance(raw, str) else f"{v[i]:.17g}", where(i))
    fractional = v != np.floor(v)
    if fractional.any():
        i = int(np.argmax(fractional))
        raise InputError(f"Region column '{col}' must hold whole-number coordinates; found {v[i]!r} at {where(i)}.")
    return v.astype(np.int64)


def _bad_position(col: str, value, shown: str, where: str) -> None:
    if value < 0:
        raise InputError(f"Region column '{col}' holds the negative position {shown} at {where}; positions count "
                         "from 1 (from 0 for BED-style starts): fix the coordinates.")
    raise InputError(f"Region column '{col}' holds the position {shown} at {where}, beyond the largest supported "
                     f"position 2^53 ({MAX_POSITION}): fix the coordinates (is this the right column?).")


def unsorted_rows(ranges: pd.DataFrame, blocks) -> np.ndarray:
    """Indices of the rows that start before the row above them in their chromosome (``blocks``: the chromosome
    blocks of ``ranges``, rows of a chromosome contiguous)."""
    start = ranges["start"].to_numpy()
    drops = np.flatnonzero(start[1:] < start[:-1]) + 1
    return drops[~np.isin(drops, [b for _, b, _ in blocks])] if drops.size else drops


def sorted_within_chromosomes(ranges: pd.DataFrame, arr: np.ndarray, blocks):
    """(ranges, counts, blocks) with each chromosome's rows in increasing start order.

    Rows whose starts decrease within a chromosome would make segments that end before they start; such input is
    sorted, stably, by chromosome (in order of first appearance), start, then end, with a warning (as rows of a
    chromosome that were not contiguous are regrouped). Input already in increasing start order (ties in any end
    order) is kept as it is. Also checks the chromosome names (no control characters)."""
    blocks = blocks if blocks is not None else chromosome_blocks(ranges["seqnames"])
    check_names([name for name, _, _ in blocks], kind="Chromosome name")
    drops = unsorted_rows(ranges, blocks)
    if not drops.size:
        return ranges, arr, blocks
    start = ranges["start"].to_numpy()
    i = int(drops[0])
    codes, _ = pd.factorize(ranges["seqnames"].to_numpy(dtype=object))
    order = np.lexsort((ranges["end"].to_numpy(), start, codes))  # stable
    log.warning(
        f"Regions were not in increasing start order within their chromosome ({drops.size} row(s) start before the "
        f"row above, the first: row {i + 1}, {ranges['seqnames'][i]}:{start[i]} after {start[i - 1]}): rows sorted by "
        "chromosome (in order of first appearance), start and end."
    )
    ranges = ranges.iloc[order].reset_index(drop=True)
    return ranges, np.asarray(arr[order], order="F"), chromosome_blocks(ranges["seqnames"])


def _seqnames(col: pd.Series, copy: bool = True) -> pd.Series:
    """Chromosome names as Python strings in an object column (also where pandas would infer Arrow strings:
    the engine reads them as an object array), one string object per run of equal names, so that every later
    ``chromosome_blocks`` compares them by object (``_object_changes``). Strings are not converted again
    (Arrow's astype(str) costs ~2 s per 7M rows); a column of such runs already (as the .npz reader makes it) is
    taken as it is, copied if ``copy`` (as :func:`validate_ranges` wants it)."""
    values = col.to_numpy() if col.dtype == object else None
    if values is not None and _object_changes(values) is not None:
        return pd.Series(values.copy() if copy else values, dtype=object, copy=False)
    if isinstance(col.dtype, pd.StringDtype) or (
            values is not None and pd.api.types.infer_dtype(col, skipna=False) == "string"):
        names = col.to_numpy(dtype=object)
    else:
        names = col.astype(str).to_numpy(dtype=object)
    return pd.Series(_one_object_per_run(names), dtype=object, copy=False)


def _one_object_per_run(names: np.ndarray) -> np.ndarray:
    """A new object array of the strings ``names`` (1-D, objects) in which each run of equal strings is one object
    (the run's first): equal values, compared once here."""
    if names.size < 2:
        return names.copy()
    firsts = np.concatenate([[0], np.flatnonzero(names[1:] != names[:-1]) + 1])
    return np.repeat(names[firsts], np.diff(np.append(firsts, names.size)))


def rows_grouped(blocks: list[tuple[str, int, int]]) -> bool:
    """True if each chromosome has one block (``chromosome_blocks``): its rows are contiguous."""
    return len({name for name, _, _ in blocks}) == len(blocks)


def chromosome_blocks(chrom) -> list[tuple[str, int, int]]:
    """(name, first_row, end_row_exclusive) of each chromosome in order of appearance (rows grouped).

    ``chrom``: the name of each row, a numpy array or a pandas Series; Arrow-backed strings (pandas 3's
    default) and categoricals are compared as they are stored, not converted to Python strings first."""
    if len(chrom) == 0:
        return []
    starts, ends, first = name_runs(chrom)
    return [(str(name), int(s), int(e)) for name, s, e in zip(first, starts, ends)]


def name_runs(chrom) -> tuple[np.ndarray, np.ndarray, object]:
    """(starts, ends, names) of the runs of rows that name one chromosome (``chrom``: n >= 1 names, as for
    ``chromosome_blocks``): each run's first row, its end row (exclusive) and its name as stored (the value of its
    first row: a Series' or an array's elements, not made strings)."""
    cut = np.flatnonzero(name_changes(chrom)) + 1
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [len(chrom)]])
    return starts, ends, chrom.iloc[starts] if isinstance(chrom, pd.Series) else np.asarray(chrom)[starts]


def name_changes(chrom) -> np.ndarray:
    """(n - 1,) bool: row i + 1 names another chromosome than row i.

    Names in an object array are compared where the object changes only (``_object_changes``): the readers make
    one string object per chromosome's rows, so that is a comparison of pointers (not of 7 million strings under
    the GIL); equal names in distinct objects are still compared as strings. Numpy string arrays are compared as
    they are stored, not turned into Python strings."""
    values = chrom.array if isinstance(chrom, pd.Series) else chrom
    if isinstance(values, pd.Categorical):
        return values.codes[1:] != values.codes[:-1]
    if hasattr(values, "__arrow_array__"):
        import pyarrow.compute as pc

        arr = values.__arrow_array__()
        return pc.not_equal(arr.slice(1), arr.slice(0, len(arr) - 1)).to_numpy(zero_copy_only=False)
    if isinstance(values, np.ndarray) and values.dtype.kind in "US":
        return values[1:] != values[:-1]
    values = np.asarray(values, dtype=object)
    changes = _object_changes(values)
    if changes is None:
        return values[1:] != values[:-1]
    out = np.zeros(values.size - 1, dtype=bool)
    out[changes - 1] = values[changes] != values[changes - 1]
    return out


def _object_changes(values: np.ndarray) -> np.ndarray | None:
    """Rows i >= 1 of the 1-D object array ``values`` whose object is not the one of row i - 1 (compared by address,
    in bulk), if every object is a ``str`` (checked on the first of each run of one object): runs of one string
    object then hold equal strings, so names can only change at these rows. None if ``values`` holds anything else
    (a float NaN, for one, differs from itself), or mostly distinct objects (then this saves nothing)."""
    if values.size < 2:
        return np.zeros(0, dtype=np.intp) if all(type(v) is str for v in values) else None
    address = np.asarray(_Addresses(values))
    changes = np.flatnonzero(address[1:] != address[:-1]) + 1
    if changes.size > values.size // 4:  # mostly distinct objects: checking their types costs more than it saves
        return None
    firsts = values[np.concatenate([[0], changes])] if changes.size else values[:1]
    if not all(type(v) is str for v in firsts):
        return None
    return changes


class _Addresses:
    """The object pointers of an object array as unsigned integers, same shape and strides (numpy has no view of an
    object array as another dtype): ``np.asarray(_Addresses(values))``, read while ``values`` is alive (it is kept
    here)."""

    def __init__(self, values: np.ndarray):
        self.values = values
        self.__array_interface__ = {"shape": values.shape, "strides": values.strides,
                                    "typestr": np.dtype(np.uintp).str,
                                    "data": (values.__array_interface__["data"][0], True), "version": 3}
