"""Writers of a CNVDetectionResult: TSV tables and matrices, BED, VCF 4.3, IGV SEG.

Every file is written to a temporary name in the output folder and renamed when complete, so a
failed run never leaves a half-written file under a final name.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

FORMATS = ("tsv", "bed", "vcf", "seg")
_CN_NUMBER = re.compile(r"^CN(\d+)$")


def atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path`` and rename it to ``path`` on success."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _write_table(path: Path, frame: pd.DataFrame) -> Path:
    return atomic_write(path, lambda tmp: frame.to_csv(tmp, sep="\t", index=False, na_rep="NA",
                                                       float_format="%.17g"))


def write_result(result, outdir, formats=None) -> list[Path]:
    """Write ``result`` under ``outdir`` (created if needed) in ``formats`` (default: all); returns paths."""
    formats = FORMATS if formats is None else tuple(formats)
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"unknown output format(s) {unknown}; choose from {list(FORMATS)}")
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    if "tsv" in formats:
        written += _write_tsv(result, outdir)
    if "bed" in formats:
        written.append(atomic_write(outdir / "cnvs.bed", lambda t: _bed_cnvs(result.cnvs, t)))
        written.append(atomic_write(outdir / "cnvr.bed", lambda t: _bed_cnvr(result, t)))
    if "vcf" in formats:
        written.append(atomic_write(outdir / "cnvr.vcf", lambda t: t.write_text(vcf_text(result))))
    if "seg" in formats:
        written.append(_write_table(outdir / "segmentation.seg", seg_table(result)))
    return written


def _write_tsv(result, outdir: Path) -> list[Path]:
    gr = result.gr
    out = []
    for name, matrix in (("normalized_data", result.normalized_data),
                         ("local_assessments", result.local_assessments),
                         ("individual_call", result.individual_call),
                         ("integer_copy_number", result.integer_copy_number)):
        frame = pd.concat([gr, pd.DataFrame(matrix, columns=result.sample_names)], axis=1)
        out.append(_write_table(outdir / f"{name}.tsv", frame))
    out.append(_write_table(outdir / "ini_call.tsv", gr.assign(ini_call=result.ini_call)))
    for key in ("L", "A"):
        frame = pd.concat([gr, pd.DataFrame(result.params[key], columns=result.classes)], axis=1)
        out.append(_write_table(outdir / f"params_{key}.tsv", frame))
    for name in ("segmentation", "cnvs", "cnvr"):
        out.append(_write_table(outdir / f"{name}.tsv", getattr(result, name)))
    scalars = {k: v for k, v in result.params.items() if k not in ("L", "A", "cov")}
    scalars["cov"] = dict(zip(result.sample_names, np.asarray(result.params["cov"], float).tolist()))
    scalars["sampleNames"] = result.sample_names
    out.append(atomic_write(outdir / "params.json", lambda t: t.write_text(json.dumps(scalars, indent=1))))
    return out


def _cn_integer(label) -> int | None:
    m = _CN_NUMBER.match(str(label)) if label is not None else None
    return int(m.group(1)) if m else None


def _bed_cnvs(cnvs: pd.DataFrame, path: Path) -> None:
    """BED6+: chrom, 0-based start, end, name (sample), score (0), strand (.), mean, median, CN."""
    frame = pd.DataFrame({
        "chrom": cnvs["seqnames"], "chromStart": cnvs["start"] - 1, "chromEnd": cnvs["end"],
        "name": cnvs["sampleName"], "score": 0, "strand": ".", "mean": cnvs["mean"], "median": cnvs["median"],
        "CN": cnvs["CN"].map(lambda v: "NA" if v is None else v),
    })
    frame.to_csv(path, sep="\t", index=False, header=False, float_format="%.6g")


def _bed_cnvr(result, path: Path) -> None:
    """BED4: chrom, 0-based start, end, name = samples with a CNV call there (comma separated)."""
    cnvr = result.cnvr
    names = []
    for _, row in cnvr.iterrows():
        hit = result.cnvs[(result.cnvs["seqnames"] == row["seqnames"]) & (result.cnvs["start"] <= row["end"])
                          & (result.cnvs["end"] >= row["start"])]
        names.append(",".join(dict.fromkeys(hit["sampleName"])) or ".")
    frame = pd.DataFrame({"chrom": cnvr["seqnames"], "chromStart": cnvr["start"] - 1, "chromEnd": cnvr["end"],
                          "name": names})
    frame.to_csv(path, sep="\t", index=False, header=False)


def vcf_text(result) -> str:
    """VCF 4.3: one record per CNV region; ALT <DEL>/<DUP> (<CNV> when both occur); FORMAT CN."""
    main = _cn_integer(result.params["mainClass"])
    lines = [
        "##fileformat=VCFv4.3",
        f"##source=gcnmops ({result.params['method']} {result.params['version']} semantics)",
        '##INFO=<ID=SVTYPE,Number=1,Type=String,Description="Type of structural variant">',
        '##INFO=<ID=END,Number=1,Type=Integer,Description="End position of the variant (1-based, closed)">',
        '##INFO=<ID=SVLEN,Number=1,Type=Integer,Description="Length of the CNV region in bp">',
        '##ALT=<ID=DEL,Description="Deletion (copy number below normal)">',
        '##ALT=<ID=DUP,Description="Duplication (copy number above normal)">',
        '##ALT=<ID=CNV,Description="Copy number variable region (losses and gains)">',
        '##FORMAT=<ID=CN,Number=1,Type=Integer,Description="Integer copy number">',
    ]
    for chrom in dict.fromkeys(result.gr["seqnames"]):
        lines.append(f"##contig=<ID={chrom}>")
    lines.append("\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT",
                            *result.sample_names]))
    cnvs = result.cnvs
    for i, row in result.cnvr.reset_index(drop=True).iterrows():
        cns = [_cn_integer(row[s]) for s in result.sample_names]
        hit = cnvs[(cnvs["seqnames"] == row["seqnames"]) & (cnvs["start"] <= row["end"])
                   & (cnvs["end"] >= row["start"])]
        known = [c for c in cns if c is not None]
        if known and main is not None:
            loss, gain = any(c < main for c in known), any(c > main for c in known)
        else:  # before integer copy numbers: the sign of the CNVs' sINI means
            loss, gain = bool((hit["mean"] < 0).any()), bool((hit["mean"] > 0).any())
        svtype = "CNV" if loss == gain else ("DEL" if loss else "DUP")
        length = int(row["end"]) - int(row["start"]) + 1
        info = f"SVTYPE={svtype};END={int(row['end'])};SVLEN={-length if svtype == 'DEL' else length}"
        samples = ["." if c is None else str(c) for c in cns]
        lines.append("\t".join([str(row["seqnames"]), str(int(row["start"])), f"cnvr{i + 1}", "N", f"<{svtype}>",
                                ".", "PASS", info, "CN", *samples]))
    return "\n".join(lines) + "\n"


def seg_table(result) -> pd.DataFrame:
    """IGV SEG: ID, chrom, loc.start, loc.end, num.mark, seg.mean (segment means of sINI)."""
    seg = result.segmentation
    gr = result.gr
    num = np.zeros(len(seg), dtype=np.int64)
    for chrom, idx in seg.groupby("seqnames", sort=False).indices.items():
        starts = np.sort(gr["start"].to_numpy()[gr["seqnames"].to_numpy() == chrom])
        s = seg["start"].to_numpy()[idx]
        e = seg["end"].to_numpy()[idx]
        num[idx] = np.searchsorted(starts, e, side="right") - np.searchsorted(starts, s, side="left")
    return pd.DataFrame({"ID": seg["sampleName"], "chrom": seg["seqnames"], "loc.start": seg["start"],
                         "loc.end": seg["end"], "num.mark": num, "seg.mean": seg["mean"]})
