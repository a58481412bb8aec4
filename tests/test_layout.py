"""The package's layout as a contract: imports only go down the data path, no circles, no private names
crossing packages, GPU code only inside its stage package or ``cuda/``.

Every import statement of ``gcnmops`` counts, also those inside functions (a lazy import is still a
dependency). CONTRIBUTING.md explains the layers.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gcnmops"

#: the layers from the bottom up: a room may import its own room and the rooms of lower layers
LAYERS = [
    {"exact", "errors", "jitcache", "compat", "files"},
    {"cuda", "params", "data", "progress"},
    {"result", "example"},
    {"io", "normalization", "model"},
    {"segmentation"},
    {"calls"},
    {"pipeline"},
    {"casemode"},
    {"plots", "report", "distributed", "rbridge", "batch", "cli", "__init__", "__main__"},
]
#: imports that run back up, each with its reason (at most one)
UPWARD_ALLOWED = {
    ("gcnmops.result", "gcnmops.io.writers"): "CNVDetectionResult.write(outdir), a convenience of the result object",
}
#: modules holding GPU (numba.cuda / cupy) code, by room: only stage packages and cuda/
GPU_ROOMS = {"cuda", "model", "normalization", "segmentation", "pipeline"}


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


def test_the_checks_can_fail():
    """The checks above see what they must: a two-module circle and an upward import are found."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert _rank("cli") > _rank("pipeline") > _rank("calls") > _rank("segmentation") > _rank("model") > _rank("exact")
