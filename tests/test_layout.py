"""The package's layout as a contract: imports only go down the data path, no circles, no private names
crossing packages, GPU code only inside its stage package or ``cuda/``.

Every import statement of ``gcnmops`` counts, also those inside functions (a lazy import is still a
dependency). CONTRIBUTING.md explains the layers.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gcnmops"

#: the layers from the bottom up: a room may import its own room and the rooms of lower layers
LAYERS = [
    {"exact", "errors", "jitcache", "compat", "dynamic", "files", "version"},
    {"cuda", "params", "data", "progress", "provenance"},
    {"result", "example"},
    {"io", "alignments", "normalization", "model"},
    {"segmentation"},
    {"calls"},
    {"outputs"},
    {"pipeline"},
    {"casemode"},
    {"plots", "report", "distributed", "rbridge", "batch", "cli", "cliparser", "gatksv", "__init__", "__main__"},
]
#: imports that run back up, each with its reason (at most one)
UPWARD_ALLOWED = {
    ("gcnmops.result", "gcnmops.outputs.writers"): "CNVDetectionResult.write(outdir), a convenience of the result object",
}
#: modules holding GPU (numba.cuda / cupy) code, by room: only stage packages and cuda/
GPU_ROOMS = {"cuda", "model", "normalization", "segmentation", "calls", "pipeline"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


MODULES = _modules()


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, path: Path):
    """(imported module, imported name or None, line) for every gcnmops import in the module."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("gcnmops"):
                    yield a.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, path, node)
            if not target.startswith("gcnmops"):
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in MODULES:  # `from package import submodule`
                    yield sub, None, node.lineno
                else:
                    yield target, a.name, node.lineno


def _graph() -> dict[str, set[str]]:
    return {m: {t for t, _, _ in _imports(m, p) if t in MODULES and t != m} for m, p in MODULES.items()}


def _rank(room: str) -> int:
    for i, layer in enumerate(LAYERS):
        if room in layer:
            return i
    raise AssertionError(f"gcnmops/{room} is in no layer of tests/test_layout.py: place it (see CONTRIBUTING.md)")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a list of module names."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_room_has_a_layer():
    for m in MODULES:
        _rank(_room(m))


def test_no_import_circle():
    graph = _graph()
    # a package's __init__ re-exporting its own modules is not a circle of the data path
    for m in graph:
        graph[m] = {t for t in graph[m] if not (m.startswith(t + ".") and MODULES[t].name == "__init__.py")}
    assert _cycles(graph) == []


def test_imports_only_go_down():
    upward = []
    for m, p in MODULES.items():
        for target, _, line in _imports(m, p):
            if target not in MODULES and target.rsplit(".", 1)[0] not in MODULES:
                continue
            if _room(target) == _room(m):
                continue
            if _rank(_room(target)) > _rank(_room(m)):
                upward.append((m, target, line))
    unexplained = [(m, t, line) for m, t, line in upward if (m, t) not in UPWARD_ALLOWED]
    assert unexplained == [], "imports running back up (move the code down, or the importer up)"
    assert len(upward) <= 1


def test_no_private_name_crosses_a_package():
    crossing = [(m, f"{t}.{name}", line) for m, p in MODULES.items() for t, name, line in _imports(m, p)
                if name and name.startswith("_") and not name.startswith("__") and _room(t) != _room(m)]
    assert crossing == [], "make the helper public in its home module (one home, imported by both)"


def _gpu_imports(path: Path) -> list[int]:
    """Lines importing numba.cuda, cupy or cupyx."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        if any(n.split(".")[0] in ("cupy", "cupyx") or n.startswith("numba.cuda") for n in names):
            lines.append(node.lineno)
    return lines


def test_gpu_code_lives_in_stage_packages_or_cuda():
    outside = [(m, _gpu_imports(p)) for m, p in MODULES.items() if _room(m) not in GPU_ROOMS and _gpu_imports(p)]
    assert outside == [], "GPU code belongs in its stage package (gpu.py) or in cuda/"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _room(m) in ("exact", "cuda")))
def test_runtime_and_primitives_import_no_stage(module):
    """exact/ imports nothing of gcnmops but errors; cuda/ nothing but exact/, errors and jitcache (whether kernels
    can be cached)."""
    allowed = {"exact": {"exact", "errors", "jitcache", "compat"},
               "cuda": {"cuda", "exact", "errors", "jitcache"}}[_room(module)]
    rooms = {_room(t) for t, _, _ in _imports(module, MODULES[module])}
    assert rooms <= allowed


#: the stage packages, each with its drivers (cpu, gpu, ...) behind one entry that dispatches on the backend
STAGE_ROOMS = {"model", "normalization", "segmentation"}
#: backend names: compared as text only where a user's name is parsed (cuda/probe.py)
BACKEND_NAMES = {"auto", "cpu", "gpu"}


def _is_driver(module: str) -> bool:
    """A stage package's driver module: its name says which backend it runs (cpu, gpu, onestep_gpu, ...)."""
    parts = module.split(".")
    return len(parts) > 2 and parts[1] in STAGE_ROOMS and ("cpu" in parts[2] or "gpu" in parts[2])


def _driver_imports_from_outside() -> list[tuple[str, str, int]]:
    return [(m, t, line) for m, p in MODULES.items() for t, _, line in _imports(m, p)
            if _is_driver(t) and _room(t) != _room(m)]


def test_stage_drivers_stay_inside_their_package():
    """Nothing outside a stage package imports its CPU or GPU driver: the package's entry dispatches on the
    backend (normalization.normalize, model.fit, segmentation.segment_blocks)."""
    assert _driver_imports_from_outside() == []


def _backend_name_comparisons(path: Path) -> list[int]:
    """Lines comparing a value with a backend name written as text ("cpu" == x; backend in ("auto", ...))."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        texts = set()
        for o in operands:
            elements = o.elts if isinstance(o, (ast.Tuple, ast.List, ast.Set)) else [o]
            texts |= {e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        names = {getattr(o, "id", None) or getattr(o, "attr", None) or "" for o in operands}
        about_backend = any("backend" in n.lower() for n in names)
        if texts & {"cpu", "gpu"} or (about_backend and texts & BACKEND_NAMES):
            lines.append(node.lineno)
    return lines


def test_the_backend_is_a_typed_value():
    """The backend is compared as text only in the parser of users' names (cuda/probe.py, at most twice);
    everywhere else it is a cuda.probe.Backend compared by identity."""
    found = {m: _backend_name_comparisons(p) for m, p in MODULES.items()}
    found = {m: lines for m, lines in found.items() if lines}
    assert set(found) <= {"gcnmops.cuda.probe"}, found
    assert sum(len(v) for v in found.values()) <= 2


def test_the_checks_can_fail():
    """The checks above see what they must: a two-module circle and an upward import are found."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert _rank("cli") > _rank("pipeline") > _rank("calls") > _rank("segmentation") > _rank("model") > _rank("exact")
    assert _is_driver("gcnmops.segmentation.gpu") and _is_driver("gcnmops.model.onestep_gpu")
    assert not _is_driver("gcnmops.segmentation.host") and not _is_driver("gcnmops.cuda.runtime")
    probe = Path(__file__).with_name("_layout_probe.py")
    probe.write_text('def f(b, backend, variant):\n    return b == "gpu" or backend in ("auto", "x") or variant == "auto"\n')
    try:
        assert _backend_name_comparisons(probe) == [2, 2]
    finally:
        probe.unlink()


# ---------------------------------------------------------------- sizes: packages and modules a reader can hold
#: the largest share of the package's lines one room may hold (the top-level modules count as one room)
MAX_ROOM_SHARE = 0.15
#: the most lines of one module
MAX_MODULE_LINES = 800


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def _room_lines() -> dict[str, int]:
    """Lines per room: each package of gcnmops, and ``__init__`` for the modules at its top."""
    rooms: dict[str, int] = {}
    for m, p in MODULES.items():
        room = _room(m) if p.parent != PACKAGE else "__init__"
        rooms[room] = rooms.get(room, 0) + _lines(p)
    return rooms


def test_no_room_holds_more_than_its_share():
    rooms = _room_lines()
    total = sum(rooms.values())
    large = {room: f"{n / total:.1%}" for room, n in rooms.items() if n > MAX_ROOM_SHARE * total}
    assert large == {}, "split the package along the data path (CONTRIBUTING.md)"
    assert "__init__" in rooms and len(rooms) > 10  # the top-level modules are counted as one room


def test_no_module_over_its_length():
    long = {m: n for m, n in ((m, _lines(p)) for m, p in MODULES.items()) if n > MAX_MODULE_LINES}
    assert long == {}, "split the module by what its parts hold"


# ---------------------------------------------------------------- one GPU kernel cache, one home for GPU tunables
#: calls that compile a GPU kernel (``cuda.jit(device=True)`` device functions are not kernels)
KERNEL_COMPILERS = {"jit_nofma", "cuda.jit", "numba.cuda.jit"}
#: decorators that memoize a function's results
CACHE_DECORATORS = {"cache", "lru_cache", "cached_property"}
#: calls making an empty container
CONTAINERS = {"dict", "list", "set", "OrderedDict", "defaultdict", "WeakValueDictionary", "WeakKeyDictionary"}
#: names of GPU tunables (block sizes, grid caps, local-work limits, compile choices), case-insensitive
TUNABLE_NAME = re.compile(r"threads_per_block|local_work|blocks_per_sm|max_blocks|unroll_max|max_registers|"
                          r"rows_per_thread|^tpb$", re.IGNORECASE)
CONFIG = PACKAGE / "cuda" / "config.py"


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` of a Name/Attribute chain ("" for anything else)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def _compiles(node: ast.AST) -> bool:
    """Whether ``node`` (a call or a decorator) compiles a kernel."""
    call = node if isinstance(node, ast.Call) else None
    name = _dotted(call.func if call else node)
    device = call is not None and any(k.arg == "device" and getattr(k.value, "value", False) for k in call.keywords)
    return name in KERNEL_COMPILERS and not device


def _kernel_cache_problems(source: str) -> list[str]:
    """How a module (outside cuda/) keeps GPU kernels of its own instead of cuda.kernels' cache: a kernel compiled at
    import; a function compiling kernels (a builder) that is not handed to ``cached_kernel``; in a module that builds
    kernels, a memoizing decorator or a module-level empty container (the dicts and lists that held kernels)."""
    tree = ast.parse(source)
    problems, builders = [], {}
    functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)

    def visit(node, func):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(_compiles,
                                                                                      child.decorator_list)):
                if func is None:
                    problems.append(f"line {child.lineno}: kernel {child.name} compiled at import")
                else:
                    builders.setdefault(getattr(func, "name", "<lambda>"), func.lineno)
            if isinstance(child, ast.Call) and _compiles(child):
                if func is None:
                    problems.append(f"line {child.lineno}: a kernel compiled at import")
                else:
                    builders.setdefault(getattr(func, "name", "<lambda>"), func.lineno)
            visit(child, child if isinstance(child, functions) else func)

    visit(tree, None)
    cached = {_dotted(n.args[0]) for n in ast.walk(tree)
              if isinstance(n, ast.Call) and _dotted(n.func).endswith("cached_kernel") and n.args}
    problems += [f"line {line}: {name} builds kernels but is not handed to cuda.kernels.cached_kernel"
                 for name, line in builders.items() if name not in cached]
    if not (builders or cached):
        return problems
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            problems += [f"line {n.lineno}: {n.name} memoized by a decorator" for d in n.decorator_list
                         if _dotted(d.func if isinstance(d, ast.Call) else d).split(".")[-1] in CACHE_DECORATORS]
    for n in tree.body:
        value = n.value if isinstance(n, (ast.Assign, ast.AnnAssign)) else None
        literal = isinstance(value, (ast.Dict, ast.List, ast.Set))
        empty = (literal and not (value.keys if isinstance(value, ast.Dict) else value.elts)
                 or isinstance(value, ast.Call) and _dotted(value.func).split(".")[-1] in CONTAINERS and not value.args)
        if empty:
            problems.append(f"line {n.lineno}: a module-level container in a module that builds kernels")
    return problems


def _tunable_problems(source: str, config_names: set[str]) -> list[str]:
    """Where a module (other than cuda/config.py) writes a GPU tunable's value itself: a module- or class-level
    assignment to a name of cuda/config.py, or to a tunable's name (``TUNABLE_NAME``) of a value with a number in
    it; a number chosen for the CUDA simulator (``... if simulating() else ...``); a number as a launch's block
    size (``kernel[grid, 128](...)``)."""
    tree = ast.parse(source)
    problems = []

    def numbers(node) -> bool:
        return any(isinstance(c, ast.Constant) and type(c.value) in (int, float) for c in ast.walk(node))

    for scope in [tree] + [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        for n in scope.body:
            if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for name in (t.id for t in targets if isinstance(t, ast.Name)):
                    if name in config_names or (TUNABLE_NAME.search(name) and numbers(n.value)):
                        problems.append(f"line {n.lineno}: {name} set outside cuda/config.py")
    for n in ast.walk(tree):
        if (isinstance(n, ast.IfExp) and isinstance(n.test, ast.Call) and _dotted(n.test.func).endswith("simulating")
                and (numbers(n.body) or numbers(n.orelse))):
            problems.append(f"line {n.lineno}: a launch size for the simulator outside cuda/config.py")
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) and isinstance(n.func.slice, ast.Tuple)
                and 2 <= len(n.func.slice.elts) <= 4 and numbers(n.func.slice.elts[1])):
            problems.append(f"line {n.lineno}: a launch's block size written as a number")
    return problems


def _config_names() -> set[str]:
    tree = ast.parse(CONFIG.read_text())
    return {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}


def test_one_kernel_cache():
    """Kernels are built only through cuda.kernels.cached_kernel (built once, first launches under one lock): no
    module outside cuda/ keeps kernels of its own."""
    found = {m: p for m, p in ((m, _kernel_cache_problems(p.read_text())) for m, p in MODULES.items()
                               if _room(m) != "cuda") if p}
    assert found == {}, "get kernels from cuda.kernels.cached_kernel(builder, *key)"


def test_gpu_tunables_live_in_cuda_config():
    names = _config_names()
    assert {"EM_THREADS_PER_BLOCK", "ESTEP_LOCAL_WORK_MAX", "SEGMENT_SPREAD_MAX_BLOCKS"} <= names
    found = {m: p for m, p in ((m, _tunable_problems(p.read_text(), names)) for m, p in MODULES.items()
                               if p != CONFIG) if p}
    assert found == {}, "GPU tunables go into cuda/config.py, each once, with what it means and its unit"


def test_the_kernel_and_tunable_checks_can_fail():
    """The checks above find the patterns they replaced: per-module dicts, lists and lru_caches of kernels, kernels
    compiled at import, and block sizes written where the kernels are launched."""
    dict_cache = ("_GPU_KERNELS: dict = {}\n"
                  "def _gpu_kernel(NC):\n"
                  "    if NC in _GPU_KERNELS:\n"
                  "        return _GPU_KERNELS[NC]\n"
                  "    def _nofma_k(x):\n"
                  "        x[0] = NC\n"
                  "    _GPU_KERNELS[NC] = jit_nofma(_nofma_k)\n"
                  "    return _GPU_KERNELS[NC]\n")
    list_cache = ("_VALUES: list = []\n"
                  "def values():\n"
                  "    with _LOCK:\n"
                  "        if not _VALUES:\n"
                  "            _VALUES.extend((jit_nofma(_nofma_a), jit_nofma(_nofma_b)))\n"
                  "        return _VALUES\n")
    lru = "@functools.lru_cache(None)\ndef kernel(n):\n    return cuda.jit(f)\n"
    at_import = "k = numba.cuda.jit(f)\n@cuda.jit\ndef g(x):\n    x[0] = 1\n"
    assert len(_kernel_cache_problems(dict_cache)) == 2  # the dict, and a builder outside the cache
    assert len(_kernel_cache_problems(list_cache)) == 2
    assert len(_kernel_cache_problems(lru)) == 2  # the decorator, and a builder outside the cache
    assert len(_kernel_cache_problems(at_import)) == 2
    assert _kernel_cache_problems("def _build(n):\n    return jit_nofma(f)\n"
                                  "def kernel(n):\n    return cached_kernel(_build, n)\n"
                                  "dev = cuda.jit(device=True)(f)\n") == []
    tunables = ("GPU_THREADS_PER_BLOCK = 128\nLOCAL_WORK_MAX = 64\nTPB = 32 if simulating() else 128\n"
                "EM_BLOCKS_PER_SM = 4\n"
                "class KernelConfig:\n    max_registers: int | None = 128\n"
                "def launch(k, x):\n    tpb = 8 if simulating() else MEDIAN_TPB\n    k[4, 1](x)\n")
    flagged = [int(p.split(":")[0].split()[1]) for p in _tunable_problems(tunables, {"EM_BLOCKS_PER_SM"})]
    assert sorted(flagged) == [1, 2, 3, 3, 4, 6, 8, 9]  # TPB: its name and its simulator's number
    assert _tunable_problems("TPB = SIM_TPB if simulating() else GPU_TPB\n"
                             "def launch(k, x, w):\n    tpb = min(GPU_TPB, 32 * w)\n    k[w, tpb](x)\n", set()) == []
    assert _rank("pipeline") > _rank("outputs") > _rank("calls") > _rank("io")
