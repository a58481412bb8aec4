"""The call files that genome tools load, from a CNVDetectionResult (the writers put them on disk):

- BED9 ``cnvs.bed`` / ``cnvr.bed`` (``bed_cnvs``, ``bed_cnvr``), also bgzipped with a tabix index;
- VCF 4.2 ``cnvr.vcf.gz`` + index, BGZF-compressed as it is made (``outputs.bgzf``), indexed by htslib
  through pysam (``write_vcf``; ``write_sample_vcfs``: per sample, its own CNVs);
(Per-window tracks and the IGV SEG file are ``outputs.tracks``.)

Formatting only: each CNV's direction and the phred quality Q of a sample's state come from
:mod:`gcnmops.calls.quality` (its docstring says how they are computed). Colours are those of the plots
(``gcnmops/report/plots.py``): gains red (#d62728), losses blue (#1f5fbf), other grey (#b4b4b4).
"""
from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..calls.filters import active_filters, filter_status
from ..calls.quality import (Evidence, call_qualities, cn_value, cnv_region_pairs, direction, genotype_qualities,
                             main_cn, window_index)
from ..errors import InputError
from ..version import __version__
from .bgzf import BgzfWriter
from .pipes import through_pipe

try:  # the [bam] extra: BGZF, tabix, VCF through htslib
    import pysam
except ImportError:  # pragma: no cover - exercised by monkeypatching in the tests
    pysam = None

#: itemRgb of gains / losses / anything else: plots.GAIN, plots.LOSS, plots.OTHER (outputs cannot import plots)
GAIN_RGB, LOSS_RGB, OTHER_RGB = "214,39,40", "31,95,191", "180,180,180"
_RGB = {"gain": GAIN_RGB, "loss": LOSS_RGB, None: OTHER_RGB}
#: largest position a .tbi index holds (2^29 - 1); files with larger coordinates get a CSI index
TBI_MAX_POSITION = (1 << 29) - 1
#: largest POS a VCF holds (VCF 4.2: a 32-bit signed Integer; htslib and pysam refuse more)
VCF_MAX_POSITION = (1 << 31) - 1


# -------------------------------------------------------------------------------------------------
# tabix (pysam)
# -------------------------------------------------------------------------------------------------

def have_pysam() -> bool:
    """True when pysam (htslib) is importable: bgzipped, indexed BED and VCF are written only then."""
    return pysam is not None


def _need_pysam(what: str) -> None:
    if pysam is None:
        raise InputError(f"{what} needs pysam: pip install 'gcnmops[bam]' (or pip install pysam).")


def index_suffix(max_position: int) -> str:
    """"tbi", or "csi" where a position exceeds what .tbi holds (contigs over 512 Mbp)."""
    return "csi" if int(max_position) > TBI_MAX_POSITION else "tbi"


def tabix(path, preset: str, index, csi: bool = False) -> None:
    """Index the bgzipped, sorted file ``path`` (``preset`` "bed" or "vcf") into ``index`` (.tbi or .csi)."""
    _need_pysam("tabix")
    through_pipe(lambda name: pysam.tabix_index(str(path), preset=preset, index=name, force=True, csi=csi,
                                                min_shift=14 if csi else -1), index)


# -------------------------------------------------------------------------------------------------
# order of chromosomes
# -------------------------------------------------------------------------------------------------

def _chromosome_order(result) -> list[str]:
    """The chromosomes of ``result.gr`` in order of first appearance."""
    return list(window_index(result).by_chrom)


def _chrom_rank(result, seqnames) -> np.ndarray:
    """Rank of each name among the chromosomes of ``result.gr`` (order of first appearance)."""
    order = pd.Index(_chromosome_order(result))
    rank = order.get_indexer(pd.Series(seqnames, dtype=object).astype(str))
    rank[rank < 0] = len(order)  # not in gr (should not happen): last
    return rank


def _sorted_positions(result, frame: pd.DataFrame) -> np.ndarray:
    """Row order by chromosome (gr's order), start, end; stable."""
    if len(frame) == 0:
        return np.arange(0)
    rank = _chrom_rank(result, frame["seqnames"])
    return np.lexsort((frame["end"].to_numpy(), frame["start"].to_numpy(), rank))


# -------------------------------------------------------------------------------------------------
# BED
# -------------------------------------------------------------------------------------------------

BED_COLUMNS = ["chrom", "chromStart", "chromEnd", "name", "score", "strand", "thickStart", "thickEnd", "itemRgb"]


def bed_cnvs(result) -> pd.DataFrame:
    """BED9 of the CNVs, sorted by chromosome (gr's order), start, end (as tabix and bedtools need).

    name: the sample; score: 10 x the CNV's call quality (0-990, an integer: Q has one decimal,
    ``calls.quality``); strand ``.``;
    thickStart/thickEnd: the CNV; itemRgb: losses blue, gains red (the plots' colours), grey where the
    integer copy number is the normal one. Mean, median and CN are in cnvs.tsv. With call filters
    (``result.selection``, ``calls.filters``) a 10th column ``filter``: PASS or the filters the CNV fails.
    """
    order = _sorted_positions(result, result.cnvs)
    cnvs = result.cnvs.iloc[order].reset_index(drop=True)
    q, directions = call_qualities(result)
    q, directions = q[order], [directions[i] for i in order]
    start0 = cnvs["start"].to_numpy(np.int64) - 1
    end = cnvs["end"].to_numpy(np.int64)
    frame = pd.DataFrame({
        "chrom": cnvs["seqnames"].astype(str).to_numpy(), "chromStart": start0, "chromEnd": end,
        "name": cnvs["sampleName"].astype(str).to_numpy(), "score": _bed_score(q), "strand": ".",
        "thickStart": start0, "thickEnd": end, "itemRgb": [_RGB[d] for d in directions],
    }, columns=BED_COLUMNS)
    return _with_filter(result, frame, cnv_filters(result)[order])


def _bed_score(q) -> np.ndarray:
    """The BED score (int64, 0-1000) of qualities ``q``: 10 x Q (Q has one decimal: ``calls.quality.Q_DECIMALS``)."""
    return np.minimum(np.rint(10 * np.asarray(q, dtype=np.float64)), 1000).astype(np.int64)


def _with_filter(result, frame: pd.DataFrame, status: np.ndarray) -> pd.DataFrame:
    """``frame`` with a last column ``filter`` (``status``) where the result's selection sets call filters."""
    return frame.assign(filter=status) if active_filters(result.selection) else frame


def cnv_filters(result) -> np.ndarray:
    """(len(cnvs),) PASS or the failed filters of each CNV (``calls.filters``: its length and quality Q)."""
    cnvs = result.cnvs
    length = cnvs["end"].to_numpy(np.int64) - cnvs["start"].to_numpy(np.int64) + 1
    return filter_status(length, call_qualities(result)[0], result.selection)


def cnvr_filters(result) -> np.ndarray:
    """(len(cnvr),) PASS or the failed filters of each CNV region: its length and the highest quality Q of the
    CNVs in it (its BED score / 10)."""
    cnvr = result.cnvr.reset_index(drop=True)
    q = call_qualities(result)[0]
    region, cnv = cnv_region_pairs(cnvr, result.cnvs.reset_index(drop=True))
    best = np.zeros(len(cnvr), np.float64)
    np.maximum.at(best, region, q[cnv])
    length = cnvr["end"].to_numpy(np.int64) - cnvr["start"].to_numpy(np.int64) + 1
    return filter_status(length, best, result.selection)


def call_table(result, name: str) -> pd.DataFrame:
    """The call table ``name`` (segmentation, cnvs, cnvr) as written: cn.mops's columns, and for cnvs and cnvr a
    last column ``filter`` where the result's selection sets call filters."""
    frame = getattr(result, name)
    if name == "segmentation":
        return frame
    return _with_filter(result, frame, (cnv_filters if name == "cnvs" else cnvr_filters)(result))


def bed_cnvr(result) -> pd.DataFrame:
    """BED9 of the CNV regions, sorted like ``bed_cnvs``.

    name: the samples with a CNV overlapping the region, comma separated (``.`` if none); score: the
    highest score of those CNVs; itemRgb: blue if they are all losses, red if all gains, grey otherwise.
    The per-sample copy numbers are in cnvr.tsv; a 10th column ``filter`` as ``bed_cnvs`` (``cnvr_filters``).
    """
    cnvr = result.cnvr.reset_index(drop=True)
    cnvs = result.cnvs.reset_index(drop=True)
    q, directions = call_qualities(result)
    region, cnv = cnv_region_pairs(cnvr, cnvs)
    sample_rank = pd.Index(result.sample_names).get_indexer(cnvs["sampleName"].to_numpy()[cnv])
    order = np.lexsort((sample_rank, region))
    region, cnv = region[order], cnv[order]
    names = np.full(len(cnvr), ".", dtype=object)
    score = np.zeros(len(cnvr), np.int64)
    rgb = np.full(len(cnvr), OTHER_RGB, dtype=object)
    if region.size:  # per region (its CNVs consecutive here): the highest score, one kind or several, its samples
        starts = np.flatnonzero(np.r_[True, region[1:] != region[:-1]])
        at = region[starts]
        score[at] = _bed_score(np.maximum.reduceat(np.asarray(q, np.float64)[cnv], starts))
        kinds, kind_names = pd.factorize(pd.Series(np.asarray(directions, dtype=object)[cnv]), use_na_sentinel=False)
        low, high = np.minimum.reduceat(kinds, starts), np.maximum.reduceat(kinds, starts)
        rgb[at] = [_RGB[kind_names[k]] if k == h else OTHER_RGB for k, h in zip(low, high)]
        sample = cnvs["sampleName"].astype(str).to_numpy()[cnv]
        # each sample once, where it first comes in its region
        key = pd.factorize(sample)[0].astype(np.int64)
        first = np.sort(np.unique(np.stack([region, key], axis=1), axis=0, return_index=True)[1])
        kept_starts = np.searchsorted(first, starts)
        names[at] = [",".join(part) for part in np.split(sample[first], kept_starts[1:])]
    order = _sorted_positions(result, cnvr)
    cnvr = cnvr.iloc[order]
    start0 = cnvr["start"].to_numpy(np.int64) - 1
    end = cnvr["end"].to_numpy(np.int64)
    frame = pd.DataFrame({"chrom": cnvr["seqnames"].astype(str).to_numpy(), "chromStart": start0, "chromEnd": end,
                          "name": names[order], "score": score[order], "strand": ".", "thickStart": start0,
                          "thickEnd": end, "itemRgb": rgb[order]}, columns=BED_COLUMNS)
    return _with_filter(result, frame, cnvr_filters(result)[order])


def bed_max_position(result) -> int:
    """The largest coordinate the BEDs hold (chooses their index: ``index_suffix``)."""
    return int(result.gr["end"].max()) if len(result.gr) else 0


# -------------------------------------------------------------------------------------------------
# VCF 4.2
# -------------------------------------------------------------------------------------------------

VCF_FILTERS = {
    "NoCarrier": "No sample has a non-reference genotype here (the CNV calls that made the CNV region have the "
                 "normal integer copy number); QUAL 0",
}


#: the fixed columns of a VCF record (``VcfTable.fixed``)
VCF_FIXED = ["CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO"]


@dataclass
class VcfTable:
    """A VCF's meta lines (after ##fileformat), samples, FORMAT keys and records: ``fixed`` one row per record
    in file order, the columns ``VCF_FIXED`` (POS int64, QUAL float64 with one decimal, INFO its text with END
    first); ``cells`` per FORMAT key the (records, samples) values: GT a tuple of allele indices, CN an int or
    None (object arrays), CNQ float64, FCN a float or None (object)."""
    header_lines: list[str]
    samples: list[str]
    formats: list[str]
    fixed: pd.DataFrame
    cells: dict[str, np.ndarray]


def _objects(values: list) -> np.ndarray:
    """A 1-D object array holding ``values`` as they are (tuples stay elements)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def read_fai(path) -> dict[str, int]:
    """Contig lengths of a FASTA index (.fai: name, length, ...), in its order."""
    lengths = {}
    try:
        with open(path) as fh:
            for line in fh:
                if line.strip():
                    name, length = line.split("\t")[:2]
                    lengths[name] = int(length)
    except (OSError, ValueError) as exc:
        raise InputError(f"Cannot read the FASTA index {path}: {exc}. Give a samtools faidx .fai file.") from exc
    return lengths


@dataclass(frozen=True)
class VcfOptions:
    """How the VCFs of a run are written (``gcnmops run --reference-fai / --reference / --per-sample-vcf``):
    ``reference_fai`` contig lengths from a FASTA index; ``reference`` a FASTA (indexed, or in a writable
    folder): REF bases and, without ``reference_fai``, contig lengths; ``per_sample`` one VCF per sample
    besides cnvr.vcf.gz (``sample_vcf_name``)."""

    reference_fai: str | None = None
    reference: str | None = None
    per_sample: bool = False

    def checked(self, ranges: pd.DataFrame | None = None) -> "VcfOptions":
        """This, once the files can be read and (``ranges``: seqnames, start, end of the counts) a VCF can hold
        the regions -- the reference has every chromosome, no position is beyond VCF_MAX_POSITION: InputError
        otherwise, before any work."""
        lengths = reference_lengths(self.reference_fai, self.reference)
        if self.reference is not None:
            _need_pysam("--reference (REF bases from a FASTA)")
        if ranges is not None and len(ranges):
            if lengths is not None:
                missing = [c for c in dict.fromkeys(str(c) for c in ranges["seqnames"].unique()) if c not in lengths[0]]
                if missing:
                    raise InputError(f"Chromosome(s) {', '.join(missing[:5])} of the counts are not in {lengths[1]}: "
                                     "give the reference the reads were aligned to.")
            end = int(ranges["end"].max())
            if end > VCF_MAX_POSITION:
                raise InputError(f"A region ends at {end:,}: VCF positions are 32-bit integers (at most "
                                 f"{VCF_MAX_POSITION:,}); leave vcf out of --formats (the BED and SEG files hold such "
                                 "coordinates).")
        return self

    def vcf_kwargs(self) -> dict:
        """The keyword arguments of ``write_vcf`` / ``vcf_max_position``."""
        return {"reference_fai": self.reference_fai, "reference": self.reference}


def _fasta(reference):
    """pysam.FastaFile of ``reference`` (its .fai made where missing); InputError naming the fix."""
    _need_pysam("Reading a reference FASTA")
    if not Path(reference).is_file():
        raise InputError(f"Reference FASTA not found: {reference}")
    quiet = pysam.set_verbosity(0)
    try:
        return pysam.FastaFile(str(reference))
    except (OSError, ValueError) as err:
        raise InputError(f"Cannot read the reference FASTA {reference}: {err} (a FASTA file, indexed with samtools "
                         "faidx or in a writable folder).") from None
    finally:
        pysam.set_verbosity(quiet)


def reference_lengths(reference_fai=None, reference=None) -> tuple[dict[str, int], str] | None:
    """(contig -> length, the file they come from): from ``reference_fai``, else the FASTA ``reference``'s
    index; None without either."""
    if reference_fai is not None:
        return read_fai(reference_fai), str(reference_fai)
    if reference is not None:
        with _fasta(reference) as fa:
            return dict(zip(fa.references, (int(n) for n in fa.lengths))), str(reference)
    return None


def vcf_contigs(result, reference_fai=None, reference=None) -> dict[str, int]:
    """Contig -> length for the VCF header: the chromosomes of gr in their order, with the last window end as
    length, or the lengths of ``reference_fai`` (else of the FASTA ``reference``; its other contigs follow)."""
    known = window_index(result).lengths()
    order = _chromosome_order(result)
    source = reference_lengths(reference_fai, reference)
    if source is None:
        return {c: known[c] for c in order}
    fai, where = source
    missing = [c for c in order if c not in fai]
    if missing:
        raise InputError(f"Chromosome(s) {', '.join(missing[:5])} of the counts are not in {where}: give "
                         "the reference the reads were aligned to.")
    short = [c for c in order if known[c] > fai[c]]
    if short:
        raise InputError(f"Windows of {', '.join(short[:5])} end beyond the contig lengths in {where}: "
                         "give the reference the reads were aligned to.")
    return {**{c: fai[c] for c in order}, **{c: n for c, n in fai.items() if c not in known}}


def _ref_bases(reference):
    """``base(chrom, pos)``: the reference base at 1-based ``pos`` (A, C, G, T or N), or always N without a
    FASTA."""
    if reference is None:
        return lambda chrom, pos: "N"
    fa = _fasta(reference)

    def base(chrom: str, pos: int) -> str:
        b = fa.fetch(chrom, pos - 1, pos).upper()
        return b if b in ("A", "C", "G", "T") else "N"

    return base


def _genotypes(alt: np.ndarray, cn: np.ndarray, main: float) -> np.ndarray:
    """GT allele indices of (r, k) cells from their ``alt`` flags and copy numbers ``cn`` (NaN unknown) against the
    normal class ``main`` (see ``vcf_table``): haploid for a normal class CN1, else diploid; (r, k) tuples."""
    if main == 1:
        code = alt.astype(np.int64)
        table = [(0,), (1,)]
    else:
        with np.errstate(invalid="ignore"):
            far = np.isfinite(cn) & (np.abs(np.rint(cn) - main) >= 2)
        code = np.where(alt, np.where(far, 2, 1), 0)
        table = [(0, 0), (0, 1), (1, 1)]
    return _objects(table)[code]


def _cells(alt: np.ndarray, cn: np.ndarray, main: float, cnq: np.ndarray, fractional: bool) -> dict:
    """``VcfTable.cells`` of (r, k) cells from their ``alt`` flags, copy numbers ``cn`` (NaN unknown) and genotype
    qualities ``cnq``: GT (``_genotypes``), CN the nearest integer, CNQ, and FCN the copy number where
    ``fractional``."""
    cells = {"GT": _genotypes(alt, cn, main),
             "CN": np.where(np.isnan(cn), None, np.rint(np.nan_to_num(cn)).astype(np.int64).astype(object)),
             "CNQ": cnq}
    if fractional:
        cells["FCN"] = np.where(np.isnan(cn), None, cn.astype(object))
    return cells


def _cell_states(result, cnvr: pd.DataFrame, cols: np.ndarray, evidence: Evidence):
    """Per region and chosen sample: copy number (NaN unknown), label, alt flag, sign (-1/0/+1), class index."""
    main = main_cn(result)
    samples = [result.sample_names[c] for c in cols]
    k, n = len(cnvr), len(samples)
    labels = cnvr[samples].to_numpy(dtype=object) if k and n else np.zeros((k, n), dtype=object)
    flat = pd.Series(labels.ravel(), dtype=object)
    codes, uniques = pd.factorize(flat, use_na_sentinel=True)
    u_val = np.array([np.nan if (v := cn_value(u)) is None else v for u in uniques] + [np.nan], dtype=np.float64)
    u_cls = np.array([evidence.class_idx.get(str(u), -1) for u in uniques] + [-1], dtype=np.int64)
    codes = np.where(codes < 0, len(uniques), codes)
    values = u_val[codes].reshape(k, n)
    cls = u_cls[codes].reshape(k, n)
    fractional = any(cn_value(u) is not None and "." in str(u) for u in uniques)
    known = np.isfinite(values) & (main is not None)
    with np.errstate(invalid="ignore"):
        diff = np.rint(values) - (main if main is not None else 0.0)
    sign = np.where(known, np.sign(diff), 0).astype(np.int64)

    # unknown copy number: the sample's CNV calls in the region (direction by copy number, else statistic)
    region, cnv = cnv_region_pairs(cnvr, result.cnvs)
    if region.size and (~known).any():
        stat = "median" if result.params.get("useMedian", False) else "mean"
        col_of = {s: j for j, s in enumerate(samples)}
        cnv_col = np.array([col_of.get(s, -1) for s in result.cnvs["sampleName"].to_numpy()[cnv]])
        v = result.cnvs[stat].to_numpy(float)[cnv]
        cnv_sign = np.array([{"loss": -1, "gain": 1}.get(direction(cn_value(lab), float(x), main) or
                                                       direction(None, float(x), None), 0)
                             for lab, x in zip(result.cnvs["CN"].to_numpy(dtype=object)[cnv], v)], dtype=np.int64)
        strength = np.abs(np.nan_to_num(v))
        best = np.full((k, n), -1.0)
        call = np.zeros((k, n), np.int64)
        for r, c, sgn, w in zip(region, cnv_col, cnv_sign, strength):
            if c >= 0 and not known[r, c] and sgn != 0 and w > best[r, c]:  # the strongest call if several
                best[r, c], call[r, c] = w, sgn
        sign = np.where(known, sign, call)
        cls = np.where(known, cls, -1)
    return values, labels, sign != 0, sign, np.where(sign != 0, cls, evidence.main_idx), fractional


def vcf_table(result, reference_fai=None, samples=None, reference=None) -> VcfTable:
    """The VCF 4.2 of the CNV regions as header lines and records (``write_vcf`` writes it).

    One record per CNV region, sorted by chromosome (gr's order) and position; ID ``cnvr<i>`` (row i of
    cnvr.tsv). A region [start, end] is a symbolic structural variant: POS = start - 1, the padding base
    before it, REF that base from the FASTA ``reference`` (``N`` without one, or for a base other than A, C,
    G, T), except a region starting at base 1: POS = 1 with that first base as REF (VCF's rule); INFO END =
    end, SVLEN = +-(END - POS) (negative for deletions: the region's length, one less for a region at base 1,
    as htslib reads it), SVTYPE, IMPRECISE with CIPOS / CIEND = +-the width of the region's first / last
    window (breakpoints are known to a window; clipped to the contig). ALT ``<DEL>`` (the carriers are losses),
    ``<DUP>`` (gains) or ``<CNV>`` (both; without carriers the direction of the region's CNV calls).

    FORMAT per sample: GT from the sample's copy number (the cnvr.tsv cell) against the normal class n:
    a normal class CN1 is haploid (GT 0 at CN1, 1 otherwise); else diploid: 0/0 at n, 0/1 one copy away,
    1/1 two or more copies away (CN0 and CN4+ for n = 2). Before integer copy numbers (``--no-integer``) a
    sample with a CNV call overlapping the region is 0/1 (haploid 1), the others 0/0 (0). CN: the integer copy
    number (``.`` before integer copy numbers; the nearest integer of FCN for fractional labels, which also
    get FORMAT FCN). CNQ: the genotype quality of the sample's state over the region's windows (``calls.quality``).
    QUAL: the highest call quality of the carriers (samples with a non-reference GT); FILTER: NoCarrier (QUAL 0) where
    there is no carrier, else PASS or the call filters (``calls.filters``) the region's length and QUAL fail.

    ``samples``: the samples to write (default all).
    """
    all_samples = list(result.sample_names)
    chosen = all_samples if samples is None else [str(s) for s in samples]
    position = {s: k for k, s in enumerate(all_samples)}
    unknown = [s for s in chosen if s not in position]
    if unknown:
        raise InputError(f"Unknown sample(s) {', '.join(unknown[:5])}; the result's samples: "
                         f"{', '.join(all_samples[:10])}{' ...' if len(all_samples) > 10 else ''}.")
    cols = np.array([position[s] for s in chosen], dtype=np.int64)
    main = main_cn(result)
    main_v = main if main is not None else 2.0
    evidence = Evidence(result)
    windows = window_index(result)
    contigs = _vcf_contigs_checked(result, reference_fai, reference)
    ref_base = _ref_bases(reference)

    cnvr = result.cnvr.reset_index(drop=True)
    k = len(cnvr)
    values, labels, alt, sign, cls, fractional = _cell_states(result, cnvr, cols, evidence)

    # direction of the region's CNV calls (all samples): the ALT of regions without carriers
    region, cnv = cnv_region_pairs(cnvr, result.cnvs)
    stat = "median" if result.params.get("useMedian", False) else "mean"
    signs = result.cnvs[stat].to_numpy(float)[cnv] if cnv.size else np.zeros(0)
    call_loss = np.bincount(region[signs < 0], minlength=k) > 0 if region.size else np.zeros(k, bool)
    call_gain = np.bincount(region[signs > 0], minlength=k) > 0 if region.size else np.zeros(k, bool)

    chrom = cnvr["seqnames"].astype(str).to_numpy() if k else np.zeros(0, dtype=object)
    start = cnvr["start"].to_numpy(np.int64) if k else np.zeros(0, np.int64)
    end = cnvr["end"].to_numpy(np.int64) if k else np.zeros(0, np.int64)
    formats = ["GT", "CN", "CNQ"] + (["FCN"] if fractional else [])
    order = _sorted_positions(result, cnvr)
    quals = evidence.region_qualities(cnvr.iloc[order], chosen, cls[order], sign[order])
    loss, gain = (sign[order] < 0).any(axis=1), (sign[order] > 0).any(axis=1)
    neither = ~(loss | gain)
    loss, gain = np.where(neither, call_loss[order], loss), np.where(neither, call_gain[order], gain)
    svtypes = np.where(loss == gain, "CNV", np.where(loss, "DEL", "DUP"))
    carriers = alt[order]
    has = carriers.any(axis=1)
    qual = np.where(has, np.where(carriers, quals.call, -np.inf).max(axis=1, initial=-np.inf), 0.0)
    status = np.where(has, filter_status(end[order] - start[order] + 1, qual, result.selection), "NoCarrier")
    cells = _cells(carriers, values[order], main_v, quals.genotype, fractional)
    fixed = _sv_records(windows, contigs, ref_base, chrom[order], start[order], end[order], svtypes,
                        [f"cnvr{i + 1}" for i in order.tolist()], qual, status)
    return VcfTable(_vcf_header_lines(result, contigs, fractional, reference_fai, reference), chosen, formats,
                    fixed, cells)


def _vcf_contigs_checked(result, reference_fai=None, reference=None) -> dict[str, int]:
    """``vcf_contigs``; InputError where a contig is longer than a VCF position holds."""
    contigs = vcf_contigs(result, reference_fai, reference)
    too_long = {c: n for c, n in contigs.items() if n > VCF_MAX_POSITION}
    if too_long:
        c, n = next(iter(too_long.items()))
        raise InputError(f"Chromosome {c} is {n:,} bp long: VCF positions are 32-bit integers (at most "
                         f"{VCF_MAX_POSITION:,}), so no VCF can hold it; leave vcf out of --formats (the BED and SEG "
                         "files hold such coordinates).")
    return contigs


def _sv_records(windows, contigs: dict, ref_base, chrom, start, end, svtype, ids: list[str], qual, status,
                extra: list[str] | None = None) -> pd.DataFrame:
    """``VcfTable.fixed`` of the symbolic variants [start, end] (1-based, closed) of ``svtype`` (arrays, one
    entry per record): POS, INFO END, SVTYPE, SVLEN, IMPRECISE, CIPOS / CIEND from the first / last window
    overlapping each (see ``vcf_table``), then ``extra`` (per record INFO text to append, "" for none)."""
    chrom = np.asarray(chrom, dtype=object).astype(str)
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    svtype = np.asarray(svtype).astype(str)
    pos = np.where(start > 1, start - 1, 1)
    svlen = np.where(svtype == "DEL", pos - end, end - pos)  # END - POS: the length (one less for one at base 1)
    first, last = windows.edge_rows(chrom, start, end)
    w0, w1 = windows.widths(first), windows.widths(last)
    contig_len = np.array([contigs.get(c, -1) for c in chrom], np.int64).reshape(-1)
    contig_len = np.where(contig_len >= 0, contig_len, end)
    lo = np.minimum(w0, pos - 1)
    hi = np.minimum(w1, np.maximum(contig_len - end, 0))
    extra = extra if extra is not None else [""] * len(chrom)
    info = [f"END={e};SVTYPE={t};SVLEN={n};IMPRECISE;CIPOS={-a},{b};CIEND={-c},{d}{x}"
            for e, t, n, a, b, c, d, x in zip(end.tolist(), svtype.tolist(), svlen.tolist(), lo.tolist(),
                                              w0.tolist(), w1.tolist(), hi.tolist(), extra)]
    pos_list = pos.tolist()
    return pd.DataFrame({"CHROM": chrom.astype(object), "POS": pos, "ID": ids,
                         "REF": [ref_base(c, p) for c, p in zip(chrom.tolist(), pos_list)],
                         "ALT": [f"<{t}>" for t in svtype.tolist()], "QUAL": np.asarray(qual, np.float64),
                         "FILTER": np.asarray(status, dtype=object).astype(str), "INFO": info}, columns=VCF_FIXED)


def sample_vcf_table(result, sample, reference_fai=None, reference=None) -> VcfTable:
    """The VCF 4.2 of one sample's own CNVs (its per-sample VCF): one record per CNV of ``sample`` in
    cnvs.tsv whose direction is a loss or a gain (a CNV whose integer copy number is the normal one is no
    variant: left out), sorted by position; ID ``cnv<k>`` (row k of cnvs.tsv). POS/END, SVLEN, CIPOS/CIEND as
    ``vcf_table``'s, of the CNV itself, so the records cover exactly the sample's calls; ALT ``<DEL>`` or
    ``<DUP>``; INFO CNVR: the ID of the cohort's CNV region (cnvr.vcf.gz) holding the CNV. FORMAT GT, CN (and FCN)
    from the CNV's copy number as in ``vcf_table``, CNQ the CNV's genotype quality, QUAL its call quality (``calls.quality``);
    FILTER PASS or the call filters the CNV fails (``cnv_filters``)."""
    sample = str(sample)
    if sample not in [str(s) for s in result.sample_names]:
        raise InputError(f"Unknown sample {sample}; the result's samples: "
                         f"{', '.join(map(str, result.sample_names[:10]))}.")
    main = main_cn(result)
    windows = window_index(result)
    contigs = _vcf_contigs_checked(result, reference_fai, reference)
    ref_base = _ref_bases(reference)
    cnvs = result.cnvs.reset_index(drop=True)
    q, directions = call_qualities(result)
    gq = genotype_qualities(result)
    status = cnv_filters(result)
    region, cnv = cnv_region_pairs(result.cnvr.reset_index(drop=True), cnvs)
    region_of = dict(zip(cnv[::-1], region[::-1]))  # the first region of a CNV (they hold one each)
    names = cnvs["sampleName"].astype(str).to_numpy()
    order = [i for i in _sorted_positions(result, cnvs) if names[i] == sample and directions[i] is not None]
    labels = cnvs["CN"].to_numpy(dtype=object)
    fractional = any(cn_value(labels[i]) is not None and "." in str(labels[i]) for i in order)
    chrom, start, end = (cnvs[c].to_numpy()[np.asarray(order, np.int64)] for c in ("seqnames", "start", "end"))
    fixed = _sv_records(windows, contigs, ref_base, chrom, start, end,
                        ["DEL" if directions[i] == "loss" else "DUP" for i in order], [f"cnv{i + 1}" for i in order],
                        np.asarray([q[i] for i in order], np.float64), [status[i] for i in order],
                        [f";CNVR=cnvr{region_of[i] + 1}" if i in region_of else "" for i in order])
    cn = np.array([np.nan if (v := cn_value(labels[i])) is None else v for i in order], dtype=np.float64)[:, None]
    cells = _cells(np.ones(cn.shape, bool), cn, main if main is not None else 2.0,
                   np.asarray(gq, np.float64)[np.asarray(order, np.int64)][:, None], fractional)
    header = _vcf_header_lines(result, contigs, fractional, reference_fai, reference, own=True)
    return VcfTable(header, [sample], ["GT", "CN", "CNQ"] + (["FCN"] if fractional else []), fixed, cells)


def _quoted(value) -> str:
    """A VCF meta-information value in double quotes (backslashes and quotes escaped, control characters as
    spaces)."""
    text = re.sub(r"[\x00-\x1f\x7f]", " ", str(value))
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def provenance_lines(provenance: dict) -> list[str]:
    """The VCF header lines saying what made the file (``provenance.describe``'s dict): one
    ``##gcnmopsCommand=<...>`` and one ``##gcnmopsInput=<...>`` per input fingerprinted."""
    if not provenance:
        return []
    fields = {"Version": provenance.get("gcnmops", __version__), "Date": provenance.get("date"),
              "CommandLine": provenance.get("command"), "Backend": provenance.get("backend"),
              "Device": provenance.get("device")}
    lines = ["##gcnmopsCommand=<ID=gcnmops," + ",".join(f"{k}={_quoted(v)}" for k, v in fields.items()
                                                      if v is not None) + ">"]
    for i, fp in enumerate(provenance.get("inputs", []), 1):
        digest = next(((k, v) for k, v in fp.items() if k.startswith("sha256")), None)
        parts = {"Path": fp.get("path"), "Size": fp.get("size"), "Modified": fp.get("modified"),
                 "Digest": None if digest is None else f"{digest[0]}:{digest[1]}"}
        lines.append(f"##gcnmopsInput=<ID=input{i}," + ",".join(f"{k}={_quoted(v)}" for k, v in parts.items()
                                                              if v is not None) + ">")
    return lines


def _vcf_header_lines(result, contigs: dict, fractional: bool, reference_fai, reference=None,
                      own: bool = False) -> list[str]:
    """The meta lines of a VCF of ``result``: of its CNV regions, or (``own``) of one sample's CNVs."""
    p = result.params
    provenance = getattr(result, "provenance", None) or {}
    day = provenance.get("date", "")[:10].replace("-", "") or f"{datetime.date.today():%Y%m%d}"
    lines = [f"##fileDate={day}",
             f"##source=gcnmops {__version__} ({p.get('method', 'cn.mops')} {p.get('version', '')} semantics)",
             *provenance_lines(provenance)]
    if reference is not None or reference_fai is not None:
        fasta = str(reference) if reference is not None else (
            str(reference_fai)[:-4] if str(reference_fai).endswith(".fai") else str(reference_fai))
        lines.append(f"##reference=file://{Path(fasta).resolve()}")
    lines += [f"##contig=<ID={c},length={n}>" for c, n in contigs.items()]
    filters = {**({} if own else VCF_FILTERS), **active_filters(result.selection)}
    lines += [f'##FILTER=<ID={k},Description="{v}">' for k, v in filters.items()]
    lines += _qc_header_lines(result)
    lines += [
        '##ALT=<ID=DEL,Description="Deletion: copy number below the normal class">',
        '##ALT=<ID=DUP,Description="Duplication: copy number above the normal class">',
        '##ALT=<ID=CNV,Description="Copy number variable region: losses and gains">',
        f'##INFO=<ID=END,Number=1,Type=Integer,Description="End position of the {"CNV" if own else "CNV region"}">',
        '##INFO=<ID=SVTYPE,Number=1,Type=String,Description="Type of structural variant: DEL, DUP or CNV">',
        '##INFO=<ID=SVLEN,Number=1,Type=Integer,Description="END - POS: the length of the CNV region after '
        'the padding base POS; negative for deletions">',
        '##INFO=<ID=IMPRECISE,Number=0,Type=Flag,Description="Imprecise structural variation: breakpoints '
        'known to a window">',
        '##INFO=<ID=CIPOS,Number=2,Type=Integer,Description="Confidence interval around POS: +-the width of '
        'the first window of the region">',
        '##INFO=<ID=CIEND,Number=2,Type=Integer,Description="Confidence interval around END: +-the width of '
        'the last window of the region">',
        f'##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype from the copy number against the normal '
        f'class {p.get("mainClass", "CN2")}: haploid (0 normal, 1 not) if it is CN1, else 0/0 normal, 0/1 one '
        f'copy away, 1/1 two or more; before integer copy numbers 0/1 (1) where the sample has a CNV call">',
        '##FORMAT=<ID=CN,Number=1,Type=Integer,Description="Copy number genotype for imprecise events (the '
        'integer copy number of cn.mops; . before integer copy numbers)">',
        f'##FORMAT=<ID=CNQ,Number=1,Type=Float,Description="Copy number genotype quality: min(99, -10 log10(e)) '
        f'to one decimal, e the error rate calibrated on spike-ins for the model\'s phred score -10 log10(1 - p) and '
        f'the locus dispersion (the other samples\' residuals), p the posterior of the sample\'s state (its CN; non-normal before integer copy numbers; normal) over the '
        f'{"CNV" if own else "region"}\'s windows from the fitted model: Poisson likelihoods of the normalized '
        f'counts under each class\'s lambda, over the sample\'s dispersion, with the mixture weights as prior '
        f'(gcnmops docs/qualities.md)">',
    ]
    if own:
        lines.append('##INFO=<ID=CNVR,Number=1,Type=String,Description="ID of the cohort\'s CNV region holding this '
                     'CNV (cnvr.vcf.gz)">')
    if fractional:
        lines.append('##FORMAT=<ID=FCN,Number=1,Type=Float,Description="Fractional copy number '
                     '(calcFractionalCopyNumbers)">')
    return lines


def _qc_header_lines(result) -> list[str]:
    """What the run left out (``result.selection``) and one ``##sampleQC`` line per sample of its sample QC
    (``calls.qc``; reasons ``|``-separated)."""
    lines = [f"##gcnmopsSelection={k}:{','.join(map(str, v)) if isinstance(v, list) else v}"
             for k, v in result.selection.items()]
    qc = result.sample_qc
    if qc is not None:
        for row in qc.itertuples(index=False):
            lines.append(f"##sampleQC=<ID={row.sample},MedianCount={row.median_count:g},"
                         f"EmptyFraction={row.empty_fraction:.4g},Log2MAD={row.log2_mad:.4g},CNVs="
                         f"{'NA' if pd.isna(row.cnvs) else int(row.cnvs)},Outlier={'yes' if row.outlier else 'no'},"
                         f"Reasons={row.reasons.replace(',', '|') or '.'},Excluded={'yes' if row.excluded else 'no'}>")
    return lines


#: records per piece of VCF text (``vcf_text``): a wide cohort's file is made a piece at a time
VCF_RECORDS_PER_PIECE = 2000


def _vcf_number(v) -> str:
    """A VCF number as htslib writes it (``%g``); ``.`` for None."""
    return "." if v is None else f"{v:g}" if isinstance(v, float) else str(v)


_ANY_TEXT = np.frompyfunc(lambda v: "." if v is None or v != v else _vcf_number(float(v) if isinstance(v, np.floating)
                                                                                 else v), 1, 1)
_GT_TEXT = np.frompyfunc(lambda t: "/".join(map(str, t)), 1, 1)
#: ``%g`` of the one-decimal numbers 0.0 .. 99.9 (qualities), looked up instead of formatted one by one
_TENTHS = np.array([f"{k / 10:g}" for k in range(1000)], dtype=object)


def _cells_text(key: str, values: np.ndarray) -> np.ndarray:
    """The text of the FORMAT field ``key`` of (r, k) cells ``values`` (``VcfTable.cells``), an object array."""
    if values.dtype == object:  # a few distinct values: each formatted once
        codes, uniques = pd.factorize(values.ravel(), use_na_sentinel=False)
        text = (_GT_TEXT if key == "GT" else _ANY_TEXT)(_objects(list(uniques)))
        return text[codes].reshape(values.shape) if codes.size else values
    if values.dtype == np.float64:
        with np.errstate(invalid="ignore"):
            tenths = np.rint(values * 10.0)
            exact = (tenths / 10.0 == values) & (tenths >= 0) & (tenths < _TENTHS.size) & ~np.signbit(values)
        out = _TENTHS[np.where(exact, tenths, 0).astype(np.int64)]
        if not exact.all():
            out[~exact] = _ANY_TEXT(values[~exact])
        return out
    return _ANY_TEXT(values)


def vcf_text(table: VcfTable):
    """The VCF 4.2 text of ``table``, in pieces (str; ``VCF_RECORDS_PER_PIECE`` records each, the header first),
    as htslib writes such a file: numbers as ``%g``, flags bare, missing values ``.``."""
    yield "\n".join(["##fileformat=VCFv4.2", '##FILTER=<ID=PASS,Description="All filters passed">',
                     *table.header_lines, "\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO"]
                                                    + (["FORMAT", *table.samples] if table.samples else []))]) + "\n"
    fixed = table.fixed
    fmt = ":".join(table.formats)
    for a in range(0, len(fixed), VCF_RECORDS_PER_PIECE):
        part = fixed.iloc[a:a + VCF_RECORDS_PER_PIECE]
        qual = _cells_text("QUAL", part["QUAL"].to_numpy(np.float64))
        lines = ["\t".join(v) for v in zip(part["CHROM"].tolist(), map(str, part["POS"].tolist()),
                                             part["ID"].tolist(), part["REF"].tolist(), part["ALT"].tolist(),
                                             qual.tolist(), part["FILTER"].tolist(), part["INFO"].tolist())]
        if table.samples:
            cell = None
            for key in table.formats:
                text = _cells_text(key, table.cells[key][a:a + len(part)])
                cell = text if cell is None else cell + ":" + text  # object arrays: joined cell by cell
            lines = [f"{line}\t{fmt}\t" + "\t".join(row) for line, row in zip(lines, cell.tolist())]
        yield "\n".join(lines) + "\n" if lines else ""


def write_vcf(result, path, reference_fai=None, samples=None, compress: bool = True, reference=None,
              own_calls_of=None) -> Path:
    """Write ``vcf_table(result, ...)`` (``own_calls_of``: ``sample_vcf_table`` of that sample) to ``path`` as VCF 4.2
    text (``vcf_text``), BGZF-compressed as it is made (``compress``; ``outputs.bgzf``) or plain. No index: see
    ``tabix`` (preset "vcf") or ``write_sample_vcfs``."""
    table = (vcf_table(result, reference_fai=reference_fai, samples=samples, reference=reference)
             if own_calls_of is None else
             sample_vcf_table(result, own_calls_of, reference_fai=reference_fai, reference=reference))
    path = Path(path)
    if compress:
        with BgzfWriter(path) as out:
            for piece in vcf_text(table):
                out.write(piece.encode("utf-8"))
        return path
    with open(path, "w", encoding="utf-8", newline="") as fh:
        for piece in vcf_text(table):
            fh.write(piece)
    return path


def vcf_max_position(result, reference_fai=None, reference=None) -> int:
    """The largest contig length of the VCF (chooses its index: ``index_suffix``)."""
    return max(vcf_contigs(result, reference_fai, reference).values(), default=0)


def file_stem(sample) -> str:
    """A sample's name as part of a file name. A name with characters other than letters, digits, ``.``, ``_`` and
    ``-`` has them replaced by ``_`` and gets the first 8 hex digits of the SHA-256 of the name (UTF-8) appended,
    ``a_b-1a2b3c4d`` for ``a/b``: deterministic, and distinct from the stem of the sample named ``a_b`` and of
    ``a b`` (sample names are unique, so their files are)."""
    name = str(sample)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    if safe != name:
        import hashlib

        safe += "-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return safe


def sample_vcf_name(sample) -> str:
    """The file name of a sample's own VCF: ``cnvr.<sample>.vcf.gz`` (``file_stem``)."""
    return f"cnvr.{file_stem(sample)}.vcf.gz"


def write_sample_vcfs(result, outdir, reference_fai=None, samples=None, reference=None) -> list[Path]:
    """One bgzipped, indexed VCF per sample (``sample_vcf_name`` + .tbi/.csi under ``outdir``): that sample's own
    CNVs (``sample_vcf_table``). Returns the VCF paths. Needs pysam."""
    _need_pysam("write_sample_vcfs")
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    csi = index_suffix(vcf_max_position(result, reference_fai, reference)) == "csi"
    paths = []
    for s in (result.sample_names if samples is None else samples):
        path = outdir / sample_vcf_name(s)
        write_vcf(result, path, reference_fai=reference_fai, reference=reference, own_calls_of=s)
        tabix(path, "vcf", str(path) + (".csi" if csi else ".tbi"), csi=csi)
        paths.append(path)
    return paths
