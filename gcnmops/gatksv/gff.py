"""``export(cnvs(res), file, "GFF3")`` as rtracklayer 1.58.0 writes it, and the records of such a file back.

Header: ``##gff-version 3``, ``##source-version rtracklayer 1.58.0``, ``##date <day of the run>``. One record
per CNV, in cnvs order: seqid (URL-encoded but ``[a-zA-Z0-9.:^*$@!+_?|-]``), ``rtracklayer``,
``sequence_feature``, start, end, ``.`` (score), ``.`` (strand ``*``), ``.`` (phase), and the attributes
``sampleName=..;median=..;mean=..;CN=..`` (``as.character`` of each value, blanks trimmed, ``%\\t\\n\\r;=&,``
URL-encoded).
"""
from __future__ import annotations

import time

import pandas as pd

from ..exact.rformat import as_character

RTRACKLAYER_VERSION = "1.58.0"
_SEQID_KEEP = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:^*$@!+_?|-")
_ATTRIBUTE_CHARS = "%\t\n\r;=&,"


def _url_encode(values: list[str], bad: list[str]) -> list[str]:
    """rtracklayer's urlEncode: each bad character, in turn, replaced by '%' + the hex of the bytes of the bad
    characters pasted together (one byte per character, as R pairs them)."""
    codes = ["%" + format(b, "02x") for b in "".join(bad).encode("utf-8", "surrogateescape")]
    out = list(values)
    for ch, code in zip(bad, codes):
        out = [v.replace(ch, code) for v in out]
    return out


def _encode_seqids(names: list[str]) -> list[str]:
    bad = list(dict.fromkeys(c for n in names for c in n if c not in _SEQID_KEEP))
    return _url_encode(names, bad)


def _attribute(values: list[str]) -> list[str]:
    return _url_encode([v.strip(" ") for v in values], list(_ATTRIBUTE_CHARS))


def gff3_text(cnvs: pd.DataFrame, date: str | None = None) -> str:
    """The GFF3 file of a result's ``cnvs`` table (seqnames, start, end, sampleName, median, mean, CN).
    ``date``: the ``##date`` line's day (default today, local time, as R's Sys.time)."""
    date = date or time.strftime("%Y-%m-%d")
    lines = ["##gff-version 3", f"##source-version rtracklayer {RTRACKLAYER_VERSION}", f"##date {date}"]
    seqids = _encode_seqids([str(s) for s in cnvs["seqnames"]])
    names = _attribute([str(s) for s in cnvs["sampleName"]])
    medians = _attribute([as_character(float(v)) for v in cnvs["median"]])
    means = _attribute([as_character(float(v)) for v in cnvs["mean"]])
    cns = _attribute([str(v) for v in cnvs["CN"]])
    for seqid, start, end, name, median, mean, cn in zip(seqids, cnvs["start"], cnvs["end"], names, medians, means,
                                                         cns):
        lines.append(f"{seqid}\trtracklayer\tsequence_feature\t{int(start)}\t{int(end)}\t.\t.\t.\t"
                     f"sampleName={name};median={median};mean={mean};CN={cn}")
    return "\n".join(lines) + "\n"


__all__ = ["gff3_text", "RTRACKLAYER_VERSION"]
