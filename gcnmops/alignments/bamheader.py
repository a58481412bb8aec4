"""The header of a BAM or CRAM file (its references: names, lengths) and where each reference's reads lie in
a BAM's ``.bai`` index; CRAM files (and ``engine="pysam"``) opened through pysam. The BGZF reading and the
record scanner are ``alignments.bam``'s.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError

_BAM_MAGIC = b"BAM\x01"
_BAI_MAGIC = b"BAI\x01"
_PSEUDO_BIN = 37450


@dataclass(frozen=True)
class BamHeader:
    """References (names, lengths, in header order) of a BAM file and its SAM header text."""

    path: str
    references: tuple[str, ...]
    lengths: tuple[int, ...]
    text: str = ""

    def targets(self) -> dict[str, int]:
        return dict(zip(self.references, self.lengths))


class HeaderParser:
    """Incremental parser of the binary BAM header (magic, text, references), fed inflated data."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.buf = bytearray()
        self.p = 0  # parse position
        self.text = None
        self.n_ref = None
        self.names: list[str] = []
        self.lengths: list[int] = []

    def feed(self, chunk: bytes) -> tuple[BamHeader, int] | None:
        """(header, offset of the first record in ``self.buf``) once complete, else None."""
        self.buf += chunk
        buf, path = self.buf, self.path
        if self.text is None:
            if len(buf) < 8:
                return None
            if buf[:4] != _BAM_MAGIC:
                raise InputError(f"{path} is not a BAM file (no BAM magic after decompression).")
            l_text = struct.unpack_from("<i", buf, 4)[0]
            if l_text < 0:
                raise InputError(f"{path}: damaged BAM header (negative text length).")
            if len(buf) < 8 + l_text:
                return None
            self.text = bytes(buf[8:8 + l_text]).split(b"\x00", 1)[0].decode("utf-8", "replace")
            self.p = 8 + l_text
        if self.n_ref is None:
            if len(buf) < self.p + 4:
                return None
            self.n_ref = struct.unpack_from("<i", buf, self.p)[0]
            if self.n_ref < 0:
                raise InputError(f"{path}: damaged BAM header (negative reference count).")
            self.p += 4
        p = self.p
        while len(self.names) < self.n_ref:
            if len(buf) < p + 4:
                break
            l_name = struct.unpack_from("<i", buf, p)[0]
            if l_name <= 0:
                raise InputError(f"{path}: damaged BAM header (reference name length {l_name}).")
            if len(buf) < p + 8 + l_name:
                break
            self.names.append(bytes(buf[p + 4:p + 4 + l_name]).rstrip(b"\x00").decode("ascii", "replace"))
            self.lengths.append(struct.unpack_from("<i", buf, p + 4 + l_name)[0])
            p += 8 + l_name
        self.p = p
        if len(self.names) < self.n_ref:
            return None
        return BamHeader(path, tuple(self.names), tuple(self.lengths), self.text), p

def is_cram(path: str | os.PathLike) -> bool:
    """True when the file starts with CRAM's magic bytes (whatever its name)."""
    with open(path, "rb") as fh:
        return fh.read(4) == b"CRAM"


def open_pysam(path: str | os.PathLike, reference: str | os.PathLike | None = None, n_threads: int = 1):
    """A pysam AlignmentFile of a BAM, or of a CRAM decoded against the FASTA ``reference``."""
    try:
        import pysam
    except ImportError:
        raise InputError("Reading CRAM files (and engine='pysam') needs pysam: pip install 'gcnmops[bam]'.") from None
    if reference is not None and not Path(reference).is_file():
        raise InputError(f"Reference FASTA not found: {reference}")
    quiet = pysam.set_verbosity(0)  # htslib's own messages (a missing optional index logged as an error) off
    try:
        if reference is None:
            mode, extra = "rb", {}
        else:
            try:
                pysam.FastaFile(str(reference)).close()  # makes the .fai where it is missing
            except (OSError, ValueError) as err:
                raise InputError(f"Cannot read the reference FASTA {reference}: {err} (a FASTA file, indexed with "
                                 "samtools faidx or in a writable folder).") from None
            mode, extra = "rc", {"reference_filename": str(reference)}
        try:
            return pysam.AlignmentFile(str(path), mode, threads=max(1, n_threads), check_sq=False, **extra)
        except (OSError, ValueError) as err:
            raise InputError(f"Cannot open {path} with pysam: {err}") from None
    finally:
        pysam.set_verbosity(quiet)


def read_cram_header(path: str | os.PathLike, reference: str | os.PathLike) -> BamHeader:
    """The reference names and lengths of a CRAM file (through pysam)."""
    with open_pysam(path, reference) as f:
        return BamHeader(str(path), tuple(f.references), tuple(int(n) for n in f.lengths), str(f.header))


def find_index(path: str | os.PathLike) -> Path | None:
    """``path.bai`` or ``path`` with ``.bam`` replaced by ``.bai``, whichever exists, else None."""
    p = Path(path)
    for cand in (Path(str(p) + ".bai"), p.with_suffix(".bai")):
        if cand.is_file():
            return cand
    return None


def read_bai_spans(index_path: Path, n_ref: int) -> list[tuple[int, int] | None] | None:
    """Per reference, the virtual-offset span (begin, end) of its reads from a .bai, None if it has
    none; None for the whole when the index cannot be used (damaged, other reference count)."""
    try:
        data = index_path.read_bytes()
        if data[:4] != _BAI_MAGIC:
            return None
        (n,) = struct.unpack_from("<i", data, 4)
        if n != n_ref:
            return None
        p = 8
        spans: list[tuple[int, int] | None] = []
        for _ in range(n):
            (n_bin,) = struct.unpack_from("<i", data, p)
            p += 4
            pseudo = None
            lo, hi = None, None
            for _ in range(n_bin):
                bin_id, n_chunk = struct.unpack_from("<Ii", data, p)
                p += 8
                chunks = np.frombuffer(data, dtype="<u8", count=2 * n_chunk, offset=p).reshape(-1, 2)
                p += 16 * n_chunk
                if bin_id == _PSEUDO_BIN:
                    if n_chunk >= 1:
                        pseudo = (int(chunks[0, 0]), int(chunks[0, 1]))
                    continue
                if n_chunk:
                    c_lo, c_hi = int(chunks[:, 0].min()), int(chunks[:, 1].max())
                    lo = c_lo if lo is None else min(lo, c_lo)
                    hi = c_hi if hi is None else max(hi, c_hi)
            (n_intv,) = struct.unpack_from("<i", data, p)
            p += 4 + 8 * n_intv
            spans.append(pseudo if pseudo is not None else (None if lo is None else (lo, hi)))
        return spans
    except (OSError, struct.error, ValueError):
        return None
