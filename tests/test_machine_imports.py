"""The layers import only what DESIGN.md allows.

- The machine's core (every module of `pam/` outside a dialect folder) names no language: "each
  dialect's runtime registers its task kinds, so the core names no language". A core module may
  import the core, the standard library and the IR's core (`hpgrem.ir` names defined in
  `hpgrem.ir.core`); not a dialect runtime, a dialect of the IR, the front ends, the passes, the
  driver, the back end or the benchmarks, nor name a dialect's task class.
- A dialect runtime is a folder of `pam/` (`pam/parlog/`, `pam/ml/`, ...): it may import the
  core, never another dialect's folder.
- The IR and its passes (`hpgrem/` outside the driver) import neither the front ends, nor the
  machine, nor the driver.

Modules are parsed, not imported, so an import inside a function counts too; the runtime table
(`pam.runtimes`) names dialect runtimes only as strings, loaded when a module needs one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import hpgrem.ir.core

ROOT = Path(__file__).parent.parent
PAM = ROOT / "pam"
HPGREM = ROOT / "hpgrem"
DIALECT_FOLDERS = tuple(sorted(f"pam.{p.name}" for p in PAM.iterdir()
                               if p.is_dir() and (p / "__init__.py").exists() and p.name != "transport"))
IR_DIALECTS = ("hpgrem.ir.parlog", "hpgrem.ir.ml")
OUTSIDE_THE_MACHINE = ("hpgrem.passes", "hpgrem.driver", "frontend", "backend", "benchmarks")
DIALECT_TASKS = {"Goal", "MLTask"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _within(name: str, packages) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _imports(path: Path) -> list[tuple[str, ast.AST]]:
    """Every module `path` imports (absolute names; `from pam import x` gives `pam.x` too)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, node) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                out.append((f"relative import in {path.name}", node))
                continue
            out.append((node.module, node))
            out += [(f"{node.module}.{a.name}", node) for a in node.names]
    return out


CORE = sorted(p for p in PAM.rglob("*.py") if not _within(_module_name(p), DIALECT_FOLDERS))
DIALECT_RUNTIME = sorted(p for p in PAM.rglob("*.py") if _within(_module_name(p), DIALECT_FOLDERS))
IR_AND_PASSES = sorted(p for p in HPGREM.rglob("*.py") if not _within(_module_name(p), ("hpgrem.driver",)))


def test_the_core_is_what_the_machine_is_made_of():
    names = {_module_name(p) for p in CORE}
    assert {"pam.pe", "pam.task", "pam.step", "pam.distribution", "pam.pack", "pam.termination", "pam.stats",
            "pam.driver", "pam.machine", "pam.ranks", "pam.runtimes", "pam.transport", "pam.transport.sim",
            "pam.transport.mpi"} <= names
    assert {"pam.parlog", "pam.ml"} <= set(DIALECT_FOLDERS)


@pytest.mark.parametrize("path", CORE, ids=_module_name)
def test_a_core_module_imports_no_language(path):
    problems = []
    for name, node in _imports(path):
        if name.startswith("relative import") or _within(name, DIALECT_FOLDERS + IR_DIALECTS + OUTSIDE_THE_MACHINE):
            problems.append(name)
        elif isinstance(node, ast.ImportFrom) and node.module == "hpgrem.ir" and name != "hpgrem.ir":
            if name.rsplit(".", 1)[1] not in vars(hpgrem.ir.core):
                problems.append(name)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name) and node.id in DIALECT_TASKS:
            problems.append(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in DIALECT_TASKS:
            problems.append(node.attr)
    assert not problems


@pytest.mark.parametrize("path", DIALECT_RUNTIME, ids=_module_name)
def test_a_dialect_runtime_imports_no_other_dialect_runtime(path):
    own = next(d for d in DIALECT_FOLDERS if _within(_module_name(path), (d,)))
    others = tuple(d for d in DIALECT_FOLDERS if d != own)
    assert not [name for name, _ in _imports(path)
                if name.startswith("relative import") or _within(name, others + OUTSIDE_THE_MACHINE)]


@pytest.mark.parametrize("path", IR_AND_PASSES, ids=_module_name)
def test_the_ir_and_passes_import_no_front_end_and_no_machine(path):
    assert not [name for name, _ in _imports(path)
                if name.startswith("relative import") or _within(name, ("frontend", "pam", "hpgrem.driver", "backend"))]
