"""outputs.bgzf: the files are BGZF that gzip, bgzip and htslib read back byte for byte."""
import gzip
import os
import shutil
import struct
import subprocess

import pytest

from gcnmops.outputs import bgzf


def _blocks(raw: bytes) -> list[tuple[int, int]]:
    """(compressed size, uncompressed size) of each BGZF block, read from the BC field and the footer."""
    out, at = [], 0
    while at < len(raw):
        assert raw[at:at + 4] == b"\x1f\x8b\x08\x04" and raw[at + 12:at + 14] == b"BC"
        size = struct.unpack_from("<H", raw, at + 16)[0] + 1
        out.append((size, struct.unpack_from("<I", raw, at + size - 4)[0]))
        at += size
    assert at == len(raw)
    return out


@pytest.mark.parametrize("size", [0, 1, bgzf.BLOCK_BYTES, bgzf.BLOCK_BYTES * 70 + 17])
def test_text_round_trips_in_blocks_of_at_most_block_bytes(tmp_path, size):
    text = b"".join(b"chr1\t%d\t%d\tcnv\n" % (i, i + 999) for i in range(size // 16 + 1))[:size]
    path = tmp_path / "t.gz"
    with bgzf.BgzfWriter(path, threads=3) as out:
        for a in range(0, len(text), 100_003):  # pieces that straddle blocks
            out.write(text[a:a + 100_003])
    raw = path.read_bytes()
    assert gzip.decompress(raw) == text
    blocks = _blocks(raw)
    assert raw.endswith(bgzf.EOF_BLOCK) and blocks[-1][1] == 0
    assert all(0 < n <= bgzf.BLOCK_BYTES for _, n in blocks[:-1]) and sum(n for _, n in blocks) == size


def test_incompressible_data_is_stored_within_a_block(tmp_path):
    data = os.urandom(bgzf.BLOCK_BYTES * 2 + 5)
    bgzf.bgzip_file(_write(tmp_path / "r.bin", data), tmp_path / "r.gz", threads=2)
    raw = (tmp_path / "r.gz").read_bytes()
    assert gzip.decompress(raw) == data and all(size <= 65536 for size, _ in _blocks(raw))


def test_htslib_reads_and_indexes_it(tmp_path):
    pysam = pytest.importorskip("pysam")
    lines = "".join(f"chr{c}\t{s}\t{s + 500}\tx\n" for c in (1, 2) for s in range(0, 3_000_000, 1000))
    bgzf.bgzip_file(_write(tmp_path / "a.bed", lines.encode()), tmp_path / "a.bed.gz")
    pysam.tabix_index(str(tmp_path / "a.bed.gz"), preset="bed", force=True)
    with pysam.TabixFile(str(tmp_path / "a.bed.gz")) as tbx:
        got = list(tbx.fetch("chr2", 1_000_000, 1_002_000))
    assert got == [f"chr2\t{s}\t{s + 500}\tx" for s in range(1_000_000, 1_002_000, 1000)]
    if shutil.which("bgzip"):
        assert subprocess.run(["bgzip", "-t", str(tmp_path / "a.bed.gz")]).returncode == 0


def _write(path, data: bytes):
    path.write_bytes(data)
    return path
