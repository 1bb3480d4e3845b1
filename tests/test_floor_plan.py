"""The floor plan (DESIGN.md, "Layers"), checked folder by folder with no list of modules.

Layers, bottom up: `hpgrem` (the IR, its passes, user errors, trace renderers), then the front
ends (`frontend`) and the machine (`pam`) side by side, then `backend`, then the driver
(`hpgrem.driver`), which imports everything and which nothing imports. `benchmarks` is data.
Inside each layer a dialect has a folder named after it (`*/parlog/`, `*/ml/`, `*/tensor/`: the
names of the dialect table). A dialect's folder imports its own folders, in any layer, and
anything outside every dialect's folder; never another dialect's folder. A module outside every
dialect's folder (a layer's core) imports no dialect's folder: it finds a dialect through the
table, by name. Import circles stay inside one dialect's folder of one layer.

Modules are parsed, not imported, so an import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

from hpgrem.ir.dialects import DIALECTS

ROOT = Path(__file__).parent.parent
PACKAGES = ("frontend", "hpgrem", "pam", "backend", "benchmarks")


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for top in PACKAGES for p in sorted((ROOT / top).rglob("*.py"))}


def _imports(path: Path) -> set[str]:
    """The project's modules that `path` imports (`from a import b` is `a.b` when that is a module)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: a relative import"
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES}
    return {m for m in out if m.split(".")[0] in PACKAGES}


def layer(module: str) -> str:
    if module == "hpgrem.driver" or module.startswith("hpgrem.driver."):
        return "driver"
    return module.split(".")[0]


# what each layer may import besides itself
BELOW = {"hpgrem": set(), "frontend": {"hpgrem"}, "pam": {"hpgrem"}, "backend": {"hpgrem", "pam"},
         "driver": {"hpgrem", "frontend", "pam", "backend", "benchmarks"}, "benchmarks": set()}


def dialect_of(module: str) -> str | None:
    """The dialect whose folder holds `module` (None: a layer's core)."""
    parts = module.split(".")
    return next((p for p in parts[1:] if p in DIALECTS), None)


GRAPH = {m: _imports(p) - {m} for m, p in MODULES.items()}
EDGES = sorted((m, d) for m, ds in GRAPH.items() for d in ds)


def test_the_plan_is_what_the_tree_is():
    assert {"parlog", "ml", "tensor"} <= set(DIALECTS)
    folders = {(layer(m), dialect_of(m)) for m in MODULES if dialect_of(m)}
    # every dialect of the project has its IR, passes and runtime folders
    for d in ("parlog", "ml", "tensor"):
        for top in ("hpgrem", "pam"):
            assert (top, d) in folders
    assert ("hpgrem.ir.core" in MODULES and "pam.machine" in MODULES and EDGES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module):
    own = layer(module)
    wrong = [d for d in GRAPH[module] if layer(d) != own and layer(d) not in BELOW[own]]
    assert not wrong, f"{module} imports against the layer order: {wrong}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_dialect_folder_imports_no_other_dialect_and_the_core_none(module):
    if layer(module) == "driver":
        return  # the one place that imports everything
    mine = dialect_of(module)
    wrong = [d for d in GRAPH[module] if dialect_of(d) not in (None, mine)]
    assert not wrong, f"{module} ({mine or 'core'}) imports a dialect folder not its own: {wrong}"


def test_no_import_circle_outside_one_dialect_folder():
    g = nx.DiGraph(EDGES)
    def inside_one_folder(circle) -> bool:
        places = {(layer(m), dialect_of(m)) for m in circle}
        return len(places) == 1 and None not in next(iter(places))

    bad = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1 and not inside_one_folder(c)]
    assert not bad, f"import circles outside one dialect's folder: {bad}"


def test_nothing_imports_the_driver():
    assert not [(m, d) for m, d in EDGES if layer(d) == "driver" and layer(m) != "driver"]
