"""tensor-pipeline: a training step split into pipeline stages, micro-batches and a schedule.

The transformer layers ("h.{i}.*") are cut into `pp * virtual_stages` contiguous chunks; chunk
g runs on stage g % pp (its local chunk g // pp: Megatron's interleaving). Every op of the
step gets a phase and a chunk:

- forward (the ops "loss" depends on): the latest chunk among its inputs (a layer's parameters
  name their chunk; the embeddings fall in chunk 0, the final LayerNorm, LM head and loss in the
  last, which reads the tied embedding "wte" too);
- backward (the rest of the gradients' ops): the chunk of the forward values and the parameters
  of one chunk that it reads (the chunk of the op it differentiates), else the parameter's
  home for a parameter's gradient, else the earliest chunk of the gradients it reads;
- optimizer: everything after (norm, clipping, AdamW), on the stage that owns the parameter.

Each forward and backward op is copied once per micro-batch (names "mb{i}.<name>"; the inputs
with a batch dimension get 1/micro_batches of its rows); the backward's seed "grad.loss" is
1/micro_batches, so the micro-batches' gradients, summed as each is made ("grad.<param>"), are
the mean over the batch, and "loss" is the mean of the micro-batch losses. A value that one
stage makes and another reads goes by a send after the action that makes it and a recv before
the first action that needs it: activations forward, their gradients backward.

The tied embedding: "wte" is owned (held with its optimizer state, and updated) by the first
stage; the last stage holds a copy for the LM head. Its gradient contribution of each
micro-batch is sent back from the last stage and summed into the first's in that micro-batch's
backward, and after the optimizer the first stage sends the updated "wte" to the last.

Data parallelism's reduction of a gradient (tensor-data-parallel's all-reduce; with ZeRO its
reduce-scatter, or all-reduce and shard) and of the loss runs once per step, in the stage's
"reduce" action, on the micro-batches' sum; the stage that owns a parameter runs its reduction
and its (sharded) update. A forward or backward value made from parameters alone (ZeRO-3's
gather of a parameter's shard and its reshape) is made per micro-batch where its first reader
runs, and on every other stage that reads it a copy of its own ("<name>.stage{s}"), just before
its first reader there: the last stage gathers the tied wte from its own copy's shard.

Gradient clipping sees the global norm: each stage's norm over the parameters it owns
("grad_norm.stage{s}") goes to every other stage (with the last stage's loss), and every stage
takes the norm of the stage norms in stage order, so all get the same bits.

The result holds one graph per stage (rule "stage.{s}", values in the order its actions run)
and each stage's action list (hpgrem/ir/tensor/schedule.py), proved deadlock-free here, in the
annotation "tensor-pipeline.actions". `stage_step(module, s)` is the module a stage's PEs run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import ClassVar

from hpgrem import ir
from hpgrem.ir.tensor.schedule import Action, ScheduleError, check_programs, units
from hpgrem.passes import Option, PassError, annotated

FORWARD, BACKWARD, REDUCE, OPTIMIZER = "forward", "backward", "reduce", "optimizer"
_LAYER = re.compile(r"h\.(\d+)\.")
_GRAD_OF_PARAM = re.compile(r"grad\.(.+?)((\.part|\.sum)(\.\d+)?)?(\.local|\.bucket)?$")


@dataclass(frozen=True)
class Pipeline:
    """Split the step into `pp` stages of `virtual_stages` chunks each, run `micro_batches`
    micro-batches per step under `schedule` ("gpipe" or "1f1b")."""

    name: ClassVar[str] = "tensor-pipeline"
    dialects: ClassVar[tuple[str, ...]] = ("tensor",)
    records: ClassVar[tuple[str, ...]] = ("pp", "stage", "micro_batches", "virtual_stages", "schedule", "actions")
    options: ClassVar[dict[str, Option]] = {
        "pp": Option("pipeline stages", minimum=1),
        "micro_batches": Option("micro-batches per step (the batch divides among them)", minimum=1),
        "virtual_stages": Option("model chunks per stage (interleaved 1F1B when > 1)", minimum=1),
        "schedule": Option("the order of a stage's forwards and backwards: gpipe or 1f1b"),
    }
    pp: int = 1
    micro_batches: int = 1
    virtual_stages: int = 1
    schedule: str = "1f1b"

    def apply(self, module: ir.Module) -> ir.Module:
        from hpgrem.ir.tensor import STEP, graph_of

        if module.annotation("stage.0", f"{self.name}.pp") is not None:
            raise PassError(f"{self.name}: the step is already split into pipeline stages")
        try:
            stages, programs = _Split(self, graph_of(module)).run()
            check_programs(programs)
        except ScheduleError as e:
            raise PassError(f"{self.name}: {e}") from None
        rules = {k: r for k, r in module.rules.items() if k != STEP}
        notes = {}
        for s, (graph, program) in enumerate(zip(stages, programs)):
            key = f"stage.{s}"
            rules[key] = graph
            notes[key] = {"pp": self.pp, "stage": s, "micro_batches": self.micro_batches,
                          "virtual_stages": self.virtual_stages, "schedule": self.schedule,
                          "actions": [[a.kind, a.micro_batch, a.chunk, a.peer, list(a.values)] for a in program]}
        lowered = ir.Module(module.source, rules, module.entry, module.language, module.annotations,
                            module.source_lines)
        return annotated(lowered, self, notes)


def stage_step(module: ir.Module, stage: int) -> tuple[ir.Module, list[Action]]:
    """The module that the PEs of `stage` run (its graph under the key "step") and its actions."""
    from hpgrem.ir.tensor import STEP

    key = f"stage.{stage}"
    graph = module.rules[key]
    actions = [Action(k, mb, c, peer, tuple(values))
               for k, mb, c, peer, values in module.annotation(key, f"{Pipeline.name}.actions")]
    step = ir.Module(module.source, {STEP: replace(graph, key=STEP, name=STEP)}, module.entry, module.language, {},
                     module.source_lines)
    return step, actions


@dataclass(slots=True)
class _Unit:
    """The ops of one phase of one chunk, for one micro-batch, as one stage runs them."""

    phase: str
    chunk: int
    micro_batch: int
    ops: list[str] = field(default_factory=list)


class _Split:
    """One run of the pass over a graph."""

    def __init__(self, options: Pipeline, graph) -> None:
        self.o = options
        self.graph = graph
        self.values = graph.value_map()
        self.chunks = options.pp * options.virtual_stages

    # -- phases and chunks of the original ops ---------------------------------------------
    def classify(self) -> None:
        from hpgrem.ir.tensor import Get, Input, Op, Param

        g, values, name = self.graph, self.values, self.o.name
        if "loss" not in values or "grad_norm" not in values:
            raise PassError(f"{name}: the graph is not a training step (no 'loss' or 'grad_norm')")
        # tensor-data-parallel's reductions of the loss and the gradients run once per step, on
        # the sums over the micro-batches: a value's local one is "<name>.local" (or, ZeRO-2/3
        # without accumulation, "grad.<p>.bucket"); what makes the reduced value from it (an
        # all-reduce; ZeRO's reshape and reduce-scatter, or all-reduce, reshape and shard) is the
        # reduction, `dp_ops`, run by the stage that owns the parameter (the loss: the last)
        self.params = [v.name for v in g.values if type(v) is Param]
        inputs = lambda v: (v.source,) if type(v) is Get else v.inputs  # noqa: E731
        self.inputs = inputs

        def local(name: str) -> str:
            return next((x for x in (f"{name}.local", f"{name}.bucket") if x in values), name)

        self.loss = local("loss")
        self.grad = {p: local(f"grad.{p}") for p in self.params}
        self.param_of = {g_: p for p, g_ in self.grad.items()}
        self.dp_owner: dict[str, str | None] = {}  # a reduction's op -> its parameter (None: the loss's)
        for p, reduced, own in [(None, "loss", self.loss), *((p, f"grad.{p}", self.grad[p]) for p in self.params)]:
            for x in self._ancestors([reduced]) - self._ancestors([own]):
                self.dp_owner[x] = p
        self.dp_ops = {v.name: v for v in g.values if v.name in self.dp_owner}
        layers = sorted({int(m.group(1)) for p in self.params if (m := _LAYER.match(p))})
        if len(layers) < self.chunks:
            raise PassError(f"{name}: {len(layers)} layer(s) cannot fill pp * virtual_stages = {self.chunks} chunks")
        layer_chunk = {layer: i * self.chunks // len(layers) for i, layer in enumerate(layers)}
        forward = self._ancestors([self.loss])
        backward = self._ancestors(list(self.grad.values())) - forward
        # a forward or backward value made from parameters alone (ZeRO-3's gather of a
        # parameter's shard, its reshape; `roots`: those parameters) is made where its first
        # reader runs and places no reader: the last stage gathers the tied wte for the LM
        # head's backward from its own copy's shard (made on the first stage, it would wait for
        # the backward that it feeds)
        roots: dict[str, set[str]] = {p: {p} for p in self.params}
        derived = []
        for v in g.values:
            if (v.name in forward or v.name in backward) and inputs(v) and all(x in roots for x in inputs(v)):
                roots[v.name] = set().union(*(roots[x] for x in inputs(v)))
                derived.append(v.name)
        chunk: dict[str, int] = {}
        readers: dict[str, set[int]] = {}  # a parameter -> the chunks of the forward ops that read it
        for v in g.values:
            if type(v) is Param and (m := _LAYER.match(v.name)):
                chunk[v.name] = layer_chunk[int(m.group(1))]
            elif v.name in forward and type(v) is not Input:
                known = [chunk[x] for x in inputs(v) if x in chunk]
                chunk[v.name] = max(known, default=0)
                if v.name not in roots:
                    for x in inputs(v):
                        for p in roots.get(x, ()):
                            readers.setdefault(p, set()).add(chunk[v.name])
        for p in self.params:  # a parameter outside the layers lives where it is first read
            chunk.setdefault(p, min(readers.get(p, {0})))
        self.home = {p: chunk[p] for p in self.params}
        self.phase: dict[str, str] = {}
        for v in g.values:
            if v.name in self.dp_ops:
                self.phase[v.name] = REDUCE
            elif type(v) in (Op, Get):
                self.phase[v.name] = FORWARD if v.name in forward else BACKWARD if v.name in backward else OPTIMIZER
        for v in g.values:
            if self.phase.get(v.name) != BACKWARD or v.name in roots:
                continue
            if type(v) is Get:
                chunk[v.name] = chunk[v.source]
                continue
            fixed = [chunk[p] for x in v.inputs for p in roots.get(x, ()) if len(readers.get(p, ())) <= 1]
            fixed += [chunk[x] for x in v.inputs if x in forward and x not in roots]
            grads = [chunk[x] for x in v.inputs if self.phase.get(x) == BACKWARD and x not in roots]
            m = _GRAD_OF_PARAM.match(v.name)
            if fixed:
                chunk[v.name] = max(fixed)
            elif m and m.group(1) in self.home:
                chunk[v.name] = self.home[m.group(1)]
            elif grads:
                chunk[v.name] = min(grads)
            else:  # a seed: where the value it is the gradient of is
                chunk[v.name] = chunk.get(m.group(1) if m else "", self.chunks - 1)
        # where each is made: for each stage that reads it, the chunk of its first reader there
        # (the tied wte's gather is made on the first stage for the embedding and on the last
        # for the LM head, each from the stage's own shard); the first reader's is the value itself
        reader_names: dict[str, list[str]] = {}
        for v in g.values:
            for x in inputs(v) if type(v) in (Op, Get) and (v.name in chunk or v.name in roots) else ():
                reader_names.setdefault(x, []).append(v.name)
        self.copies: dict[str, dict[int, int]] = {}  # value -> {stage: chunk} where it is made
        for x in reversed(derived):
            where: dict[int, int] = {}
            for r in reader_names.get(x, ()):
                for stage, c in (self.copies[r].items() if r in self.copies else
                                 [(self._stage_of(chunk[r]), chunk[r])] if r in chunk else []):
                    where.setdefault(stage, c)
            if where:
                self.copies[x] = where
                chunk[x] = next(iter(where.values()))
        self.chunk = chunk

    def copy_name(self, x: str, stage: int, name: str) -> str:
        """The name of value `x` (named `name` in its micro-batch) as stage `stage` reads it:
        the stage's own copy of a value made from parameters alone ("mb0.wte.full.stage1"),
        else `name`."""
        where = self.copies.get(x)
        if where is None or stage not in where or self._stage_of(self.chunk[x]) == stage:
            return name
        return f"{name}.stage{stage}"

    def _ancestors(self, roots: list[str]) -> set[str]:
        from hpgrem.ir.tensor import Get, Op

        seen, todo = set(), list(roots)
        while todo:
            x = todo.pop()
            if x in seen or type(self.values[x]) not in (Op, Get):
                continue
            seen.add(x)
            todo.extend(self.inputs(self.values[x]))
        return seen

    # -- the split -----------------------------------------------------------------------------
    def run(self):
        from hpgrem.ir.tensor import Get, Input, Op, Param, State
        from hpgrem.ir.tensor.build import GraphBuilder
        from hpgrem.ir.tensor.dialect import ShapeError, op_attrs

        self.classify()
        o, values, m = self.o, self.values, self.o.micro_batches
        batched = {v.name for v in self.graph.values if type(v) is Input and v.shape}
        for x in batched:
            if values[x].shape[0] % m:
                raise PassError(f"{o.name}: a batch of {values[x].shape[0]} ({x}) does not divide among "
                                f"{m} micro-batches")
        whole = GraphBuilder()  # every stage's values, to infer their types once
        for v in self.graph.values:
            if type(v) is Param:
                whole.param(v.name, v.shape, v.dtype)
            elif type(v) is State:
                whole.state(v.name, v.shape, v.dtype)
            elif type(v) is Input and v.name in batched:
                for i in range(m):
                    whole.input(f"mb{i}.{v.name}", (v.shape[0] // m, *v.shape[1:]), v.dtype)
            elif type(v) is Input:
                whole.input(v.name, v.shape, v.dtype)
        per_mb = batched | {n for n, ph in self.phase.items() if ph in (FORWARD, BACKWARD)}
        first_bucket = 1 + max((int(v.attr("bucket", 0)) for v in self.graph.values
                                if type(v) is Op and v.attr("bucket") is not None), default=0)
        self.units: dict[tuple[str, int, int], _Unit] = {}
        self.maker: dict[str, tuple[str, int, int]] = {}  # value -> the unit that makes it
        final_grad = {}

        def add(unit: _Unit, op: str, *inputs: str, name: str, **attrs) -> None:
            whole.op(op, *inputs, name=name, **attrs)
            unit.ops.append(name)
            self.maker[name] = (unit.phase, unit.chunk, unit.micro_batch)

        pending: dict = {}  # a stage's copy of a value made from parameters: made before its first reader

        def emit(v, unit: _Unit, on, name: str) -> None:
            for x in (v.source,) if type(v) is Get else v.inputs:
                if on(x) in pending:
                    pending.pop(on(x))()
            if type(v) is Get:
                whole.get(on(v.source), v.index, name)
                unit.ops.append(name)
                self.maker[name] = (unit.phase, unit.chunk, unit.micro_batch)
                return
            attrs = op_attrs(v)
            if v.name == "grad.loss":
                attrs["value"] = 1.0 / m
            if "bucket" in attrs:  # each micro-batch's collective is one of its own
                attrs["bucket"] = first_bucket + int(attrs["bucket"]) * m + unit.micro_batch
            add(unit, v.op, *map(on, v.inputs), name=name, **attrs)

        try:
            for i in range(m):
                rename = lambda x, i=i: f"mb{i}.{x}" if x in per_mb else x  # noqa: E731
                for phase in (FORWARD, BACKWARD):
                    for v in self.graph.values:
                        if self.phase.get(v.name) != phase:
                            continue
                        for c in (self.copies[v.name].values() if v.name in self.copies else [self.chunk[v.name]]):
                            unit = self._unit(phase, c, i)
                            on = lambda x, c=c: self.copy_name(x, self._stage_of(c), rename(x))  # noqa: E731
                            name = on(v.name)
                            if name != rename(v.name):  # another stage's copy: made just before its first reader
                                pending[name] = lambda v=v, unit=unit, on=on, name=name: emit(v, unit, on, name)
                            else:
                                emit(v, unit, on, name)
                        if v.name == self.loss:
                            self._accumulate_loss(add, whole, unit, i)
                        elif v.name in self.param_of:
                            final_grad[v.name] = self._accumulate(add, whole, unit, v.name, i)
        except ShapeError as e:
            raise PassError(f"{o.name}: a micro-batch of the step does not type: {e}") from None
        self.whole, self.final_grad = whole, final_grad
        return self._stages()

    def _unit(self, phase: str, chunk: int, mb: int) -> _Unit:
        key = (phase, chunk, mb)
        if key not in self.units:
            self.units[key] = _Unit(phase, chunk, mb)
        return self.units[key]

    def _accumulate(self, add, whole, unit: _Unit, grad: str, i: int) -> str:
        """The running sum of a parameter's micro-batch gradients; the last is "grad.<param>"."""
        m = self.o.micro_batches
        name = grad if i == m - 1 else f"{grad}.sum{i}"
        if i == 0:
            add(unit, "reshape", f"mb0.{grad}", name=name, shape=whole.type_of(f"mb0.{grad}")[0])
        else:
            add(unit, "add", f"{grad}.sum{i - 1}", f"mb{i}.{grad}", name=name)
        return name

    def _accumulate_loss(self, add, whole, unit: _Unit, i: int) -> None:
        """"loss": the mean of the micro-batch losses (each times 1/m, summed as they come)."""
        m, loss = self.o.micro_batches, self.loss
        own = f"mb{i}.{loss}"
        name = loss if i == m - 1 else f"{loss}.sum{i}"
        add(unit, "reshape", own, name=f"{own}.row", shape=(1, 1))
        add(unit, "fill", name=f"{own}.weight", shape=(1, 1), value=1.0 / m, dtype=whole.type_of(own)[1])
        add(unit, "matmul", f"{own}.row", f"{own}.weight", name=f"{own}.part")
        add(unit, "reshape", f"{own}.part", name=name if i == 0 else f"{own}.share", shape=())
        if i:
            add(unit, "add", f"{loss}.sum{i - 1}", f"{own}.share", name=name)

    def _restricted(self, v, theirs: set[str], stage_norm: str):
        """An op of the gradient norm on one stage: it reads only the stage's own gradients,
        and the norm it ends in is the stage's ("grad_norm.stage{s}")."""
        from hpgrem.ir.tensor import Get

        if type(v) is Get:
            return v
        inputs = tuple(x for x in v.inputs if x not in theirs)
        if not inputs:
            raise PassError(f"{self.o.name}: a stage has no gradient for {v.name}")
        return replace(v, inputs=inputs, name=stage_norm if v.name == "grad_norm" else v.name)

    def _stage_of(self, chunk: int) -> int:
        return chunk % self.o.pp

    def _stages(self):
        """Each stage's action list and graph."""
        from hpgrem.ir.tensor import Get, Input, Param, State
        from hpgrem.ir.tensor.build import GraphBuilder
        from hpgrem.ir.tensor.dialect import op_attrs

        o, pp, whole = self.o, self.o.pp, self.whole
        made = {v.name: v for v in whole.values}
        last = self._stage_of(self.chunks - 1)
        # -- the forward and backward units in each stage's order, with their messages
        orders = [[self.units[(kind, c * pp + s, mb)] for kind, mb, c in
                   units(o.schedule, pp, s, o.micro_batches, o.virtual_stages)
                   if (kind, c * pp + s, mb) in self.units] for s in range(pp)]
        needs: dict[int, dict[tuple, list[str]]] = {s: {} for s in range(pp)}  # stage -> maker -> values
        for s in range(pp):
            for unit in orders[s]:
                for name in unit.ops:
                    v = made[name]
                    for x in ((v.source,) if type(v) is Get else v.inputs):
                        src = self.maker.get(x)
                        if src is not None and self._stage_of(src[1]) != s:
                            wanted = needs[s].setdefault(src, [])
                            if x not in wanted:
                                wanted.append(x)
        programs: list[list[Action]] = [[] for _ in range(pp)]
        received: list[set] = [set() for _ in range(pp)]
        for s in range(pp):
            for unit in orders[s]:
                key = (unit.phase, unit.chunk, unit.micro_batch)
                wants = {src for src, vals in needs[s].items() if src not in received[s]
                         and any(x in vals for n in unit.ops for x in _reads(made[n]))}
                for src in sorted(wants, key=_unit_order):
                    vals = tuple(needs[s][src])
                    programs[s].append(Action("recv", src[2], src[1] // pp, self._stage_of(src[1]), vals))
                    received[s].add(src)
                programs[s].append(Action(unit.phase, unit.micro_batch, unit.chunk // pp, -1, tuple(unit.ops)))
                for t in range(pp):
                    if t != s and key in needs[t]:
                        programs[s].append(Action("send", unit.micro_batch, unit.chunk // pp, t,
                                                  tuple(needs[t][key])))
        # -- the reduce: dp all-reduces, the stage's norm; stage norms (and the loss) exchanged
        owned = [[p for p in self.params if self._stage_of(self.home[p]) == s] for s in range(pp)]
        reads: list[set[str]] = [set() for _ in range(pp)]
        for s in range(pp):
            for unit in orders[s]:
                for n in unit.ops:
                    reads[s].update(_reads(made[n]))
        for p in self.params:
            grad = self.maker.get(self.final_grad[self.grad[p]])
            if grad is None or self._stage_of(grad[1]) != self._stage_of(self.home[p]):
                raise PassError(f"{o.name}: the gradient of {p} is not made on the stage that owns it")
        norm_ops = self._ancestors(["grad_norm"]) & {n for n, ph in self.phase.items() if ph == OPTIMIZER}
        optimizer_ops = [v for v in self.graph.values if self.phase.get(v.name) == OPTIMIZER and v.name not in norm_ops]
        stage_norms = [f"grad_norm.stage{s}" for s in range(pp)]
        copies: dict[int, list[str]] = {}  # stage -> parameters it reads but does not own
        reduce_ops: list[list] = []
        opt_ops: list[list[str]] = []
        for s in range(pp):
            mine = set(owned[s])
            theirs = {f"grad.{p}" for p in self.params if p not in mine}
            ops = [v for x, v in self.dp_ops.items()
                   if (s == last if self.dp_owner[x] is None else self.dp_owner[x] in mine)]
            for v in self.graph.values:
                if v.name in norm_ops:
                    ops.append(self._restricted(v, theirs, stage_norms[s]))
            reduce_ops.append(ops)
            programs[s].append(Action(REDUCE, -1, -1, -1, tuple(v.name for v in ops)))
            for t in range(pp):
                if t != s:
                    programs[s].append(Action("send", -1, -1, t, (stage_norms[s], "loss") if s == last
                                              else (stage_norms[s],)))
            for t in range(pp):
                if t != s:
                    programs[s].append(Action("recv", -1, -1, t, (stage_norms[t], "loss") if t == last
                                              else (stage_norms[t],)))
            kept: list[str] = []
            for v in optimizer_ops:  # the updates of its own parameters, and what they read
                if all((x in mine) if x in self.home else (x in kept) if x in self.phase and
                       self.phase[x] == OPTIMIZER and x not in norm_ops else True for x in _reads(v)):
                    kept.append(v.name)
            opt_ops.append(kept)
            programs[s].append(Action(OPTIMIZER, -1, -1, -1, ("grad_norm", *kept)))
            copies[s] = [p for p in self.params if p not in mine and p in reads[s]]
        updates = dict(self.graph.updates)
        for s in range(pp):
            for p in owned[s]:
                for t in range(pp):
                    if p in copies[t]:
                        programs[s].append(Action("send", -1, -1, t, (updates[p],)))
        for t in range(pp):
            for p in copies[t]:
                programs[t].append(Action("recv", -1, -1, self._stage_of(self.home[p]), (updates[p],)))
        # -- each stage's graph: what it keeps and is fed, then its ops in the order they run
        graphs = []
        norm_type = (self.values["grad_norm"].shape, self.values["grad_norm"].dtype)
        for s in range(pp):
            b = GraphBuilder()
            own_opt = [self.values[n] for n in opt_ops[s]]
            persistent = reads[s] | {x for v in own_opt for x in _reads(v)}
            for v in self.graph.values:
                if type(v) in (Param, State) and v.name in persistent:
                    (b.param if type(v) is Param else b.state)(v.name, v.shape, v.dtype)
            inputs = {x for a in programs[s] if a.kind in (FORWARD, BACKWARD) for n in a.values
                      for x in _reads(made[n]) if type(made.get(x)) is Input}
            inputs.update(x for v in (*own_opt, *reduce_ops[s]) for x in _reads(v) if type(self.values[x]) is Input)
            for v in whole.values:
                if type(v) is Input and v.name in inputs:
                    b.input(v.name, v.shape, v.dtype)
            for a in programs[s]:
                for x in a.values if a.kind == "recv" else ():
                    shape, dtype = norm_type if x in stage_norms else whole.type_of(x) if x in whole.types \
                        else (self.values[x].shape, self.values[x].dtype)
                    b.input(x, shape, dtype)
            for a in programs[s]:
                if a.kind in (FORWARD, BACKWARD):
                    for n in a.values:
                        _copy(b, made[n], op_attrs)
            for v in reduce_ops[s]:
                _copy(b, v, op_attrs)
            b.op("global_norm", *stage_norms, name="grad_norm")
            for v in own_opt:
                _copy(b, v, op_attrs)
            stage_updates = {k: u for k, u in updates.items() if u in b.types}
            graphs.append(b.graph(("loss", "grad_norm"), stage_updates, key=f"stage.{s}"))
        return graphs, programs


def _reads(v) -> tuple[str, ...]:
    from hpgrem.ir.tensor import Get, Op

    return (v.source,) if type(v) is Get else v.inputs if type(v) is Op else ()


def _copy(b, v, op_attrs) -> None:
    from hpgrem.ir.tensor import Get

    if type(v) is Get:
        b.get(v.source, v.index, v.name)
    else:
        b.op(v.op, *v.inputs, name=v.name, **op_attrs(v))


def _unit_order(key: tuple[str, int, int]) -> tuple:
    """A fixed order of units: forward before backward, then micro-batch and chunk."""
    return (key[0] != FORWARD, key[2], key[1])


__all__ = ["Pipeline", "stage_step"]
