"""ML on the machine (`pam.runtimes`): the generated source of a module's functions is compiled
once per module and executed once per PE, in a namespace holding that PE's globals, output and
basis; ML evaluations are the task kind, and ML values travel through the codecs of
pam/ml/codecs.py."""

from __future__ import annotations

import time

from hpgrem import ir
from pam.errors import LimitExceeded
from pam.generated import GeneratedCode
from pam.ml import codegen
from pam.ml.codecs import codecs
from pam.ml.codegen import FUNCTION_REGIONS, Region
from pam.ml.profile_names import code_names
from pam.ml.task import INNER, STARTED, MLTask, MLTaskKind, make_nested, make_step
from pam.ml.tracing import MLTrace
from pam.ml.values import BASIS_EXCEPTIONS, OVERFLOW, Closure, ExnCon, Packet, Raised


class MLRuntime:
    """A module's ML code, compiled once; `load(pe)` makes a PE's copy. With `tracing`, the
    traced mode (pam/ml/tracing.py): a separate compile whose code reports every reduction to
    the PE's tracer."""

    # Steps a simulated PE runs between looks at its messages: one, since a step may run a whole
    # computation of direct code (fib 15: 2,000 calls); a steal request waits for no more.
    batch = 1
    encoding = "latin-1"  # an ML char is a byte: print writes it as one, as Poly/ML does
    traces = True  # made with `tracing=True`, its code reports each reduction (pam.runtimes)

    def __init__(self, module: ir.Module, tracing: bool = False):
        self.module = module
        self.tracing = tracing
        # By (poll, counts): (source, analysis, constants, code). Made when a run first needs
        # it: a run with no limits compiles only the code without limit checks (compiling both
        # was 0.07 s of knuth_bendix's start-up), one that observes no reductions only the code
        # that counts none.
        self.built: dict[tuple[bool, bool], tuple] = {}
        self.places: dict[int, MLPlace] = {}  # by PE number

    def build(self, poll: bool = True, counts: bool = True) -> tuple:
        """(source, analysis, constants, code) of the module's code, with or without limit
        checks, counting reductions or not (codegen.generate); `code` is a GeneratedCode."""
        key = poll, counts
        if key not in self.built:
            source, analysis, constants = codegen.generate(self.module, poll=poll, trace=self.tracing, counts=counts)
            self.built[key] = source, analysis, constants, GeneratedCode(source, "<hpgrem ml>", code_names, analysis)
        return self.built[key]

    @property
    def source(self) -> str:
        return self.build()[0]

    @property
    def analysis(self):
        """The functions' annotations (the same whichever code was built)."""
        return next(iter(self.built.values()))[1] if self.built else self.build()[1]

    def load(self, pe, timeout: float | None = None) -> dict:
        """Execute the code for `pe`; returns {"ml": the step of ML tasks} and keeps the namespace."""
        from pam.ml import basis

        # A run with no limit gets code whose counts need no look at the clock, and one that
        # observes no reductions (PE.counts_reductions) code that counts none.
        poll = timeout is not None or pe.max_steps is not None
        counts = poll or self.tracing or pe.counts_reductions
        _, analysis, constants, code = self.build(poll=poll, counts=counts)
        calls, banked = [0], [0]
        regions: dict[int, Region] = {}  # filled once the code is executed
        settle = make_settle(calls, regions) if counts else drop_traceback
        tick = _ticker(pe, calls, banked, timeout)
        trace = MLTrace(pe.tracer, analysis.info) if self.tracing and pe.tracer is not None else None
        ns: dict = {
            "calls": calls, "nested": make_nested(calls, tick, settle, trace), "tick": tick, "Again": Again,
            "Packet": Packet, "ExnCon": ExnCon, "Closure": Closure, "Raised": Raised,
            "G": [None] * len(analysis.globals),
            "ovf": _overflow, "idiv": basis.idiv, "imod": basis.imod, "rdiv": basis.rdiv, "assign": _assign,
            "before": _before, "eq": basis.ml_equal, "out": _printer(pe.output),
            "rw": _untraced if trace is None else trace.inline, "settle": settle,
        }
        for name, con in BASIS_EXCEPTIONS.items():
            ns[f"X_{name}"] = con
        infos = analysis.info
        deferred = []
        for key, name in constants.items():
            if isinstance(key, str):
                ns[key] = name  # a literal: `name` is its value here
            elif key[0] == "prim":
                ns[name] = _primitive(basis, key[1])
            elif key[0] == "closure0":
                deferred.append((key, name))
        code.run(ns)
        for name, region in constants.get(FUNCTION_REGIONS, {}).items():
            regions[id(ns[name].__code__)] = region
        for (_, fkey), name in deferred:  # closures with no environment exist once
            info = infos[fkey]
            fn, d = ns[info.py], ns[info.py + "_d"] if info.direct else None
            ns[name] = Closure(fn, (), fkey, info.gen, info.pure, d)
        if trace is not None:
            trace.bind(ns)
        step = make_step(pe, basis.exn_message, calls, banked, settle, trace)
        place = self.places[pe.number] = MLPlace(self, ns, step)
        if pe.net is not None:
            pe.net.add_kind(MLTaskKind(place))
            for codec in codecs(place):
                pe.net.add_codec(codec)
        return {step.key: step}

    def entry_task(self, pe, outputs: list) -> MLTask:
        place = self.places[pe.number]
        entry = self.analysis.info[self.module.entry.target]
        task = MLTask(place.step, None, None, entry.fn.span, [place.ns[entry.py]()])
        task.state = STARTED  # the program itself never moves
        return task

    def show(self, value, names: dict) -> str:
        raise AssertionError("an ML entry has no output variables to show")

    def globals_read(self, keys: list[str]) -> set[int]:
        """The global slots that the functions `keys`, and all they may call, read."""
        a = self.analysis
        seen: set[str] = set()
        slots: set[int] = set()
        todo = list(keys)
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.add(k)
            slots |= a.reads[k]
            todo.extend(a.refs[k])
        return slots


class MLPlace:
    """One PE's ML code, as distribution needs it: closures from keys, globals to ship."""

    def __init__(self, compiled: MLRuntime, ns: dict, step):
        self.compiled = compiled
        self.ns = ns
        self.step = step
        self.globals = ns["G"]

    def closure(self, key: str, env: tuple) -> Closure:
        info = self.compiled.analysis.info[key]
        d = self.ns[info.py + "_d"] if info.direct else None
        return Closure(self.ns[info.py], env, key, info.gen, info.pure, d)

    def globals_for(self, thunk: Closure) -> tuple:
        """(slot, value) of the globals the thunk's code (and closures in its environment) may read."""
        keys = [thunk.key]
        stack = list(thunk.env)
        while stack:  # closures held in the environment, however deep
            x = stack.pop()
            if type(x) is tuple:
                stack.extend(x)
            elif type(x) is Closure:
                keys.append(x.key)
                stack.extend(x.env)
        g = self.globals
        return tuple((i, g[i]) for i in sorted(self.compiled.globals_read(keys)))

    def set_globals(self, pairs: tuple) -> None:
        g = self.globals
        for i, v in pairs:
            g[i] = v


def _untraced(index: int, place: int, values) -> None:
    """`rw` of traced code loaded on a PE that has no tracer: nothing to report."""


def drop_traceback(exc: BaseException, here: Region | None = None) -> None:
    """`settle` of code that counts no reductions: nothing to take back."""
    exc.__traceback__ = None


def make_settle(calls: list, regions: dict[int, Region]):
    """`settle(exc, here)`, called where an ML exception is caught (a handler of generated code,
    with the Region of its `try` body, or a driver, pam/ml/task.py): takes back from `calls[0]`
    the calls that blocks of direct code counted at their start (ml-batch-counts) and that `exc`
    kept from being made, in each frame it left (by `regions`: id of a function's code -> the
    Region of its body), then drops the traceback. So --stats counts exactly the reductions
    made, as the trace's events do, and code that raises nothing pays nothing."""

    known = regions.get

    def settle(exc: BaseException, here: Region | None = None) -> None:
        tb = exc.__traceback__
        if tb is None:
            return
        if exc.ml:  # an ML raise crosses only functions that count each call when made
            exc.__traceback__ = None
            return
        n = 0
        if here is not None:  # the catching frame: only its `try` body was left
            n = here.known.get(tb.tb_lasti)
            if n is None:
                n = here.at(tb)
            tb = tb.tb_next
        while tb is not None:
            region = known(id(tb.tb_frame.f_code))
            if region is not None:
                m = region.known.get(tb.tb_lasti)
                n += region.at(tb) if m is None else m
            tb = tb.tb_next
        if n:
            calls[0] -= n
        exc.__traceback__ = None
    return settle


def _ticker(pe, calls: list, banked: list, timeout: float | None):
    """What direct code and loops call when they have counted POLL reductions without
    returning to the PE loop: bank the count, and stop the run when --timeout has passed or
    the reductions made within this step amount to more than --max-steps steps (an ML step
    being up to INNER of them)."""
    deadline = None if timeout is None else time.monotonic() + timeout

    def tick():
        banked[0] += calls[0]
        calls[0] = 0
        if deadline is not None and time.monotonic() > deadline:
            raise LimitExceeded(f"time limit of {timeout:g} s reached (--timeout)")
        limit = pe.max_steps
        if limit is not None and pe.steps + banked[0] // INNER >= limit:
            raise LimitExceeded(f"step limit reached after {limit} steps (--max-steps {limit})")
    return tick


class Again:
    """What a helper of a looping function (code nested too deeply, pam/ml/codegen.py) returns
    for a self tail call: the arguments the loop goes on with."""

    __slots__ = ("args",)

    def __init__(self, args: tuple):
        self.args = args


def _primitive(basis, op: str):
    """The basis function of `op`: a basis name, or `type.name` for an overloaded operator."""
    if op in basis.PRIMITIVES:
        return basis.PRIMITIVES[op]
    ty, _, name = op.partition(".")
    return basis.OVERLOADED[(name, ty)]


def _printer(output):
    def out(s: str):
        output(s)
        return ()
    return out


def _overflow():
    raise Packet(OVERFLOW)


def _assign(r: list, v):
    r[0] = v
    return ()


def _before(a, b):
    return a
