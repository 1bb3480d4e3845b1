"""What the passes recorded that the ML code generator (pam/ml/codegen.py) reads: the
`ml-kinds` analysis (each function's kind, purity, loop, the globals it reads, the functions it
refers to, the globals' slots), and the shapes the ML passes ask for (docs/passes.md): the
overflow checks each int operation needs (`ml-ranges`), the depth bound of a recursion
(`ml-ranges`), calls counted per block (`ml-batch-counts`). No note is stale: the pass manager
drops a pass's notes of a rule that a later pass changed, and those of a `.hpg` file whose stamp
is not their rule's (hpgrem/passes/__init__.py, "Stamps"). A malformed note (a hand-edited
`.hpg` file's) is ignored: the plain shape is kept.
"""

from __future__ import annotations

from hpgrem import ir

from hpgrem.ir import ml
from hpgrem.ir.ml import INT_ARITHMETIC, fingerprint

KIND = "ml-kinds.kind"  # notes are named by their owner (docs/passes.md); the machine imports no pass
DEPTH = 200  # Python frames of direct recursion before the rest runs on a heap stack


class FunctionInfo:
    """How one function is compiled: its Python name and what the passes said of it."""

    __slots__ = ("key", "py", "gen", "pure", "loop", "fn", "direct", "bounded", "applies", "raises",
                 "returns_raise", "checks_once")

    def __init__(self, key: str, py: str, fn: ml.Function):
        self.key, self.py, self.fn = key, py, fn
        self.direct = False
        self.gen = True
        self.pure = True
        self.loop = False
        self.raises = True  # an ML raise may leave it (ml-kinds): its calls are counted one by one
        self.applies = any(isinstance(x, ml.Apply) for x in ir.walk(fn.body))  # calls closures
        # (argument position, the largest value of it whose calls nest at most DEPTH frames):
        # a direct function that calls only itself and plain functions, with that argument
        # decreasing (ml-ranges' `depth`); such calls run in a copy `_b` without depth test.
        self.bounded: tuple[int, int] | None = None
        # Its twins (`_d`, `_b`), or a plain function itself, return an ML raise that leaves
        # them as a `Raised` instead of raising it (Annotations): a direct or plain function
        # that may raise, called only by name.
        self.returns_raise = False
        # Its copy `_b` checks its result once, where the caller gets it (ml-ranges' `once`).
        self.checks_once = False


class Annotations:
    """What the `ml-kinds` pass recorded (hpgrem/passes/ml/kinds.py): each function's kind,
    purity and loop, the globals' slots, the globals each function reads and the functions it
    refers to. The machine reads these annotations and computes none of them (it only combines
    them: which functions, made into no closure, return their raises)."""

    def __init__(self, module: ir.Module):
        self.info: dict[str, FunctionInfo] = {}
        self.reads: dict[str, set[int]] = {}
        self.refs: dict[str, set[str]] = {}
        for i, (key, fn) in enumerate(module.rules.items()):
            notes = module.annotations.get(key)
            if notes is None or KIND not in notes:
                raise ValueError(f"function {key} has no ml-kinds annotations: compile the module with "
                                 "hpgrem.driver.pipeline (the machine runs no analysis of its own)")
            info = self.info[key] = FunctionInfo(key, f"f{i}", fn)
            info.gen = notes[KIND] != "plain"
            info.direct = notes[KIND] == "direct"
            info.pure = notes["ml-kinds.pure"]
            info.loop = notes["ml-kinds.loop"]
            info.raises = notes.get("ml-kinds.raises", True)  # unknown (an older .hpg): it may
            self.reads[key] = set(notes["ml-kinds.reads"])
            self.refs[key] = set(notes["ml-kinds.refs"])
        names = module.annotation(ir.MODULE_FACTS, "ml-kinds.globals", ())
        self.globals: dict[str, int] = {name: slot for slot, name in enumerate(names)}
        self.overflow: dict[int, str] = {}  # id of an int operation -> the checks it needs
        # ml-batch-counts (hpgrem/passes/ml/batch_counts.py): count calls of direct code per block
        self.batch_counts = module.annotation(ir.MODULE_FACTS, "ml-batch-counts.calls") == "block"
        self.poll = True  # check the limits when counts pass POLL (`generate`)
        # direct code and loops count their reductions (`generate`): false only for a run that
        # neither reports nor limits them (one PE, no --stats, --max-steps, --timeout, trace)
        self.counts = True
        self.trace = False  # the traced mode: reductions inside compiled code are reported (`generate`)
        for key, fn in module.rules.items():
            self.overflow.update(overflow_checks(fn, module.annotation(key, "ml-ranges.overflow")))
        # A function made into a closure is also called by code that does not know it (the
        # basis's map, a closure's twin `d`): only functions called by name return their raises.
        closures = {x.function for fn in module.rules.values() for x in ir.walk(fn.body)
                    if isinstance(x, ml.MakeClosure)}
        for key, info in self.info.items():
            info.bounded = self._bounded(info, module.annotation(key, "ml-ranges.depth"))
            # ml-ranges' `once`: the bounded copy's result is checked by its caller
            info.checks_once = info.bounded is not None and module.annotation(key, "ml-ranges.once") is not None
            info.returns_raise = (info.direct or not info.gen) and info.raises and key not in closures

    def _bounded(self, info: FunctionInfo, note) -> tuple[int, int] | None:
        fn = info.fn
        if not (info.direct and isinstance(note, tuple) and len(note) == 3
                and type(note[1]) is int and len(fn.params) - fn.arity <= note[1] < len(fn.params)
                and type(note[2]) is int and ml.INT_MIN < note[2] <= ml.INT_MAX):
            return None
        if info.applies or any(k != info.key and (k not in self.info or self.info[k].gen)
                               for k in self.refs[info.key]):
            return None  # it reaches other recursion: its depth is not its own
        return note[1], note[2] + DEPTH - 2  # a call with n nests n - L + 2 frames


def overflow_checks(fn: ml.Function, note) -> dict[int, str]:
    """The checks the `ml-ranges` annotation `note` gives the int operations of `fn`'s body, by
    node id; none when it is malformed (every check is kept): its form is the body's digest and
    one check per operation (a note of another body has another digest, or length: the manager
    keeps such notes from the machine, but this function serves any caller)."""
    ops = [x for x in ir.walk_tree(fn.body) if isinstance(x, ml.Prim) and x.op in INT_ARITHMETIC]
    if not (isinstance(note, tuple) and len(note) == len(ops) + 1 and note[0] == fingerprint(fn.body)
            and all(c in ("", "lo", "hi", "hi0", "lohi") for c in note[1:])):
        return {}
    out: dict[int, str] = {}
    for x, c in zip(ops, note[1:]):
        # a node object met twice (a shared subtree) keeps the checks of both places
        prev = out.get(id(x), c)
        out[id(x)] = c if prev == c else "".join(k for k in ("lo", "hi") if k in prev + c)
    return out

