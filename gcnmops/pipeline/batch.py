"""Batch runs: many experiments from a manifest, dispatched to GPUs or CPU worker processes.

``python -m gcnmops batch MANIFEST -o OUTDIR [--devices all|0,1] [--workers N]``

Manifest (docs/scaling.md has examples): a TSV whose header names ``id``, ``input``, ``method`` and then
parameter columns (cn.mops's names, snake_case or cn.mops's camelCase; an empty cell keeps the default),
optionally ``controls`` (referencecn.mops) and ``params`` (``key=value`` pairs separated by ``;`` or
spaces); or a YAML file holding a list of experiments (mappings with the same keys; ``params`` a
mapping), or a mapping with ``experiments:`` and optional ``defaults:`` (applied to every experiment).
Relative paths are relative to the manifest. The whole manifest is checked before anything runs.

Dispatch: one worker process per GPU (``CUDA_VISIBLE_DEVICES`` set to its device; the GPU backend) or
``--workers`` CPU processes (each with its share of the cores); experiments are queued largest input
first and handed to workers as they free up. Each experiment writes ``OUTDIR/<id>/``: its result files
(written atomically), ``log.txt`` (appended per attempt: messages, warnings, any traceback) and, last,
``status.json`` (state done/failed, the numbers, a fingerprint of input and parameters). A re-run skips
experiments whose status says done with the same fingerprint and runs the others (failed, interrupted,
changed); ``--force`` runs everything again. A failing experiment (bad data, a crashed worker process) is
recorded and the others go on. Ctrl-C or SIGTERM stops the batch: running experiments are stopped (their files
being written removed) and are run again by the next call; workers also stop when the batch process itself dies
(killed outright), and temporary files of an attempt killed outright are removed when it is run again. At the end ``OUTDIR/summary.tsv`` and a printed table list every experiment.
"""
from __future__ import annotations

import contextlib
import csv
import datetime
import hashlib
import json
import logging
import os
import re
import shlex
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..errors import InputError
from ..params import ModelKind, parameter_name

log = logging.getLogger("gcnmops")

#: manifest columns that are not parameters
RESERVED = ("id", "input", "method", "controls", "params")
REQUIRED = ("id", "input", "method")
STATUS_FILE = "status.json"
LOG_FILE = "log.txt"
SUMMARY_FILE = "summary.tsv"
SUMMARY_COLUMNS = ["id", "method", "status", "regions", "samples", "cnvs", "cnv_regions", "seconds", "worker",
                   "error"]
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: the longest id (characters): a folder name, with room for the temporary names made beside it
MAX_ID = 128


@dataclass(frozen=True)
class Experiment:
    """One manifest entry: ``id`` (its output folder name), ``input`` (count file), ``method`` (cn.mops,
    exome, haplo, reference, single), ``params`` (keyword arguments of the method), ``controls``
    (referencecn.mops's control counts) and where it was defined (``origin``, for messages)."""

    id: str
    input: Path
    method: str
    params: dict = field(default_factory=dict)
    controls: Path | None = None
    origin: str = ""

    @property
    def size(self) -> int:
        """Bytes of input (input + controls; a folder such as a Zarr store: all its files)."""
        return sum(_path_size(p) for p in (self.input, self.controls) if p is not None)

    def fingerprint(self) -> str:
        """Changes when the method, the parameters or an input file (path, size, modification time) change."""
        files = [(str(p.resolve()), _path_size(p), _mtime(p)) for p in (self.input, self.controls) if p is not None]
        text = json.dumps([self.method, sorted((k, repr(v)) for k, v in self.params.items()), files])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _path_size(p: Path) -> int:
    try:
        if p.is_dir():
            return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
        return p.stat().st_size
    except OSError:
        return 0


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


# ------------------------------------------------------------------------------------------------ manifest
def parse_value(text: str):
    """A manifest cell as a Python value: TRUE/FALSE, a number, a comma-separated list of those, or text."""
    t = text.strip()
    if "," in t:
        return [parse_value(v) for v in t.split(",") if v.strip() != ""]
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if t.lower() in ("none", "null", "na"):
        return None
    for cast in (int, float):
        try:
            return cast(t)
        except ValueError:
            pass
    return t


def read_manifest(path) -> list[Experiment]:
    """The experiments of a manifest (TSV, or YAML by extension .yaml/.yml), checked as a whole: InputError
    listing every problem (missing columns, duplicate or unusable ids, unknown methods or parameters,
    missing input files, invalid values)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"Manifest not found: {p}")
    if p.is_dir():
        raise InputError(f"Manifest {p} is a folder: give the manifest file (TSV with columns id, input, method, or "
                         "YAML; see docs/scaling.md).")
    if p.suffix.lower() in (".yaml", ".yml"):
        entries = _yaml_entries(p)
    else:
        entries = _tsv_entries(p)
    if not entries:
        raise InputError(f"Manifest {p} lists no experiments.")
    problems: list[str] = []
    experiments: list[Experiment] = []
    seen: dict[str, str] = {}
    for origin, entry in entries:
        try:
            if isinstance(entry, InputError):  # a line that could not be read as an entry
                raise entry
            exp = _experiment(entry, origin, p.parent)
        except InputError as err:
            problems.append(f"{origin}: {err}")
            continue
        if exp.id in seen:
            problems.append(f"{origin}: id {exp.id!r} is already used at {seen[exp.id]}; ids name the output "
                            "folders and must be unique.")
            continue
        seen[exp.id] = origin
        experiments.append(exp)
    if problems:
        raise InputError(f"Manifest {p} has {len(problems)} problem(s):\n  " + "\n  ".join(problems))
    return experiments


def _tsv_entries(p: Path) -> list[tuple[str, dict | InputError]]:
    """(origin, entry) per line; a line that cannot be an entry has its InputError instead (all are reported)."""
    try:
        with open(p, newline="", encoding="utf-8") as f:
            lines = [(i + 1, line) for i, line in enumerate(f) if line.strip() and not line.lstrip().startswith("#")]
    except UnicodeDecodeError:
        raise InputError(f"Manifest {p} is not a text file (UTF-8): give a TSV with columns id, input, method, or "
                         "YAML.") from None
    if not lines:
        raise InputError(f"Manifest {p} is empty.")
    sep = "\t" if "\t" in lines[0][1] else ","
    rows = list(csv.reader([line for _, line in lines], delimiter=sep))
    header = [h.strip() for h in rows[0]]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(f"Manifest {p} lacks column(s) {', '.join(missing)}: its first line must name the columns "
                         "id, input, method, then parameter columns (or a params column of key=value pairs), "
                         f"tab-separated. Found: {', '.join(header) or 'nothing'}.")
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise InputError(f"Manifest {p}: column(s) {', '.join(dup)} appear more than once.")
    out = []
    for (lineno, _), row in zip(lines[1:], rows[1:]):
        try:
            out.append((f"line {lineno}", _tsv_entry(header, row)))
        except InputError as err:
            out.append((f"line {lineno}", err))
    return out


def _tsv_entry(header: list[str], row: list[str]) -> dict:
    """The entry of one manifest line (InputError: it cannot be one)."""
    if len(row) > len(header):
        raise InputError(f"{len(row)} fields for {len(header)} columns.")
    cells = {h: v.strip() for h, v in zip(header, row)}
    entry: dict = {k: cells.get(k, "") for k in RESERVED if k != "params"}
    params = {parameter_name(key): parse_value(value) for key, value in cells.items()
              if key not in RESERVED and value != ""}
    try:
        pairs = _split_pairs(cells.get("params", ""))
    except ValueError as err:  # shlex: an unclosed quote
        raise InputError(f"params {cells.get('params')!r} cannot be read ({err}).") from None
    for item in pairs:
        if "=" not in item:
            raise InputError(f"params entry {item!r} is not key=value.")
        key, value = item.split("=", 1)
        params[parameter_name(key)] = parse_value(value)
    entry["params"] = params
    return entry


def _split_pairs(text: str) -> list[str]:
    return [t for part in text.split(";") for t in shlex.split(part)] if text.strip() else []


def _yaml_entries(p: Path) -> list[tuple[str, dict]]:
    try:
        import yaml
    except ImportError:
        raise InputError(f"Reading the YAML manifest {p} needs PyYAML (pip install pyyaml, or "
                         "pip install 'gcnmops[dask]'); or write the manifest as TSV (id, input, method, "
                         "parameter columns).") from None
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"Manifest {p} is not valid YAML: {e}") from None
    defaults: dict = {}
    if isinstance(doc, dict):
        defaults = doc.get("defaults") or {}
        doc = doc.get("experiments")
    if not isinstance(doc, list) or not all(isinstance(e, dict) for e in doc):
        raise InputError(f"Manifest {p}: expected a list of experiments (mappings with id, input, method, "
                         "params), or a mapping with 'experiments:' (and optional 'defaults:').")
    out = []
    for k, raw in enumerate(doc):
        merged = {**{kk: v for kk, v in defaults.items() if kk != "params"}, **raw}
        params = dict(defaults.get("params") or {})
        if not isinstance(raw.get("params", {}) or {}, dict):
            raise InputError(f"Manifest {p}, experiment {k + 1}: params must be a mapping (key: value).")
        params.update(raw.get("params") or {})
        params.update({kk: v for kk, v in merged.items() if kk not in RESERVED})
        entry = {kk: ("" if merged.get(kk) is None else str(merged.get(kk))) for kk in RESERVED if kk != "params"}
        entry["params"] = {parameter_name(str(kk)): v for kk, v in params.items()}
        out.append((f"experiment {k + 1}" + (f" ({entry['id']})" if entry["id"] else ""), entry))
    return out


def _experiment(entry: dict, origin: str, base: Path) -> Experiment:
    from .methods import build_params, method_spec

    missing = [k for k in REQUIRED if not entry.get(k)]
    if missing:
        raise InputError(f"no {', '.join(missing)} given.")
    exp_id = entry["id"]
    if not _ID.match(exp_id):
        raise InputError(f"id {exp_id!r} cannot name a folder: use letters, digits, '.', '_' and '-' (starting "
                         "with a letter or digit).")
    if len(exp_id) > MAX_ID:
        raise InputError(f"id {exp_id[:20]}... is {len(exp_id)} characters long: at most {MAX_ID} (it names the "
                         "experiment's folder).")
    if exp_id.lower() == SUMMARY_FILE:
        raise InputError(f"id {exp_id!r} is the name of the batch's own summary file: choose another id.")
    spec = method_spec(entry["method"])
    method = spec.name
    inp = _resolve(entry["input"], base)
    if not inp.exists():
        raise InputError(f"input file {inp} not found.")
    controls = _resolve(entry["controls"], base) if entry.get("controls") else None
    if spec.model is ModelKind.REFERENCE and controls is None:
        raise InputError(f"method {method} needs a controls file (column/key 'controls').")
    if spec.model is not ModelKind.REFERENCE and controls is not None:
        raise InputError(f"controls are only used by method reference, not {method}.")
    if controls is not None and not controls.exists():
        raise InputError(f"controls file {controls} not found.")
    params = dict(entry.get("params") or {})
    build_params(method, params)  # unknown names and invalid values, with the method's messages
    return Experiment(id=exp_id, input=inp, method=method, params=params, controls=controls, origin=origin)


def _resolve(text: str, base: Path) -> Path:
    q = Path(os.path.expanduser(str(text).strip()))
    return q if q.is_absolute() else (base / q)


# ------------------------------------------------------------------------------------------------ one experiment
def run_experiment(exp: Experiment, outdir: str, backend: str, formats: list[str] | None, integer: bool,
                   worker: str) -> dict:
    """Run one experiment in this process: its log, result files and, last, its status.json. Never raises
    for the experiment's own failures (they are in the returned record and in the log)."""
    from ..io.atomic import atomic_write
    from ..outputs.writers import remove_temporaries

    folder = Path(outdir) / exp.id
    folder.mkdir(parents=True, exist_ok=True)
    remove_temporaries(folder)  # of an attempt killed while writing (SIGKILL, out of memory)
    (folder / STATUS_FILE).unlink(missing_ok=True)  # an old status must not outlive a new attempt
    record = {"id": exp.id, "method": exp.method, "worker": worker, "fingerprint": exp.fingerprint(),
              "started": _now()}
    t0 = time.perf_counter()
    with open(folder / LOG_FILE, "a", buffering=1) as logf, _logging_to(logf):
        logf.write(f"=== {record['started']} {exp.id}: method {exp.method}, input {exp.input}"
                   f"{f', controls {exp.controls}' if exp.controls else ''}, params {exp.params}; "
                   f"host {socket.gethostname()} pid {os.getpid()} worker {worker} backend {backend}\n")
        try:
            from .run import run_and_write

            result, written = run_and_write(exp.method, str(exp.input), folder, controls=_str_or_none(exp.controls),
                                            backend=backend, integer=integer, formats=formats, **exp.params)
            record.update(state="done", files=[p.name for p in written], **result.summary(),
                          timings={k: round(v, 4) for k, v in result.timings.items()})
            logf.write(f"done: {result.summary()}; {len(written)} files\n")
        except Exception as exc:  # noqa: BLE001 - reported, the batch goes on
            record.update(state="failed", error=f"{type(exc).__name__}: {exc}".splitlines()[0][:500])
            logf.write(traceback.format_exc())
        except WorkerTerminated:
            logf.write(f"=== {_now()} terminated (the batch stopped or its process died); files being written "
                       "were removed\n")
            raise
        record["seconds"] = round(time.perf_counter() - t0, 3)
        record["finished"] = _now()
        logf.write(f"=== {record['finished']} {record['state']} after {record['seconds']} s\n")
    atomic_write(folder / STATUS_FILE, lambda tmp: tmp.write_text(json.dumps(record, indent=1, default=str)))
    return record


def _str_or_none(path: Path | None) -> str | None:
    return None if path is None else str(path)


@contextlib.contextmanager
def _logging_to(stream):
    """Messages of the gcnmops logger, Python warnings and anything printed go to ``stream``."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    loggers = [logging.getLogger("gcnmops"), logging.getLogger("py.warnings")]
    old_levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    logging.captureWarnings(True)
    try:
        with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
            yield
    finally:
        logging.captureWarnings(False)
        for lg, level in zip(loggers, old_levels):
            lg.removeHandler(handler)
            lg.setLevel(level)


def _now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


def read_status(outdir, exp_id: str) -> dict | None:
    try:
        return json.loads((Path(outdir) / exp_id / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------------------------------------ dispatch
@dataclass(eq=False)
class Slot:
    """One worker process: its name, environment (CUDA_VISIBLE_DEVICES / numba threads) and backend."""

    name: str
    env: dict
    backend: str
    pool: ProcessPoolExecutor | None = None

    def start(self) -> ProcessPoolExecutor:
        import multiprocessing

        if self.pool is None:
            self.pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=_init_worker, initargs=(self.env, os.getpid()))
        return self.pool

    def stop(self, kill: bool) -> None:
        if self.pool is None:
            return
        if kill:  # our own child process: terminate it (an interrupted experiment is simply re-run later)
            for proc in list(getattr(self.pool, "_processes", {}).values()):
                if proc.is_alive():
                    proc.terminate()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.pool = None


def python_process_env(env: dict | None = None) -> dict:
    """``env`` (default os.environ) for a new Python process of this interpreter: with this interpreter's
    library folder first in LD_LIBRARY_PATH when that variable is set. Embedded R (rpy2, reticulate) puts R's
    library paths there, which can hold the system's libpython: a child started from such a process would
    load it instead of its own and break (e.g. ``_ssl``: undefined symbol)."""
    import sysconfig

    env = dict(os.environ if env is None else env)
    libdir = sysconfig.get_config_var("LIBDIR")
    paths = env.get("LD_LIBRARY_PATH")
    if paths and libdir and sysconfig.get_config_var("Py_ENABLE_SHARED"):
        env["LD_LIBRARY_PATH"] = libdir + os.pathsep + paths
    return env


@contextlib.contextmanager
def python_children_env():
    """Within the block, processes started by this one (multiprocessing, Dask nannies) get
    :func:`python_process_env`'s LD_LIBRARY_PATH; restored afterwards."""
    old = os.environ.get("LD_LIBRARY_PATH")
    new = python_process_env().get("LD_LIBRARY_PATH")
    if new is not None and new != old:
        os.environ["LD_LIBRARY_PATH"] = new
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("LD_LIBRARY_PATH", None)
        else:
            os.environ["LD_LIBRARY_PATH"] = old


class WorkerTerminated(BaseException):
    """A worker got SIGTERM (the batch stopping it, or its batch process gone): unwinds the experiment, so that
    the files it was writing are removed, then the worker exits."""


#: whether this worker process is running an experiment (a SIGTERM then unwinds it; an idle worker just ends)
_RUNNING = False


def _terminated(signum, frame) -> None:
    if not _RUNNING:
        os._exit(143)
    raise WorkerTerminated()


def _init_worker(env: dict, parent: int) -> None:
    os.environ.update(env)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the dispatcher's to handle
    signal.signal(signal.SIGTERM, _terminated)
    _exit_with_parent(parent)
    if "GCNMOPS_NUMBA_THREADS" in env:
        import numba

        numba.set_num_threads(max(1, min(int(env["GCNMOPS_NUMBA_THREADS"]), numba.config.NUMBA_NUM_THREADS)))


def _exit_with_parent(parent: int) -> None:
    """SIGTERM to this worker when the batch process ``parent`` dies (killed, crashed): a worker must not finish
    its experiment and then wait forever for the next. Linux: prctl(PR_SET_PDEATHSIG); elsewhere a thread
    watching the parent's pid."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, int(signal.SIGTERM), 0, 0, 0) != 0:  # 1: PR_SET_PDEATHSIG
            raise OSError(ctypes.get_errno(), "prctl")
    except (OSError, AttributeError):
        import threading

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, name="gcnmops-parent-watch", daemon=True).start()
    if os.getppid() != parent:  # died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _worker_run(exp: Experiment, outdir: str, backend: str, formats, integer: bool, worker: str) -> dict:
    """``run_experiment`` in a worker process; a SIGTERM there unwinds the experiment, then ends the process."""
    global _RUNNING
    _RUNNING = True
    try:
        return run_experiment(exp, outdir, backend, formats, integer, worker)
    except WorkerTerminated:
        os._exit(143)
    finally:
        _RUNNING = False


def make_slots(devices=None, workers: int | None = None, backend: str | None = None) -> list[Slot]:
    """GPU slots (one per device of ``devices``: ids or "all") or ``workers`` CPU slots (default: the GPUs
    when one is usable and neither is given, else one CPU worker)."""
    from ..cuda.probe import gpu_available, may_use_gpu

    if devices is None and workers is None and may_use_gpu(backend or "auto"):
        if gpu_available():
            devices = "all"
    if devices is not None:
        ids = _gpu_ids(devices)
        return [Slot(f"gpu{d}", {"CUDA_VISIBLE_DEVICES": d}, backend or "gpu") for d in ids]
    n = max(1, int(workers or 1))
    threads = max(1, (os.cpu_count() or 1) // n)
    return [Slot(f"cpu{k}", {"GCNMOPS_NUMBA_THREADS": str(threads)}, backend or "cpu") for k in range(n)]


def _gpu_ids(devices) -> list[str]:
    """Device ids as CUDA_VISIBLE_DEVICES spells them ("all": the visible ones, e.g. those SLURM gave us)."""
    if devices == "all":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible:
            return [v.strip() for v in visible.split(",") if v.strip()]
        from ..cuda.probe import gpu_count

        if not gpu_count():
            raise InputError("--devices all: no CUDA GPU found; use --workers N for CPU workers.")
        return [str(k) for k in range(gpu_count())]
    ids = [str(int(devices))] if isinstance(devices, int) else [str(d).strip() for d in devices]
    if not ids:
        raise InputError("--devices must name at least one GPU.")
    return ids


def run_batch(manifest, outdir, *, devices=None, workers: int | None = None, backend: str | None = None,
              formats: list[str] | None = None, integer: bool = True, force: bool = False,
              stop_after: int | None = None, echo: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Run every experiment of ``manifest`` (a path or a list of Experiment) into ``outdir``.

    ``devices`` ("all" or GPU ids) / ``workers`` (CPU processes): see :func:`make_slots`. ``formats``:
    result file formats (default all); ``integer``: integer copy numbers. ``force``: re-run experiments
    already done. ``stop_after``: stop (as an interruption would: running experiments killed) after that
    many experiments finished in this call (for tests). ``echo``: where progress lines go (default stderr).
    Returns the summary table (also written to ``outdir/summary.tsv``); KeyboardInterrupt (Ctrl-C,
    SIGTERM) stops the batch the same way, writes the summary and re-raises.
    """
    experiments = read_manifest(manifest) if not isinstance(manifest, list) else manifest
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    blocked = [e.id for e in experiments if (outdir / e.id).exists() and not (outdir / e.id).is_dir()]
    if blocked:  # before any work, as for the output folder itself
        raise InputError(f"In {str(outdir)!r}, {', '.join(map(repr, blocked[:5]))} "
                         f"{'is a file' if len(blocked) == 1 else 'are files'} where the experiment's folder goes: "
                         "move it away or write to another folder (-o).")
    echo = echo or (lambda line: print(line, file=sys.stderr, flush=True))
    rows, queue = _queue(experiments, outdir, force)
    slots = make_slots(devices, workers, backend)
    echo(f"gcnmops batch: {len(experiments)} experiments, {len(rows)} already done, {len(queue)} to run on "
         f"{len(slots)} worker(s) ({', '.join(s.name for s in slots)})")
    started = time.time()
    interrupted = False
    previous = signal.signal(signal.SIGTERM, _sigterm) if _main_thread() else None
    try:
        interrupted = _dispatch(slots, queue, rows, outdir, formats, integer, len(experiments), stop_after, echo)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        for slot in slots:
            slot.stop(kill=True)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        summary = _close(experiments, rows, outdir, started, interrupted, echo)
    return summary


def _queue(experiments: list[Experiment], outdir: Path, force: bool) -> tuple[dict[str, dict], list[Experiment]]:
    """(summary rows of the experiments already done (skipped), the others to run: largest first)."""
    rows: dict[str, dict] = {}
    queue: list[Experiment] = []
    for exp in experiments:
        old = read_status(outdir, exp.id)
        if not force and old and old.get("state") == "done" and old.get("fingerprint") == exp.fingerprint():
            rows[exp.id] = dict(old, status="skipped")
        else:
            queue.append(exp)
    queue.sort(key=lambda e: -e.size)  # largest first (stable: manifest order among equals)
    return rows, queue


def _dispatch(slots: list[Slot], queue: list[Experiment], rows: dict, outdir: Path, formats, integer: bool,
              total: int, stop_after: int | None, echo: Callable[[str], None]) -> bool:
    """Hand the queued experiments to the slots as they free up, recording each finished one in ``rows``.
    Returns True when stopped after ``stop_after`` experiments (as an interruption), False when all ran."""
    running: dict = {}
    finished = 0
    while queue or running:
        if stop_after is not None and finished >= stop_after:
            return True
        for slot in slots:
            if queue and slot not in running.values():
                exp = queue.pop(0)
                with python_children_env():  # the worker process starts here, on the first submit
                    fut = slot.start().submit(_worker_run, exp, str(outdir), slot.backend, formats, integer,
                                              slot.name)
                running[fut] = slot
                fut.exp = exp  # type: ignore[attr-defined]
        done, _ = wait(list(running), return_when=FIRST_COMPLETED)
        for fut in done:
            slot = running.pop(fut)
            exp = fut.exp  # type: ignore[attr-defined]
            try:
                rec = fut.result()
            except BrokenProcessPool:
                rec = _crashed(exp, outdir, slot, "the worker process died (killed, out of memory, or a crash "
                                                  "in native code)")
                slot.stop(kill=True)
            except Exception as exc:  # noqa: BLE001 - e.g. the experiment could not be sent to the worker
                rec = _crashed(exp, outdir, slot, f"{type(exc).__name__}: {exc}")
            finished += 1
            rows[exp.id] = dict(rec, status=rec["state"])
            echo(f"[{len(rows)}/{total}] {exp.id}: {rec['state']} in {rec.get('seconds', 0):.1f} s "
                 f"on {slot.name}" + (f" - {rec['error']}" if rec.get("error") else
                                      f" ({rec.get('cnvs', 0)} CNVs)"))
    return False


def _close(experiments: list[Experiment], rows: dict, outdir: Path, started: float, interrupted: bool,
           echo: Callable[[str], None]) -> pd.DataFrame:
    """The summary once the workers are stopped (experiments not recorded: finished meanwhile, interrupted or
    not run), written to ``outdir/summary.tsv``."""
    for exp in [e for e in experiments if e.id not in rows]:
        rec = _written_since(outdir, exp, started)  # finished while the batch was being stopped
        rows[exp.id] = dict(rec, status=rec["state"]) if rec else \
            {"id": exp.id, "method": exp.method, "status": "interrupted" if interrupted else "not run"}
    left = [e for e in experiments if rows[e.id]["status"] in ("interrupted", "not run")]
    summary = _summary(experiments, rows)
    _write_summary(summary, outdir / SUMMARY_FILE)
    if interrupted:
        echo(f"gcnmops batch: stopped; {len(left)} experiment(s) not finished (re-run the same command to "
             "resume).")
    return summary


def _written_since(outdir: Path, exp: Experiment, since: float) -> dict | None:
    """The status an experiment's worker wrote during this batch (None if none)."""
    path = outdir / exp.id / STATUS_FILE
    try:
        if path.stat().st_mtime < since:
            return None
    except OSError:
        return None
    rec = read_status(outdir, exp.id)
    return rec if rec and rec.get("fingerprint") == exp.fingerprint() else None


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _sigterm(signum, frame):  # a scheduler's SIGTERM (SLURM time limit, preemption) stops like Ctrl-C
    raise KeyboardInterrupt


def _crashed(exp: Experiment, outdir: Path, slot: Slot, why: str) -> dict:
    """The record of an experiment whose worker could not report (its process died: killed for memory, a
    crash in native code; or the dispatch itself failed), written by the dispatcher."""
    from ..io.atomic import atomic_write

    rec = {"id": exp.id, "method": exp.method, "worker": slot.name, "fingerprint": exp.fingerprint(),
           "state": "failed", "finished": _now(), "error": why}
    folder = outdir / exp.id
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / LOG_FILE, "a") as f:
            f.write(f"=== {rec['finished']} on worker {slot.name}: {why}\n")
        atomic_write(folder / STATUS_FILE, lambda tmp: tmp.write_text(json.dumps(rec, indent=1)))
    except (OSError, InputError) as err:  # its folder cannot be written: the summary still lists it
        rec["error"] = f"{why}; its folder cannot be written either ({err})"
    return rec


def _summary(experiments: list[Experiment], rows: dict) -> pd.DataFrame:
    table = pd.DataFrame([{c: rows[e.id].get(c) for c in SUMMARY_COLUMNS} for e in experiments],
                         columns=SUMMARY_COLUMNS)
    for c in ("regions", "samples", "cnvs", "cnv_regions"):
        table[c] = pd.to_numeric(table[c]).astype("Int64")
    table["seconds"] = pd.to_numeric(table["seconds"]).round(2)
    return table


def _write_summary(summary: pd.DataFrame, path: Path) -> None:
    from ..io.atomic import atomic_write

    atomic_write(path, lambda tmp: summary.to_csv(tmp, sep="\t", index=False, na_rep=""))


def format_summary(summary: pd.DataFrame) -> str:
    """The summary as a printable table and a count line."""
    counts = summary["status"].value_counts().to_dict()
    shown = summary.drop(columns=["error"]).astype(object)
    shown = shown.where(shown.notna(), "")
    lines = [shown.to_string(index=False)]
    for _, row in summary[summary["status"] == "failed"].iterrows():
        lines.append(f"  {row['id']}: {row['error']}")
    lines.append("gcnmops batch: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return "\n".join(lines)


__all__ = ["Experiment", "read_manifest", "run_batch", "run_experiment", "make_slots", "format_summary",
           "parse_value", "parameter_name", "read_status", "python_process_env", "python_children_env"]
