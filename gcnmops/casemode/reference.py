"""The stored reference cohort: ``Reference`` and its versioned on-disk store.

A store is a folder:

    manifest.json          format "gcnmops-reference", format_version, gcnmops and cn.mops versions, method,
                           parameters (CnMopsParams's names), cohort sample names, regions count, sex settings
                           and the cohort's sexes, the norm=2 coverage median, per part its settings and its
                           normalization state (per chromosome: rows, status, level R_l, mode D_l, totals)
    ranges.parquet         seqnames, start, end of the regions (ranged input only)
    counts.npy             the cohort's counts (m, N) float64, column-major (``keep_counts=True``: needed by
                           mode="refit")
    part-<name>/rows.npy   the part's rows (int64; absent: every row), lambda.npy and alpha.npy (rows x classes,
                           float64, column-major), silent.npy (bool: rows silent in the cohort)

It is written under a temporary name and renamed when complete. A reader refuses a store of another format or a
newer format version (update gcnmops) with an InputError naming it.
"""
from __future__ import annotations

import json
import math
import re
import shutil
import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..files import check_target, holds_only, publish_folder, remove_stale, temp_folder
from ..params import METHODS, VERSION, CnMopsParams
from .normalize import NormState
from .parts import Part, PartFit

FORMAT = "gcnmops-reference"
#: the store's layout version this gcnmops writes and the newest it reads
FORMAT_VERSION = 1
MANIFEST = "manifest.json"


@dataclass
class Reference:
    """A fitted reference cohort (m regions, N samples, n classes).

    ``method``: METHODS key ("cn.mops", "exome", "haplo"); ``params``: its CnMopsParams; ``sample_names`` (N);
    ``ranges``: seqnames/start/end or None (a bare matrix of ``n_regions`` rows); ``fits``: the model's parts
    (parts.py: lambda and alpha per region and class, the normalization state); ``coverage_median``: norm=2's
    divisor (NaN otherwise); ``sex_aware``, ``genome``, ``cohort_sex`` (per sample: sex, x_ratio, y_ratio, given;
    None unless sex-aware); ``counts``: the cohort's (m, N) counts, order F, or None.
    """

    method: str
    params: CnMopsParams
    sample_names: list[str]
    ranges: pd.DataFrame | None
    n_regions: int
    fits: list[PartFit]
    coverage_median: float = math.nan
    sex_aware: bool = False
    genome: str | None = None
    cohort_sex: list[dict] | None = None
    counts: np.ndarray | None = None

    @property
    def n_samples(self) -> int:
        return len(self.sample_names)

    def qc_levels(self, result) -> np.ndarray:
        """Each window's level that the sample QC takes new samples' log2 ratios against, (m,) float64: the
        normal class's lambda of ``result`` (their call against this reference; ``calls.qc.normal_levels``), NaN
        where it depends on the sample's sex (the rows of the parts that hold one sex's samples)."""
        from ..calls.qc import normal_levels

        levels = normal_levels(result)
        for fit in self.fits:
            if fit.part.sexes and fit.part.rows is not None:
                levels[fit.part.rows] = np.nan
        return levels

    def __repr__(self) -> str:
        return (f"Reference({self.method}: {self.n_regions:,} regions x {self.n_samples} samples, "
                f"{len(self.params.classes)} classes, parts {[f.part.name for f in self.fits]}, "
                f"counts {'kept' if self.counts is not None else 'not kept'})")

    def save(self, path) -> Path:
        """Write the store to folder ``path`` (replacing a reference stored there); returns the path."""
        return save_reference(self, path)


def _params_json(p: CnMopsParams) -> dict:
    return {f.name: (list(v) if isinstance(v, tuple) else v) for f in fields(p) for v in [getattr(p, f.name)]}


def _params_from_json(d: dict) -> CnMopsParams:
    d = dict(d)
    for k in ("I", "classes"):
        d[k] = tuple(d[k])
    return CnMopsParams(**d)


def is_reference_store(path: Path) -> bool:
    """True when the folder ``path`` is a reference store gcnmops wrote: its manifest names the format and the
    folder holds nothing but the store's files (``save_reference`` replaces only such a folder)."""
    try:
        man = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(man, dict) and man.get("format") == FORMAT and holds_only(path, _STORE_FILES.match)


#: the files of a store (module docstring), relative names
_STORE_FILES = re.compile(r"^(manifest\.json|ranges\.parquet|counts\.npy|"
                          r"part-[^/]+(/(rows|lambda|alpha|silent)\.npy)?)$")


def save_reference(ref: Reference, path) -> Path:
    """Write ``ref`` to the folder ``path`` (module docstring) under a temporary name, then rename; a store
    already there is replaced, any other existing file or folder is refused (InputError)."""
    path = Path(path)
    if not path.parent.exists():
        raise InputError(f"Folder {path.parent} does not exist: create it first.")
    path = check_target(path, is_reference_store, "the reference")
    remove_stale(path.parent)  # of a build killed outright
    tmp = None
    try:
        tmp = temp_folder(path)
        parts = []
        for pf in ref.fits:
            d = tmp / f"part-{pf.part.name}"
            d.mkdir()
            entry = pf.part.manifest()
            if pf.part.rows is not None:
                np.save(d / "rows.npy", pf.part.rows)
            entry["fitted"] = pf.lam is not None
            if pf.lam is not None:
                np.save(d / "lambda.npy", np.asfortranarray(pf.lam))
                np.save(d / "alpha.npy", np.asfortranarray(pf.alpha))
                np.save(d / "silent.npy", pf.norm.silent)
                entry["normalization"] = pf.norm.manifest()
            parts.append(entry)
        if ref.ranges is not None:
            ref.ranges[["seqnames", "start", "end"]].astype({"seqnames": str}).to_parquet(tmp / "ranges.parquet")
        if ref.counts is not None:
            np.save(tmp / "counts.npy", np.asfortranarray(ref.counts))
        manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "gcnmops_version": _gcnmops_version(),
            "cn_mops_version": VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "method": ref.method, "params": _params_json(ref.params), "sample_names": list(ref.sample_names),
            "n_regions": ref.n_regions, "ranged": ref.ranges is not None, "has_counts": ref.counts is not None,
            "coverage_median": None if math.isnan(ref.coverage_median) else ref.coverage_median,
            "sex_aware": ref.sex_aware, "genome": ref.genome, "cohort_sex": ref.cohort_sex, "parts": parts,
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
        publish_folder(tmp, path)
    except BaseException as err:  # an interruption (Ctrl-C, SIGTERM) too: nothing is left
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError):
            raise InputError(f"Cannot write the reference to {path}: {err.strerror or err}.") from None
        raise
    return path


def load_reference(path) -> Reference:
    """Read a reference store written by :meth:`Reference.save` (or ``gcnmops reference build``)."""
    path = Path(path)
    man_path = path / MANIFEST
    if not man_path.is_file():
        raise InputError(f"{path} is not a gcnmops reference (no {MANIFEST}): build one with gcnmops.build_reference "
                         "or `gcnmops reference build`.")
    try:
        man = json.loads(man_path.read_text())
    except (OSError, ValueError, RecursionError) as err:  # RecursionError: arrays nested beyond the parser's depth
        raise InputError(f"{man_path} cannot be read as a reference manifest: {err}.") from None
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        what = man.get("format") if isinstance(man, dict) else None
        raise InputError(f"{path} is not a gcnmops reference (format {what!r}).")
    version = man.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise InputError(f"{path}: unknown reference format version {version!r}; rebuild the reference.")
    if version > FORMAT_VERSION:
        raise InputError(f"{path} was written by a newer gcnmops ({man.get('gcnmops_version')}, reference format "
                         f"version {version}; this gcnmops {_gcnmops_version()} reads up to {FORMAT_VERSION}): "
                         "update gcnmops.")
    _check_manifest(man, path)
    try:
        fits = []
        for entry in man["parts"]:
            d = path / f"part-{entry['name']}"
            rows = np.load(d / "rows.npy") if (d / "rows.npy").exists() else None
            part = Part(entry["name"], rows, tuple(entry["sexes"]), entry["main_class"], float(entry["fold_scale"]),
                        entry["fixed"])
            if entry["fitted"]:
                fits.append(PartFit(part, np.load(d / "lambda.npy"), np.load(d / "alpha.npy"),
                                    NormState.from_manifest(entry["normalization"], np.load(d / "silent.npy"))))
            else:
                fits.append(PartFit(part, None, None, None))
        ranges = pd.read_parquet(path / "ranges.parquet") if man["ranged"] else None
        counts = np.load(path / "counts.npy") if man["has_counts"] else None
        cm = man["coverage_median"]
        params = _params_from_json(man["params"])
        ref = Reference(method=man["method"], params=params, sample_names=list(man["sample_names"]), ranges=ranges,
                        n_regions=int(man["n_regions"]), fits=fits, coverage_median=math.nan if cm is None else float(cm),
                        sex_aware=bool(man["sex_aware"]), genome=man["genome"], cohort_sex=man["cohort_sex"],
                        counts=counts)
    except (OSError, KeyError, ValueError, TypeError, AttributeError, IndexError) as err:
        raise InputError(f"The reference {path} is incomplete or damaged ({type(err).__name__}: {err}); rebuild "
                         "it.") from None
    except InputError as err:
        raise InputError(f"The reference {path} is damaged: {err} Rebuild it.") from None
    check_reference(ref, str(path))
    return ref


def check_reference(ref: Reference, where: str) -> None:
    """InputError unless every part of ``ref`` is what a build makes (``where`` names it): valid parameters; unique
    sample names; the regions' count and names; per fitted part its rows (sorted, in range), lambda and alpha
    float64 (rows of the part x classes) with finite lambdas >= 0 and alphas >= 0 summing to 1 per row, its
    normalization that of the parameters, its chromosome blocks tiling the part's rows in order (named as the
    regions are), its silent rows one bool per row; the coverage median of norm=2; the counts kept (regions x
    samples, finite, >= 0)."""
    from ..data import check_names, chromosome_blocks, validate_counts, validate_ranges

    def bad(what: str) -> InputError:
        return InputError(f"The reference {where} is damaged: {what}. Rebuild it (gcnmops reference build).")

    try:
        params = ref.params.validated()
    except (InputError, TypeError, ValueError) as err:
        raise bad(f"its parameters are invalid ({err})") from None
    m, n_classes = ref.n_regions, len(params.classes)
    names = ref.sample_names
    if m < 1 or not names or not all(isinstance(s, str) for s in names) or len(set(names)) != len(names):
        raise bad(f"{m} regions, sample names {names!r} (need regions and unique names)")
    check_names(names)
    seq = None
    if ref.ranges is not None:
        try:
            ranges = validate_ranges(ref.ranges, m)
        except InputError as err:
            raise bad(f"its regions: {err}") from None
        check_names([b[0] for b in chromosome_blocks(ranges["seqnames"])], kind="Chromosome name")
        seq = ranges["seqnames"].to_numpy(dtype=object)
    if ref.counts is not None:
        c = ref.counts
        if not isinstance(c, np.ndarray) or c.dtype != np.float64 or c.shape != (m, len(names)):
            raise bad(f"its counts are {getattr(c, 'dtype', type(c))} of shape {getattr(c, 'shape', None)}, not "
                      f"float64 ({m}, {len(names)})")
        validate_counts(c, f"counts of the reference {where}")
    if params.norm == 2 and not (math.isfinite(ref.coverage_median) and ref.coverage_median > 0):
        raise bad(f"its coverage median is {ref.coverage_median} (norm=2 needs a positive number)")
    for fit in ref.fits:
        part, label = fit.part, f"part {fit.part.name!r}"
        rows = part.rows
        if rows is not None:
            if (not isinstance(rows, np.ndarray) or rows.ndim != 1 or rows.dtype.kind not in "iu" or
                    (rows.size and (rows[0] < 0 or rows[-1] >= m or np.any(np.diff(rows) <= 0)))):
                raise bad(f"the rows of {label} are not increasing row numbers below {m}")
        r = m if rows is None else int(rows.size)
        if fit.lam is None:
            continue
        for name, a in (("lambda", fit.lam), ("alpha", fit.alpha)):
            if not isinstance(a, np.ndarray) or a.dtype != np.float64 or a.shape != (r, n_classes):
                raise bad(f"the {name} of {label} is {getattr(a, 'dtype', type(a))} of shape "
                          f"{getattr(a, 'shape', None)}, not float64 ({r} rows, {n_classes} classes)")
            if not np.isfinite(a).all() or (a < 0).any():
                raise bad(f"the {name} of {label} holds values that are not finite numbers >= 0")
        if r and not np.allclose(fit.alpha.sum(axis=1), 1.0, rtol=0, atol=1e-6):
            raise bad(f"the alphas of {label} do not sum to 1 per region")
        norm = fit.norm
        expect = (params.norm, params.norm_type, params.size_factor, float(params.qu_size_factor))
        if norm is None or (norm.norm, norm.norm_type, norm.size_factor, norm.qu_size_factor) != expect:
            raise bad(f"the normalization of {label} is not that of its parameters (norm {params.norm}, normType "
                      f"{params.norm_type}, sizeFactor {params.size_factor}, quSizeFactor {params.qu_size_factor})")
        silent = norm.silent
        if not isinstance(silent, np.ndarray) or silent.dtype != bool or silent.shape != (r,):
            raise bad(f"the silent rows of {label} are not one bool per row ({r})")
        at = 0
        for level in norm.levels:
            if level.first != at or level.end <= level.first or level.status not in ("untouched", "ones", "scaled"):
                raise bad(f"the chromosome blocks of {label}'s normalization do not tile its {r} rows in order")
            if level.status == "scaled" and not (math.isfinite(level.reference) and
                                                 (math.isnan(level.mode) or level.mode > 0)):
                raise bad(f"the normalization level of chromosome {level.name!r} in {label} is not a finite number")
            if seq is not None and seq[level.first if rows is None else rows[level.first]] != level.name:
                raise bad(f"the normalization of {label} names chromosome {level.name!r} where its regions are on "
                          f"{seq[level.first if rows is None else rows[level.first]]!r}")
            at = level.end
        if at != r and r:
            raise bad(f"the chromosome blocks of {label}'s normalization cover {at} of its {r} rows")


#: the manifest's entries and the JSON types each may have (None: null); every part entry's likewise
_MANIFEST_TYPES = {"method": str, "params": dict, "sample_names": list, "n_regions": int, "ranged": bool,
                   "has_counts": bool, "coverage_median": (int, float, type(None)), "sex_aware": bool,
                   "genome": (str, type(None)), "cohort_sex": (list, type(None)), "parts": list}
_PART_TYPES = {"name": str, "sexes": list, "main_class": str, "fold_scale": (int, float), "fitted": bool}


def _check_manifest(man: dict, path: Path) -> None:
    """InputError naming the first entry of the manifest ``man`` that is missing or of the wrong type, a part
    whose name is not a folder of the store, or a count of regions below one."""
    def check(entries: dict, types: dict, where: str) -> None:
        for key, kind in types.items():
            value = entries.get(key, KeyError)
            if value is KeyError or not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
                got = "missing" if value is KeyError else f"{type(value).__name__} {str(value)[:40]!r}"
                raise InputError(f"The reference {path} is damaged: {where}{key!r} is {got}. Rebuild it.")

    check(man, _MANIFEST_TYPES, "manifest entry ")
    if man["method"] not in METHODS:
        raise InputError(f"The reference {path} is damaged: its method {man['method'][:40]!r} is none of "
                         f"{', '.join(METHODS)}. Rebuild it.")
    if man["n_regions"] < 1 or not man["parts"]:
        raise InputError(f"The reference {path} is damaged: it holds {man['n_regions']} regions and "
                         f"{len(man['parts'])} parts. Rebuild it.")
    for k, part in enumerate(man["parts"]):
        if not isinstance(part, dict):
            raise InputError(f"The reference {path} is damaged: part {k + 1} is not a mapping. Rebuild it.")
        check(part, {**_PART_TYPES, **({"normalization": dict} if part.get("fitted") else {})}, f"part {k + 1}'s ")
        if not _STORE_FILES.match(f"part-{part['name']}") or part["name"] in (".", "..") or "\\" in part["name"]:
            raise InputError(f"The reference {path} is damaged: part {k + 1}'s name {part['name'][:40]!r} is not a "
                             "folder of the store. Rebuild it.")


def _gcnmops_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gcnmops")
    except PackageNotFoundError:  # run from a source tree
        return "unknown"


__all__ = ["Reference", "save_reference", "load_reference", "check_reference", "FORMAT", "FORMAT_VERSION"]
