"""ml-flatten: tuple arguments passed flat (worker/wrapper).

`fun tak (x, y, z) = ...` takes one argument, a tuple, which every call builds and the body
takes apart again. When a function uses an argument only through its fields (`arg.0`, `arg.2`:
after pattern-match compilation that is how `(x, y, z)` patterns read), the pass makes a
*worker* `KEY/flat` that takes those fields as separate parameters, and turns the function
itself into a *wrapper* that calls the worker with the fields of its argument (closures and
calls with a tuple built elsewhere still go through it; the ml-inline pass may then inline it).
Every call whose argument is a tuple written in place calls the worker with the tuple's items
instead: no tuple is built. The items keep their evaluation order; an item the worker does not
use is still evaluated (bound by a `let`) unless it is a local, a literal or a global.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hpgrem import ir

from hpgrem.ir import ml
from hpgrem.ir import fold, transform

SUFFIX = "/flat"


@dataclass
class MLFlatten:
    name: str = "ml-flatten"
    dialects: tuple[str, ...] = ("ml",)
    flattened: int = 0  # functions given a worker
    calls: int = 0  # calls that pass a tuple's items flat

    def apply(self, module: ir.Module) -> ir.Module:
        entry = module.entry.target if module.entry is not None else None
        plans: dict[str, dict[int, tuple[int, ...]]] = {}  # key -> argument position -> fields used
        for key, fn in module.rules.items():
            if key == entry or key.endswith(SUFFIX) or key + SUFFIX in module.rules:
                continue
            plan = {}
            for pos in range(len(fn.params) - fn.arity, len(fn.params)):
                fields = _fields_only(fn.body, fn.params[pos])
                if fields:
                    plan[pos] = fields
            if plan:
                plans[key] = plan
        if not plans:
            return module
        rules: dict = {}
        for key, fn in module.rules.items():
            if key in plans:
                worker, wrapper = self._split(fn, plans[key])
                rules[key] = wrapper
                rules[worker.key] = worker
            else:
                rules[key] = fn
        fresh = [0]
        for key, fn in list(rules.items()):
            body = transform(fn.body, lambda n: self._call(n, plans, fresh) if isinstance(n, ml.CallKnown) else n)
            if body is not fn.body:
                rules[key] = replace(fn, body=body)
        self.flattened = len(plans)
        return replace(module, rules=rules)

    def _split(self, fn: ml.Function, plan: dict[int, tuple[int, ...]]) -> tuple[ml.Function, ml.Function]:
        params: list[str] = []
        wrapper_args: list = []
        for pos, p in enumerate(fn.params):
            if pos in plan:
                params += [_field_name(p, j) for j in plan[pos]]
                wrapper_args += [ml.Part(ml.Local(p, fn.span), j, fn.span) for j in plan[pos]]
            else:
                params.append(p)
                wrapper_args.append(ml.Local(p, fn.span))
        names = {p for pos, p in enumerate(fn.params) if pos in plan}

        def flat(n):
            if isinstance(n, ml.Part) and isinstance(n.value, ml.Local) and n.value.name in names:
                return ml.Local(_field_name(n.value.name, n.step), n.span)
            return n
        free = len(fn.params) - fn.arity
        worker = ml.Function(fn.key + SUFFIX, fn.name, tuple(params), len(params) - free, transform(fn.body, flat),
                             fn.span)
        wrapper = replace(fn, body=ml.CallKnown(worker.key, tuple(wrapper_args), fn.span))
        return worker, wrapper

    def _call(self, call: ml.CallKnown, plans: dict, fresh: list):
        plan = plans.get(call.function)
        if plan is None or not all(isinstance(call.args[pos], ml.Tuple) for pos in plan):
            return call
        # Does dropping unused items, or reading items out of their written order, change what
        # is evaluated, or in which order? Then every argument and item is bound in order first.
        in_order = all(call.args[pos].order in ((), tuple(range(len(call.args[pos].items)))) for pos in plan)
        droppable = all(_simple(item) for pos in plan for j, item in enumerate(call.args[pos].items)
                        if j not in plan[pos])
        lets: list[tuple[str, ml.Expr]] = []

        def named(e):
            if not (in_order and droppable) and not _simple(e):
                fresh[0] += 1
                name = f"flat.{fresh[0]}"
                lets.append((name, e))
                return ml.Local(name, call.span)
            return e
        args: list = []
        for pos, a in enumerate(call.args):
            if pos in plan:
                order = a.order or tuple(range(len(a.items)))
                items = dict((i, named(a.items[i])) for i in order)
                args += [items[j] for j in plan[pos]]
            else:
                args.append(named(a))
        self.calls += 1
        out: ml.Expr = ml.CallKnown(call.function + SUFFIX, tuple(args), call.span)
        for name, value in reversed(lets):
            out = ml.Let(name, value, out, call.span)
        return out


def _fields_only(body, param: str) -> tuple[int, ...]:
    """The fields of `param` the body reads, when it reads it only through fields (`param.i`)."""
    none: frozenset[int] = frozenset()

    def at(x, kids: list) -> tuple[int, int, frozenset[int], bool]:
        # (field reads of it, uses of it (a field read is one too), the fields read, a read
        # that is not of a field) below x, per path: a shared use counts at each place
        reads, uses, bad = sum(k[0] for k in kids), sum(k[1] for k in kids), any(k[3] for k in kids)
        used = none.union(*(k[2] for k in kids)) if any(k[2] for k in kids) else none
        if isinstance(x, ml.Part) and isinstance(x.value, ml.Local) and x.value.name == param:
            if type(x.step) is not int:
                bad = True
            else:
                used, reads = used | {x.step}, reads + 1
        elif isinstance(x, ml.Local) and x.name == param:
            uses += 1
        return reads, uses, used, bad
    reads, uses, used, bad = fold(body, at)
    return tuple(sorted(used)) if reads == uses and not bad else ()


def _field_name(param: str, field: int) -> str:
    return f"{param}.{field}"  # `.` is in no ML identifier: no clash with other locals


def _simple(e) -> bool:
    """Evaluating it has no effect and cannot fail."""
    return isinstance(e, (ml.Local, ml.Lit, ml.Global))
