"""CNVDetectionResult: everything cn.mops returns, as numpy arrays and pandas tables.

Matrices are float64 (regions x samples), column-major (region-fastest), the layout of R
matrices; copy-number labels are kept as int8 class indices (``cn_index``) and turned into
strings on demand.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from .data import chromosome_blocks, region_names as row_names_of
from .errors import InputError

SEGMENT_COLUMNS = ["seqnames", "start", "end", "sampleName", "median", "mean", "CN"]


def empty_segments() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in zip(
        SEGMENT_COLUMNS, [object, np.int64, np.int64, object, np.float64, np.float64, object])})


def cnvr_frame(seqnames, start, end, sample_names: list[str], labels=None) -> pd.DataFrame:
    """CNV regions: seqnames, start, end + one object column of copy-number labels per sample (``labels``:
    (regions, samples) array, or a list of per-sample columns; None: every label missing), built at once."""
    n = len(start)
    cells = np.full((n, len(sample_names)), None, dtype=object)  # one block: no column-by-column frame to merge
    if isinstance(labels, np.ndarray):
        cells[:] = labels
    elif labels is not None:
        for k in range(len(sample_names)):
            cells[:, k] = np.asarray(labels[k], dtype=object)
    # object columns under any pandas (pandas 3 would otherwise convert every label column to its string dtype);
    # the block is the frame's own (no copy), the coordinates put in front of it
    frame = pd.DataFrame(cells, columns=list(sample_names), dtype=object, copy=False)
    for name, values in (("end", np.asarray(end, dtype=np.int64)), ("start", np.asarray(start, dtype=np.int64)),
                         ("seqnames", np.asarray(seqnames, dtype=object))):
        frame.insert(0, name, values, allow_duplicates=True)
    return frame


def empty_cnvr(sample_names: list[str]) -> pd.DataFrame:
    return cnvr_frame([], [], [], sample_names)


#: the matrices of a result: its slot, or "L" / "A" of its params (regions x classes)
MATRIX_SLOTS = ("normalized_data", "local_assessments", "individual_call", "ini_call", "cn_index", "posterior_probs",
                "L", "A")


def read_rows(array, rows: np.ndarray | None = None) -> np.ndarray:
    """Rows ``rows`` (sorted indices; None: all) of a matrix wherever it lives: a numpy array, a Zarr array (only
    those rows read) or a Dask array (computed in this process's threads); a column-major numpy array."""
    if hasattr(array, "dask"):
        return np.asfortranarray((array if rows is None else array[rows]).compute(scheduler="threads"))
    if hasattr(array, "oindex"):
        return np.asfortranarray(array[...] if rows is None else array.oindex[rows])
    return np.asfortranarray(array if rows is None else array[rows])


#: the names of what a run left out or filtered (``Result.selection``; params.json holds them beside cn.mops's)
SELECTION_KEYS = ("excludedSamples", "excludeBed", "excludedWindows", "minLength", "minQuality")


@dataclass(repr=False)
class Result:
    """cn.mops's CNVDetectionResult slots in snake_case (m regions, N samples, n classes), the matrices wherever
    they live: numpy arrays (:class:`CNVDetectionResult`), a Zarr store (``outputs.resultstore.StoredResult``) or
    Dask arrays (``distributed.DistributedResult``); a matrix not kept is None.

    Attributes
    ----------
    gr : DataFrame
        seqnames, start, end of every region (1-based, closed; a bare matrix: "undef", i..i).
    normalized_data : (m, N) float64
        the counts the model saw (cn.mops's normalizedData), region-fastest (order F) as R's matrices.
    local_assessments : (m, N) float64
        sINI: the posterior-weighted log2 fold change of each region and sample (what is segmented).
    individual_call : (m, N) float64
        each region's segment mean (median with useMedian) of sINI per sample (individualCall).
    ini_call : (m,) float64
        INI, the region's informative/non-informative call (iniCall).
    cn_index : (m, N) int8
        index into ``params['classes']`` of each region's expected copy number.
    posterior_probs : (m, n, N) float64 or None
        posterior probabilities (with ``return_posterior=True``).
    params : dict
        cn.mops's params list under cn.mops's names (method, folds, classes, priorImpact, ..., mainClass) incl.
        ``cov`` (N,) numpy, ``L`` (lambda) and ``A`` (alpha), (m, n) matrices each.
    segmentation, cnvs : DataFrame
        SEGMENT_COLUMNS: seqnames, start, end, sampleName, median, mean (of sINI), CN.
    cnvr : DataFrame
        CNV regions: seqnames, start, end + one column per sample (copy-number labels, None before
        integer copy numbers).
    sample_names : list of str
    ranged : bool
        False for a bare matrix input (no genomic coordinates).
    timings : dict
        seconds per stage.
    gpu_stats : dict
        the GPU backend's sub-stage seconds and counts (norm_*, model_*, seg_*; empty on the CPU).
    sample_qc : DataFrame or None
        per-sample quality control (``calls.qc.sample_qc``: coverage, spread, calls, outlier flag, exclusion) of a
        run made by ``run_and_write``, ``run_streaming`` or ``gcnmops call``; None otherwise.
    selection : dict
        what the run left out or filtered, under these names where used: ``excludedSamples`` (names),
        ``excludeBed`` (path), ``excludedWindows`` (count), ``minLength`` (bp), ``minQuality`` (phred).
    provenance : dict
        what made the result (version, command line, date, backend, device, inputs: ``provenance.describe``);
        empty until a run or the writer fills it.
    call_evidence : calls.quality.CallEvidence or None
        what the call qualities need of the model, gathered where the matrices were at hand (each block of the
        run); None: made from the matrices when asked for.
    """

    gr: pd.DataFrame
    normalized_data: np.ndarray
    local_assessments: np.ndarray
    individual_call: np.ndarray
    ini_call: np.ndarray
    cn_index: np.ndarray
    posterior_probs: np.ndarray | None
    params: dict
    segmentation: pd.DataFrame
    cnvs: pd.DataFrame
    cnvr: pd.DataFrame
    sample_names: list[str]
    ranged: bool = True
    timings: dict = field(default_factory=dict)
    gpu_stats: dict = field(default_factory=dict)
    sample_qc: pd.DataFrame | None = None
    selection: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    call_evidence: object = None

    #: whether the matrices are numpy arrays in this process
    in_memory = False

    @property
    def classes(self) -> list[str]:
        return list(self.params["classes"])

    def summary(self) -> dict:
        """Counts for a one-screen report."""
        return {
            "regions": len(self.gr),
            "samples": len(self.sample_names),
            "chromosomes": len({name for name, _, _ in chromosome_blocks(self.gr["seqnames"])}),
            "segments": len(self.segmentation),
            "cnvs": len(self.cnvs),
            "cnv_regions": len(self.cnvr),
        }

    def has_integer_copy_numbers(self) -> bool:
        """True once calc_integer_copy_numbers has labelled the CNV regions (cnvr holds labels, not None)."""
        labels = self.cnvr[[s for s in self.sample_names if s in self.cnvr.columns]]
        return bool(len(labels)) and bool(labels.notna().to_numpy().any())

    def replace(self, **changes) -> "Result":
        """A new result with some slots replaced (arrays are shared, not copied)."""
        return replace(self, **changes)

    def slot(self, name: str):
        """The matrix ``name`` of MATRIX_SLOTS where it lives (None: not kept)."""
        return self.params.get(name) if name in ("L", "A") else getattr(self, name)

    def read(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        """Rows ``rows`` (None: all) of the kept matrix ``name`` of MATRIX_SLOTS in this process (``read_rows``)."""
        return read_rows(self.slot(name), rows)

    def rows(self, rows: np.ndarray | None = None, only: tuple[str, ...] = MATRIX_SLOTS) -> "CNVDetectionResult":
        """The result in this process (numpy arrays, column-major) with the regions ``rows`` (sorted indices;
        None: every region) and the whole call tables; the matrices ``only`` read, a matrix not read or not kept
        an empty (rows, 0) array (posteriors: None)."""
        count = len(self.gr) if rows is None else len(rows)
        values = {}
        for name in MATRIX_SLOTS:
            if name in only and self.slot(name) is not None:
                values[name] = self.read(name, rows)
            elif name != "posterior_probs":
                values[name] = np.empty((count,) if name == "ini_call" else (count, 0),
                                        dtype=np.int8 if name == "cn_index" else np.float64)
        params = dict(self.params, L=values.pop("L"), A=values.pop("A"))
        return CNVDetectionResult(
            gr=self.gr if rows is None else self.gr.iloc[rows].reset_index(drop=True), params=params,
            posterior_probs=values.pop("posterior_probs", None), **values, segmentation=self.segmentation,
            cnvs=self.cnvs, cnvr=self.cnvr, sample_names=list(self.sample_names), ranged=self.ranged,
            timings=dict(self.timings), gpu_stats=dict(self.gpu_stats), call_evidence=self.call_evidence,
            sample_qc=self.sample_qc, selection=dict(self.selection), provenance=dict(self.provenance))

    def compute(self) -> "CNVDetectionResult":
        """The whole result in this process as a CNVDetectionResult (numpy arrays, column-major): for results
        that fit in memory."""
        return self.rows()

    def __repr__(self) -> str:
        s = self.summary()
        integer = "integer copy numbers" if self.has_integer_copy_numbers() else "no integer copy numbers yet"
        return (f"<{type(self).__name__} {self.params.get('method', 'cn.mops')}: {s['regions']:,} regions x "
                f"{s['samples']} samples on {s['chromosomes']} chromosome(s); {s['segments']:,} segments, "
                f"{s['cnvs']:,} CNVs, {s['cnv_regions']:,} CNV regions; {integer}>")


@dataclass(repr=False)
class CNVDetectionResult(Result):
    """cn.mops's CNVDetectionResult: the slots of :class:`Result`, every matrix a numpy array in this process
    (``cn_index``'s labels: ``integer_copy_number``, cached).

    ``to_frame(name)`` gives a matrix as a DataFrame labelled by region and sample.
    """

    in_memory = True

    @property
    def region_names(self) -> list[str]:
        """cn.mops's row names ("chr_start_end") for ranged input; empty for a bare matrix (built on demand)."""
        return row_names_of(self.gr) if self.ranged else []

    @property
    def integer_copy_number(self) -> np.ndarray:
        """(m, N) read-only object array of class labels ("CN0", ...) of each region's expected copy number, made
        from ``cn_index`` on first use and kept while ``cn_index`` and the classes stay the same."""
        key = (id(self.cn_index), self.cn_index.shape, tuple(self.classes))
        cached = self.__dict__.get("_labels")
        if cached is None or cached[0] != key:
            labels = np.asarray(self.classes, dtype=object)[self.cn_index]
            labels.flags.writeable = False
            cached = (key, labels)
            self.__dict__["_labels"] = cached
        return cached[1]

    def to_frame(self, name: str, index: str = "ranges") -> pd.DataFrame:
        """A per-region matrix as a labelled DataFrame: one row per region, one column per sample (per class for
        ``params_L`` / ``params_A``; one column for ``ini_call``).

        name: ``normalized_data``, ``local_assessments``, ``individual_call``, ``integer_copy_number``,
            ``ini_call``, ``params_L`` or ``params_A`` (the names of the written files).
        index: ``"ranges"``: a MultiIndex (seqnames, start, end), 1-based closed (regions of a bare matrix:
            their row numbers from 1); ``"names"``: cn.mops's row names "chr_start_end".

        Float matrices are shared with the result, not copied (read-only views).
        """
        matrices = {"normalized_data": lambda: self.normalized_data,
                    "local_assessments": lambda: self.local_assessments,
                    "individual_call": lambda: self.individual_call,
                    "integer_copy_number": lambda: self.integer_copy_number,
                    "ini_call": lambda: np.asarray(self.ini_call).reshape(-1, 1),
                    "params_L": lambda: np.asarray(self.params["L"]), "params_A": lambda: np.asarray(self.params["A"])}
        if name not in matrices:
            raise InputError(f"to_frame: unknown matrix {name!r}; choose one of {', '.join(matrices)}.")
        if index not in ("ranges", "names"):
            raise InputError(f"to_frame: index must be 'ranges' or 'names', not {index!r}.")
        values = matrices[name]().view()
        values.flags.writeable = False
        if name.startswith("params_"):
            columns = pd.Index(self.classes, name="class")
        else:
            columns = pd.Index(["ini_call"] if name == "ini_call" else list(self.sample_names), name="sample")
        gr = self.gr
        if index == "names":
            rows = pd.Index(self.region_names if self.ranged else [str(i) for i in range(1, len(gr) + 1)],
                            name="region")
        else:
            rows = pd.MultiIndex.from_arrays([gr["seqnames"].to_numpy(), gr["start"].to_numpy(),
                                              gr["end"].to_numpy()], names=["seqnames", "start", "end"])
        return pd.DataFrame(values, index=rows, columns=columns, copy=False)

    def derived(self, name: str, build):
        """A value computed from the regions (``gr``) once per result object: ``build()`` on first use, kept
        while ``gr`` is the same frame. The writers ask for chromosome blocks and window indexes of every region
        many times (at 6.9M regions each pass over the chromosome names costs ~0.1-0.3 s)."""
        key = (name, id(self.gr), len(self.gr))
        store = self.__dict__.setdefault("_derived", {})
        if key not in store:
            store[key] = build()
        return store[key]

    def __getstate__(self) -> dict:
        """Pickled without the cached labels and derived values (made again on first use)."""
        state = self.__dict__.copy()
        state.pop("_labels", None)
        state.pop("_derived", None)
        state.pop("_derived_locks", None)
        return state

    def _repr_html_(self) -> str:
        import html

        s = self.summary()
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k.replace('_', ' '))}</th><td>{v:,}</td></tr>"
                       for k, v in s.items())
        return (f"<b>CNVDetectionResult</b> ({html.escape(str(self.params.get('method', 'cn.mops')))})"
                f"<table>{rows}</table>")

    def compute(self) -> "CNVDetectionResult":
        """This result (already in memory)."""
        return self

    def write(self, outdir, formats=None) -> list:
        """Write the result's tables and matrices under ``outdir``; returns the paths written."""
        from .outputs.writers import write_result

        return write_result(self, outdir, formats=formats)
