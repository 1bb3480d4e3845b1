"""ML's traced mode: what ML's traced code reports to its PE's tracer (pam.trace, docs/trace.md).

An ML reduction is one application of an ML function (docs/ml.md): a call of a generator or of
direct code, a tail call, the next round of a loop (a self tail call or a `while`), a thunk
applied (a forked task starting, or a child taken back at its join) and a fork
(`ForkJoin.par` of two pure thunks, which spawns the right one as a task). Calls of plain
functions are part of their caller's reduction. `--stats` counts exactly these; in a traced
run each is one `rewrite` event: the function's name, its source span, the redex (the function
applied to its arguments, their values shortened) and, for a fork, the task it spawned. The
event's depth is the depth of the frame in the evaluation (the task's own depth, plus its
frames: a call one deeper than its caller). Joins that wait are the PE's suspensions.

The task driver (pam/ml/task.py) reports what it sees (calls, tail calls, thunks, forks); the
traced code of pam/ml/codegen.py calls `inline` (`rw` in the generated module) for what runs
inside one Python call (direct code, loops), and the heap driver of deep direct code `nested`.
"""

from __future__ import annotations

from pam.ml.annotations import FunctionInfo
from pam.ml.values import Closure, Packet

ITEMS = 5  # list elements or tuple fields shown before "..."
NEST = 3  # values nested deeper than this are shown as "..."
CHARS = 24  # characters of a string shown


class MLTrace:
    """One PE's reporter for ML's traced code: `tracer` is the PE's (pam.trace.Tracer),
    `infos` the module's functions by key (pam.ml.annotations)."""

    __slots__ = ("tracer", "task", "by_code", "by_index", "shapes")

    def __init__(self, tracer, infos: dict[str, FunctionInfo]) -> None:
        self.tracer = tracer
        self.task = None  # the task the PE is stepping (set by the driver at each step)
        self.by_index = {int(info.py[1:]): info for info in infos.values()}
        self.by_code: dict = {}
        self.shapes: dict[str, tuple] = {}  # function key -> its redex's shape (`redex_shape`)

    def bind(self, ns: dict) -> None:
        """Learn the generator functions of a PE's namespace, to name the frames the driver sees."""
        for info in self.by_index.values():
            fn = ns.get(info.py)
            if fn is not None:
                self.by_code[fn.__code__] = info

    # -- what the drivers report ------------------------------------------------------------------
    def call(self, gen, frame: int) -> None:
        """The task's frame number `frame` (0: its first) is a new application: `gen`, a
        generator not started yet, whose frame holds the arguments."""
        info = self.by_code[gen.gi_code]
        self._rewrite(info, frame, "" if self.tracer.trace.cut else self.redex(info, _frame_values(gen)))

    def nested(self, gen, place: int) -> None:
        """An application on the heap stack of deep direct code, `place` frames below the task's
        top frame."""
        self.call(gen, len(self.task.stack) + place)

    def thunk(self, closure: Closure, frame: int, child=None) -> None:
        """A thunk is applied: a forked task starting (`frame` 0), or `child`, a task nobody
        started, taken back at its join (`frame`: where it runs in the joining task). The event
        is then the child's: its goal is reduced there, and the evaluation goes on in the
        joining task."""
        info = self._info_of(closure)
        text = "" if self.tracer.trace.cut else self.redex(info, (*closure.env, ()))
        self._rewrite(info, frame, text, child)

    def fork(self, child, frame: int) -> None:
        """`ForkJoin.par` of pure thunks in frame `frame`: `child`, the right thunk's task, is
        spawned. Its span is the right thunk's (on the line of the `par`)."""
        tr = self.tracer
        thunk = self._info_of(child.thunk)
        tr.begin(self.task, "ForkJoin.par", "ForkJoin.par (fn, fn)", [], span=thunk.fn.span)
        event = tr.open[-1][0]
        if event is not None:
            event["depth"] = tr.depth(self.task) + frame
        tr.spawned(child)
        if event is not None:
            event["spawn"][-1]["goal"] = self.redex(thunk, (*child.thunk.env, ()))
        tr.end()

    def inline(self, index: int, place: int, values: tuple | None) -> None:
        """An application inside compiled code (`rw`): function number `index`, at `place`
        (direct code's depth `d`, -1: the task's top frame), `values` its parameters (None: a
        round of a `while` loop)."""
        info = self.by_index[index]
        if self.tracer.trace.cut:
            text = ""
        elif values is None:
            text = f"while (in {info.fn.name})"
        else:
            text = self.redex(info, values)
        self._rewrite(info, len(self.task.stack) + place, text)

    # -- events ------------------------------------------------------------------------------------
    def _info_of(self, closure: Closure) -> FunctionInfo:
        return self.by_index[int(closure.fn.__name__[1:])]

    def redex(self, info: FunctionInfo, values: tuple) -> str:
        """The text of `info`'s function applied to its parameters' `values` (free variables
        first, then the arguments): `fib 10`, `go (3, [1, 2])`."""
        shape = self.shapes.get(info.key)
        if shape is None:
            shape = self.shapes[info.key] = redex_shape(info)
        name, i, groups = shape
        parts = [name]
        for n in groups:
            if n:
                parts.append("(" + ", ".join([show(v) for v in values[i:i + n]]) + ")")
                i += n
            else:
                parts.append(show(values[i], atom=True))
                i += 1
        return " ".join(parts)

    def _rewrite(self, info: FunctionInfo, frame: int, text: str, task=None) -> None:
        """One rewrite event of the running task, or of `task`, `frame` frames below the running
        task's top (its text "" past --trace-limit: not written)."""
        tr = self.tracer
        tr.begin(self.task if task is None else task, info.fn.name, text, [], span=info.fn.span)
        event = tr.open[-1][0]
        if event is not None:
            event["depth"] = tr.depth(self.task) + frame
        tr.end()


def _frame_values(gen) -> tuple:
    """The arguments a generator was made with (its frame's first locals)."""
    code = gen.gi_code
    names = code.co_varnames[:code.co_argcount]
    values = gen.gi_frame.f_locals
    return tuple(values[n] for n in names)


def redex_shape(info: FunctionInfo) -> tuple[str, int, list[int]]:
    """How a redex of `info`'s function is written: its name, the position of its first
    argument among its parameters, and per argument 0 (one value) or n (a tuple passed flat by
    ml-flatten, as parameters `x.0` .. `x.n-1`, shown as the tuple)."""
    fn = info.fn
    start = len(fn.params) - fn.arity
    groups: list[int] = []
    prefix = None
    for name in fn.params[start:]:
        head, dot, tail = name.rpartition(".")
        if dot and tail.isdigit():
            if head == prefix:
                groups[-1] += 1
            else:
                groups.append(1)
                prefix = head
        else:
            groups.append(0)
            prefix = None
    return fn.name, start, groups


def show(value, depth: int = 0, atom: bool = False) -> str:
    """An ML value, shortened, as ML writes it where its representation tells (pam/ml/values.py;
    values carry no types: a pair whose second part is a list shows as a list)."""
    if depth > NEST:
        return "..."
    tp = type(value)
    if tp is int:
        return str(value) if value >= 0 else "~" + str(-value)
    if tp is bool:
        return "true" if value else "false"
    if tp is float:
        text = repr(value)
        return "~" + text[1:] if text.startswith("-") else text
    if tp is str:
        body = value if len(value) <= CHARS else value[:CHARS] + "..."
        return '"' + body.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if value is None:
        return "[]"
    if tp is tuple:
        items = _list_items(value)
        if items is not None:
            shown = [show(x, depth + 1) for x in items[:ITEMS]]
            return "[" + ", ".join(shown + (["..."] if len(items) > ITEMS else [])) + "]"
        shown = [show(x, depth + 1) for x in value[:ITEMS]]
        return "(" + ", ".join(shown + (["..."] if len(value) > ITEMS else [])) + ")"
    if tp is list:
        text = "ref " + show(value[0], depth + 1, atom=True)
        return f"({text})" if atom else text
    if tp is Closure:
        return "fn"
    if isinstance(value, Packet):
        return value.con.name
    return tp.__name__


def _list_items(value: tuple) -> list | None:
    """The elements of a list cell chain `(head, tail)` ending in nil, up to ITEMS + 1 of them
    (a longer list is cut there); None if `value` is no such chain."""
    items = []
    while type(value) is tuple and len(value) == 2:
        items.append(value[0])
        value = value[1]
        if len(items) > ITEMS:
            return items
    return items if value is None and items else None
