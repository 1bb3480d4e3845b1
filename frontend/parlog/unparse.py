"""PARLOG source from an HPGREM module: the inverse of the front end, for round-trip tests and
for showing users what a compiled `.hpg` holds in their own language."""

from __future__ import annotations

from hpgrem import ir

from hpgrem.ir import parlog
from hpgrem.ir.parlog import quote_atom
from hpgrem.printer import text


def program_text(module: ir.Module, include_prelude: bool = False) -> str:
    """Mode declarations and clauses of the module's relations, groups joined by `;`."""
    out: list[str] = []
    for key, rel in module.rules.items():
        if key.startswith("prelude:") and not include_prelude or key.startswith("$goal"):
            continue
        if rel.modes:
            out.append(f"mode {quote_atom(rel.name)}({', '.join(rel.modes)}).")
        groups = []
        for group in rel.groups:
            groups.append(".\n".join(clause_text(rel, c) for c in group))
        out.append(" ;\n".join(groups) + ".")
        out.append("")
    return "\n".join(out)


def clause_text(rel: parlog.Relation, c: parlog.Clause) -> str:
    return quote_atom(rel.name) + text(c)
