"""HPGREM modules as readable text (`hpgrem ir`): one block per relation, clauses by group."""

from __future__ import annotations

from hpgrem import ir

_GOAL_OPS = {"=", "\\=", "==", "\\==", "is", "<", ">", "=<", ">=", "=:=", "=\\=", "=.."}


def term_text(t: ir.Term) -> str:
    """Canonical text of an IR term (lists as lists, comparison goals infix)."""
    parts: list[str] = []
    stack: list = [t]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            parts.append(x)
        elif isinstance(x, ir.Var):
            parts.append(x.name)
        elif isinstance(x, ir.Atom):
            parts.append(quote_atom(x.name))
        elif isinstance(x, (ir.Int, ir.Float)):
            parts.append(repr(x.value))
        elif x.name == ir.CONS and len(x.args) == 2:
            items, tail = [], x
            while isinstance(tail, ir.Struct) and tail.name == ir.CONS and len(tail.args) == 2:
                items.append(tail.args[0])
                tail = tail.args[1]
            seq: list = ["["]
            for i, item in enumerate(items):
                seq += ([", "] if i else []) + [item]
            if not (isinstance(tail, ir.Atom) and tail.name == ir.NIL):
                seq += ["|", tail]
            seq.append("]")
            stack.extend(reversed(seq))
        else:
            seq = [quote_atom(x.name), "("]
            for i, a in enumerate(x.args):
                seq += ([", "] if i else []) + [a]
            seq.append(")")
            stack.extend(reversed(seq))
    return "".join(parts)


def quote_atom(name: str) -> str:
    """An atom as source text, quoted where it must be."""
    if name == "[]" or (name[:1].islower() and name.replace("_", "a").isalnum()):
        return name
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


def call_text(c: ir.Call) -> str:
    name = c.target.rsplit("/", 1)[0]
    if name in _GOAL_OPS and len(c.args) == 2:
        text = f"{term_text(c.args[0])} {name} {term_text(c.args[1])}"
    elif c.args:
        text = f"{quote_atom(name)}({', '.join(term_text(a) for a in c.args)})"
    else:
        text = quote_atom(name)
    if c.placement is not None:
        text += f" @ {term_text(c.placement)}"
    return text


def body_text(b: ir.Body | None) -> str:
    if b is None:
        return "true"
    if isinstance(b, ir.Call):
        return call_text(b)
    sep = ", " if b.op == "," else " & "
    return sep.join(body_text(p) if isinstance(p, ir.Call) or p.op == b.op else f"({body_text(p)})"
                    for p in b.parts)


def module_text(module: ir.Module) -> str:
    lines = [f"module {module.source!r} ({module.language})"]
    if module.entry is not None:
        outs = f" -> {', '.join(module.entry.outputs)}" if module.entry.outputs else ""
        lines.append(f"entry {module.entry.target}{outs}")
    for key, rel in module.relations.items():
        modes = f"({', '.join(rel.modes)})" if rel.modes else ""
        lines.append("")
        lines.append(f"relation {key} {modes}".rstrip())
        for gi, group in enumerate(rel.groups, 1):
            lines.append(f"  group {gi}:")
            for c in group:
                head = f"{quote_atom(rel.name)}({', '.join(term_text(a) for a in c.head)})" if c.head else quote_atom(rel.name)
                guard = ", ".join(call_text(g) for g in c.guard)
                rhs = ""
                if guard:
                    rhs = f" <- {guard} : {body_text(c.body)}"
                elif c.body is not None:
                    rhs = f" <- {body_text(c.body)}"
                lines.append(f"    {head}{rhs}.    % {c.span.line}:{c.span.col}, {c.nvars} vars")
    return "\n".join(lines) + "\n"
