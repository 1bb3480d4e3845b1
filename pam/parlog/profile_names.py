"""How PARLOG code is named in a profile (pam/profile.py, docs/profile.md): rules.py and
search.py register these for the source they compile."""

from __future__ import annotations

import os

from hpgrem.ir.parlog import SEARCH
from pam.profile import CodeNames, Where, machine

HERE = os.path.dirname(os.path.abspath(__file__))
# this dialect's files by the part of the machine they are
FILES = {"goal.py": "scheduler", "rules.py": "scheduler", "guards.py": "scheduler", "subcomp.py": "scheduler",
         "primitives.py": "primitives", "arith.py": "primitives", "write.py": "primitives",
         "search.py": "search", "clause_code.py": None, "relation_code.py": None}


def _files() -> dict:
    return {os.path.join(HERE, f): part for f, part in FILES.items()}


def rule_names(compiler) -> CodeNames:
    """The committed-choice code (pam/parlog/rules.py): relation k's step is `R<i>`, the steps
    of its arithmetic tasks `A<i>_<n>` (pam/parlog/clause_code.py)."""
    prefixes = {}
    for key, proc in compiler.proc_names.items():
        prefixes[proc] = prefixes["A" + proc[1:]] = where(compiler.module.rules[key])
    return CodeNames(prefixes, files=_files())


def search_names(compiler) -> CodeNames:
    """The all-solutions code (pam/parlog/search.py): relation k is `S<i>`, its clauses
    `S<i>_<c>`, its index `S<i>_ix`; `G<n>` runs a primitive goal after a relation call."""
    prefixes = {name: where(compiler.module.rules[key]) for key, name in compiler.names.items()}
    prefixes["G"] = machine("search")
    return CodeNames(prefixes, files=_files())


def where(rel) -> Where:
    """A relation as the program names it, `nrev/2`; a construct's relation as the construct
    (`set/3`, `subset/3`, `~`) where it is written."""
    construct = getattr(rel, "construct", SEARCH)
    if construct in ("set", "subset"):
        name = f"{construct}/3"
    elif construct == "not":
        name = "~"
    else:
        name = f"{rel.name}/{rel.arity}"
    span = rel.span
    return Where(name, span.file, span.line, span.col)
