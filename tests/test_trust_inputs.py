"""Inputs that read as a different answer at exit 0 unless refused (issue 34): each class through the one
validation layer every reader goes through (``data.make_count_data`` / ``check_names`` for names and regions,
``io.columns`` for columns, ``io.store.check_zarr_counts`` for stores, ``casemode.reference`` for references),
asserting the clear error: InputError through the API, ``error:`` + exit 2 and nothing written through the CLI;
plus a small fuzz of stores and archives. Each repaired input gives the clean input's answer."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gcnmops
from gcnmops.cli import main
from gcnmops.errors import InputError
from gcnmops.io import read_counts

pysam = pytest.importorskip("pysam")


def _frame(m: int = 60, n: int = 4, seed: int = 5, chroms=("chr1", "chr2")) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    per = m // len(chroms)
    df = pd.DataFrame({"seqnames": np.repeat(list(chroms), per),
                       "start": np.tile(np.arange(per) * 1000 + 1, len(chroms)),
                       "end": np.tile(np.arange(1, per + 1) * 1000, len(chroms))})
    for k in range(n):
        df[f"S{k + 1}"] = rng.poisson(60, len(df))
    return df


def _cli_refuses(args, out: Path, capsys, *words) -> str:
    """The command line: exit 2, stderr 'error: ...' with ``words``, no traceback, nothing written to ``out``."""
    assert main([*args, "--quiet", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())
    return err


def _run(path, out: Path) -> pd.DataFrame:
    assert main(["run", str(path), "--backend", "cpu", "--quiet", "--formats", "bed", "-o", str(out)]) == 0
    return pd.read_csv(out / "cnvs.tsv", sep="\t")


# ------------------------------------------------------------------------------------------ names
@pytest.mark.parametrize("name", ["chr<1>", "*", "#1", "chr\u00e41", "chr1,alt", "=1", "chr 1", "chr1[2]"])
def test_chromosome_names_no_output_can_hold_are_refused(name, tmp_path, capsys):
    df = _frame(chroms=("chr9", name))
    with pytest.raises(InputError, match="Chromosome name.*VCF"):
        read_counts(df.copy())
    path = tmp_path / "c.tsv"
    df.to_csv(path, sep="\t", index=False)
    _cli_refuses(["run", str(path)], tmp_path / "o", capsys, "Chromosome name", "VCF")


def test_valid_contig_names_pass():
    for name in ("chrUn_gl000220.1", "HLA-A*01:01", "chrM", "1", "chr1:100-200", "NC_000001.11"):
        assert read_counts(_frame(chroms=("chr9", name))).chromosomes[-1] == name


# ------------------------------------------------------------------------------------------ cells and columns
def test_nul_byte_in_a_count_is_refused(tmp_path, capsys):
    text = _frame().to_csv(sep="\t", index=False)
    lines = text.splitlines()
    lines[3] = lines[3].rsplit("\t", 1)[0] + "\t6\x002"
    for name, opener in (("c.tsv", open), ("c.tsv.gz", __import__("gzip").open)):
        path = tmp_path / name
        with opener(path, "wt") as fh:
            fh.write("\n".join(lines) + "\n")
        with pytest.raises(InputError, match="NUL byte"):
            read_counts(path)
        _cli_refuses(["run", str(path)], tmp_path / "o", capsys, "NUL byte")
        from gcnmops.io.readers import read_count_parts
        with pytest.raises(InputError, match="NUL byte"):
            list(read_count_parts(path))


def test_columns_found_by_name_and_value_in_any_order(tmp_path):
    df = _frame()
    clean = read_counts(df.copy())
    # a sample called width and one called strand: counts, whatever the column order
    named = df.rename(columns={"S2": "width", "S3": "strand"})
    shuffled = named[["S4", "end", "width", "seqnames", "strand", "S1", "start"]]
    got = read_counts(shuffled)
    assert sorted(got.sample_names) == ["S1", "S4", "strand", "width"]
    for old, new in (("S1", "S1"), ("S2", "width"), ("S3", "strand"), ("S4", "S4")):
        np.testing.assert_array_equal(got.counts[:, got.sample_names.index(new)],
                                      clean.counts[:, clean.sample_names.index(old)])
    pd.testing.assert_frame_equal(got.genomic_ranges(), clean.genomic_ranges())
    # as.data.frame(<GRanges>)'s width and strand columns are the regions', dropped
    gr = df.copy()
    gr.insert(3, "width", gr["end"] - gr["start"] + 1)
    gr.insert(4, "strand", "*")
    back = read_counts(gr)
    assert back.sample_names == clean.sample_names
    np.testing.assert_array_equal(back.counts, clean.counts)
    path = tmp_path / "w.tsv"
    named.to_csv(path, sep="\t", index=False)
    assert read_counts(path).n_samples == 4


def test_parquet_coordinates_in_the_index(tmp_path):
    df = _frame()
    clean = read_counts(df.copy())
    path = tmp_path / "i.parquet"
    df.set_index(["seqnames", "start", "end"]).to_parquet(path)
    for data in (read_counts(path),):
        pd.testing.assert_frame_equal(data.genomic_ranges(), clean.genomic_ranges())
        np.testing.assert_array_equal(data.counts, clean.counts)
        assert data.sample_names == clean.sample_names
    from gcnmops.io.readers import read_count_parts
    parts = [d for d, _ in read_count_parts(path, rows=7)]
    assert pd.concat([p.genomic_ranges() for p in parts], ignore_index=True).equals(clean.genomic_ranges())
    assert all(p.sample_names == clean.sample_names for p in parts)
    plain = tmp_path / "p.parquet"
    df.to_parquet(plain, index=False)
    whole = _run(plain, tmp_path / "a")
    pd.testing.assert_frame_equal(_run(path, tmp_path / "b"), whole)
    assert main(["run", str(path), "--stream", "--backend", "cpu", "--quiet", "--formats", "bed",
                 "-o", str(tmp_path / "s")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "s" / "cnvs.tsv", sep="\t"), whole)


# ------------------------------------------------------------------------------------------ BAM and CRAM
_CONTIGS = [("chrA", 60000), ("chrB", 45000), ("chrC", 30000)]


@pytest.fixture(scope="module")
def alignments(tmp_path_factory):
    """(folder, FASTA, sorted indexed BAM, indexed CRAM, read starts by contig) of reads on three contigs."""
    d = tmp_path_factory.mktemp("aln")
    rng = np.random.default_rng(11)
    fasta = d / "ref.fa"
    fasta.write_text("".join(f">{n}\n" + "".join(rng.choice(list("ACGT"), L)) + "\n" for n, L in _CONTIGS))
    pysam.faidx(str(fasta))
    header = {"HD": {"VN": "1.6", "SO": "coordinate"}, "SQ": [{"SN": n, "LN": L} for n, L in _CONTIGS]}
    bam = d / "s1.bam"
    starts = {}
    with pysam.AlignmentFile(str(bam), "wb", header=header) as out:
        for rid, (name, length) in enumerate(_CONTIGS):
            pos = np.sort(rng.integers(0, length - 100, 1000))
            starts[name] = pos
            for k, p in enumerate(pos):
                a = pysam.AlignedSegment()
                a.query_name, a.reference_id, a.reference_start = f"{name}_{k}", rid, int(p)
                a.query_sequence, a.cigarstring, a.mapping_quality, a.flag = "A" * 50, "50M", 30, 0
                a.query_qualities = pysam.qualitystring_to_array("I" * 50)
                out.write(a)
    pysam.index(str(bam))
    cram = d / "s2.cram"
    with pysam.AlignmentFile(str(bam)) as src, \
            pysam.AlignmentFile(str(cram), "wc", template=src, reference_filename=str(fasta)) as out:
        for read in src.fetch(until_eof=True):
            out.write(read)
    pysam.index(str(cram))
    return d, fasta, bam, cram, starts


def test_cram_counts_every_contig_as_pysam_reads_it(alignments):
    from gcnmops.alignments.counting import count_reads

    d, fasta, bam, cram, starts = alignments
    with pysam.AlignmentFile(str(cram), reference_filename=str(fasta)) as f:  # pysam itself, one contig a time
        assert f.has_index()
        by_pysam = {n: sum(1 for _ in f.fetch(n)) for n, _ in _CONTIGS}
    assert by_pysam == {n: 1000 for n, _ in _CONTIGS}
    window = 5000
    data = count_reads([bam, cram], window=window, reference=fasta, progress=False)
    assert data.sample_names == ["s1", "s2"]
    np.testing.assert_array_equal(data.counts[:, 0], data.counts[:, 1])
    for name, _ in _CONTIGS:
        rows = data.chromosomes == name
        assert data.counts[rows, 1].sum() == 1000, name
        expect = np.bincount(starts[name] // window, minlength=rows.sum())[:rows.sum()]
        np.testing.assert_array_equal(data.counts[rows, 1], expect)
    one = count_reads([cram, cram], sample_names=["a", "b"], ref_seq_names=["chrC", "chrA"], window=window,
                      reference=fasta, progress=False)
    assert list(pd.unique(one.chromosomes)) == ["chrC", "chrA"] and one.counts[:, 0].sum() == 2000


def test_truncated_bgzf_is_refused(alignments, tmp_path, capsys):
    from gcnmops.alignments.bam import _BGZF_EOF, inflate_bgzf
    from gcnmops.alignments.counting import count_reads

    d, fasta, bam, cram, _ = alignments
    raw = bam.read_bytes()
    assert raw.endswith(_BGZF_EOF)
    cut = tmp_path / "cut.bam"
    cut.write_bytes(raw[:-len(_BGZF_EOF)])  # at a block boundary: every block whole
    for engine in ("native", "pysam"):
        with pytest.raises(InputError, match="truncated|EOF"):
            count_reads([bam, cut], window=5000, engine=engine, progress=False)
    shutil.copy(str(bam) + ".bai", str(cut) + ".bai")
    with pytest.raises(InputError, match="EOF"):
        count_reads([bam, cut], ref_seq_names=["chrB"], window=5000, progress=False)
    with pytest.raises(InputError, match="EOF"):
        list(inflate_bgzf(cut))
    out = tmp_path / "c.tsv"
    assert main(["count", str(bam), str(cut), "--window", "5000", "--quiet", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "EOF" in err and not out.exists()


# ------------------------------------------------------------------------------------------ count stores
@pytest.fixture()
def store(tmp_path):
    """(a count store of 3,000 regions x 6 samples in 3 x 2 chunks, the CountData it holds)."""
    from gcnmops.io.store import save_count_data

    df = _frame(m=3000, n=6, seed=9, chroms=("chr1", "chr2", "chr3"))
    data = read_counts(df)
    path = save_count_data(data, tmp_path / "c.zarr", rows_per_chunk=1000, samples_per_chunk=3)
    return path, data


def _edit_zarray(path: Path, **changes) -> None:
    meta = path / "counts" / ".zarray"
    z = json.loads(meta.read_text())
    z.update(changes)
    meta.write_text(json.dumps(z))


def _store_refused(path: Path, capsys, tmp_path, *words) -> None:
    from gcnmops.distributed.store import open_matrix
    from gcnmops.io.store import open_count_store

    for opener in (open_count_store, open_matrix):  # the CLI and streaming path; the Dask path
        with pytest.raises(InputError) as e:
            opener(path)
        for w in words:
            assert w in str(e.value), str(e.value)
    _cli_refuses(["run", str(path), "--backend", "cpu"], tmp_path / "o", capsys, *words)


def test_store_with_a_missing_chunk_is_refused(store, tmp_path, capsys):
    from gcnmops.io.store import open_count_store

    path, data = store
    assert open_count_store(path).shape == data.counts.shape
    (path / "counts" / "1.1").unlink()
    _store_refused(path, capsys, tmp_path, "lacks 1 of the 6 chunks", "rows 1001-2000, samples 4-6")


@pytest.mark.parametrize("change", [{"dtype": "<f4"}, {"order": "F"}, {"dtype": "<i8"}, {"chunks": [500, 3]}])
def test_store_metadata_edited_after_writing_is_refused(store, tmp_path, capsys, change):
    path, _ = store
    _edit_zarray(path, **change)
    _store_refused(path, capsys, tmp_path, "was changed")


def test_store_of_integer_totals_relabelled_as_floats_is_refused(store, tmp_path, capsys):
    path, _ = store
    attrs = json.loads((path / ".zattrs").read_text())
    del attrs["counts_layout"]  # a store of an earlier gcnmops: its integer totals still tell
    (path / ".zattrs").write_text(json.dumps(attrs))
    _edit_zarray(path, dtype="<f4")
    _store_refused(path, capsys, tmp_path, "integer sample totals")


def test_a_store_without_checksums_is_read_and_said_so(store, tmp_path, capsys):
    """A count store of an earlier gcnmops (no chunk checksums) is still read, with one warning per store saying
    a damaged chunk could not be told from counts and how to get a copy that carries them (which works)."""
    import logging

    import zarr

    from gcnmops.io.store import counts_layout, create_array, has_checksums, open_count_store

    path, data = store
    old = zarr.open_array(str(path / "counts"), mode="r")
    assert has_checksums(old)
    values = old[...]
    earlier = create_array(str(path / "counts"), values.shape, old.chunks, old.dtype)  # as it was written before
    earlier[...] = values
    assert not has_checksums(earlier)
    attrs = json.loads((path / ".zattrs").read_text())
    attrs["counts_layout"] = counts_layout(earlier)
    (path / ".zattrs").write_text(json.dumps(attrs))
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logging.getLogger("gcnmops").addHandler(handler)
    try:
        for _ in range(2):
            np.testing.assert_array_equal(open_count_store(path).rows(0, 3000), data.counts)
    finally:
        logging.getLogger("gcnmops").removeHandler(handler)
    said = [m for m in seen if "without chunk checksums" in m]
    assert len(said) == 1 and "gcnmops convert" in said[0], seen
    out = tmp_path / "sealed.zarr"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    assert has_checksums(zarr.open_group(str(out), mode="r")["counts"])
    np.testing.assert_array_equal(open_count_store(out).rows(0, 3000), data.counts)


def test_fuzz_stores(store, tmp_path):
    """Random damage to a store's chunks and metadata: each opening gives the clean store's counts or an
    InputError, never other numbers."""
    from gcnmops.io.store import open_count_store

    path, data = store
    rng = np.random.default_rng(2)
    files = sorted(p.relative_to(path) for p in path.rglob("*") if p.is_file())
    outcomes = {"same": 0, "refused": 0}
    for case in range(25):
        copy = tmp_path / f"f{case}.zarr"
        shutil.copytree(path, copy)
        victim = copy / files[rng.integers(len(files))]
        action = rng.integers(4)
        if action == 0:
            victim.unlink()
        elif action == 1:
            victim.write_bytes(victim.read_bytes()[: rng.integers(0, max(1, victim.stat().st_size))])
        elif action == 2 and victim.name == ".zarray":
            key = ["dtype", "order", "shape", "chunks"][rng.integers(4)]
            _edit_zarray(copy, **{key: {"dtype": "<f8", "order": "F", "shape": [3000, 5], "chunks": [1000, 2]}[key]})
        else:
            raw = bytearray(victim.read_bytes())
            if raw:
                raw[rng.integers(len(raw))] ^= 0xFF
            victim.write_bytes(bytes(raw))
        try:
            s = open_count_store(copy)
            got = np.vstack([s.chromosome(n, a, b).counts for n, a, b in s.blocks])
        except InputError:
            outcomes["refused"] += 1
            continue
        np.testing.assert_array_equal(got, data.counts)
        assert s.sample_names == data.sample_names
        outcomes["same"] += 1
    assert outcomes["refused"] > 0


# ------------------------------------------------------------------------------------------ R integer64
def test_r_integer64_counts_read_as_numbers(tmp_path, capsys):
    import subprocess

    if subprocess.run(["Rscript", "-e", "stopifnot(requireNamespace('bit64', quietly = TRUE))"],
                      capture_output=True).returncode != 0:
        pytest.skip("R with bit64 needed")
    df = _frame(m=40, n=4)
    counts = df[[f"S{k + 1}" for k in range(4)]].to_numpy()
    (tmp_path / "x.tsv").write_text("\n".join(" ".join(map(str, r)) for r in counts))
    script = f"""
        x <- as.matrix(read.table("{tmp_path / 'x.tsv'}"))
        x64 <- bit64::as.integer64(x); dim(x64) <- dim(x); colnames(x64) <- paste0("S", 1:4)
        saveRDS(x64, "{tmp_path / 'm.rds'}")
        x64[3, 2] <- bit64::as.integer64("9007199254740993")
        saveRDS(x64, "{tmp_path / 'big.rds'}")
    """
    subprocess.run(["Rscript", "-e", script], check=True, capture_output=True)
    got = read_counts(tmp_path / "m.rds")
    np.testing.assert_array_equal(got.counts, counts.astype(float))
    assert got.sample_names == ["S1", "S2", "S3", "S4"]
    with pytest.raises(InputError, match="2\\^53"):
        read_counts(tmp_path / "big.rds")
    _cli_refuses(["run", str(tmp_path / "big.rds")], tmp_path / "o", capsys, "2^53")


# ------------------------------------------------------------------------------------------ per-sample VCF names
def test_per_sample_vcf_names_are_unique():
    from gcnmops.outputs.callfiles import sample_vcf_name

    names = ["a/b", "a_b", "a b", "a:b", "NA12878", "s.1-x", "\u00e9"]
    files = [sample_vcf_name(s) for s in names]
    assert len(set(files)) == len(names)
    assert files[1] == "cnvr.a_b.vcf.gz" and files[4] == "cnvr.NA12878.vcf.gz"  # valid names keep their file
    assert files == [sample_vcf_name(s) for s in names]  # deterministic
    assert all(f.startswith("cnvr.") and "/" not in f and " " not in f for f in files)


# ------------------------------------------------------------------------------------------ case-mode references
@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    df = _frame(m=400, n=6, seed=4, chroms=("chr1", "chr2"))
    path = tmp_path_factory.mktemp("ref") / "ref"
    gcnmops.build_reference(df, backend="cpu").save(path)
    return path


def _damage(src: Path, dst: Path, how: str) -> None:
    shutil.copytree(src, dst)
    part = dst / "part-all"
    man = json.loads((dst / "manifest.json").read_text())
    lam = np.load(part / "lambda.npy")
    if how == "short lambda":
        np.save(part / "lambda.npy", lam[:-3])
    elif how == "transposed lambda":
        np.save(part / "lambda.npy", np.asfortranarray(lam.T))
    elif how == "NaN lambda":
        lam[5, 2] = np.nan
        np.save(part / "lambda.npy", lam)
    elif how == "alpha not summing to 1":
        a = np.load(part / "alpha.npy")
        np.save(part / "alpha.npy", np.asfortranarray(a * 2))
    elif how == "float32 alpha":
        np.save(part / "alpha.npy", np.load(part / "alpha.npy").astype(np.float32))
    elif how == "swapped normalization":
        levels = man["parts"][0]["normalization"]["chromosomes"]
        levels[0], levels[1] = levels[1], levels[0]
    elif how == "normalization of other parameters":
        man["parts"][0]["normalization"]["norm_type"] = "mean"
    elif how == "cyc = -3":
        man["params"]["cyc"] = -3
    elif how == "NaN level":
        man["parts"][0]["normalization"]["chromosomes"][0]["reference"] = float("nan")
    elif how == "short silent":
        np.save(part / "silent.npy", np.load(part / "silent.npy")[:10])
    elif how == "regions count":
        man["n_regions"] = 399
    elif how == "counts":
        c = np.load(dst / "counts.npy")
        c[0, 0] = -1
        np.save(dst / "counts.npy", c)
    (dst / "manifest.json").write_text(json.dumps(man))


_DAMAGE = ["short lambda", "transposed lambda", "NaN lambda", "alpha not summing to 1", "float32 alpha",
           "swapped normalization", "normalization of other parameters", "cyc = -3", "NaN level", "short silent",
           "regions count", "counts"]


@pytest.mark.parametrize("how", _DAMAGE)
def test_damaged_reference_is_refused(reference, tmp_path, capsys, how):
    bad = tmp_path / "bad"
    _damage(reference, bad, how)
    with pytest.raises(InputError, match="damaged|incomplete"):
        gcnmops.load_reference(bad)
    new = tmp_path / "new.tsv"
    _frame(m=400, n=2, seed=8, chroms=("chr1", "chr2")).to_csv(new, sep="\t", index=False)
    assert main(["call", str(new), "--reference-cohort", str(bad), "--backend", "cpu", "--quiet",
                 "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err and ("damaged" in err or "incomplete" in err), err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_intact_reference_loads(reference):
    ref = gcnmops.load_reference(reference)
    assert ref.n_regions == 400 and ref.n_samples == 6
