"""HPGREM modules as readable text (`hpgrem ir`).

One printer for every dialect: each node kind says how it prints (`Node.render`: text pieces,
child nodes, `inline(child)` and layout marks); this module lays the pieces out, iteratively,
so that a list of 50,000 elements or an expression nested thousands deep prints in linear time.
"""

from __future__ import annotations

from hpgrem import ir
from hpgrem.ir.core import IN, NL, OUT, Inline


def text(node: ir.Node) -> str:
    """A node on one line (multi-line forms in braces, their lines joined by `; `)."""
    return "".join(_layout(node, block=False)[0])


def lines(node: ir.Node) -> list[str]:
    """A node as indented lines (two spaces a level); forms that print on one line give one."""
    return ["".join(line) for line in _layout(node, block=True)]


def _layout(root: ir.Node, block: bool) -> list[list[str]]:
    out: list[list[str]] = [[]]
    depth = 0
    stack: list = [(root, block)]
    while stack:
        piece, blk = stack.pop()
        if type(piece) is str:
            out[-1].append(piece)
        elif piece is NL:
            if blk:
                out.append(["  " * depth])
            else:
                out[-1].append("; ")
        elif piece is IN or piece is OUT:
            if blk:
                depth += 1 if piece is IN else -1
        elif type(piece) is Inline:
            stack.append((piece.node, False))
        else:
            pieces = piece.render()
            if piece.block_form and not blk:
                pieces = ["{ ", *pieces, " }"]
            child_mode = blk and piece.block_form
            stack.extend((p, child_mode) for p in reversed(pieces))
    return out


def module_text(module: ir.Module) -> str:
    """The whole module: header, entry, then each rule."""
    out = [f"module {module.source!r} ({module.dialect})"]
    if module.entry is not None:
        outs = f" -> {', '.join(module.entry.outputs)}" if module.entry.outputs else ""
        out.append(f"entry {module.entry.target}{outs}")
    for key, rule in module.rules.items():
        out.append("")
        out += lines(rule)
        notes = module.annotations.get(key)
        if notes:
            out.append("  % " + ", ".join(f"{k}={v!r}" for k, v in sorted(notes.items())))
    return "\n".join(out) + "\n"

