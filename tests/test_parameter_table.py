"""The one parameter table (params.PARAMETERS): every CnMopsParams field has a row, and every face reads it -- the
command line has a flag for each (run and reference build) whose value reaches the method, the R bridge maps each
cn.mops name (R's gcn.mops() takes each), batch manifests take both spellings, the docstrings describe each."""
from __future__ import annotations

import inspect
import re
from dataclasses import fields
from pathlib import Path

import pytest

import gcnmops
from gcnmops.params import METHODS, PARAMETERS, CnMopsParams, parameter_name

REPO = Path(__file__).resolve().parents[1]
#: a value of every parameter unlike cn.mops's default (kept in sync with the table: a new row fails below)
VALUES = dict(I=(0.025, 0.5, 1.0, 1.5, 2.0), classes=("CN0", "CN1", "CN2", "CN3", "CN4"), prior_impact=2.5, cyc=15,
              norm=2, norm_type="mean", size_factor="median", norm_qu=0.3, qu_size_factor=0.6, upper_threshold=0.4,
              lower_threshold=-0.8, min_width=4, seg_algorithm="DNAcopy", min_read_count=3.0, use_median=True,
              return_posterior=True)


def test_every_parameter_has_one_row():
    set_by_method = {"method", "main_class", "segment_args"}
    assert [f.name for f in fields(CnMopsParams) if f.name not in set_by_method] == list(PARAMETERS)
    assert set(VALUES) == set(PARAMETERS)
    assert len({p.r_name for p in PARAMETERS.values()}) == len(PARAMETERS)
    defaults = CnMopsParams()
    for name, value in VALUES.items():
        assert value != getattr(defaults, name), name
    p = METHODS["cn.mops"].params(**VALUES)
    assert all(getattr(p, name) == value for name, value in VALUES.items())
    r = p.r_params()  # the result's params list: cn.mops's names of the rows it holds
    assert r["folds"] == list(VALUES["I"]) and r["priorImpact"] == 2.5 and "sizeFactor" not in r


def _cli_words(name, value) -> list[str]:
    flag = PARAMETERS[name].flag
    if isinstance(value, bool):
        return [flag]
    return [flag, ",".join(map(str, value)) if isinstance(value, tuple) else str(value)]


@pytest.mark.parametrize("command", [["run", "in.tsv", "-o", "out"], ["reference", "build", "in.tsv", "-o", "ref"]])
def test_the_command_line_has_a_flag_for_each(command):
    from gcnmops.cli import _method_kwargs, build_parser

    parser = build_parser()
    assert all(PARAMETERS[n].flag == "--" + n.replace("_", "-") for n in PARAMETERS)
    words = [w for name, value in VALUES.items() for w in _cli_words(name, value)]
    args = parser.parse_args(command + words)
    kwargs = _method_kwargs(args, METHODS["cn.mops"])
    assert {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()} == VALUES
    none = _method_kwargs(parser.parse_args(command), METHODS["cn.mops"])
    assert none == {}  # not given: the method's default, whatever the method
    sub = parser._subparsers._group_actions[0].choices[command[0]]
    if command[0] == "reference":
        sub = sub._subparsers._group_actions[0].choices["build"]
    helps = {a.dest: a.help for a in sub._actions}
    for p in PARAMETERS.values():
        assert helps[p.name].startswith(f"cn.mops {p.r_name}: ") and "default" in helps[p.name], p.name
    assert "exome 10.0" in helps["prior_impact"] and "haplo 0.6" in helps["upper_threshold"]


def test_manifests_and_docstrings_take_the_rows():
    for p in PARAMETERS.values():
        assert parameter_name(p.r_name) == p.name and parameter_name(p.name) == p.name
        for fn in (gcnmops.cn_mops, gcnmops.haplo_cn_mops):
            if p.name in inspect.signature(fn).parameters:
                assert f"{p.name} : " in fn.__doc__ and f"cn.mops's ``{p.r_name}``" in fn.__doc__, (fn, p.name)
    assert parameter_name("segMedianT") == "seg_median_t"  # the segmentation's names: converted


def test_the_r_package_takes_every_cn_mops_name():
    """R's gcn.mops() (R code, cn.mops's formals) has an argument for each row's cn.mops name."""
    text = (REPO / "r_package" / "gcn.mops" / "R" / "gcn.mops.R").read_text()
    head = re.search(r"^gcn\.mops <- function\((.*?)\) \{", text, re.S | re.M).group(1)
    formals = set(re.findall(r"(?:^|,)\s*([A-Za-z.][A-Za-z0-9._]*)\s*(?==|,|$)", head))
    assert {p.r_name for p in PARAMETERS.values()} <= formals


def _r_value(value) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, tuple):
        return "c(" + ", ".join(_r_value(v) for v in value) + ")"
    return f'"{value}"' if isinstance(value, str) else repr(value)


def test_the_r_bridge_maps_each_cn_mops_name():
    """An R list of cn.mops's arguments (R's names, R's types: whole numbers as doubles) through the bridge is the
    same CnMopsParams as the Python keywords; an engine message names the parameters as R does."""
    try:
        from gcnmops.io.rsession import r_session
        session = r_session()
    except Exception as err:  # noqa: BLE001 - rpy2 missing, or R failing to start
        pytest.skip(f"R through rpy2 is not available: {err}")
    from gcnmops.rbridge import _family_kwargs, _params_from_r, _r_names

    code = "list(" + ", ".join(f"{PARAMETERS[n].r_name} = {_r_value(v)}" for n, v in VALUES.items()) + \
        ", parallel = 2, segment_args = list(segMedianT = c(0.5, -0.5)))"
    with session.conversion():
        plist = session.ro.r(code)
    ours = METHODS["cn.mops"].params(segment_args={"seg_median_t": [0.5, -0.5]}, **VALUES)
    assert _params_from_r(plist) == ours
    kw = _family_kwargs(plist)
    assert kw.pop("parallel") == 2 and kw.pop("seg_median_t") == [0.5, -0.5]
    assert {k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()} == VALUES
    assert isinstance(kw["cyc"], int) and isinstance(kw["min_width"], int)
    assert _r_names("size_factor and qu_size_factor, min_width") == "sizeFactor and quSizeFactor, minWidth"
