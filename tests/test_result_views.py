"""The result as labelled tables (to_frame), its cached labels, and the public functions' numpy-style docstrings."""
from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest

import gcnmops
from gcnmops import InputError
from gcnmops.example import example_cohort
from gcnmops.params import METHODS


@pytest.fixture(scope="module")
def result():
    data, _ = example_cohort(n_regions=300, n_samples=6, n_cnvs=2, seed=4)
    return gcnmops.calc_integer_copy_numbers(gcnmops.cn_mops(data, backend="cpu"))


def test_integer_copy_number_labels_are_cached_and_read_only(result):
    labels = result.integer_copy_number
    assert labels is result.integer_copy_number  # not rebuilt on every access
    np.testing.assert_array_equal(labels, np.asarray(result.classes, dtype=object)[result.cn_index])
    with pytest.raises(ValueError):
        labels[0, 0] = "CN9"
    other = result.replace(cn_index=np.zeros_like(result.cn_index))
    assert other.integer_copy_number is not labels and set(other.integer_copy_number.ravel()) == {result.classes[0]}
    import pickle

    back = pickle.loads(pickle.dumps(result))
    assert "_labels" not in back.__dict__ and (back.integer_copy_number == labels).all()


@pytest.mark.parametrize("name", ["normalized_data", "local_assessments", "individual_call", "integer_copy_number",
                                  "ini_call", "params_L", "params_A"])
def test_to_frame(result, name):
    frame = result.to_frame(name)
    m = len(result.gr)
    assert isinstance(frame, pd.DataFrame) and len(frame) == m
    assert list(frame.index.names) == ["seqnames", "start", "end"]
    assert frame.index.get_level_values("start").tolist() == result.gr["start"].tolist()
    expected = {"ini_call": ["ini_call"], "params_L": result.classes, "params_A": result.classes}.get(
        name, list(result.sample_names))
    assert list(frame.columns) == expected
    source = {"integer_copy_number": result.integer_copy_number, "ini_call": result.ini_call.reshape(-1, 1),
              "params_L": result.params["L"], "params_A": result.params["A"]}.get(name, getattr(result, name, None))
    np.testing.assert_array_equal(frame.to_numpy(), source)
    if name in ("normalized_data", "local_assessments", "individual_call"):
        assert np.shares_memory(frame.to_numpy(), source)  # a view, not a copy
    named = result.to_frame(name, index="names")
    assert named.index.tolist() == result.region_names and named.index.name == "region"


def test_to_frame_selects_by_label(result):
    frame = result.to_frame("integer_copy_number")
    cnv = result.cnvs.iloc[0]
    rows = frame.loc[cnv["seqnames"]]
    inside = rows[(rows.index.get_level_values("start") >= cnv["start"]) &
                  (rows.index.get_level_values("end") <= cnv["end"])][cnv["sampleName"]]
    assert len(inside) and (inside != result.params["mainClass"]).any()
    with pytest.raises(InputError, match="unknown matrix"):
        result.to_frame("posterior")
    with pytest.raises(InputError, match="index must be"):
        result.to_frame("local_assessments", index="rows")


PUBLIC = ["cn_mops", "exome_cn_mops", "haplo_cn_mops", "reference_cn_mops", "single_cn_mops", "count_reads",
          "calc_integer_copy_numbers", "read_counts", "read_result"]


@pytest.mark.parametrize("name", PUBLIC)
def test_public_functions_have_numpy_docstrings(name):
    fn = getattr(gcnmops, name)
    doc = inspect.getdoc(fn)
    for section in ("Parameters\n----------", "Returns\n-------"):
        assert section in doc, f"{name}: no {section.splitlines()[0]} section"
    for p in inspect.signature(fn).parameters.values():
        head = f"**{p.name}" if p.kind is p.VAR_KEYWORD else f"{p.name} :"
        assert head in doc or f"{p.name}, " in doc, f"{name}: parameter {p.name} not documented"
    assert "{parameters}" not in doc and "{returns}" not in doc


def test_family_docstrings_show_each_methods_defaults():
    haplo = inspect.getdoc(gcnmops.haplo_cn_mops)
    assert f"upper_threshold : float, default {METHODS['haplo'].parameter_defaults()['upper_threshold']!r}" in haplo
    exome = inspect.getdoc(gcnmops.exome_cn_mops)
    assert "prior_impact : float, default 10" in exome and "priorImpact" in exome
    assert "min_read_count : float, default 5" in inspect.getdoc(gcnmops.cn_mops)
