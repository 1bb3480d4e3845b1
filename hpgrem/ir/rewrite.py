"""Rewrite rules over the node protocol, applied to a fixpoint by one driver.

A rule is a node class (or a tuple of them) and a function that takes a node of that class
and returns its replacement, or None where it does not apply: rewrites read like algebra, as in
tinygrad's pattern tables or xDSL's rewrite patterns. `Rewriter` applies a table bottom up,
each distinct node to a fixpoint (a node shared by several places is rewritten once, and its
replacement stays shared), then the whole graph again until nothing changes, and counts how
often each rule fired (what a pass reports). While a `RewriteLog` is recording (`recording`,
the compile trace of `hpgrem ir --trace`), every rewrite is also written to it: the rule, the
node before and after, its span; the pass manager (hpgrem/passes) adds what passes without
rewrite rules changed, rule by rule. Off, it costs one test each time a rule fires.
"""

from __future__ import annotations

import json
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from hpgrem.ir.core import NODE_KINDS, Node, transform

RewriteFn = Callable[[Node], "Node | None"]
MAX_ROUNDS = 50  # rounds at a node and over the tree: a terminating table needs few
TEXT_LIMIT = 400  # characters of a node's text in a compile trace; longer ones end in "..."


@dataclass(slots=True)
class RewriteLog:
    """A compile trace: what each pass changed, in order. Each entry is a dict: "pass", "kind"
    ("rewrite": a rewrite rule fired on a node; "rule": a rule (relation, function) changed;
    "added" or "removed": a rule; "note": an annotation the pass set), "rule" (the rewrite
    rule's name, or the key of the rule changed), "before" and "after" (printed, one line; ""
    for what is not there) and "span" ([file, line, col] or None)."""

    entries: list[dict] = field(default_factory=list)
    pass_name: str = ""  # the pass running (set by the pass manager)

    def add(self, kind: str, rule: str, before: str, after: str, span) -> None:
        if before != after:  # a rule rebuilt the same: nothing a reader could see
            self.entries.append({"pass": self.pass_name, "kind": kind, "rule": rule, "before": before,
                                 "after": after, "span": span_list(span)})

    def rewrite(self, rule: str, before: Node, after: Node) -> None:
        """The rewrite rule `rule` replaced `before` by `after`."""
        span = getattr(before, "span", None) or getattr(after, "span", None)
        self.add("rewrite", rule, node_text(before), node_text(after), span)

    def text(self) -> str:
        """The trace as text: each pass that changed something, then its changes in order, each
        with its source position and the printed node before and after."""
        out: list[str] = []
        current = None
        for e in self.entries:
            if e["pass"] != current:
                current = e["pass"]
                out.append(f"pass {current}")
            where = ":".join(map(str, e["span"])) if e["span"] else "-"
            out.append(f"  {e['kind']} {e['rule'] or '(module)'}    at {where}")
            if e["before"]:
                out.append(f"    before: {e['before']}")
            if e["after"]:
                out.append(f"    after:  {e['after']}")
        if not out:
            out.append("no pass changed anything")
        return "\n".join(out) + "\n"

    def jsonl(self, header: dict) -> str:
        """The trace as JSON lines: `header` (with "trace": "hpgrem-compile" and the version
        added), then one line per entry."""
        head = {"trace": "hpgrem-compile", "version": 1, **header, "entries": len(self.entries)}
        return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in (head, *self.entries))


_active: list[RewriteLog] = []  # the log recording now (at most one)


@contextmanager
def recording(log: RewriteLog) -> Iterator[RewriteLog]:
    """Record every rewrite made while in this block into `log`."""
    _active.append(log)
    try:
        yield log
    finally:
        _active.pop()


def active_log() -> RewriteLog | None:
    """The log recording now, if any."""
    return _active[-1] if _active else None


def node_text(node: Node) -> str:
    """A node printed on one line (hpgrem/printer.py), cut to TEXT_LIMIT characters."""
    from hpgrem.printer import text

    s = text(node)
    return s if len(s) <= TEXT_LIMIT else s[:TEXT_LIMIT - 3] + "..."


def span_list(span) -> list | None:
    """A source span as traces write it: [file, line, col]; None where there is none."""
    if span is None or getattr(span, "line", 0) <= 0:
        return None
    return [span.file, span.line, span.col]


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
                    if _active:
                        _active[-1].rewrite(fn.__name__, node, new)
                    node = new
                    break
            else:
                return node
        raise RuntimeError("rewrite rules did not reach a fixpoint")
