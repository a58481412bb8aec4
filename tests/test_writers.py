"""Writers: tables and matrices round-trip, writes are all-or-nothing, formats are checked. The call files
(BED, VCF, SEG) as the genome tools read them: tests/test_callfiles.py.
"""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gcnmops
from gcnmops.errors import InputError
from gcnmops.io import atomic
from gcnmops.outputs import parquet, writers
from gcnmops.outputs.writers import DEFAULT_FORMATS, FORMATS, write_result

try:
    import pysam
except ImportError:  # pragma: no cover - optional
    pysam = None

#: the bgzipped, indexed call files (written with pysam; without it a plain cnvr.vcf)
CALL_FILES = (("cnvs.bed.gz", "cnvs.bed.gz.tbi", "cnvr.bed.gz", "cnvr.bed.gz.tbi", "cnvr.vcf.gz", "cnvr.vcf.gz.tbi")
              if pysam is not None else ("cnvr.vcf",))


@pytest.fixture(scope="module")
def written(results, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    paths = write_result(results[1], out, formats=["tsv", "parquet", "bed", "vcf", "seg"])
    return out, paths


def _read_tsv(path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", float_precision="round_trip", keep_default_na=False, na_values=["NA"],
                       dtype={"seqnames": str})


# ------------------------------------------------------------------------------------------------ TSV
def test_every_file_is_written_with_normal_permissions(written):
    out, paths = written
    names = {p.name for p in paths}
    for name in ("normalized_data.tsv", "local_assessments.tsv", "individual_call.tsv", "integer_copy_number.tsv",
                 "ini_call.tsv", "params_L.tsv", "params_A.tsv", "segmentation.tsv", "cnvs.tsv", "cnvr.tsv",
                 "params.json", "cnvs.bed", "cnvr.bed", *CALL_FILES, "segmentation.seg"):
        assert name in names and (out / name).stat().st_size > 0
    # nothing else (no temporary files) but the run's manifest
    assert sorted(p.name for p in out.iterdir()) == sorted(names | {writers.MANIFEST})
    umask = os.umask(0)
    os.umask(umask)
    for p in paths:  # mkstemp's 0600 is not kept
        assert (p.stat().st_mode & 0o777) == (0o666 & ~umask)


def test_matrices_round_trip_exactly(written, results):
    out, _ = written
    r = results[1]
    for name, matrix in (("normalized_data", r.normalized_data), ("local_assessments", r.local_assessments),
                         ("individual_call", r.individual_call)):
        t = _read_tsv(out / f"{name}.tsv")
        assert list(t.columns) == ["seqnames", "start", "end", *r.sample_names]
        assert t[["seqnames", "start", "end"]].equals(r.gr)
        assert np.array_equal(t[r.sample_names].to_numpy(), matrix), name  # bit for bit
    labels = _read_tsv(out / "integer_copy_number.tsv")[r.sample_names].to_numpy()
    assert (labels == r.integer_copy_number).all()
    ini = _read_tsv(out / "ini_call.tsv")
    assert np.array_equal(ini["ini_call"].to_numpy(), r.ini_call)
    for key in ("L", "A"):
        t = _read_tsv(out / f"params_{key}.tsv")
        assert list(t.columns[3:]) == r.classes
        assert np.array_equal(t[r.classes].to_numpy(), r.params[key])


def test_tables_round_trip(written, results):
    out, _ = written
    r = results[1]
    for name in ("segmentation", "cnvs", "cnvr"):
        ours = getattr(r, name).reset_index(drop=True)
        back = _read_tsv(out / f"{name}.tsv")
        assert list(back.columns) == list(ours.columns)
        for col in ours.columns:
            if ours[col].dtype.kind == "f":
                assert np.array_equal(back[col].to_numpy(), ours[col].to_numpy())
            else:
                assert (back[col].astype(str).to_numpy() == ours[col].astype(str).to_numpy()).all(), col


def test_missing_values_and_special_floats_are_written_as_r_reads_them(tmp_path, results):
    raw = results[0]  # CN columns are None before integer copy numbers
    paths = write_result(raw, tmp_path, formats=["tsv"])
    assert paths
    cnvr = (tmp_path / "cnvr.tsv").read_text().splitlines()
    assert cnvr[1].split("\t")[3:] == ["NA"] * len(raw.sample_names)
    p = tmp_path / "special.tsv"
    writers.write_columns(p, ["a", "b", "c", "d"], [np.array([np.nan, np.inf, -np.inf, 0.1]),
                                                    np.array([1, 2, 3, 4]), np.array([True, False, True, True]),
                                                    pd.Series(["x", None, "tab\there", "q\"uote"])])
    lines = p.read_text().splitlines()
    assert lines[0] == "a\tb\tc\td"
    assert [ln.split("\t")[0] for ln in lines[1:]] == ["NA", "Inf", "-Inf", "0.1"]
    assert lines[1].split("\t")[2] == "TRUE" and lines[2].split("\t")[3] == "NA"
    back = pd.read_csv(p, sep="\t", keep_default_na=False, na_values=["NA"])
    assert back["d"].tolist()[2:] == ["tab\there", 'q"uote']  # quoted where needed, read back intact
    assert np.isinf(back["a"][1]) and back["a"][2] == -np.inf


def test_gzip_tsv(tmp_path, results):
    r = results[1]
    paths = write_result(r, tmp_path, formats=["tsv.gz"])
    assert {p.name for p in paths} >= {"normalized_data.tsv.gz", "cnvr.tsv"}
    with gzip.open(tmp_path / "local_assessments.tsv.gz", "rt") as fh:
        t = pd.read_csv(fh, sep="\t", float_precision="round_trip")
    assert np.array_equal(t[r.sample_names].to_numpy(), r.local_assessments)
    with pytest.raises(InputError, match="Unknown output format 'xlsx'"):
        write_result(r, tmp_path, formats=["xlsx"])


# BED, VCF and SEG: tests/test_callfiles.py


# ------------------------------------------------------------------------------------------ atomicity
def test_a_failing_write_leaves_no_file(tmp_path, results, monkeypatch):
    r = results[1]
    out = tmp_path / "out"

    def boom(result, path, **kwargs):  # the VCF comes after every TSV and BED: they are complete when it fails
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(writers, "write_vcf", boom)
    with pytest.raises(InputError, match=r"^Writing into the output folder .* failed: disk full \(simulated\)"):
        write_result(r, out)
    assert not out.exists()  # no final file, no temporary file, and not the folder the call made


def test_a_failure_mid_file_keeps_the_previous_version(tmp_path, results, monkeypatch):
    r = results[1]
    write_result(r, tmp_path, formats=["tsv"])
    before = (tmp_path / "normalized_data.tsv").read_bytes()
    real = writers.write_columns
    calls = {"n": 0}

    def half_then_fail(path, names, columns, compress=False, header=True):
        calls["n"] += 1
        if calls["n"] == 2:  # the second matrix: write part of it, then fail
            Path(path).write_text("seqnames\tstart\n chr1\t1\n")
            raise KeyboardInterrupt
        return real(path, names, columns, compress, header)

    monkeypatch.setattr(writers, "write_columns", half_then_fail)
    with pytest.raises(KeyboardInterrupt):
        write_result(r.replace(normalized_data=r.normalized_data + 1.0), tmp_path, formats=["tsv"])
    assert (tmp_path / "normalized_data.tsv").read_bytes() == before  # the old file, untouched
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") and p.name != writers.MANIFEST]


def test_atomic_write_helper(tmp_path):
    target = tmp_path / "x.txt"

    def fail(tmp):
        tmp.write_text("partial")
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        atomic.atomic_write(target, fail)
    assert list(tmp_path.iterdir()) == []
    atomic.atomic_write(target, lambda t: t.write_text("done"))
    assert target.read_text() == "done"


def test_formats_constant():
    assert DEFAULT_FORMATS == ("parquet", "bed", "vcf", "seg")
    assert set(DEFAULT_FORMATS) <= set(FORMATS)


def test_default_output_is_calls_as_text_and_matrices_as_parquet(results, tmp_path):
    names = sorted(p.name for p in write_result(results[1], tmp_path))
    matrices = ["individual_call", "ini_call", "integer_copy_number", "local_assessments", "normalized_data",
                "params_A", "params_L"]
    assert names == sorted([m + ".parquet" for m in matrices] + ["cnvr.bed", "cnvr.tsv", "cnvs.bed", "cnvs.tsv",
                                                                 "params.json", "segmentation.seg",
                                                                 "segmentation.tsv", *CALL_FILES])
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != writers.MANIFEST) == names


def test_parquet_matrices_are_lossless_and_labelled(results, tmp_path):
    import pyarrow.parquet as pq

    r = results[1]
    write_result(r, tmp_path, formats=["parquet"])
    t = pq.read_table(tmp_path / "local_assessments.parquet").to_pandas()
    assert list(t.columns) == ["seqnames", "start", "end", *r.sample_names]
    assert np.array_equal(t[r.sample_names].to_numpy(), r.local_assessments)  # bit for bit
    labels = pq.read_table(tmp_path / "integer_copy_number.parquet").to_pandas()[r.sample_names]
    assert (labels.astype(str).to_numpy() == r.integer_copy_number).all()
    assert pq.read_metadata(tmp_path / "normalized_data.parquet").row_group(0).column(3).compression == "ZSTD"


def _assert_same_result(a, b):
    for name in ("normalized_data", "local_assessments", "individual_call", "ini_call", "cn_index"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name
    pd.testing.assert_frame_equal(a.gr.reset_index(drop=True), b.gr.reset_index(drop=True))
    for name in ("segmentation", "cnvs", "cnvr"):
        pd.testing.assert_frame_equal(getattr(a, name).reset_index(drop=True), getattr(b, name).reset_index(drop=True))
    assert a.sample_names == b.sample_names and a.ranged == b.ranged
    assert a.params.keys() == b.params.keys()
    for k in a.params:
        if isinstance(a.params[k], np.ndarray):
            assert np.array_equal(a.params[k], b.params[k]), k
        else:
            assert a.params[k] == b.params[k], k


@pytest.mark.parametrize("fmt", ["parquet", "tsv", "tsv.gz"])
def test_read_result_round_trips(results, tmp_path, fmt):
    for r in results:  # before and after integer copy numbers
        folder = tmp_path / str(id(r))
        write_result(r, folder, formats=[fmt])
        _assert_same_result(gcnmops.read_result(folder), r)


def test_read_result_names_what_is_missing(results, tmp_path):
    with pytest.raises(InputError, match="params.json"):
        gcnmops.read_result(tmp_path)
    write_result(results[1], tmp_path, formats=["bed"])
    with pytest.raises(InputError, match="normalized_data"):
        gcnmops.read_result(tmp_path)


@pytest.mark.parametrize("formats, fragment", [(["vfc"], "'vfc' (did you mean 'vcf'?)"), (["foo"], "'foo'"),
                                               ([], "No output format")])
def test_unknown_formats_are_refused_naming_them(results, tmp_path, formats, fragment):
    with pytest.raises(InputError, match=fragment.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        write_result(results[1], tmp_path / "x", formats=formats)
    assert not (tmp_path / "x").exists()


# ------------------------------------------------------------------------------------------ Parquet parts
def test_parquet_written_in_parts_joins_into_one_lossless_file(results, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    monkeypatch.setattr(writers, "PARQUET_MIN_PART_ROWS", 100)
    monkeypatch.setattr(writers, "PARQUET_ROW_GROUP", 256)  # 1200 rows: 5 parts of one row group each
    for r in results:
        folder = tmp_path / str(id(r))
        write_result(r, folder, formats=["parquet"])
        _assert_same_result(gcnmops.read_result(folder), r)
    meta = pq.read_metadata(folder / "local_assessments.parquet")
    assert meta.num_rows == 1200 and meta.num_row_groups == 5
    offsets = [meta.row_group(g).column(c).data_page_offset for g in range(5) for c in range(meta.num_columns)]
    assert offsets == sorted(offsets)
    columns = {meta.row_group(4).column(c).path_in_schema: meta.row_group(4).column(c) for c in range(meta.num_columns)}
    assert "DELTA_BINARY_PACKED" in columns["start"].encodings and columns["start"].statistics.has_min_max
    assert "BYTE_STREAM_SPLIT" in columns[results[1].sample_names[0]].encodings  # continuous values
    assert columns[results[1].sample_names[0]].compression == "ZSTD"
    labels = pq.read_metadata(folder / "integer_copy_number.parquet").row_group(2).column(3)
    assert "RLE_DICTIONARY" in labels.encodings
    frame = pd.read_parquet(folder / "normalized_data.parquet")  # pandas reads every row group
    assert np.array_equal(frame[results[1].sample_names].to_numpy(), results[1].normalized_data)


def test_join_parquet_keeps_bits_and_falls_back_on_unknown_footers(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    special = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324, 1.5] * 300)
    table = pa.table({"seqnames": pa.array(["chr1"] * 2100).dictionary_encode(), "start": np.arange(2100),
                      "x": special, "y": np.round(special * 3, 1), "z": np.random.default_rng(0).random(2100)})
    options = parquet.parquet_options(table)
    parts = [parquet.encode_parquet(table.slice(a, 300), options, 300) for a in range(0, 2100, 300)]
    parquet.join_parquet(tmp_path / "j.parquet", parts)
    back = pq.read_table(tmp_path / "j.parquet")
    for name in ("x", "y", "z"):
        assert back[name].to_numpy().view(np.uint64).tolist() == table[name].to_numpy().view(np.uint64).tolist()
    assert back["seqnames"].to_pylist() == table["seqnames"].to_pylist()
    indexed = pa.BufferOutputStream()
    pq.write_table(table.slice(0, 300), indexed, write_page_index=True)  # a page index holds offsets of its own
    with pytest.raises(parquet._FooterError):
        parquet.join_parquet(tmp_path / "k.parquet", [indexed.getvalue(), parts[1]])


def test_wide_matrices_in_parts_of_columns_are_the_bytes_of_one_write(results, tmp_path, monkeypatch):
    """A matrix of more columns than PARQUET_PART_COLUMNS (a wide cohort: pyarrow holds a few kilobytes per
    column of what it writes) is encoded in parts of columns and joined into the very bytes of one write."""
    r = results[1]
    write_result(r, tmp_path / "whole", formats=["parquet"])
    parts = []
    monkeypatch.setattr(writers, "PARQUET_PART_COLUMNS", 4)
    monkeypatch.setattr(writers, "encode_columns", lambda names, columns, rows: parts.append(len(names)) or
                        parquet.encode_columns(names, columns, rows))
    write_result(r, tmp_path / "parts", formats=["parquet"])
    assert max(parts) == 4 and len(parts) >= 4 * -(-(3 + len(r.sample_names)) // 4)
    for path in sorted((tmp_path / "whole").glob("*.parquet")):
        assert (tmp_path / "parts" / path.name).read_bytes() == path.read_bytes(), path.name


def test_join_columns_keeps_bits_and_falls_back_on_unknown_footers(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from concurrent.futures import Future

    def done(value):
        future = Future()
        future.set_result(value)
        return future

    rng = np.random.default_rng(2)
    special = rng.choice([0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324, 1.5], (7, 9))
    gr = pd.DataFrame({"seqnames": ["chr1"] * 4 + ["chr2"] * 3, "start": np.arange(7) * 10 + 1,
                       "end": np.arange(1, 8) * 10})
    columns = (writers.parquet_coordinates(gr) + writers._matrix_columns(np.asfortranarray(special))
               + writers._matrix_columns(np.asfortranarray(rng.random((7, 5))))
               + writers._label_columns(np.asfortranarray(rng.integers(0, 4, (7, 6)).astype(np.int8)), list("abcd")))
    names = writers.COORDINATES + [f"S{k}" for k in range(len(columns) - 3)]
    table = parquet.parquet_table(names, columns)
    whole = bytes(parquet.encode_parquet(table, parquet.parquet_options(table), 7))
    for per in (1, 2, 5, 22):
        parts = [done(parquet.encode_columns(names[a:a + per], columns[a:a + per], 7)) for a in range(0, 23, per)]
        parquet.join_columns(tmp_path / "j.parquet", parts, None)
        assert (tmp_path / "j.parquet").read_bytes() == whole, per
    indexed = pa.BufferOutputStream()  # a page index holds offsets of its own: the whole table written instead
    pq.write_table(parquet.parquet_table(names[3:5], columns[3:5]), indexed, write_page_index=True)
    parts = [done(parquet.encode_columns(names[:3], columns[:3], 7)), done((indexed.getvalue(), None))]
    parquet.join_columns(tmp_path / "k.parquet", parts, lambda: (table, parquet.parquet_options(table)))
    assert (tmp_path / "k.parquet").read_bytes() == whole


@pytest.mark.parametrize("compress", [False, True])
def test_wide_text_tables_written_a_part_of_columns_at_a_time_are_the_same_bytes(results, tmp_path, monkeypatch,
                                                                                 compress):
    """A text table of more columns than TEXT_PART_COLUMNS (a wide cohort's cnvr.tsv) is rendered a part of its
    columns at a time, the parts' lines joined: the same bytes (a cell that needs quoting: the quoting path)."""
    from gcnmops.outputs.callfiles import call_table

    rng = np.random.default_rng(4)
    mixed = pd.DataFrame({"seqnames": ["chr1", "chr2", "chrX"], "n": [1, -2, 3], "x": [0.1, np.nan, -np.inf],
                          "flag": [True, False, True], "label": ["CN1", None, "CN3"], "y": rng.random(3) * 1e300,
                          "z": [5e-324, -0.0, 1e21]})
    quoted = mixed.assign(label=["a\tb", "c", 'd"e'])
    frames = {"cnvr": call_table(results[1], "cnvr"), "mixed": mixed, "quoted": quoted, "empty": mixed.iloc[:0]}
    (tmp_path / "whole").mkdir()
    (tmp_path / "parts").mkdir()
    for name, frame in frames.items():
        writers.write_frame(tmp_path / "whole" / name, frame, compress=compress)
    monkeypatch.setattr(writers, "TEXT_PART_COLUMNS", 2)
    for name, frame in frames.items():
        writers.write_frame(tmp_path / "parts" / name, frame, compress=compress)
        assert (tmp_path / "parts" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_a_second_run_replaces_the_first_runs_files(results, tmp_path):
    """A folder never mixes two runs: files of the earlier run that the new one does not write are removed."""
    r = results[1]
    first = {p.name for p in write_result(r, tmp_path, formats=["tsv", "bed", "vcf", "seg"])}
    (tmp_path / "notes.txt").write_text("the user's own file")
    second = {p.name for p in write_result(r, tmp_path, formats=["parquet"])}
    assert "normalized_data.tsv" in first and "cnvs.bed" in first
    left = {p.name for p in tmp_path.iterdir()} - {writers.MANIFEST}
    assert left == second | {"notes.txt"}  # the user's own files stay
    assert (tmp_path / writers.MANIFEST).read_text().split() == sorted(second)


# ------------------------------------------------------------------------------- writing in steps (ResultWriter)
@pytest.mark.parametrize("fmt", ["parquet", "tsv"])
def test_a_staged_matrix_the_final_result_no_longer_holds_is_written_again(results, tmp_path, fmt):
    """The model's matrices are staged while the segmentation runs; should the final result hold another array
    (a method that changes one after the model), the file holds the final one."""
    raw = results[1]
    writer = writers.ResultWriter(tmp_path / "out", formats=[fmt])
    writer.stage_matrices(raw)
    changed = raw.replace(local_assessments=np.asfortranarray(raw.local_assessments + 1.0))
    writer.finish(changed)
    back = gcnmops.read_result(tmp_path / "out")
    assert np.array_equal(back.local_assessments, changed.local_assessments)
    assert np.array_equal(back.normalized_data, raw.normalized_data)  # staged and unchanged: written once
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")
                and p.name != writers.MANIFEST]  # no temporary file left


def test_a_run_failing_after_the_model_leaves_nothing(tmp_path, monkeypatch):
    """run_and_write stages the model's matrices before the segmentation: a failure there removes them and the
    folder it made."""
    from gcnmops.pipeline import run, stages

    def broken(*args, **kwargs):
        raise InputError("segmentation failed (test)")

    monkeypatch.setattr(stages, "call_cnvs", broken)
    out = tmp_path / "out"
    with pytest.raises(InputError, match="segmentation failed"):
        run.run_and_write("cn.mops", gcnmops.example.example_cohort(n_regions=600, n_samples=6, seed=1)[0], out,
                          backend="cpu")
    assert not out.exists()


@pytest.mark.parametrize("fmt", ["parquet", "tsv"])
def test_staged_and_final_matrices_share_one_copy_of_the_coordinates(results, tmp_path, monkeypatch, fmt):
    """The coordinates (seqnames, start, end) of the staged matrices serve the files of ``finish`` too (the same
    regions): made once per batch, and the files are those of write_result."""
    built = []
    shared = writers._Batch.shared
    monkeypatch.setattr(writers._Batch, "shared",
                        lambda self, key, source, build: shared(self, key, source,
                                                                lambda: built.append(key) or build()))
    raw = results[1]
    writer = writers.ResultWriter(tmp_path / "steps", formats=[fmt])
    writer.stage_matrices(raw)
    writer.finish(raw.replace(cnvr=raw.cnvr))
    assert built == [{"parquet": "parquet coordinates", "tsv": "text coordinates"}[fmt]]
    write_result(raw, tmp_path / "once", formats=[fmt])
    for path in sorted((tmp_path / "once").iterdir()):
        if path.name != "params.json":
            assert path.read_bytes() == (tmp_path / "steps" / path.name).read_bytes(), path.name


def test_label_columns_refuse_indices_outside_the_classes():
    """Copy-number labels from class indices; an index outside the classes is Arrow's IndexError, as ever."""
    import pyarrow as pa

    classes = ["CN0", "CN1", "CN2"]
    cn = np.asfortranarray(np.array([[0, 2], [1, 1], [2, 0]], dtype=np.int8))
    assert [c.to_pylist() for c in writers._label_columns(cn, classes)] == [["CN0", "CN1", "CN2"],
                                                                           ["CN2", "CN1", "CN0"]]
    for bad in (3, -1):
        wrong = cn.copy()
        wrong[1, 1] = bad
        with pytest.raises(pa.ArrowIndexError):
            writers._label_columns(wrong, classes)


def test_joined_footer_moves_every_offset_of_each_part(tmp_path):
    """The merged footer (one pass over each part's footer) holds each part's row group as pyarrow reads it,
    with its page offsets moved by the part's place in the joined file: small moves and ones that need longer
    varints (beyond 2^28 and 2^35 bytes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"seqnames": pa.array(["chr1", "chr2"] * 600).dictionary_encode(), "start": np.arange(1200),
                      "x": np.random.default_rng(1).random(1200), "y": np.repeat([1.0, 2.0], 600)})
    options = parquet.parquet_options(table)
    parts = [bytes(parquet.encode_parquet(table.slice(a, 300), options, 300)) for a in range(0, 1200, 300)]
    footers = [p[-8 - int.from_bytes(p[-8:-4], "little"):-8] for p in parts]
    moved = ("data_page_offset", "dictionary_page_offset", "file_offset")
    for shifts in ([0, 5, 300, 70_000], [0, 1 << 28, 3 << 34, (1 << 40) + 7]):
        merged = parquet._merge_footers(footers, shifts)
        meta = pq.read_metadata(pa.BufferReader(b"PAR1" + merged + len(merged).to_bytes(4, "little") + b"PAR1"))
        assert meta.num_rows == 1200 and meta.num_row_groups == 4
        assert meta.schema.equals(pq.read_metadata(pa.BufferReader(parts[0])).schema)
        for g, (part, shift) in enumerate(zip(parts, shifts)):
            want = pq.read_metadata(pa.BufferReader(part)).row_group(0).to_dict()
            for column in want["columns"]:
                for key in moved:
                    if column[key] is not None:  # no dictionary page in some columns
                        column[key] += shift
            assert meta.row_group(g).to_dict() == want
