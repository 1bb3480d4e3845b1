"""The machine's core names no language (DESIGN.md: "each dialect's runtime registers its task
kinds, so the core names no language").

The core is every module of pam/ except the dialects' own: PARLOG's (`pam.rules`, its compiled
rules and runtime, with `pam.relation_code` and `pam.clause_code`, the code of a relation and of
a clause; `pam.primitives`; `pam.goal`, its task kind; `pam.arith`, its arithmetic;
`pam.write`, SWI-Prolog's `write/1`) and ML's
(`pam.ml`). `pam.terms` and `pam.unify` are core: variables, structures and their unification
are the graph every dialect's values live in, and packing, deadlock reports and distribution
walk them. A core module may import the core, the standard library and the IR's core
(`hpgrem.ir` names defined in `hpgrem.ir.core`); it may not import a dialect module of pam, a
dialect of the IR, the front ends, the compiler's passes or driver, the back end or the
benchmarks, nor name a dialect's task class. Modules are parsed, not imported, so an import
inside a function counts too; the runtime table (`pam.runtimes`) names dialect runtimes only
as strings, loaded when a module needs one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import hpgrem.ir.core

PAM = Path(__file__).parent.parent / "pam"
DIALECT_MODULES = ("pam.rules", "pam.relation_code", "pam.clause_code", "pam.primitives", "pam.goal", "pam.arith", "pam.write", "pam.ml")
FORBIDDEN = DIALECT_MODULES + ("hpgrem.ir.parlog", "hpgrem.ir.ml", "hpgrem.passes", "hpgrem.pipeline",
                               "hpgrem.cli", "frontend", "backend", "benchmarks")
DIALECT_TASKS = {"Goal", "MLTask"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PAM.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _within(name: str, packages) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


CORE = sorted(p for p in PAM.rglob("*.py") if not _within(_module_name(p), DIALECT_MODULES))


def test_the_core_is_what_the_machine_is_made_of():
    names = {_module_name(p) for p in CORE}
    assert {"pam.pe", "pam.task", "pam.step", "pam.distribution", "pam.pack", "pam.termination", "pam.stats",
            "pam.driver", "pam.machine", "pam.ranks", "pam.runtimes", "pam.transport", "pam.transport.sim",
            "pam.transport.mpi"} <= names


@pytest.mark.parametrize("path", CORE, ids=_module_name)
def test_a_core_module_imports_no_language(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            problems += [a.name for a in node.names if _within(a.name, FORBIDDEN)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            if _within(node.module, FORBIDDEN):
                problems.append(node.module)
            elif node.module == "hpgrem.ir":
                problems += [f"hpgrem.ir.{a.name}" for a in node.names if a.name not in vars(hpgrem.ir.core)]
            elif node.module in ("pam", "hpgrem"):  # `from pam import rules`
                problems += [f"{node.module}.{a.name}" for a in node.names
                             if _within(f"{node.module}.{a.name}", FORBIDDEN)]
        elif isinstance(node, ast.ImportFrom):
            problems.append(f"relative import in {path.name}")
        elif isinstance(node, ast.Name) and node.id in DIALECT_TASKS:
            problems.append(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in DIALECT_TASKS:
            problems.append(node.attr)
    assert not problems
