"""``cleancnMOPS.sh`` (per-sample DEL/DUP calls merged across GFFs) and the ``CleanCNMops`` task of CNMOPS.wdl
(the batch's DEL/DUP BEDs), as GATK-SV's shell, bedtools and svtk make them in the C locale.

cleancnMOPS.sh: GFF records with CN < 2 are DEL, > 2 DUP (CN2 dropped), as ``chrom, start, end, sample``
(the GFF's start taken as a BED start); per sample (the SAMPLES list, in order) ``bedtools merge``, then
``bedtools subtract`` of SUBTRACT, sorted ``-V`` by chromosome then by position.
CleanCNMops: the per-sample files concatenated in the C-locale glob order of their paths and numbered in that
order (``<batch>_DEL_<n>``), sorted ``-k1,1V -k2,2n`` (ties by whole line), header, bgzip + tabix. The large
call (``stitch_and_clean_large_events``): ``svtk rdtest2vcf`` (POS = the BED start, at least 1; samples in the
ped only), ``stitch_fragmented_CNVs.sh -d`` (which does nothing: ``-d`` is not among its options, so the
EVIDENCE check selects no record), ``svtk vcf2bed`` (start = POS - 1), rows longer than ``min_size`` kept.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import numpy as np

from ..errors import InputError
from .files import bgzip, gzip_lines, write_text
from .intervals import by_chrom, merge, read_bed, subtract
from .shelltools import VersionKey, awk_key, awk_looks_numeric, awk_number, bash_read, line_key

HEADER = "#chr\tstart\tend\tname\tsample\tsvtype\tsources"
_SORT_N = re.compile(r"[ \t]*(-?(?:\d+\.?\d*|\.\d+)?)")


def _sort_n(field: str) -> float:
    """``sort -n``'s value of a key (C locale): leading blanks, sign, digits, decimal point; else 0."""
    m = _SORT_N.match(field)
    text = m.group(1) if m else ""
    return float(text) if text not in ("", "-") else 0.0


def _fields_with_blanks(line: str) -> list[str]:
    """sort's fields: each with the blanks before it (as ``-k N,N`` without ``-b`` sees it)."""
    return re.findall(r"[ \t]*[^ \t]+|[ \t]+$", line) or [""]


def sort_lines(lines: list[str], spec: str) -> list[str]:
    """``lines`` as ``sort`` orders them with a key list like "V n n V" (field k's rule: ``-kK,KV`` or
    ``-kK,Kn``), then by the whole line. A V field's texts are ranked once (equal ranks where ``sort -V`` finds
    them equal), not compared pair by pair."""
    rules = spec.split()
    fields = [_fields_with_blanks(line) for line in lines]
    texts = [[f[k] if k < len(f) else "" for f in fields] for k in range(len(rules))]
    keys = []
    for rule, column in zip(rules, texts):
        if rule == "V":
            rank, order = {}, sorted(set(column), key=VersionKey)
            for i, t in enumerate(order):
                rank[t] = rank[order[i - 1]] if i and VersionKey(t) == VersionKey(order[i - 1]) else i
            keys.append([rank[t] for t in column])
        else:
            keys.append([_sort_n(t) for t in column])
    return [line for *_, line in sorted(zip(*keys, [line_key(ln) for ln in lines], lines),
                                        key=lambda row: row[:-1])]


def gff_calls(paths, cnv: str) -> list[str]:
    """The DEL (CN < 2) or DUP (CN > 2) lines ``chrom<TAB>start<TAB>end<TAB>sample`` of cleancnMOPS.sh's master
    list, from the GFFs in order, sorted ``-Vk1,1 -k2,2n -k3,3n -k4,4``."""
    out = []
    for path in paths:
        text = Path(path).read_text(encoding="utf-8", errors="surrogateescape")
        for line in text.splitlines():
            if "#" in line:
                continue
            f = line.replace(";", "\t").replace("CN=CN", "").split()
            if len(f) < 9:
                continue
            last = f[-1]  # awk's $NF < 2 / > 2: as numbers when $NF looks like one, else as strings
            if awk_looks_numeric(last):
                chosen = awk_number(last) < 2 if cnv == "DEL" else awk_number(last) > 2
            else:
                chosen = last < "2" if cnv == "DEL" else last > "2"
            if chosen:
                out.append("\t".join([f[0], f[3], f[4], f[8]]).replace("sampleName=", ""))
    return sort_lines(out, "V n n V")


def calls_by_sample(master: list[str]) -> dict[tuple, list[tuple[str, str, str]]]:
    """The master list's (chrom, start, end), in its order, under the ``awk_key`` of each line's sample field: a
    sample's rows are those of its key (awk's ``$4 == sample``), found without reading the list once per sample."""
    out: dict[tuple, list] = {}
    for line in master:
        f = line.split()
        if len(f) >= 4:
            out.setdefault(awk_key(f[3]), []).append((f[0], f[1], f[2]))
    return out


def sample_calls(master: dict, sample: str, exclude: dict | None) -> list[str]:
    """One sample's merged (and, with ``exclude``, subtracted) calls as cleancnMOPS.sh writes them; ``master``:
    ``calls_by_sample`` of the master list; ``exclude``: ``intervals.by_chrom`` of the BED subtracted."""
    rows = master.get(awk_key(sample), [])
    merged = []
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j][0] == rows[i][0]:
            j += 1
        try:
            s = np.asarray([int(r[1]) for r in rows[i:j]], dtype=np.int64)
            e = np.asarray([int(r[2]) for r in rows[i:j]], dtype=np.int64)
        except ValueError:
            raise InputError(f"A call of sample {sample} has a position that is not a whole number.") from None
        ms, me = merge(s, e)
        merged += [(rows[i][0], a, b) for a, b in zip(ms.tolist(), me.tolist())]
        i = j
    if exclude is None:
        return [f"{c}\t{a}\t{b}\t{sample}" for c, a, b in merged]
    pieces = [f"{c}\t{a}\t{b}\t{sample}" for c, s0, e0 in merged for a, b in subtract(c, s0, e0, exclude)]
    return sort_lines(pieces, "V n n")


def clean_cnmops(samples: str | os.PathLike, gffs: str | os.PathLike, outdir: str | os.PathLike, *,
                 subtract_bed: str | os.PathLike | None = None, gz: bool = False) -> list[Path]:
    """cleancnMOPS.sh [-z] -o OUTDIR [-S SUBTRACT] SAMPLES GFFS: OUTDIR/<ID>/<ID>.cnMOPS.{DEL,DUP}.bed[.gz]."""
    ids = [bash_read(line) for line in Path(samples).read_text(encoding="utf-8").splitlines()]
    gff_paths = [bash_read(line) for line in Path(gffs).read_text(encoding="utf-8").splitlines()]
    return clean_samples(ids, gff_paths, outdir, subtract_bed=subtract_bed, gz=gz)


def clean_samples(ids: list[str], gff_paths: list[str], outdir: str | os.PathLike, *,
                  subtract_bed: str | os.PathLike | None = None, gz: bool = False) -> list[Path]:
    out = Path(outdir)
    out.mkdir(exist_ok=True)
    exclude = by_chrom(read_bed(subtract_bed)) if subtract_bed else None
    masters = {cnv: calls_by_sample(gff_calls(gff_paths, cnv)) for cnv in ("DEL", "DUP")}
    written = []
    for sample in ids:
        (out / sample).mkdir(exist_ok=True)
        for cnv in ("DEL", "DUP"):
            lines = sample_calls(masters[cnv], sample, exclude)
            path = out / sample / f"{sample}.cnMOPS.{cnv}.bed"
            if gz:
                path = gzip_lines(f"{path}.gz", lines)
            else:
                write_text(path, lines)
            written.append(path)
    return written


def _batch_rows(calls_dir: Path, ids: list[str], cnv: str, batch: str) -> list[str]:
    """``zcat calls/*/*.cnMOPS.<cnv>.bed.gz``, numbered by ``cat -n``, named, sorted ``-k1,1V -k2,2n``."""
    import gzip

    names = sorted({i for i in ids if i and not i.startswith(".") and "/" not in i},
                   key=lambda i: f"{calls_dir.name}/{i}/{i}.cnMOPS.{cnv}.bed.gz".encode("utf-8", "surrogateescape"))
    rows, n = [], 0
    for sample in names:
        with gzip.open(calls_dir / sample / f"{sample}.cnMOPS.{cnv}.bed.gz", "rt", encoding="utf-8",
                       errors="surrogateescape") as fh:
            for line in fh:
                f = line.split()
                n += 1
                rows.append("\t".join([f[0], f[1], f[2], f"{batch}_{cnv}_{n}", f[3], cnv, "cnmops"]))
    return sort_lines(rows, "V n")


def _large_rows(rows: list[str], ped_ids: list[str], contigs: set[str], min_size: int) -> list[str]:
    """rdtest2vcf -> stitch_fragmented_CNVs.sh -d (a copy) -> vcf2bed -> ``$3-$2 > min_size``."""
    header_samples = sorted(s.strip() for s in ped_ids)
    out = ["#chrom\tstart\tend\tname\tsamples\tsvtype\tcnmops_large"] if 0 > min_size else []
    for line in rows:
        chrom, start, end, name, samples, svtype = line.split()[:6]
        called = [s for s in header_samples if s in set(samples.split(","))]
        if not called:
            continue
        if chrom not in contigs:
            raise InputError(f"svtk rdtest2vcf: contig {chrom!r} of call {name} is in neither the chrom nor the allo "
                             "file.")
        pos, stop = max(int(start), 1), int(end)
        a, b = sorted((pos, stop))
        a = max(0, a - 1)
        if b - a > min_size:
            out.append("\t".join([chrom, str(a), str(b), name, ",".join(called), svtype.upper(), "cnmops_large"]))
    return out


def clean_batch(gffs: list[str | os.PathLike], ped: str | os.PathLike, exclude: str | os.PathLike, batch: str,
                prefix: str, outdir: str | os.PathLike, *, stitch: bool = False, min_size: int = 1000000,
                contig_files: tuple = ()) -> list[Path]:
    """The CleanCNMops task: ``gffs`` in the task's order (NR1, NR2, MR1, MR2, FR1, FR2); writes
    ``<batch>.DEL.<prefix>.bed.gz``, ``<batch>.DUP.<prefix>.bed.gz`` and their indexes in ``outdir`` (and the
    ``*.prestitch.bed`` files of the large call)."""
    from .matrix import ped_samples

    out = Path(outdir)
    ids = ped_samples(ped)
    contigs = set()
    for f in contig_files:
        for line in Path(f).read_text(encoding="utf-8").splitlines():
            if line.split():
                contigs.add(line.split()[0])
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        merged = Path(tmp) / "cnmops.gff1"
        lines = []
        for g in gffs:
            lines += [ln for ln in Path(g).read_text(encoding="utf-8", errors="surrogateescape").splitlines()
                      if "#" not in ln]
        write_text(merged, lines)
        calls = Path(tmp) / "calls"
        clean_samples([bash_read(i) for i in ids], [str(merged)], calls, subtract_bed=exclude, gz=True)
        written = []
        for cnv in ("DEL", "DUP"):
            rows = _batch_rows(calls, [bash_read(i) for i in ids], cnv, batch)
            final = out / f"{batch}.{cnv}.{prefix}.bed.gz"
            if stitch:
                write_text(out / f"{batch}.{cnv}.{prefix}.prestitch.bed", [HEADER] + rows)
                rows = _large_rows(rows, ids, contigs, min_size)
            written += [bgzip(final, [HEADER] + rows), Path(f"{final}.tbi")]
    return written


__all__ = ["HEADER", "gff_calls", "calls_by_sample", "sample_calls", "clean_cnmops", "clean_samples", "clean_batch"]
