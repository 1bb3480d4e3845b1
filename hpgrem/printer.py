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
    for key, fn in module.functions.items():
        lines.append("")
        lines.append(f"function {key}({', '.join(fn.params)})    % {fn.span.line}:{fn.span.col}, "
                     f"{len(fn.params) - fn.arity} free, {fn.arity} argument{'s' if fn.arity != 1 else ''}")
        lines.extend("  " + line for line in expr_lines(fn.body))
    return "\n".join(lines) + "\n"


def expr_lines(e: ir.Expr) -> list[str]:
    """An ML function body as indented text: control forms on their own lines."""
    ind = "  "
    if isinstance(e, ir.Let):
        return [f"let {e.name} = {expr_text(e.value)}"] + expr_lines(e.body)
    if isinstance(e, ir.Sequence):
        return [line for x in e.exprs for line in expr_lines(x)]
    if isinstance(e, ir.If):
        return ([f"if {expr_text(e.cond)} then"] + [ind + x for x in expr_lines(e.then)] + ["else"]
                + [ind + x for x in expr_lines(e.else_)])
    if isinstance(e, ir.Switch):
        kind = f"{e.test} {e.datatype}".rstrip()
        out = [f"switch {expr_text(e.subject)} ({kind})"]
        for k, body in e.cases:
            out.append(f"case {k!r}:" if isinstance(k, (int, str)) else f"case {expr_text(k)}:")
            out += [ind + x for x in expr_lines(body)]
        if e.default is not None:
            out.append("default:")
            out += [ind + x for x in expr_lines(e.default)]
        return out
    if isinstance(e, ir.Handle):
        return (["try"] + [ind + x for x in expr_lines(e.body)] + [f"handle {e.name} =>"]
                + [ind + x for x in expr_lines(e.handler)])
    if isinstance(e, ir.While):
        return [f"while {expr_text(e.cond)} do"] + [ind + x for x in expr_lines(e.body)]
    return [expr_text(e)]


def expr_text(e: ir.Expr) -> str:
    """An ML expression on one line (control forms in braces)."""
    if isinstance(e, ir.Lit):
        return "()" if e.value is None else repr(e.value)
    if isinstance(e, (ir.Local, ir.Global)):
        return e.name if isinstance(e, ir.Local) else f"global {e.name}"
    if isinstance(e, ir.MakeClosure):
        return f"closure {e.function}[{', '.join(expr_text(x) for x in e.free)}]"
    if isinstance(e, ir.CallKnown):
        return f"{e.function}({', '.join(expr_text(x) for x in e.args)})"
    if isinstance(e, ir.Apply):
        return f"apply({expr_text(e.fn)}, {expr_text(e.arg)})"
    if isinstance(e, ir.Prim):
        return f"{e.op}({', '.join(expr_text(x) for x in e.args)})"
    if isinstance(e, ir.Construct):
        arg = "" if e.arg is None else f"({expr_text(e.arg)})"
        return f"{e.datatype.split('|')[0]}#{e.tag}{arg}"
    if isinstance(e, ir.Tuple):
        return f"({', '.join(expr_text(x) for x in e.items)})"
    if isinstance(e, ir.Part):
        return f"{expr_text(e.value)}.{e.step}"
    if isinstance(e, ir.SetGlobal):
        return f"global {e.name} := {expr_text(e.value)}"
    if isinstance(e, ir.Raise):
        return f"raise {expr_text(e.exn)}"
    if isinstance(e, ir.NewException):
        return f"new exception {e.name}"
    if isinstance(e, ir.BasisException):
        return e.name
    if isinstance(e, ir.Packet):
        return expr_text(e.con) + ("" if e.arg is None else f"({expr_text(e.arg)})")
    if isinstance(e, ir.Par):
        return f"par({expr_text(e.left)}, {expr_text(e.right)})"
    return "{ " + "; ".join(expr_lines(e)) + " }"
