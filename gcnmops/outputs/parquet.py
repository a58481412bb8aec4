"""Parquet files of equally long columns: the encodings chosen per column (``parquet_options``), a file encoded in
memory (``encode_parquet``), and files of one schema joined into one (``join_parquet``: their column chunks copied
as they are, their Thrift footers merged with every file offset moved). The writers (``outputs.writers``) write
every per-region matrix this way, in parts encoded in parallel. A table of more than ``PARQUET_PART_COLUMNS``
columns (a wide cohort) is encoded in parts of columns instead, joined (``join_columns``) into the bytes pyarrow
writes for the whole table: pyarrow holds a few kilobytes per column while it writes a file.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd

PARQUET_COMPRESSION = "zstd"


def parquet_array(c):
    """A column as Arrow: Arrow arrays as they are, numbers as they are (zero-copy), anything else as strings,
    dictionary-encoded (missing values null)."""
    import pyarrow as pa

    if isinstance(c, (pa.Array, pa.ChunkedArray)):
        return c
    values = c.to_numpy() if isinstance(c, pd.Series) else np.asarray(c)
    if values.dtype.kind in "iuf":
        return pa.array(values)
    values = np.asarray(values, dtype=object)
    try:  # one look-up per run of equal values (the rows of a chromosome)
        firsts = np.concatenate([[0], np.flatnonzero(values[1:] != values[:-1]) + 1]) if len(values) else \
            np.zeros(0, dtype=np.intp)
        run_codes, uniques = pd.factorize(pd.Series(values[firsts], dtype=object), use_na_sentinel=True)
        codes = np.repeat(run_codes, np.diff(np.append(firsts, len(values))))
    except (TypeError, ValueError):  # values that do not compare elementwise
        codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32), mask=codes < 0),
                                          pa.array([str(u) for u in uniques], pa.string()))


def parquet_table(names: list, columns: list):
    """The table of the columns; a column without nulls (NaN is a value, not a null) is marked required, which
    spares the writer its definition levels (a third of its time for a float column)."""
    import pyarrow as pa

    arrays = [parquet_array(c) for c in columns]
    schema = pa.schema([pa.field(str(n), a.type, nullable=a.null_count > 0) for n, a in zip(names, arrays)])
    return pa.Table.from_arrays(arrays, schema=schema)


def parquet_options(table) -> dict:
    """``pq.write_table`` options for a matrix table, chosen per column (sizes and times at genome scale in
    benchmarks/RESULTS.md): strings (seqnames, copy-number labels) dictionary-encoded; integers (start, end)
    DELTA_BINARY_PACKED; floats by ``_float_encoding``; zstd; statistics for the coordinates only (what a
    reader filters on)."""
    import pyarrow as pa

    dictionary, encoding = [], {}
    for field, column in zip(table.schema, table.columns):
        if pa.types.is_dictionary(field.type):
            dictionary.append(field.name)
        elif pa.types.is_integer(field.type):
            encoding[field.name] = "DELTA_BINARY_PACKED"
        elif pa.types.is_floating(field.type):
            kind = _float_encoding(column)
            if kind == "dictionary":
                dictionary.append(field.name)
            elif kind is not None:
                encoding[field.name] = kind
    return {"compression": PARQUET_COMPRESSION, "use_dictionary": dictionary, "column_encoding": encoding or None,
            "write_statistics": [c for c in ("seqnames", "start", "end") if c in table.column_names]}


def _float_encoding(column) -> str | None:
    """The encoding of a float column, judged on three windows of 4096 values: mostly runs of equal values
    (piecewise-constant calls) -> None, plain (zstd packs runs faster than a dictionary); few distinct values
    (normalized counts: multiples of a sample's factor) -> "dictionary"; else (posterior assessments, model
    parameters) "BYTE_STREAM_SPLIT" (each byte of the doubles apart: zstd then finds the exponents' repeats)."""
    values = column.chunk(0).to_numpy(zero_copy_only=False) if column.num_chunks == 1 else column.to_numpy()
    w, n = 4096, len(values)
    windows = [values] if n <= 3 * w else [values[:w], values[n // 2 - w // 2:n // 2 + w // 2], values[-w:]]
    pairs = sum(len(v) - 1 for v in windows if len(v))
    if pairs and 2 * sum(int(np.count_nonzero(v[1:] == v[:-1])) for v in windows if len(v)) >= pairs:
        return None
    sample = np.concatenate(windows)
    return "dictionary" if 4 * len(np.unique(sample)) <= len(sample) else "BYTE_STREAM_SPLIT"


def write_parquet(path, names: list[str], columns: list) -> None:
    """A Parquet file of equally long columns: numpy arrays (float64 and integers kept as they are, strings
    dictionary-encoded) or Arrow arrays; encodings as ``parquet_options``. Lossless."""
    import pyarrow.parquet as pq

    table = parquet_table(names, columns)
    pq.write_table(_int32_indices(table), path, **parquet_options(table))


def encode_parquet(table, options: dict, rows: int):
    """``table`` as a Parquet file in memory (an Arrow buffer)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(_int32_indices(table), sink, row_group_size=rows, **options)
    return sink.getvalue()


#: columns of a part of a wide table at most (``encode_columns``, ``join_columns``)
PARQUET_PART_COLUMNS = 1 << 13


def encode_columns(names: list, columns: list, rows: int):
    """The part of a wide table holding ``columns`` (``parquet_table``) as a Parquet file in memory of one row group
    of its ``rows`` rows, with the encodings ``parquet_options`` chooses for each column: (the Arrow buffer, the
    part's schema as written)."""
    table = parquet_table(names, columns)
    written = _int32_indices(table)
    return encode_parquet(written, parquet_options(table), max(rows, 1)), written.schema


def _int32_indices(table):
    """``table`` with its dictionary columns' indices widened to int32 (Arrow writes int8 indices a third
    slower), as every file has them."""
    import pyarrow as pa

    fields, columns, widened = [], [], False
    for field, column in zip(table.schema, table.columns):
        if pa.types.is_dictionary(field.type) and field.type.index_type != pa.int32():
            wide = pa.dictionary(pa.int32(), field.type.value_type)
            field, column, widened = field.with_type(wide), column.cast(wide), True
        fields.append(field)
        columns.append(column)
    # one new table: replacing columns one at a time copies the schema each time (quadratic in the columns)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, table.schema.metadata)) if widened else table


def join_parts(path: Path, table, options: dict, parts: list) -> None:
    """The file of the parts' (futures') Parquet files, joined as they complete; each part is dropped once
    written. Written in one piece instead should the parts' footers not be ones ``join_parquet`` knows."""
    import pyarrow.parquet as pq

    def buffers():
        while parts:
            yield parts.pop(0).result()

    try:
        join_parquet(path, buffers())
    except _FooterError:
        parts.clear()
        pq.write_table(_int32_indices(table), path, **options)


def join_parquet(path, parts) -> None:
    """One Parquet file of the row groups of ``parts`` (buffers holding whole Parquet files of one schema, written
    with the same options), in order: their column chunks copied as they are, their footers merged with every
    file offset moved (``_merge_footers``). A single part is written as it is."""
    rest = iter(parts)
    ahead = [next(rest)]
    ahead.extend(itertools.islice(rest, 1))

    def in_order():  # each part dropped once written
        while ahead:
            yield ahead.pop(0)
        yield from rest

    with open(path, "wb") as fh:
        if len(ahead) == 1:
            fh.write(memoryview(ahead.pop()))
            return
        fh.write(b"PAR1")
        position, footers, shifts = 4, [], []
        for part in in_order():
            view = memoryview(part)
            size = len(view)
            meta = int.from_bytes(view[size - 8:size - 4], "little") if size >= 12 else -1
            if size < 12 or bytes(view[:4]) != b"PAR1" or bytes(view[size - 4:]) != b"PAR1" or not 0 < meta <= size - 12:
                raise _FooterError("not a Parquet file")
            body = view[4:size - 8 - meta]
            fh.write(body)
            shifts.append(position - 4)
            position += len(body)
            footers.append(bytes(view[size - 8 - meta:size - 8]))
            del view, part
        footer = _merge_footers(footers, shifts)
        fh.write(footer)
        fh.write(len(footer).to_bytes(4, "little") + b"PAR1")


def join_columns(path: Path, parts: list, whole) -> None:
    """The file pyarrow writes for a table of one row group, from ``parts`` (futures of ``encode_columns`` of
    consecutive groups of its columns, in order): their column chunks copied in order as they complete (each part
    dropped once written), their footers merged (``_merge_columns``). Written in one piece (``whole()``: the table
    and its options) should a footer not be one ``_merge_columns`` knows."""
    import base64

    import pyarrow as pa
    import pyarrow.parquet as pq

    footers, fields, metadata = [], [], None
    try:
        with open(path, "wb") as fh:
            fh.write(b"PAR1")
            position = 4
            while parts:
                buffer, schema = parts.pop(0).result()
                view = memoryview(buffer)
                size = len(view)
                meta = int.from_bytes(view[size - 8:size - 4], "little") if size >= 12 else -1
                if size < 12 or bytes(view[:4]) != b"PAR1" or bytes(view[size - 4:]) != b"PAR1" or \
                        not 0 < meta <= size - 12:
                    raise _FooterError("not a Parquet file")
                body = view[4:size - 8 - meta]
                fh.write(body)
                footers.append(_column_part(bytes(view[size - 8 - meta:size - 8]), position - 4))
                if len(footers) > 1:  # the first part's footer is the joined one's frame; the others' are read
                    del footers[-1]["meta"]
                position += len(body)
                fields.extend(schema)
                metadata = schema.metadata
                del view, buffer, body
            arrow = base64.b64encode(pa.schema(fields, metadata).serialize().to_pybytes())
            footer = _merge_columns(footers, arrow)
            fh.write(footer)
            fh.write(len(footer).to_bytes(4, "little") + b"PAR1")
    except _FooterError:
        for future in parts:
            future.cancel()
        parts.clear()
        table, options = whole()
        pq.write_table(_int32_indices(table), path, **options)


# A Parquet footer is a FileMetaData struct in Thrift's compact protocol. Joining files needs only its row groups
# with their file offsets moved; everything else is copied byte for byte.
_T_I16, _T_I64, _T_LIST, _T_STRUCT = 4, 6, 9, 12
#: ColumnMetaData: data_page_offset, index_page_offset, dictionary_page_offset, bloom_filter_offset
_COLUMN_META = {9: "offset", 10: "offset", 11: "offset", 14: "offset"}
#: ColumnChunk: file_offset, meta_data; a page index (offset_index_offset, column_index_offset) holds offsets of
#: its own, which are not moved: refused
_COLUMN_CHUNK = {2: "offset", 3: _COLUMN_META, 4: "refuse", 6: "refuse", 8: "refuse", 9: "refuse"}
#: a ColumnChunk of a part of a wide table: its own file_offset moved only where it is set (pyarrow writes 0)
_PART_COLUMN_CHUNK = {**_COLUMN_CHUNK, 2: "set offset"}
#: RowGroup: columns, file_offset, ordinal
_ROW_GROUP = {1: [_COLUMN_CHUNK], 5: "offset", 7: "ordinal"}


class _FooterError(ValueError):
    """A footer ``join_parquet`` cannot merge (never one of pyarrow's with ``parquet_options``)."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def _list_header(buf: bytes, pos: int) -> tuple[int, int, int]:
    """(size, element type, position after the header) of a list."""
    b = buf[pos]
    size, pos = b >> 4, pos + 1
    if size == 15:
        size, pos = _varint(buf, pos)
    return size, b & 0x0F, pos


def _list_header_bytes(size: int, element: int) -> bytes:
    return bytes([size << 4 | element]) if size < 15 else bytes([0xF0 | element]) + _varint_bytes(size)


def _skip(buf: bytes, pos: int, kind: int, element: bool = False) -> int:
    """The position after a value of Thrift compact type ``kind`` (``element``: inside a list, set or map)."""
    if kind in (1, 2):  # booleans: in a field's header, or one byte as an element
        return pos + 1 if element else pos
    if kind == 3:
        return pos + 1
    if kind in (4, 5, 6):
        return _varint(buf, pos)[1]
    if kind == 7:
        return pos + 8
    if kind == 8:
        size, pos = _varint(buf, pos)
        return pos + size
    if kind in (9, 10):
        size, item, pos = _list_header(buf, pos)
        for _ in range(size):
            pos = _skip(buf, pos, item, True)
        return pos
    if kind == 11:
        size, pos = _varint(buf, pos)
        if size:
            types, pos = buf[pos], pos + 1
            for _ in range(size):
                pos = _skip(buf, _skip(buf, pos, types >> 4, True), types & 0x0F, True)
        return pos
    if kind == 12:
        return _fields(buf, pos)[1]
    raise _FooterError(f"unknown Thrift type {kind}")


_STOP = -1  # ``_header``'s type at a struct's stop byte


def _header(buf: bytes, pos: int, last: int) -> tuple[int, int, int]:
    """(field id, type, position after the header) of the field header at ``pos`` of a struct (``last``: the
    previous field's id); type _STOP at the struct's stop byte."""
    b = buf[pos]
    pos += 1
    if b == 0:
        return last, _STOP, pos
    kind, delta = b & 0x0F, b >> 4
    if delta:
        return last + delta, kind, pos
    raw, pos = _varint(buf, pos)
    return _unzigzag(raw), kind, pos


def _fields(buf: bytes, pos: int) -> tuple[list[tuple[int, int, int, int]], int]:
    """[(field id, type, value start, value end)] of the struct at ``pos``, and the position after it."""
    fields, last = [], 0
    while True:
        field, kind, pos = _header(buf, pos, last)
        if kind == _STOP:
            return fields, pos
        end = _skip(buf, pos, kind)
        fields.append((field, kind, pos, end))
        last, pos = field, end


def _patched(buf: bytes, pos: int, rules: dict, shift: int, ordinal: int) -> tuple[bytes, int]:
    """The struct at ``pos`` with its offsets moved by ``shift`` and its ordinal set, by ``rules`` (field id ->
    "offset", "ordinal", "refuse", the rules of a struct, or [the rules of a list's structs]); the position after it.
    One pass: each value is read once."""
    out, copied, last = bytearray(), pos, 0
    while True:
        field, kind, pos = _header(buf, pos, last)
        if kind == _STOP:
            out += buf[copied:pos]
            return bytes(out), pos
        last = field
        rule = rules.get(field)
        if rule is None:
            pos = _skip(buf, pos, kind)
            continue
        out += buf[copied:pos]
        if rule in ("offset", "set offset") and kind == _T_I64:
            value, pos = _varint(buf, pos)
            value = _unzigzag(value)
            out += _varint_bytes(_zigzag(value + shift if rule == "offset" or value else value))
        elif rule == "ordinal" and kind == _T_I16:
            pos = _varint(buf, pos)[1]
            out += _varint_bytes(_zigzag(ordinal))
        elif isinstance(rule, dict) and kind == _T_STRUCT:
            patched, pos = _patched(buf, pos, rule, shift, ordinal)
            out += patched
        elif isinstance(rule, list) and kind == _T_LIST:
            head, items, pos = _patched_list(buf, pos, rule[0], shift, ordinal, 0)
            out += head + b"".join(items)
        else:
            raise _FooterError(f"field {field} (type {kind}) cannot be moved")
        copied = pos


def _patched_list(buf: bytes, pos: int, rules: dict, shift: int, ordinal: int, step: int
                  ) -> tuple[bytes, list[bytes], int]:
    """(header, structs, position after it) of the list of structs at ``pos``, each ``_patched`` (the i-th with
    ordinal ``ordinal + i * step``)."""
    size, item, p = _list_header(buf, pos)
    if item != _T_STRUCT:
        raise _FooterError("a list of structs expected")
    items, end = [], p
    for i in range(size):
        patched, end = _patched(buf, end, rules, shift, ordinal + i * step)
        items.append(patched)
    return bytes(buf[pos:p]), items, end


def _footer(meta: bytes, shift: int, ordinal: int) -> tuple[dict[int, tuple[int, int, int]], list[bytes], int]:
    """The fields of the FileMetaData ``meta`` (field id -> (type, value start, value end)), its row groups with
    their offsets moved by ``shift`` and ordinals from ``ordinal`` on (the structs, without the list's header),
    and the position after it; one pass."""
    fields, groups, pos, last = {}, [], 0, 0
    while True:
        field, kind, start = _header(meta, pos, last)
        if kind == _STOP:
            return fields, groups, start
        if field == 4 and kind == _T_LIST:
            _, groups, pos = _patched_list(meta, start, _ROW_GROUP, shift, ordinal, 1)
        else:
            pos = _skip(meta, start, kind)
        fields[field] = (kind, start, pos)
        last = field


def _merge_footers(footers: list[bytes], shifts: list[int]) -> bytes:
    """The FileMetaData of the files whose bodies lie ``shifts`` bytes further on in the joined file: the first
    file's, with num_rows the sum and row_groups all the files' row groups (offsets moved, ordinals renumbered).
    The files must agree on everything else (schema, key-value metadata, ...)."""
    try:
        first, groups, end = _footer(footers[0], shifts[0], 0)
        if end != len(footers[0]):
            raise _FooterError("trailing bytes after the footer")
        same = {field: footers[0][start:stop] for field, (_, start, stop) in first.items() if field not in (3, 4)}
        rows = 0
        for k, (meta, shift) in enumerate(zip(footers, shifts)):
            fields = first
            if k:
                fields, more, _ = _footer(meta, shift, len(groups))
                groups = groups + more
            if {f: meta[a:b] for f, (_, a, b) in fields.items() if f not in (3, 4)} != same or \
                    fields.get(3, (0,))[0] != _T_I64 or fields.get(4, (0,))[0] != _T_LIST:
                raise _FooterError("the parts differ in more than their row groups")
            rows += _unzigzag(_varint(meta, fields[3][1])[0])
    except IndexError:
        raise _FooterError("a truncated footer") from None
    out, copied, meta = bytearray(), 0, footers[0]
    for field, (_, start, stop) in first.items():
        if field == 3:
            out += meta[copied:start] + _varint_bytes(_zigzag(rows))
        elif field == 4:
            out += meta[copied:start] + _list_header_bytes(len(groups), _T_STRUCT) + b"".join(groups)
        else:
            continue
        copied = stop
    out += meta[copied:]
    return bytes(out)


def _column_part(meta: bytes, shift: int) -> dict:
    """One pass over the FileMetaData of a part of a wide table whose body lies ``shift`` bytes further on in the
    joined file: its fields (id -> (type, value start, value end)), its schema's root element (start, end), the
    count and bytes of its other schema elements (2: one per column) and of its column orders (7), and its one row
    group (``_column_group``)."""
    fields, out, pos, last = {}, {"meta": meta}, 0, 0
    while True:
        field, kind, start = _header(meta, pos, last)
        if kind == _STOP:
            break
        if kind == _T_LIST and field in (2, 7):
            size, item, pos = _list_header(meta, start)
            first = pos
            for i in range(size):
                pos = _skip(meta, pos, item, True)
                if i == 0 and field == 2:
                    out["root"], first = (first, pos), pos
            out[field] = (size - (field == 2), meta[first:pos])
        elif kind == _T_LIST and field == 4:
            size, item, at = _list_header(meta, start)
            if size != 1 or item != _T_STRUCT:
                raise _FooterError("a part of one row group expected")
            out["group"], pos = _column_group(meta, at, shift)
        else:
            pos = _skip(meta, start, kind)
        fields[field] = (kind, start, pos)
        last = field
    if not {"root", 2, 7, "group"} <= set(out) or start != len(meta):
        raise _FooterError("a part's footer without its schema, row group or column orders")
    out["fields"] = fields
    group = out["group"]
    kv = [(k, v if k != b"ARROW:schema" else None) for k, v, *_ in _key_values(meta, fields[5][1])] \
        if 5 in fields else None
    root = _fields_of(meta, *out["root"])
    # what every part must share: the other fields, the key-value pairs but the Arrow schema, the schema's root
    # but its number of columns, the row group's fields, rows, file offset and ordinal
    out["shared"] = ({i: meta[a:b] for i, (_, a, b) in fields.items() if i not in (2, 4, 5, 7)}, kv,
                     _replaced(meta, *out["root"], root, {5: b""}), sorted(group["fields"]), group.get(3),
                     group.get(5) == 4, group.get(7))
    return out


def _column_group(meta: bytes, pos: int, shift: int) -> tuple[dict, int]:
    """The RowGroup at ``pos`` of a part's footer: its fields and their integers, its ColumnChunks (count, bytes;
    offsets moved by ``shift``), where it starts and ends; and the position after it."""
    group, fields, last = {"start": pos}, {}, 0
    while True:
        field, kind, start = _header(meta, pos, last)
        if kind == _STOP:
            break
        if field == 1 and kind == _T_LIST:
            _, items, pos = _patched_list(meta, start, _PART_COLUMN_CHUNK, shift, 0, 0)
            group["columns"] = (len(items), b"".join(items))
        elif field in (2, 3, 5, 6) and kind == _T_I64 or field == 7 and kind == _T_I16:
            value, pos = _varint(meta, start)
            group[field] = _unzigzag(value)
        else:
            raise _FooterError(f"row group field {field} cannot be joined")
        fields[field] = (kind, start, pos)
        last = field
    if not {"columns", 2, 6} <= set(group):
        raise _FooterError("a row group without its columns or sizes")
    group["fields"], group["end"] = fields, start
    return group, start


def _replaced(buf: bytes, start: int, end: int, fields: dict, values: dict) -> bytes:
    """The struct ``buf[start:end]`` (its ``fields``: id -> (type, value start, value end)) with the values of the
    fields in ``values`` (id -> encoded value) replaced."""
    out, copied = bytearray(), start
    for field, (_, a, b) in sorted(fields.items(), key=lambda item: item[1][1]):
        if field in values:
            out += buf[copied:a] + values[field]
            copied = b
    out += buf[copied:end]
    return bytes(out)


def _fields_of(buf: bytes, start: int, end: int) -> dict:
    """The fields (id -> (type, value start, value end)) of the struct ``buf[start:end]``."""
    fields, stop = _fields(buf, start)
    if stop != end:
        raise _FooterError("a struct's end moved")
    return {f: (k, a, b) for f, k, a, b in fields}


def _key_values(meta: bytes, start: int) -> list[tuple]:
    """The KeyValue list at ``start``: (key, value, struct start, struct end, fields) of each."""
    size, item, pos = _list_header(meta, start)
    if item != _T_STRUCT:
        raise _FooterError("key-value metadata of structs expected")
    out = []
    for _ in range(size):
        fields, end = _fields(meta, pos)
        values = {f: meta[_varint(meta, a)[1]:b] for f, k, a, b in fields if k == 8}  # binary: length, bytes
        out.append((values.get(1), values.get(2), pos, end, {f: (k, a, b) for f, k, a, b in fields}))
        pos = end
    return out


def _merge_columns(parts: list[dict], arrow_schema: bytes) -> bytes:
    """The FileMetaData of the whole table whose groups of columns the parts (``_column_part``) hold: the first
    part's, with the schema's root counting every column and every part's elements after it, one row group of
    every part's ColumnChunks (their sizes added), ``arrow_schema`` (base64) as the value of the key
    ``ARROW:schema``, and every part's column orders. The parts must agree on everything else."""
    first, meta = parts[0], parts[0]["meta"]
    if any(p["shared"] != first["shared"] for p in parts[1:]):
        raise _FooterError("the parts differ in more than their columns")
    columns = sum(p[2][0] for p in parts)
    root = _fields_of(meta, *first["root"])
    if 5 not in root:
        raise _FooterError("a schema root without its number of columns")
    group = first["group"]
    values = {
        2: _list_header_bytes(columns + 1, _T_STRUCT) + _replaced(meta, *first["root"], root, {
            5: _varint_bytes(_zigzag(columns))}) + b"".join(p[2][1] for p in parts),
        4: _list_header_bytes(1, _T_STRUCT) + _replaced(meta, group["start"], group["end"], group["fields"], {
            1: _list_header_bytes(columns, _T_STRUCT) + b"".join(p["group"]["columns"][1] for p in parts),
            2: _varint_bytes(_zigzag(sum(p["group"][2] for p in parts))),
            6: _varint_bytes(_zigzag(sum(p["group"][6] for p in parts)))}),
        7: _list_header_bytes(sum(p[7][0] for p in parts), _T_STRUCT) + b"".join(p[7][1] for p in parts)}
    if 5 in first["fields"]:
        pairs = _key_values(meta, first["fields"][5][1])
        values[5] = _list_header_bytes(len(pairs), _T_STRUCT) + b"".join(
            _replaced(meta, start, end, fields, {2: _varint_bytes(len(arrow_schema)) + arrow_schema}
                      if key == b"ARROW:schema" else {}) for key, _, start, end, fields in pairs)
    return _replaced(meta, 0, len(meta), first["fields"], values)
