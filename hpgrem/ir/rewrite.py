"""Rewrite rules over the node protocol, applied to a fixpoint by one driver.

A rule is a node class (or a tuple of them) and a function that takes a node of that class
and returns its replacement, or None where it does not apply: rewrites read like algebra, as in
tinygrad's pattern tables or xDSL's rewrite patterns. `Rewriter` applies a table bottom up,
each distinct node to a fixpoint (a node shared by several places is rewritten once, and its
replacement stays shared), then the whole graph again until nothing changes, and counts how
often each rule fired (what a pass reports, and what a rewrite trace will show).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Sequence

from hpgrem.ir.core import NODE_KINDS, Node, transform

RewriteFn = Callable[[Node], "Node | None"]
MAX_ROUNDS = 50  # rounds at a node and over the tree: a terminating table needs few


class Rewriter:
    """Applies `rules`, a sequence of (node class or classes, function), to a fixpoint."""

    def __init__(self, rules: Sequence[tuple[type | tuple[type, ...], RewriteFn]]):
        self.by_kind: dict[type, list[RewriteFn]] = {}
        for kinds, fn in rules:
            for cls in NODE_KINDS.values():
                if issubclass(cls, kinds):
                    self.by_kind.setdefault(cls, []).append(fn)
        self.fired: Counter[str] = Counter()

    def rewrite(self, root: Node) -> Node:
        for _ in range(MAX_ROUNDS):
            before = sum(self.fired.values())
            root = transform(root, self._at)
            if sum(self.fired.values()) == before:
                return root
        raise RuntimeError("rewrite rules did not reach a fixpoint")

    def _at(self, node: Node) -> Node:
        for _ in range(MAX_ROUNDS):
            for fn in self.by_kind.get(type(node), ()):
                new = fn(node)
                if new is not None and new is not node:
                    self.fired[fn.__name__] += 1
                    node = new
                    break
            else:
                return node
        raise RuntimeError("rewrite rules did not reach a fixpoint")
