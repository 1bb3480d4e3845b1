"""HPGREM modules as readable text (`hpgrem ir`).

One printer for every dialect: each node kind says how it prints (`Node.render`: text pieces,
child nodes, `inline(child)` and layout marks); this module lays the pieces out, iteratively,
so that a list of 50,000 elements or an expression nested thousands deep prints in linear time.
A node with children that is used in several places prints once, where it is first met, as a
named definition `%N = ...`, and as `%N` everywhere after: the text grows with the distinct
nodes, not with the paths to them.
"""

from __future__ import annotations

from hpgrem import ir
from hpgrem.ir.core import IN, NL, OUT, Inline, use_counts


def text(node: ir.Node) -> str:
    """A node on one line (multi-line forms in braces, their lines joined by `; `)."""
    return "".join(_layout(node, block=False)[0])


def lines(node: ir.Node) -> list[str]:
    """A node as indented lines (two spaces a level); forms that print on one line give one."""
    return ["".join(line) for line in _layout(node, block=True)]


def _layout(root: ir.Node, block: bool) -> list[list[str]]:
    shared = {i for i, n in use_counts((root,)).items() if n > 1}
    names: dict[int, str] = {}
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
        elif id(piece) in names:
            out[-1].append(names[id(piece)])
        else:
            pieces = piece.render()
            if piece.block_form and not blk:
                pieces = ["{ ", *pieces, " }"]
            if id(piece) in shared and piece.children():
                name = names[id(piece)] = f"%{len(names) + 1}"
                pieces = [f"{name} = ", *pieces]
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
