"""ML functions -> Python source, compiled once per module (threaded code, as for PARLOG rules).

Each HPGREM `Function` becomes one Python function (two for a direct one), by the kind the
`ml-kinds` pass recorded (hpgrem/passes/ml/kinds.py decides; this module only reads it):
- *plain*: its calls are only to primitives and other plain functions, and the plain call graph
  has no cycles (a self tail call is a loop), so running it directly cannot grow Python's stack
  without bound;
- *generator*: everything else. A non-tail call `yield`s the callee's generator to the task's
  driver (pam/ml/task.py), which keeps the frames on a heap-allocated stack, so ML recursion is
  bounded by memory, never by Python's stack. A tail call returns the callee's generator, and
  the driver replaces the frame. `ForkJoin.par` yields fork and join requests;
- *direct*: a generator that (transitively) calls only known functions also gets a twin `f_d`
  that recurses in Python to depth DEPTH and then hands the rest to a heap-stack driver
  (`nested`); code outside the direct set calls the twin (see `call_text`).

A direct or plain function that an ML raise may leave and that only generated code calls (never
made into a closure) returns such a raise as a `Raised` (FunctionInfo.returns_raise); its
callers test for one (`unraised`), so a raise caught a frame or two up costs no Python raise.

Only thunks of `ForkJoin.par` the pass found *pure* may run as separate tasks, so effects keep
program order. What the passes recorded is read in pam/ml/annotations.py; the shapes the ML
passes ask for at -O2 (docs/passes.md) are chosen here.
"""

from __future__ import annotations

import re
import sys

from hpgrem import ir

from hpgrem.ir import ml
from hpgrem.ir.ml import ML_BASIS_EXCEPTIONS
from pam.emit import Emitter
from pam.ml.annotations import DEPTH, Annotations, FunctionInfo

FORK, JOIN, CANCEL = "fork", "join", "cancel"
# Every call of direct code and every iteration of a loop counts as a reduction; past POLL
# uncounted ones, `tick` banks them and checks --timeout and --max-steps (direct code and loops
# run inside one step of the PE loop, which could otherwise never stop them).
POLL = 16383
TICK = f"calls[0] += 1\nif calls[0] > {POLL}: tick()"
LONG = 400  # characters of one generated expression before it is split into statements
# A pure node used in several places (the IR is a graph) whose expression is longer than this is
# computed once into a temporary that its later places read; a shorter one is written again
# at each (its text made once): so code grows with the distinct nodes, not the paths.
SHARED_LONG = 60
# Python refuses more than 100 levels of indentation and 20 nested try/while blocks: code nested
# deeper than these goes into a helper function of its own (`FunctionCompiler.helper`).
MAX_DEPTH = 40
MAX_BLOCKS = 8
MANY_CASES = 64  # a switch of more constant cases goes through a table (table_switch)
# Marks in the source while it is built (batched counts), removed by `resolve_marks`: CALL n
# OPEN text CLOSE around a counted call; a line REGION + b/e n: block n starts/ends (its count
# at its start); REGION + r/q n: region n (a function's body, a handler's `try` body) starts/ends.
CALL, OPEN, CLOSE, REGION = "\x01", "\x02", "\x03", "\x04"
FUNCTION_REGIONS = "FUNCTION_REGIONS"  # the module's constant: Python function -> its body's Region

# Inline templates of primitives of two arguments, by op; `{t}` is a fresh temporary. A result
# within 30 bits is tested first: CPython compares such ints inline (specialized), while a
# comparison with a 63-bit bound goes through the generic one (fib: 1.38x -> 1.22x CPython).
_IN_RANGE = ("({t} if ({t} := {x}) <= 1073741823 and {t} >= -1073741823"
             " or -4611686018427387904 <= {t} <= 4611686018427387903 else ovf())")
_CHECKED = _IN_RANGE.replace("{x}", "{a} {o} {b}")
# The same with only the checks the ml-ranges pass found needed (hpgrem/passes/ml/ranges.py).
_NARROWED = {"lo": "({t} if ({t} := {a} {o} {b}) >= -1073741823 or {t} >= -4611686018427387904 else ovf())",
             "hi": "({t} if ({t} := {a} {o} {b}) <= 1073741823 or {t} <= 4611686018427387903 else ovf())",
             "": "({a} {o} {b})"}
_UNCHECKED_UNARY = {"int.~": "(-{a})", "int.abs": "abs({a})"}
BINARY = {
    "int.+": _CHECKED.replace("{o}", "+"), "int.-": _CHECKED.replace("{o}", "-"),
    "int.*": _CHECKED.replace("{o}", "*"),
    "real.+": "({a} + {b})", "real.-": "({a} - {b})", "real.*": "({a} * {b})", "/": "rdiv({a}, {b})",
    "div": "idiv({a}, {b})", "mod": "imod({a}, {b})",
    "=.simple": "({a} == {b})", "<>.simple": "({a} != {b})", "=": "eq({a}, {b})", "<>": "(not eq({a}, {b}))",
    "^": "({a} + {b})", ":=": "assign({a}, {b})", "before": "before({a}, {b})",
}
# Polymorphic equality with a test for an int first (its operand a name): eq's own answer.
_EQ_INT = {"=": "({a} == {b} if {a}.__class__ is int else eq({a}, {b}))",
           "<>": "({a} != {b} if {a}.__class__ is int else not eq({a}, {b}))"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
for _ty in ("int", "real", "string", "char"):
    for _op in ("<", ">", "<=", ">="):
        BINARY[f"{_ty}.{_op}"] = f"({{a}} {_op} {{b}})"
UNARY = {
    "int.~": "({t} if ({t} := -{a}) <= 4611686018427387903 else ovf())",
    "int.abs": "({t} if ({t} := abs({a})) <= 4611686018427387903 else ovf())",
    "real.~": "(-{a})", "real.abs": "abs({a})", "not": "(not {a})", "print": "out({a})",
    "!": "{a}[0]", "ref": "[{a}]",
}


class FunctionCompiler:
    """Compiles one function's body into Python statements."""

    def __init__(self, analysis: Annotations, info: FunctionInfo, constants: dict, mode: str | None = None,
                 root: FunctionCompiler | None = None):
        self.a = analysis
        self.info = info
        # "gen" (a generator), "plain", or "direct" (the Python-recursive twin of a direct function)
        self.mode = mode or ("gen" if info.gen else "plain")
        # With ml-batch-counts a caller counts its calls of direct code, once per block, unless an
        # ML raise may leave this function (ml-kinds' `raises`): then it counts each call just
        # before making it, so that such a raise has no counted call to take back (`settle`).
        # Code that counts nothing (`Annotations.counts` false) batches everywhere: no count
        # to take back.
        self.batch = analysis.batch_counts and (not info.raises or not analysis.counts)
        self.fn = info.fn
        self.out = Emitter(depth=1)
        self.names: dict[str, str] = root.names if root is not None else {}
        self.constants = constants
        self.blocks = 0  # try and while blocks open around the code being emitted
        # With batched counts: per open block, a `_Count` (`open_count`, `close_count`).
        self.counts: list[_Count] = []
        # Nothing emitted so far could do anything twice if the function ran again from its
        # start with its parameters (no call, effect or handler yet, in emission order).
        self.fresh = root is None
        # A helper (code nested too deeply, compiled as a function of its own) belongs to the
        # compiler of its function, which emits it after the function.
        self.root = root if root is not None else self
        self.helpers: list[str] = []
        self.trys: list[_Try] = []  # the handlers' `try` bodies open around the code being emitted
        # A node object used in several places of the body (the IR is a graph) means what copies
        # would: when it is pure (`_shareable`), its text is made once, by node id (`expr`), and
        # a long one names its value (SHARED_LONG). What a block made is forgotten when the
        # block ends (a name set in it may not be set after it).
        self.shared: dict[int, bool] = root.shared if root is not None else _shareable(self.fn.body)
        self.memo: dict[int, str] = {}
        # The locals bound so far, and how many times one was bound again (`rebound`).
        self.bound: set[str] = root.bound if root is not None else set(self.fn.params)
        self.rebinds = 0

    @property
    def py_name(self) -> str:
        return self.info.py + {"direct": "_d", "bounded": "_b"}.get(self.mode, "")

    @property
    def tick(self) -> str:
        """Count one reduction made here (a call, a loop's round); check the limits now and then."""
        return TICK if self.a.poll else "calls[0] += 1"

    def emit_tick(self) -> None:
        if self.a.counts:
            self.out.emit(self.tick)

    def local(self, name: str) -> str:
        py = self.names.get(name)
        if py is None:
            py = self.names[name] = f"v{len(self.names)}"
        return py

    def rebound(self, name: str) -> None:
        """`name` was bound: if it was before (a name bound in two places), what was computed
        from its old value no longer holds, and nothing shared is read from before (nor, once
        the blocks around end, from before them: `remember`)."""
        if name in self.bound:
            self.memo = {}
            self.rebinds += 1
        self.bound.add(name)

    def remember(self) -> tuple[dict[int, str], int]:
        """What a block that starts now restores when it ends (`forget`)."""
        return dict(self.memo), self.rebinds

    def forget(self, saved: tuple[dict[int, str], int]) -> None:
        """A block ends: what it computed may not have been (it may not have run)."""
        memo, rebinds = saved
        self.memo = memo if rebinds == self.rebinds else {}

    def constant(self, kind: str, key, prefix: str) -> str:
        """The name in the generated module of the object (`kind`, `key`): a literal, a primitive,
        a closure maker or a closure without free variables; the loader binds the names."""
        name = self.constants.get((kind, key))
        if name is None:
            name = self.constants[(kind, key)] = f"{prefix}{len(self.constants)}"
        return name

    def const(self, value) -> str:
        """A name for a literal (a string or a real) of the generated module."""
        name = self.constant("lit", repr(value), "k")
        self.constants[name] = value
        return name

    def source(self) -> str:
        params = [self.local(p) for p in self.fn.params]
        direct = self.mode == "direct"
        head = f"def {self.py_name}({', '.join((['d'] if direct else []) + params)}):"
        out = self.out
        if self.mode in ("direct", "bounded"):
            if not self.a.batch_counts:
                # a call counts as a reduction (each further iteration of its loop too)
                self.emit_tick()
            self.traced(self.local_params())
        if self.info.loop:
            out.emit("while True:")
            out.depth += 1
            self.blocks += 1
        first = self.a.marks.calls
        self.open_count()
        self.ret(self.fn.body)
        self.close_count()
        self.guard(first, self.py_name)
        if self.mode == "gen":
            out.depth = 1
            out.emit("if 0: yield")
        return "\n\n".join(["\n".join([head, *out.lines]), *self.helpers])

    def guard(self, first: int, name: str) -> None:
        """With batched counts, when the Python function `name` (`first`: the count of marked
        calls before it) counts any: its body is a region, so that an ML exception that leaves
        it takes back the calls its blocks counted and never made (`settle`, pam/ml/loader.py,
        where the exception is caught: nothing is added to the path that does not raise)."""
        if self.a.marks.calls == first or not self.a.counts:
            return
        region = self.a.marks.region(name)
        self.out.lines = [f"{REGION}r{region}", *self.out.lines, f"{REGION}q{region}"]

    def local_params(self) -> str:
        """The function's parameters as a Python tuple (their values now)."""
        params = [self.local(p) for p in self.fn.params]
        return f"({''.join(p + ', ' for p in params)})"

    def traced(self, values: str) -> None:
        """In the traced mode (pam/ml/tracing.py), after the count of a reduction made inside this
        code (a call of direct code, a loop's next round; `values` None: a `while` round): its
        rewrite event, with where its frame is (`place`)."""
        if self.a.trace:
            self.out.emit(f"rw({self.info.py[1:]}, {self.place()}, {values})")

    def place(self) -> str:
        """Where this code's frame is, below the task's top frame: direct code's depth (batched
        counts count `d` down from DEPTH), -1 for the top frame itself (a generator's)."""
        if self.mode == "direct":
            return f"{DEPTH} - d" if self.a.batch_counts else "d"
        return "-1" if self.mode == "gen" else "0"

    # ---- code nested too deeply for one Python function --------------------------------------
    def too_deep(self, e) -> bool:
        return (self.out.depth > MAX_DEPTH or self.blocks >= MAX_BLOCKS) and \
            isinstance(e, (ml.If, ml.Switch, ml.Let, ml.Sequence, ml.Handle, ml.While))

    def helper(self, e, tail: bool) -> str:
        """Compile `e` as a module-level function of the locals it uses (and the depth, for
        direct code) and return the Python expression that evaluates it here: its value, or in
        tail position what the function returns (a tail call's generator, or `Again` for a self
        tail call of a loop, which the function then continues). Indentation starts afresh."""
        root = self.root
        root.helpers.append("")  # its place: helpers it makes itself come after it
        slot = len(root.helpers) - 1
        name = f"{root.py_name}_h{slot}"
        free = sorted({x.name for x in ir.walk(e) if isinstance(x, ml.Local)}
                      - {x.name for x in ir.walk(e) if isinstance(x, (ml.Let, ml.Handle))})
        params = (["d"] if self.mode == "direct" else []) + [self.local(n) for n in free]
        sub = FunctionCompiler(self.a, self.info, self.constants, self.mode, root)
        first = self.a.marks.calls
        sub.open_count()
        if tail:
            sub.ret(e)
        else:
            result = sub.out.temp()
            sub.assign(e, result)
            sub.out.emit(f"return {result}")
        sub.close_count()
        sub.guard(first, name)
        if self.mode == "gen":
            sub.out.emit("if 0: yield")
        root.helpers[slot] = "\n".join([f"def {name}({', '.join(params)}):", *sub.out.lines])
        call = f"{name}({', '.join(params)})"
        return f"yield from {call}" if self.mode == "gen" else call

    def ret_helper(self, e) -> None:
        call = self.helper(e, tail=True)
        if not (self.info.loop and self.root is self):
            self.out.emit(f"return ({call})")
            return
        r = self.out.temp()  # a self tail call inside the helper continues the loop here
        self.out.emit(f"{r} = {call}")
        self.out.emit(f"if {r}.__class__ is Again:")
        self.out.depth += 1
        params = [self.local(p) for p in self.fn.params]
        if params:
            self.out.emit(f"{', '.join(params)}, = {r}.args")
        self.emit_tick()
        self.traced(self.local_params())
        self.out.emit("continue")
        self.out.depth -= 1
        self.out.emit(f"return {r}")

    # ---- tail position ------------------------------------------------------------------------
    def ret(self, e) -> None:
        out = self.out
        if self.too_deep(e):
            self.ret_helper(e)
        elif isinstance(e, ml.If):
            c = self.expr(e.cond)
            out.emit(f"if {c}:")
            self.block(lambda: self.ret(e.then))
            out.emit("else:")
            self.block(lambda: self.ret(e.else_))
        elif isinstance(e, ml.Let):
            self.assign(e.value, self.local(e.name))
            self.rebound(e.name)
            self.ret(e.body)
        elif isinstance(e, ml.Sequence):
            for x in e.exprs[:-1]:
                self.stmt(x)
            self.ret(e.exprs[-1])
        elif isinstance(e, ml.Switch):
            self.switch(e, self.ret)
        elif isinstance(e, ml.Raise) and self.returns_raise:
            if isinstance(e.exn, ml.Packet) and e.exn.arg is None:  # its one Raised
                out.emit(f"return {self.expr(e.exn.con)}.raised")
            else:
                out.emit(f"return Raised({self.expr(e.exn)})")
        elif isinstance(e, ml.Raise):
            out.emit(f"raise {self.expr(e.exn)}")
        elif isinstance(e, ml.Handle):
            self.handle(e, None)
        elif isinstance(e, ml.CallKnown):
            callee = self.a.info[e.function]
            args = self.exprs(e.args)
            if e.function == self.fn.key and self.info.loop and self.root is not self:
                out.emit(f"return Again(({''.join(a + ', ' for a in args)}))")
            elif e.function == self.fn.key and self.info.loop:
                params = [self.local(p) for p in self.fn.params]
                if params:
                    out.emit(f"{', '.join(params)} = {', '.join(args)}")
                self.traced(self.local_params())
                if self.batch:  # the iteration counts with its block, made here
                    out.emit(self.counted(self.count_call(False), "continue"))
                else:
                    self.emit_tick()
                    out.emit("continue")
            else:
                kind, call = self.call_text(callee, args)
                if kind == "raised" and not self.returns_raise:
                    call = self.unraised(call)
                out.emit(f"return {call}")
        elif isinstance(e, ml.Apply) and self.mode == "gen":
            f, x = self.exprs((e.fn, e.arg), atomic=True)
            self.fresh = False
            out.emit(f"return {f}.fn(*{f}.env, {x})")
        else:
            out.emit(f"return {self.expr(e)}")

    def block(self, body) -> None:
        self.out.depth += 1
        n = len(self.out.lines)
        saved = self.remember()
        self.open_count()
        body()
        self.close_count()
        self.forget(saved)
        if len(self.out.lines) == n:
            self.out.emit("pass")
        self.out.depth -= 1

    # ---- raises returned (FunctionInfo.returns_raise) -----------------------------------------
    @property
    def returns_raise(self) -> bool:
        """Whether an ML raise leaving this code is returned (a `Raised`), not raised: in the
        twins of a function that returns its raises, outside any `try` of theirs (a helper's
        result goes back into its function's code, which does not test it)."""
        return (self.info.returns_raise and self.mode in ("direct", "bounded", "plain") and self.root is self
                and not self.trys)

    def unraised(self, call: str) -> str:
        """The value of `call`, a call that may give a `Raised`: one is handed on, returned by
        code that returns its raises, raised by other code (in a `try` here, its handler runs)."""
        out = self.out
        tmp = out.temp()
        out.emit(f"{tmp} = {call}")
        body = self.trys[-1] if self.trys else None
        if body is not None and out.depth == body.depth and out.depth < MAX_DEPTH:
            # at the top level of a `try` body here: its handler gets the packet, and the rest
            # of the body goes in an `else` (closed by `end_try`)
            out.emit(f"if {tmp}.__class__ is Raised: {body.caught} = {tmp}.packet")
            out.emit("else:")
            out.depth += 1
            body.depth += 1
            return tmp
        hand_on = f"return {tmp}" if self.returns_raise else f"raise {tmp}.packet"
        out.emit(f"if {tmp}.__class__ is Raised: {hand_on}")
        return tmp

    def end_try(self, body: _Try) -> None:
        """The end of a `try` body: close the `else` blocks that `unraised` opened in it."""
        self.out.depth -= body.depth - body.opened

    # ---- batched call counts (ml-batch-counts) ------------------------------------------------
    def open_count(self) -> None:
        """A block starts: the calls of direct code made in it (outside its inner blocks) are
        counted once at its start, instead of one by one in the callees."""
        if self.batch:
            # Direct code may move itself to a heap stack (when `d` is 0) from a block that
            # nothing it did before could tell apart from a fresh call: outside any `try`.
            restart = self.mode == "direct" and self.fresh and self.root is self and not self.trys
            self.counts.append(_Count(len(self.out.lines), self.out.depth, restart, self.a.marks.block()))

    def close_count(self) -> None:
        if not self.batch:
            return
        c = self.counts.pop()
        if not c.calls and not c.deeper:  # (deeper without calls: inner blocks' calls use `dd`)
            return
        lines = []
        if c.deeper and c.restart:
            params = ", ".join(self.local(p) for p in self.fn.params)
            lines.append(f"if not d: return {heap_call(f'{self.info.py}({params})', 0, f'{DEPTH} - d', self.a.trace)}")
        if self.a.counts and c.calls:
            lines.append(f"{REGION}b{c.id}")
            lines.append(f"calls[0] += {c.calls}")
            if self.a.poll:
                lines.append(f"if calls[0] > {POLL}: tick()")
        if c.deeper:
            lines.append("dd = d - 1")
        # inner blocks inserted their lines after `c.at`, so it still marks this block's start
        self.out.lines[c.at:c.at] = ["    " * c.depth + line for line in lines]
        if self.a.counts and c.calls:
            self.out.lines.append(f"{REGION}e{c.id}")

    def count_call(self, deeper: bool) -> _Count:
        """A call of direct code in the current block; `deeper`: one frame deeper (`dd`)."""
        c = self.counts[-1]
        c.calls += 1
        c.deeper |= deeper
        return c

    def count(self, call: str, deeper: bool = False) -> str:
        """A call of direct code that its caller counts (batched counts): counted with its block
        (`deeper`: one frame deeper, `dd`), or, in a function an ML raise may leave, counted
        just before it is made, its result named."""
        if self.batch:
            return self.counted(self.count_call(deeper), call)
        if not self.a.counts:
            return call
        self.out.emit(self.tick)
        tmp = self.out.temp()
        self.out.emit(f"{tmp} = {call}")
        return tmp

    def counted(self, c: _Count, call: str) -> str:
        """The text of a call counted with block `c`, marked so that `generate` finds where it
        ends in the final source (`unrun` tells from that which counted calls were not made)."""
        if not self.a.counts:
            return call
        return f"{CALL}{self.a.marks.call(c.id)}{OPEN}{call}{CLOSE}"

    # ---- statements ---------------------------------------------------------------------------
    def stmt(self, e) -> None:
        """Evaluate `e` for its effects."""
        if isinstance(e, ml.Lit | ml.Local | ml.Global):
            return
        if isinstance(e, ml.Sequence):
            for x in e.exprs:
                self.stmt(x)
            return
        if isinstance(e, ml.SetGlobal):
            self.fresh = False
            v = self.expr(e.value)
            self.out.emit(f"G[{self.a.globals[e.name]}] = {v}")
            return
        if isinstance(e, ml.Raise):
            self.out.emit(f"raise {self.expr(e.exn)}")
            return
        if isinstance(e, ml.While) and not self.too_deep(e):
            self.while_(e)
            return
        if isinstance(e, (ml.If, ml.Switch, ml.Let, ml.Handle, ml.While)):
            self.assign(e, "_")
            return
        x = self.expr(e)
        if not _atomic(x):
            self.out.emit(x)

    def while_(self, e: ml.While) -> None:
        out = self.out
        self.fresh = False
        out.emit("while True:")
        out.depth += 1
        self.blocks += 1
        self.emit_tick()
        self.traced("None")
        saved = self.remember()
        self.open_count()
        c = self.expr(e.cond)
        out.emit(f"if not {c}: break")
        self.stmt(e.body)
        self.close_count()
        self.forget(saved)
        self.blocks -= 1
        out.depth -= 1

    def assign(self, e, target: str) -> None:
        """Evaluate `e` into the Python variable `target`."""
        out = self.out
        if self.too_deep(e):
            out.emit(f"{target} = {self.helper(e, tail=False)}")
        elif isinstance(e, ml.If):
            c = self.expr(e.cond)
            out.emit(f"if {c}:")
            self.block(lambda: self.assign(e.then, target))
            out.emit("else:")
            self.block(lambda: self.assign(e.else_, target))
        elif isinstance(e, ml.Let):
            self.assign(e.value, self.local(e.name))
            self.rebound(e.name)
            self.assign(e.body, target)
        elif isinstance(e, ml.Sequence):
            for x in e.exprs[:-1]:
                self.stmt(x)
            self.assign(e.exprs[-1], target)
        elif isinstance(e, ml.Switch):
            self.switch(e, lambda branch: self.assign(branch, target))
        elif isinstance(e, ml.Handle):
            self.handle(e, target)
        elif isinstance(e, ml.Raise):
            out.emit(f"raise {self.expr(e.exn)}")
        elif isinstance(e, ml.While):
            self.while_(e)
            out.emit(f"{target} = ()")
        elif isinstance(e, ml.SetGlobal):
            self.stmt(e)
            out.emit(f"{target} = ()")
        else:
            out.emit(f"{target} = {self.expr(e)}")

    def handle(self, e: ml.Handle, target: str | None) -> None:
        """`e handle ...` into `target`, or in tail position (`target` None). The handler runs
        after the `except` clause, not in it: an exception raised or passing there would
        otherwise be chained to the one caught and leave each frame of a recursion through
        handlers by a re-raise of Python's own; and in tail position the handler's calls are
        tail calls (a self tail call continues the loop), as in ML."""
        out = self.out
        self.blocks += 1
        self.fresh = False
        caught = self.local(e.name)
        self.rebound(e.name)
        if target is not None:
            out.emit(f"{caught} = None")
        out.emit("try:")
        region = self.a.marks.region() if self.a.counts else 0
        if region:
            out.emit(f"{REGION}r{region}")
        body = _Try(out.depth + 1, caught)
        self.trys.append(body)
        if target is None:
            result = out.temp()
            self.block(lambda: (self.assign(e.body, result), out.emit(f"return {result}"), self.end_try(body)))
        else:
            self.block(lambda: (self.assign(e.body, target), self.end_try(body)))
        self.trys.pop()
        if region:
            out.emit(f"{REGION}q{region}")
        out.emit("except Packet as _p:")
        out.depth += 1
        if self.a.batch_counts and region:  # calls counted and not made, in this try and below it
            out.emit("if _p.ml: _p.__traceback__ = None")  # an ML raise left no such call
            out.emit(f"else: settle(_p, R{region})")
        else:
            out.emit("_p.__traceback__ = None")
        out.emit(f"{caught} = _p")
        out.depth -= 1
        self.blocks -= 1
        if target is None:  # only an exception gets here: the handler is a block of its own
            self.open_count()
            self.ret(e.handler)
            self.close_count()
            return
        out.emit(f"if {caught} is not None:")
        out.depth += 1
        saved = self.remember()
        self.open_count()
        self.assign(e.handler, target)
        self.close_count()
        self.forget(saved)
        out.depth -= 1

    def switch(self, e: ml.Switch, branch) -> None:
        out = self.out
        subject = self.expr(e.subject)
        if not _atomic(subject):
            tmp = out.temp()
            out.emit(f"{tmp} = {subject}")
            subject = tmp
        cases = list(e.cases)
        if e.test == "con" and e.datatype == "list":
            tests = {0: f"{subject} is None", 1: f"{subject} is not None"}
        elif e.test == "con" and e.datatype == "bool":
            tests = {0: f"not {subject}", 1: f"{subject}"}
        elif e.test == "con":
            rep = e.rep
            tag = subject if rep == ml.ConRep.TAGS else f"{subject}[0]" if rep == ml.ConRep.ARGS else \
                f"({subject} if {subject}.__class__ is int else {subject}[0])"
            if len(cases) > 1 or e.default is not None:
                tmp = out.temp()
                out.emit(f"{tmp} = {tag}")
                tag = tmp
            tests = {k: f"{tag} == {k}" for k, _ in cases}
        elif e.test == "exn":
            tmp = out.temp()
            out.emit(f"{tmp} = {subject}.con")
            tests = {}
            for i, (k, _) in enumerate(cases):
                tests[i] = f"{tmp} is {self.expr(k)}"
            cases = [(i, body) for i, (_, body) in enumerate(cases)]
        else:
            tests = {k: f"{subject} == {self.const(k) if isinstance(k, str) else repr(k)}" for k, _ in cases}
        if len(cases) > MANY_CASES and e.test != "exn":
            self.table_switch(tag if e.test == "con" else subject, cases, e.default, branch)
            return
        for i, (k, body) in enumerate(cases):
            last = i == len(cases) - 1 and e.default is None
            if last and i > 0:
                out.emit("else:")
            elif last:
                out.emit("if True:")
            else:
                out.emit(f"{'if' if i == 0 else 'elif'} {tests[k]}:")
            self.block(lambda body=body: branch(body))
        if e.default is not None:
            if cases:
                out.emit("else:")
                self.block(lambda: branch(e.default))
            else:
                branch(e.default)

    def table_switch(self, key: str, cases: list, default, branch) -> None:
        """A switch of many constant cases: a table (a constant of the module) gives the case's
        number, then tests on the number halve the range, so the code nests as the logarithm of
        the cases (an if/elif chain of thousands nests too deeply for Python's compiler)."""
        out = self.out
        table = self.const({k: i for i, (k, _) in enumerate(cases)})
        number = out.temp()
        # without a default the last case takes what the table lacks, as the chain's `else` does
        out.emit(f"{number} = {table}.get({key}, {-1 if default is not None else len(cases) - 1})")

        def part(lo: int, hi: int) -> None:  # the cases numbered lo..hi-1
            if hi - lo <= 8:
                for i in range(lo, hi):
                    out.emit("else:" if i == hi - 1 and i > lo else "if True:" if i == hi - 1
                             else f"{'if' if i == lo else 'elif'} {number} == {i}:")
                    self.block(lambda body=cases[i][1]: branch(body))
                return
            mid = (lo + hi) // 2
            out.emit(f"if {number} < {mid}:")
            self.block(lambda: part(lo, mid))
            out.emit("else:")
            self.block(lambda: part(mid, hi))

        if default is not None:
            out.emit(f"if {number} < 0:")
            self.block(lambda: branch(default))
            out.emit("else:")
            self.block(lambda: part(0, len(cases)))
        else:
            part(0, len(cases))

    # ---- expressions ----------------------------------------------------------------------------
    def exprs(self, items, atomic: bool = False) -> list[str]:
        """Expressions in order: an earlier result is kept in a temporary when a later one needs
        statements, so that evaluation stays left to right."""
        out = self.out
        results: list[str] = []
        for x in items:
            mark, depth = len(out.lines), out.depth  # `unraised` may nest what follows deeper
            r = self.expr(x)
            if len(out.lines) != mark:
                # statements were emitted: earlier non-atomic results must be computed first
                for j, prev in enumerate(results):
                    if not _atomic(prev):
                        tmp = out.temp()
                        out.insert(mark, f"{tmp} = {prev}", depth)
                        mark += 1
                        results[j] = tmp
            if atomic and not _atomic(r):
                tmp = out.temp()
                out.emit(f"{tmp} = {r}")
                r = tmp
            results.append(r)
        return results

    def expr(self, e) -> str:
        shared = self.shared.get(id(e), False)
        if shared and id(e) in self.memo:
            return self.memo[id(e)]
        r = self._expr(e)
        if shared:  # its later places evaluate the same text, or read the value named here
            if len(r) > SHARED_LONG and not _atomic(r):
                r = self.atom(r)
            self.memo[id(e)] = r
            return r
        if len(r) > LONG and not _atomic(r):  # Python's parser limits nesting: name the part
            tmp = self.out.temp()
            self.out.emit(f"{tmp} = {r}")
            return tmp
        return r

    def _expr(self, e) -> str:
        out = self.out
        if isinstance(e, ml.Lit):
            v = e.value
            if v is None:
                return "()"
            if isinstance(v, str):
                return self.const(v)
            if isinstance(v, float):
                return self.const(v)
            return repr(v)
        if isinstance(e, ml.Local):
            return self.local(e.name)
        if isinstance(e, ml.Global):
            return f"G[{self.a.globals[e.name]}]"
        if isinstance(e, ml.Tuple):
            if e.order:  # fields written out of label order: evaluate them as written
                parts = self.exprs([e.items[i] for i in e.order], atomic=True)
                items = [""] * len(e.items)
                for pos, value in zip(e.order, parts):
                    items[pos] = value
            else:
                items = self.exprs(e.items)
            if len(items) == 1:
                return f"({items[0]},)"
            return f"({', '.join(items)})"
        if isinstance(e, ml.Part):
            v = self.expr(e.value)
            step = e.step
            if step == "cons":
                return v
            if step == "arg":
                return f"{v}[1]"
            if step == "exnarg":
                return f"{v}.arg"
            if step == "deref":
                return f"{v}[0]"
            return f"{v}[{step}]"
        if isinstance(e, ml.Construct):
            if e.datatype == "list":
                return "None" if e.tag == 0 else self.expr(e.arg)
            if e.datatype == "bool":
                return "True" if e.tag else "False"
            if e.arg is None:
                return repr(e.tag)
            return f"({e.tag}, {self.expr(e.arg)})"
        if isinstance(e, ml.MakeClosure):
            if not e.free:
                return self.constant("closure0", e.function, "c")
            free = self.exprs(e.free)
            info = self.a.info[e.function]  # made here, not through a maker: one Python call less
            d = f"{info.py}_d" if info.direct else "None"
            return f"Closure({info.py}, ({', '.join(free)},), {e.function!r}, {info.gen}, {info.pure}, {d})"
        if isinstance(e, ml.Prim):
            return self.prim(e)
        if isinstance(e, ml.CallKnown):
            callee = self.a.info[e.function]
            kind, call = self.call_text(callee, self.exprs(e.args))
            if kind == "value":
                return call
            if kind == "raised":
                return self.unraised(call)
            tmp = out.temp()
            out.emit(f"{tmp} = yield {call}")
            return tmp
        if isinstance(e, ml.Apply):
            f, x = self.exprs((e.fn, e.arg), atomic=True)
            self.fresh = False
            tmp = out.temp()
            self.apply(f, x, tmp)
            return tmp
        if isinstance(e, ml.Packet):
            con = self.expr(e.con)
            if e.arg is None:
                return f"{con}.packet"
            con, arg = self.exprs((e.con, e.arg))
            return f"Packet({con}, {arg}, True)"
        if isinstance(e, ml.BasisException):
            if e.name not in ML_BASIS_EXCEPTIONS:  # never paste a name from an untrusted .hpg
                raise ValueError(f"unknown basis exception {e.name!r}")
            return f"X_{e.name}"
        if isinstance(e, ml.NewException):
            return f"ExnCon({e.name!r}, {e.has_arg})"
        if isinstance(e, ml.Par):
            return self.par(e)
        if isinstance(e, ml.Sequence):
            for x in e.exprs[:-1]:
                self.stmt(x)
            return self.expr(e.exprs[-1])
        if isinstance(e, ml.Let):
            self.assign(e.value, self.local(e.name))
            self.rebound(e.name)
            return self.expr(e.body)
        if isinstance(e, ml.SetGlobal | ml.While):
            self.stmt(e)
            return "()"
        if isinstance(e, ml.Raise):
            out.emit(f"raise {self.expr(e.exn)}")
            return "()"
        tmp = out.temp()
        self.assign(e, tmp)
        return tmp

    def call_text(self, callee: FunctionInfo, args: list[str]) -> tuple[str, str]:
        """How this function calls `callee`: ("value", a call giving the result), ("raised", a
        call of a twin that returns its raises, giving the result or a `Raised`) or ("gen", a
        call giving the generator to yield or return)."""
        kind, call = self._call_text(callee, args)
        return ("raised" if kind == "value" and callee.returns_raise else kind), call

    def _call_text(self, callee: FunctionInfo, args: list[str]) -> tuple[str, str]:
        """How this function calls `callee` (`call_text`). Direct code calls direct functions with
        Python recursion up to DEPTH, then runs the rest on a heap stack (`nested`); generator
        code outside the direct set enters it at depth 0. Inside the direct set, generators
        call each other by yielding, so Python's stack stays bounded."""
        text = ", ".join(args)
        self.fresh = False
        if not callee.gen:
            return "value", f"{callee.py}({text})"
        if self.mode == "bounded":  # it calls only itself (and plain functions)
            call = f"{callee.py}_b({text})"
            if self.a.batch_counts:
                call = self.count(call)
            return "value", call
        if callee.bounded is not None and self.mode == "gen" and not self.info.direct:
            args = [self.atom(a) for a in args]
            text = ", ".join(args)
            pos, limit = callee.bounded
            entry = f"{callee.py}_d({DEPTH if self.a.batch_counts else 0}, {text})"
            call = f"({callee.py}_b({text}) if {args[pos]} <= {limit} else {entry})"
            if callee.checks_once:  # its result, checked here
                call = _IN_RANGE.format(x=call, t=self.out.temp())
            if self.a.batch_counts:
                call = self.count(call)
            return "value", call
        if callee.direct and self.a.batch_counts:
            # `d` counts down the Python frames left (`dd` is d - 1, set with the block's count);
            # at 0 the twin runs on a heap stack. The call is counted with its block's others.
            if self.mode == "direct":
                tested = next((c for c in reversed(self.counts) if c.restart), None) if self.batch else None
                if tested is not None:
                    # `d` is tested (and `dd` set) at the start of this block or of one around
                    # it: d is a parameter, so it holds in every block inside
                    tested.deeper = True
                    return "value", self.count(f"{callee.py}_d(dd, {text})")
                dd = "dd" if self.batch else "d - 1"  # unbatched: no block sets `dd`
                return "value", self.count(f"({callee.py}_d if d else {callee.py}_n)({dd}, {text})", True)
            if not self.info.direct:
                return "value", self.count(f"{callee.py}_d({DEPTH}, {text})")
        if callee.direct and self.mode == "direct":
            if any(not _atomic(a) for a in args):
                args = [self.atom(a) for a in args]
                text = ", ".join(args)
            return "value", (f"({callee.py}_d(d + 1, {text}) if d < {DEPTH} "
                             f"else {heap_call(f'{callee.py}({text})', 1, 'd + 1', self.a.trace)})")
        if callee.direct and self.mode == "gen" and not self.info.direct:
            return "value", f"{callee.py}_d(0, {text})"
        return "gen", f"{callee.py}({text})"

    def apply(self, f: str, x: str, tmp: str) -> None:
        """`tmp = f x`, `f` a closure. A closure of a direct function carries its twin (`f.d`):
        code that cannot reach a join (ml-kinds) only applies plain and direct functions, and
        calls the twin as it calls a known direct function (Python recursion to DEPTH, then the
        heap stack); a generator outside the direct set enters the twin afresh. Only the
        generator form of a direct function (on a heap stack) and code that may reach a join
        step a closure's frames. The twin's call is counted here when the caller counts calls
        (batched counts), by the twin itself otherwise."""
        out = self.out
        call = f"{f}.fn(*{f}.env, {x})"
        twin = f"{f}.d(%s, *{f}.env, {x})"
        count = ["calls[0] += 1", *([f"if calls[0] > {POLL}: tick()"] if self.a.poll else [])] if self.a.counts else []
        if self.mode == "direct":
            out.emit(f"if {f}.d is None: {tmp} = {call}")
            if self.a.batch_counts:
                out.emit("elif d:")
                for line in count:
                    out.emit("    " + line)
                out.emit(f"    {tmp} = {twin % 'd - 1'}")
                place = f"{DEPTH} + 1"
            else:
                out.emit(f"elif d < {DEPTH}: {tmp} = {twin % 'd + 1'}")
                place = "d + 1"
            out.emit(f"else: {tmp} = {heap_call(call, 1, place, self.a.trace)}")
        elif self.mode == "gen" and not self.info.direct:
            out.emit(f"if {f}.d is None:")
            out.emit(f"    {tmp} = {call}")
            out.emit(f"    if {f}.gen: {tmp} = yield {tmp}")
            out.emit("else:")
            if self.a.batch_counts:
                for line in count:
                    out.emit("    " + line)
            out.emit(f"    {tmp} = {twin % (DEPTH if self.a.batch_counts else 0)}")
        else:
            out.emit(f"{tmp} = {call}")
            out.emit(f"if {f}.gen: {tmp} = yield {tmp}")

    def atom(self, x: str) -> str:
        if _atomic(x):
            return x
        tmp = self.out.temp()
        self.out.emit(f"{tmp} = {x}")
        return tmp

    def prim(self, e: ml.Prim) -> str:
        op = e.op
        if op not in BINARY and op not in UNARY or op in ("print", ":=", "ref"):
            self.fresh = False  # an effect, or a basis function: nothing is assumed of it
        checks = self.a.overflow.get(id(e), "lohi")
        if checks == "hi0":  # a sum of non-negative ints: in a copy checked once, not here
            checks = "" if self.mode == "bounded" and self.info.checks_once else "hi"
        if checks != "lohi" and op in ("int.+", "int.-", "int.*"):
            a, b = self.exprs(e.args)
            t = self.out.temp() if checks else ""
            return _NARROWED[checks].format(a=a, b=b, t=t, o=op[-1])
        if checks == "" and op in _UNCHECKED_UNARY:
            (a,) = self.exprs(e.args)
            return _UNCHECKED_UNARY[op].format(a=a)
        if op in BINARY:
            a, b = self.exprs(e.args)
            if op in _EQ_INT and _NAME.fullmatch(a):
                # Polymorphic equality at int is int equality: no call of eq (knuth_bendix's
                # variables); `a` is a name, so testing its class first evaluates nothing twice.
                return _EQ_INT[op].format(a=a, b=b)
            t = self.out.temp() if "{t}" in BINARY[op] else ""
            return BINARY[op].format(a=a, b=b, t=t)
        if op in UNARY:
            (a,) = self.exprs(e.args)
            t = self.out.temp() if "{t}" in UNARY[op] else ""
            return UNARY[op].format(a=a, t=t)
        args = self.exprs(e.args)
        name = self.constant("prim", op, "p")
        if len(args) == 2:  # a curried basis function applied to both arguments
            return f"{name}({args[0]})({args[1]})"
        return f"{name}({args[0]})"

    def par(self, e: ml.Par) -> str:
        """`ForkJoin.par`: fork the right thunk as a task when both are pure, run the left one
        here, then join (taking the right one back to run here if no one has started it)."""
        out = self.out
        left, right = self.exprs((e.left, e.right), atomic=True)
        self.fresh = False
        a, b = out.temp(), out.temp()
        out.emit(f"if {left}.pure and {right}.pure:")
        out.depth += 1
        child = out.temp()
        out.emit(f"{child} = yield ({FORK!r}, {right})")
        out.emit("try:")
        out.emit(f"    {a} = {left}.fn(*{left}.env, ())")
        out.emit(f"    if {left}.gen: {a} = yield {a}")
        out.emit("except Packet:")
        out.emit(f"    yield ({CANCEL!r}, {child})")
        out.emit("    raise")
        out.emit(f"{b} = yield ({JOIN!r}, {child})")
        out.depth -= 1
        out.emit("else:")
        out.depth += 1
        out.emit(f"{a} = {left}.fn(*{left}.env, ())")
        out.emit(f"if {left}.gen: {a} = yield {a}")
        out.emit(f"{b} = {right}.fn(*{right}.env, ())")
        out.emit(f"if {right}.gen: {b} = yield {b}")
        out.depth -= 1
        return f"({a}, {b})"


class Region:
    """A function's body or a handler's `try` body in the generated source: per block of
    direct code inside it (its lines first..last), where its counted calls end (line, column);
    `known`: the calls not made, by instruction offset of where an exception left the frame
    (filled by `Region.at`; every PE runs the same code objects)."""

    __slots__ = ("blocks", "known")

    def __init__(self, blocks: tuple) -> None:
        self.blocks = blocks
        self.known: dict[int, int] = {}

    def at(self, tb) -> int:
        """The calls not made in the frame of traceback entry `tb` (inside this region)."""
        n = self.known.get(tb.tb_lasti)
        if n is None:
            n = self.known[tb.tb_lasti] = self.unrun_at(tb.tb_frame.f_code, tb.tb_lasti)
        return n

    def unrun_at(self, code, lasti: int) -> int:
        """The counted calls of the blocks around instruction `lasti` of `code` that end after
        it (Python's code positions count UTF-8 columns, as `resolve_marks` does)."""
        line, end_line, _, end_col = list(code.co_positions())[lasti // 2]
        at = (end_line, end_col)
        return sum(1 for first, last, ends in self.blocks if first <= line <= last for end in ends if end > at)


class Marks:
    """Numbers for the marked blocks, calls and regions of one module's code."""

    __slots__ = ("blocks", "calls", "regions", "block_of", "functions")

    def __init__(self) -> None:
        self.blocks = self.calls = self.regions = 0
        self.block_of: dict[int, int] = {}  # call -> its block
        self.functions: dict[str, int] = {}  # Python function -> the region of its body

    def block(self) -> int:
        self.blocks += 1
        return self.blocks

    def call(self, block: int) -> int:
        self.calls += 1
        self.block_of[self.calls] = block
        return self.calls

    def region(self, function: str | None = None) -> int:
        self.regions += 1
        if function is not None:
            self.functions[function] = self.regions
        return self.regions


def resolve_marks(source: str, marks: Marks, constants: dict) -> str:
    """`source` without its marks; binds in `constants` each region's table `R<n>`: per block
    inside it (lines first..last), where its counted calls end in the source (line, column),
    which `unrun` compares with where an exception left the frame."""
    lines: list[str] = []
    blocks: dict[int, list[int]] = {}
    regions: dict[int, list[int]] = {}
    ends: dict[int, list[tuple[int, int]]] = {}
    for raw in source.split("\n"):
        text = raw.lstrip()
        if text.startswith(REGION):
            kind, n = text[1], int(text[2:])
            if kind in "br":
                (blocks if kind == "b" else regions)[n] = [len(lines) + 1, 0]
            else:
                (blocks if kind == "e" else regions)[n][1] = len(lines)
            continue
        if CALL in raw:
            raw = _strip_calls(raw, len(lines) + 1, marks, ends)
        lines.append(raw)
    for n, (first, last) in regions.items():
        constants[f"R{n}"] = Region(tuple((b0, b1, tuple(ends.get(b, ()))) for b, (b0, b1) in blocks.items()
                                          if first <= b0 and b1 <= last))
    constants[FUNCTION_REGIONS] = {name: constants[f"R{n}"] for name, n in marks.functions.items()}
    return "\n".join(lines)


def _strip_calls(raw: str, line: int, marks: Marks, ends: dict) -> str:
    """One line without its call marks, noting where each marked call ends (UTF-8 column, as
    Python's code positions count)."""
    out: list[str] = []
    open_calls: list[int] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == CALL:
            j = raw.index(OPEN, i)
            open_calls.append(int(raw[i + 1:j]))
            i = j + 1
            continue
        if ch == CLOSE:
            n = open_calls.pop()
            ends.setdefault(marks.block_of[n], []).append((line, len("".join(out).encode())))
        else:
            out.append(ch)
        i += 1
    return "".join(out)


class _Try:
    """A `try` body being emitted (a handler's): the depth its statements are at now (`unraised`
    nests the rest of the body in an `else` after each call that may give a `Raised`), the
    depth it opened at, and the variable its handler reads the packet from."""

    __slots__ = ("depth", "opened", "caught")

    def __init__(self, depth: int, caught: str):
        self.depth = self.opened = depth
        self.caught = caught


class _Count:
    """A block of code being emitted, with batched counts: where its count goes (line, depth),
    the calls of direct code counted in it, whether one is a frame deeper (needs `dd`), and
    whether it starts by moving to a heap stack when `d` is 0 (`restart`)."""

    __slots__ = ("at", "depth", "restart", "calls", "deeper", "id")

    def __init__(self, at: int, depth: int, restart: bool, id: int):
        self.at, self.depth, self.restart, self.id = at, depth, restart, id
        self.calls = 0
        self.deeper = False


# Nodes whose value a shared node may compute once for all its places: no effect, no call,
# nothing generative (a `ref`, an exception constructor) and nothing that may change between
# its places (a global, a ref's contents: `!`, a `deref` part).
_PURE_NODES = (ml.Lit, ml.Local, ml.Tuple, ml.Part, ml.Construct, ml.MakeClosure)
_IMPURE_OPS = frozenset({"print", ":=", "ref", "!", "before"})


def _shareable(body) -> dict[int, bool]:
    """By node id, the nodes of `body` used in several places whose value may be computed once
    (pure, `_PURE_NODES`, and not a leaf, which costs nothing to repeat); empty for a tree."""
    counts = ir.use_counts((body,))
    if all(c == 1 for c in counts.values()):
        return {}
    out: dict[int, bool] = {}

    def pure(n, kids: list) -> bool:
        ok = all(kids) and (isinstance(n, _PURE_NODES) and not (isinstance(n, ml.Part) and n.step == "deref")
                            or isinstance(n, ml.Prim) and n.op not in _IMPURE_OPS and (n.op in BINARY or n.op in UNARY))
        if ok and counts[id(n)] > 1 and n.children():
            out[id(n)] = True
        return ok
    ir.fold(body, pure)
    return out


def _atomic(x: str) -> bool:
    """A Python expression whose value cannot change between now and later statements."""
    if x in ("()", "None", "True", "False"):
        return True
    if x.startswith(("_t", "k", "c", "X_")) and x.replace("_", "").isalnum():
        return True
    if x.startswith("v") and x[1:].isdigit():
        return True
    return x.lstrip("-").isdigit()


def heap_call(gen: str, entered: int, place: str, trace: bool) -> str:
    """Direct code's call of `nested` (pam/ml/task.py), the heap driver, to run the generator
    call `gen` to its end: `entered` 1 when the call is not counted yet (its callee `f_d` would
    have counted it); traced, `place` is where its frame is below the task's top frame."""
    args = [gen, *([str(entered)] if entered or trace else []), *([place] if trace else [])]
    return f"nested({', '.join(args)})"


def heap_entry(info: FunctionInfo, trace: bool) -> str:
    """`f_n`, the twin `f_d`'s stand-in where the countdown `d` is 0 (batched counts): it runs
    the call on a heap stack. Direct code whose block could not test `d` at its start (inside a
    `try`, or after a call or an effect) picks it per call, `(f_d if d else f_n)(dd, ...)`, so
    every direct function needs one, whatever else the passes found of it."""
    params = ", ".join(f"a{i}" for i in range(len(info.fn.params)))
    # traced: the call, counted by its caller, is reported here (`f_d` reports its own)
    report = f"    rw({info.py[1:]}, {DEPTH} - d, ({params},))\n" if trace else ""
    call = heap_call(f"{info.py}({params})", 0, f"{DEPTH} - d", trace)
    return f"def {info.py}_n(d, {params}):\n{report}    return {call}"


def generate(module: ir.Module, poll: bool = True, trace: bool = False,
             counts: bool = True) -> tuple[str, Annotations, dict]:
    """The Python source of every function of `module`, its analysis and its constants.
    Without `poll` (a run with no --timeout or --max-steps), batched counts (ml-batch-counts)
    are not checked against the limits. Without `counts` (a run that neither reports nor
    limits reductions: `Annotations.counts`), direct code and loops count nothing, so neither
    poll nor trace may be asked for. With `trace`, the traced mode: each reduction made
    inside compiled code also calls `rw` (pam/ml/tracing.py) where it is made; the counts, and
    so the schedule, are the untraced code's (no depth-bounded copies, whose depth the events
    could not tell, but they count as their direct twins do)."""
    analysis = Annotations(module)
    if not counts and (poll or trace):
        raise ValueError("code that counts no reductions can neither poll the limits nor trace")
    analysis.poll = poll
    analysis.counts = counts
    analysis.marks = Marks()
    if trace:
        analysis.trace = True
        for info in analysis.info.values():
            info.bounded = None
    constants: dict = {}
    parts = []
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 12000))  # as deep as the front end lets a program nest
    try:
        for info in analysis.info.values():
            parts.append(FunctionCompiler(analysis, info, constants).source())
            if info.direct:
                parts.append(FunctionCompiler(analysis, info, constants, "direct").source())
                if analysis.batch_counts:
                    parts.append(heap_entry(info, trace))
            if info.bounded is not None:
                parts.append(FunctionCompiler(analysis, info, constants, "bounded").source())
    finally:
        sys.setrecursionlimit(old)
    return resolve_marks("\n\n".join(parts) + "\n", analysis.marks, constants), analysis, constants
