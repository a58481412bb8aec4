"""The call files that genome tools load: BED (cnvs.bed, cnvr.bed), VCF (cnvr.vcf) and IGV SEG
(segmentation.seg), as tables or text from a CNVDetectionResult (the writers put them on disk).
"""
from __future__ import annotations

import datetime
import re

import numpy as np
import pandas as pd

_CN_LABEL = re.compile(r"^CN(\d+(?:\.\d*)?)$")
_RGB = {"loss": "200,0,0", "gain": "0,0,200", None: "128,128,128"}


# -------------------------------------------------------------------------------------------------
# shared geometry: order of chromosomes, CNVs per CNV region
# -------------------------------------------------------------------------------------------------

def _chrom_rank(result, seqnames) -> np.ndarray:
    """Rank of each name among the chromosomes of ``result.gr`` (order of first appearance)."""
    order = pd.Index(pd.unique(result.gr["seqnames"].astype(str)))
    rank = order.get_indexer(pd.Series(seqnames, dtype=object).astype(str))
    rank[rank < 0] = len(order)  # not in gr (should not happen): last
    return rank


def _sorted_positions(result, frame: pd.DataFrame) -> np.ndarray:
    """Row order by chromosome (gr's order), start, end; stable."""
    if len(frame) == 0:
        return np.arange(0)
    rank = _chrom_rank(result, frame["seqnames"])
    return np.lexsort((frame["end"].to_numpy(), frame["start"].to_numpy(), rank))


def _cnv_region_pairs(cnvr: pd.DataFrame, cnvs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(region, cnv) index pairs of every CNV region and CNV that overlap (same chromosome)."""
    regions, cnv_idx = [], []
    r_chrom = cnvr["seqnames"].astype(str).to_numpy()
    c_chrom = cnvs["seqnames"].astype(str).to_numpy()
    r_start, r_end = cnvr["start"].to_numpy(np.int64), cnvr["end"].to_numpy(np.int64)
    c_start, c_end = cnvs["start"].to_numpy(np.int64), cnvs["end"].to_numpy(np.int64)
    for name in pd.unique(r_chrom):
        ri = np.flatnonzero(r_chrom == name)
        ci = np.flatnonzero(c_chrom == name)
        if ci.size == 0:
            continue
        ri = ri[np.argsort(r_start[ri], kind="stable")]
        starts, ends = r_start[ri], np.maximum.accumulate(r_end[ri])
        # regions [lo, hi) that may overlap each CNV: start <= cnv end, running max end >= cnv start
        lo = np.searchsorted(ends, c_start[ci], side="left")
        hi = np.searchsorted(starts, c_end[ci], side="right")
        n = np.maximum(hi - lo, 0)
        if n.sum() == 0:
            continue
        cand_c = np.repeat(ci, n)
        cand_r = ri[np.repeat(lo, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))]
        hit = (r_start[cand_r] <= c_end[cand_c]) & (r_end[cand_r] >= c_start[cand_c])
        regions.append(cand_r[hit])
        cnv_idx.append(cand_c[hit])
    if not regions:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(regions), np.concatenate(cnv_idx)


# -------------------------------------------------------------------------------------------------
# BED
# -------------------------------------------------------------------------------------------------

def _cn_value(label) -> float | None:
    if label is None or (isinstance(label, float) and np.isnan(label)):
        return None
    m = _CN_LABEL.match(str(label))
    return float(m.group(1)) if m else None


def _main_cn(result) -> float | None:
    return _cn_value(result.params.get("mainClass"))


def _direction(cn: float | None, mean: float, main: float | None) -> str | None:
    """"loss"/"gain" from the copy number when known and not normal, else from the sign of the mean."""
    if cn is not None and main is not None and cn != main:
        return "loss" if cn < main else "gain"
    if cn is None and np.isfinite(mean) and mean != 0:
        return "loss" if mean < 0 else "gain"
    return None


def bed_cnvs(result) -> pd.DataFrame:
    """BED9+3 rows of the CNVs, sorted for tabix."""
    cnvs = result.cnvs.iloc[_sorted_positions(result, result.cnvs)].reset_index(drop=True)
    main = _main_cn(result)
    stat = "median" if result.params.get("useMedian", False) else "mean"
    rgb = [_RGB[_direction(_cn_value(c), float(v), main)] for c, v in zip(cnvs["CN"], cnvs[stat])]
    start0 = cnvs["start"].to_numpy(np.int64) - 1
    end = cnvs["end"].to_numpy(np.int64)
    return pd.DataFrame({
        "chrom": cnvs["seqnames"].astype(str), "chromStart": start0, "chromEnd": end,
        "name": cnvs["sampleName"].astype(str), "score": np.zeros(len(cnvs), np.int64), "strand": ".",
        "thickStart": start0, "thickEnd": end, "itemRgb": rgb,
        "mean": cnvs["mean"].to_numpy(float), "median": cnvs["median"].to_numpy(float), "CN": cnvs["CN"],
    })


def bed_cnvr(result) -> pd.DataFrame:
    """BED4 rows of the CNV regions (name: the samples with a CNV overlapping it), sorted for tabix."""
    cnvr = result.cnvr.reset_index(drop=True)
    region, cnv = _cnv_region_pairs(cnvr, result.cnvs)
    sample_rank = pd.Index(result.sample_names).get_indexer(result.cnvs["sampleName"].to_numpy()[cnv])
    order = np.lexsort((sample_rank, region))
    region, cnv = region[order], cnv[order]
    names = np.full(len(cnvr), ".", dtype=object)
    sample = result.cnvs["sampleName"].astype(str).to_numpy()
    for r, idx in pd.Series(np.arange(region.size)).groupby(region).indices.items():
        names[r] = ",".join(dict.fromkeys(sample[cnv[idx]]))
    order = _sorted_positions(result, cnvr)
    cnvr = cnvr.iloc[order]
    return pd.DataFrame({"chrom": cnvr["seqnames"].astype(str).to_numpy(),
                         "chromStart": cnvr["start"].to_numpy(np.int64) - 1,
                         "chromEnd": cnvr["end"].to_numpy(np.int64), "name": names[order]})


# -------------------------------------------------------------------------------------------------
# VCF 4.3
# -------------------------------------------------------------------------------------------------

def vcf_text(result) -> str:
    """VCF 4.3: one record per CNV region, sorted by chromosome (gr's order) and position.

    A region [start, end] is written as VCF writes symbolic structural variants: POS = start - 1 (the
    base before the event; 0 for a region at the start of a chromosome, VCF's telomere position), END =
    end, SVLEN = +-(end - start + 1) = +-(END - POS), so htslib/pysam give the record the span of the
    region. REF = N; ALT <DEL> (every known copy number below normal), <DUP> (above) or <CNV> (both, or
    unknown); INFO SVTYPE, END, SVLEN (negative for deletions), IMPRECISE; FORMAT CN, the integer copy
    number of each sample (``.`` before integer copy numbers). Regions labelled by
    calcFractionalCopyNumbers ("CN2.4") get FORMAT FCN (Float) instead. Before integer copy numbers the
    direction comes from the sign of the sINI means of the CNVs inside the region.
    """
    main = _main_cn(result)
    samples = list(result.sample_names)
    cnvr = result.cnvr.reset_index(drop=True)
    k = len(cnvr)
    labels = cnvr[samples].to_numpy(dtype=object).ravel() if k else np.zeros(0, dtype=object)
    codes, uniques = pd.factorize(pd.Series(labels, dtype=object), use_na_sentinel=True)
    u_val = [_cn_value(u) for u in uniques]
    fractional = any("." in str(u) for u, v in zip(uniques, u_val) if v is not None)
    key = "FCN" if fractional else "CN"
    u_num = np.array([np.nan if v is None else v for v in u_val] + [np.nan], dtype=np.float64)
    u_txt = np.array(["." if v is None else _vcf_number(v, fractional) for v in u_val] + ["."], dtype=object)
    codes = np.where(codes < 0, len(u_val), codes)
    values = u_num[codes].reshape(k, len(samples))
    cells = u_txt[codes].reshape(k, len(samples))
    known = ~np.isnan(values)
    if main is not None:
        loss_cn, gain_cn = (values < main).any(axis=1), (values > main).any(axis=1)
    else:
        loss_cn = gain_cn = np.zeros(k, dtype=bool)
    use_cn = known.any(axis=1) & (main is not None)

    # direction of the CNVs in each region (used where no copy number is known)
    region, cnv = _cnv_region_pairs(cnvr, result.cnvs)
    stat = "median" if result.params.get("useMedian", False) else "mean"
    signs = result.cnvs[stat].to_numpy(float)[cnv] if cnv.size else np.zeros(0)
    neg = np.bincount(region[signs < 0], minlength=k) > 0 if region.size else np.zeros(k, bool)
    pos = np.bincount(region[signs > 0], minlength=k) > 0 if region.size else np.zeros(k, bool)
    loss = np.where(use_cn, loss_cn, neg)
    gain = np.where(use_cn, gain_cn, pos)

    lines = [
        "##fileformat=VCFv4.3",
        f"##fileDate={datetime.date.today():%Y%m%d}",
        f"##source=gcnmops ({result.params.get('method', 'cn.mops')} {result.params.get('version', '')} semantics)",
        '##INFO=<ID=SVTYPE,Number=1,Type=String,Description="Type of structural variant">',
        '##INFO=<ID=END,Number=1,Type=Integer,Description="End position of the variant described in this record">',
        '##INFO=<ID=SVLEN,Number=1,Type=Integer,Description="Difference in length between REF and ALT alleles '
        '(length of the CNV region; negative for deletions)">',
        '##INFO=<ID=IMPRECISE,Number=0,Type=Flag,Description="Imprecise structural variation">',
        "##gcnmops_coordinates=POS is the base before each CNV region (VCF's padding base for symbolic "
        "alleles); the region spans POS+1..END",
        '##ALT=<ID=DEL,Description="Deletion">',
        '##ALT=<ID=DUP,Description="Duplication">',
        '##ALT=<ID=CNV,Description="Copy number variable region">',
    ]
    if fractional:
        lines.append('##FORMAT=<ID=FCN,Number=1,Type=Float,Description="Fractional copy number '
                     '(calcFractionalCopyNumbers)">')
    else:
        lines.append('##FORMAT=<ID=CN,Number=1,Type=Integer,Description="Copy number genotype for imprecise events">')
    for chrom in pd.unique(result.gr["seqnames"].astype(str)):
        lines.append(f"##contig=<ID={chrom}>")
    lines.append("\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *samples]))
    chrom = cnvr["seqnames"].astype(str).to_numpy() if k else np.zeros(0, dtype=object)
    start = cnvr["start"].to_numpy(np.int64) if k else np.zeros(0, np.int64)
    end = cnvr["end"].to_numpy(np.int64) if k else np.zeros(0, np.int64)
    for i in _sorted_positions(result, cnvr):
        svtype = "CNV" if loss[i] == gain[i] else ("DEL" if loss[i] else "DUP")
        length = int(end[i] - start[i] + 1)
        info = f"SVTYPE={svtype};END={int(end[i])};SVLEN={-length if svtype == 'DEL' else length};IMPRECISE"
        fixed = f"{chrom[i]}\t{int(start[i]) - 1}\tcnvr{i + 1}\tN\t<{svtype}>\t.\tPASS\t{info}\t{key}\t"
        lines.append(fixed + "\t".join(cells[i]))
    return "\n".join(lines) + "\n"


def _vcf_number(value: float, fractional: bool) -> str:
    return repr(float(value)) if fractional else str(int(value))


# -------------------------------------------------------------------------------------------------
# IGV SEG
# -------------------------------------------------------------------------------------------------

def seg_table(result) -> pd.DataFrame:
    """IGV SEG: ID, chrom, loc.start, loc.end, num.mark, seg.mean (segment means of sINI), ordered by
    sample (result's order), chromosome (gr's order), start."""
    seg = result.segmentation.reset_index(drop=True)
    gr = result.gr
    num = np.zeros(len(seg), dtype=np.int64)
    gr_chrom = gr["seqnames"].astype(str).to_numpy()
    seg_chrom = seg["seqnames"].astype(str).to_numpy()
    for chrom in pd.unique(seg_chrom):
        idx = np.flatnonzero(seg_chrom == chrom)
        on = gr_chrom == chrom
        starts = np.sort(gr["start"].to_numpy()[on])
        ends = np.sort(gr["end"].to_numpy()[on])
        s = seg["start"].to_numpy()[idx]
        e = seg["end"].to_numpy()[idx]
        # regions overlapping [s, e]: start <= e and end >= s (regions of a chromosome do not nest)
        num[idx] = np.searchsorted(starts, e, side="right") - np.searchsorted(ends, s, side="left")
    if len(seg):
        sample_rank = pd.Index(result.sample_names).get_indexer(seg["sampleName"].to_numpy())
        order = np.lexsort((seg["start"].to_numpy(), _chrom_rank(result, seg_chrom), sample_rank))
    else:
        order = np.arange(0)
    seg, num = seg.iloc[order], num[order]
    return pd.DataFrame({"ID": seg["sampleName"].astype(str).to_numpy(),
                         "chrom": seg["seqnames"].astype(str).to_numpy(), "loc.start": seg["start"].to_numpy(np.int64), "loc.end": seg["end"].to_numpy(np.int64),
                         "num.mark": num, "seg.mean": seg["mean"].to_numpy(float)})
