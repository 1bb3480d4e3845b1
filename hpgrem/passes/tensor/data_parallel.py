"""tensor-data-parallel: a training step lowered for `dp` data-parallel ranks.

Every rank runs the same lowered graph on its slice of the batch: each input with a batch
dimension (every input that is not a scalar: tokens, targets) keeps 1/dp of its rows, and the
shapes of the graph follow (inferred again; a `reshape` or `sum_to` whose target counts the
batch is scaled with it). The loss and each parameter's gradient `grad.<param>` become the mean
over the ranks of their local values: the local value is renamed `<name>.local` and an
`allreduce` (group "dp", reduce "mean") defines the name again, so the optimizer, the outputs
and the updates read the reduced values unchanged. Gradients are all-reduced in *buckets* in the
order backward produces them: a bucket closes when its gradients reach `bucket_bytes` (or when a
later op reads one of them), and its all-reduces stand right after its last gradient, so the
runtime starts each bucket's collective while backward goes on (overlap). The loss has a bucket
of its own, right after it. Clipping and AdamW then see the same gradients on every rank.

With `zero` = 1, 2 or 3 the model states are sharded over the dp group (ZeRO), each tensor
flattened and zero-padded to dp equal chunks, rank j owning chunk j (its coordinate, the input
"rank.dp"): a rank holds the reduced chunk of each gradient it owns ("grad.<p>", flat); AdamW's
states "m.<p>", "v.<p>" are chunks; the gradient norm sums the squares of the chunks and
all-reduces them over "dp" (padding adds nothing); AdamW updates the rank's chunk only. Stage 1
keeps whole gradients, as ZeRO's P_os does: they are all-reduced in buckets of `bucket_bytes`
as without ZeRO ("grad.<p>.reduced") and each rank then takes its chunk with `shard`. Stages 2
and 3 reduce-scatter (mean) each gradient as soon as backward makes it; until then it waits in
its bucket, "grad.<p>.bucket" (a tied weight's contributions "grad.<p>.part.<k>.bucket" too),
which memory accounting counts as communication (DeepSpeed copies each gradient into its reduce
bucket), so the whole gradients never all live. Stages 1 and 2 keep the whole parameter: the
rank's chunk of it is taken with `shard`, and the updated chunks are all-gathered into the
whole "new.<p>". Stage 3 keeps only the chunk as the parameter: each is all-gathered (and
reshaped, "<p>.full") before its first use in the forward and again ("<p>.full.backward") before
the op that makes its gradient or its first use in the backward, whichever comes first, so the runtime frees the forward's copy after its last forward
reader; the update stays a chunk. (The runtime runs one all-gather at a time, in the graph's
order: pam/tensor/runtime.py.)

With `accumulate` (a pipeline's micro-batches, tensor-pipeline run after this pass) a gradient
is summed over the micro-batches before its reduction, so its local value is the whole
accumulation buffer "grad.<p>.local" (a gradient, not a reduce bucket) under every stage, and
tensor-pipeline runs the reduction once a step, after the last micro-batch.

The lowering names no transport: simulated PEs and MPI ranks run the same graph
(pam/tensor/runtime.py). Records on the step graph: `dp`, `buckets` (how many all-reduce buckets),
`bucket_bytes`, `zero`, `accumulate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hpgrem import ir
from hpgrem.passes import Option, PassError, annotated

GROUP = "dp"


@dataclass(frozen=True)
class DataParallel:
    """Split the batch over `dp` ranks; all-reduce the loss and the gradients in buckets."""

    name: ClassVar[str] = "tensor-data-parallel"
    dialects: ClassVar[tuple[str, ...]] = ("tensor",)
    records: ClassVar[tuple[str, ...]] = ("dp", "buckets", "bucket_bytes", "zero", "accumulate")
    options: ClassVar[dict[str, Option]] = {
        "dp": Option("data-parallel ranks: each runs the step on 1/dp of the batch", minimum=1),
        "bucket_bytes": Option("gradient bytes all-reduced together (a bucket closes when it holds this many)",
                               minimum=1),
        "zero": Option("ZeRO stage: 0 none, 1 optimizer states, 2 and gradients, 3 and parameters sharded",
                       minimum=0),
        "accumulate": Option("1: the gradients are accumulated over micro-batches (a pipeline) before their "
                             "reduction, so ZeRO-2/3 hold a whole gradient buffer, not a reduce bucket", minimum=0),
    }
    dp: int = 1
    bucket_bytes: int = 1 << 20
    zero: int = 0
    accumulate: int = 0

    def apply(self, module: ir.Module) -> ir.Module:
        from hpgrem.ir.tensor import STEP, graph_of

        if self.dp == 1:
            return module
        done = module.annotation(STEP, f"{self.name}.dp")
        if done is not None:
            raise PassError(f"{self.name}: the graph is already lowered for dp = {done}")
        if self.zero not in (0, 1, 2, 3):
            raise PassError(f"{self.name}: zero is 0, 1, 2 or 3, not {self.zero}")
        graph, buckets = (self._lower_zero if self.zero else self._lower)(graph_of(module))
        lowered = ir.Module(module.source, {**module.rules, STEP: graph}, module.entry, module.language,
                            module.annotations, module.source_lines)
        return annotated(lowered, self, {STEP: {"dp": self.dp, "buckets": buckets, "bucket_bytes": self.bucket_bytes,
                                                "zero": self.zero, "accumulate": self.accumulate}})

    def _lower(self, graph):
        from hpgrem.ir.tensor import Get, Input, Param, State
        from hpgrem.ir.tensor.build import GraphBuilder

        params = self._check(graph)
        grads = {f"grad.{p}" for p in params}
        b = GraphBuilder()
        waiting: list[tuple[str, str]] = []  # gradients of the open bucket: (name, local name)
        held = 0  # their bytes
        count = 0

        def reduce(members: list[tuple[str, str]]) -> None:
            nonlocal count
            for name, local in members:
                b.op("allreduce", local, name=name, group=GROUP, bucket=count, reduce="mean")
            count += 1

        for v in graph.values:
            if type(v) is Param:
                b.param(v.name, v.shape, v.dtype)
                continue
            if type(v) is State:
                b.state(v.name, v.shape, v.dtype)
                continue
            if type(v) is Input:
                self._input(b, v)
                continue
            reads = (v.source,) if type(v) is Get else v.inputs
            if waiting and any(name in reads for name, _ in waiting):
                reduce(waiting)  # a reader needs the reduced value now
                waiting, held = [], 0
            name = f"{v.name}.local" if v.name == "loss" or v.name in grads else v.name
            if type(v) is Get:
                b.get(v.source, v.index, name=name)
            else:
                b.op(v.op, *v.inputs, name=name, **self._attrs(v, b))
            if v.name == "loss":
                reduce([(v.name, name)])
            elif v.name in grads:
                waiting.append((v.name, name))
                shape, dtype = b.type_of(name)
                held += _size(shape) * (8 if dtype == "float64" else 4)
                if held >= self.bucket_bytes:
                    reduce(waiting)
                    waiting, held = [], 0
        if waiting:
            reduce(waiting)
        return b.graph(graph.outputs, dict(graph.updates)), count

    def _check(self, graph) -> list[str]:
        """The parameters' names; PassError if a gradient or the loss is missing."""
        from hpgrem.ir.tensor import Param

        params = [v.name for v in graph.values if type(v) is Param]
        defined = {v.name for v in graph.values}
        missing = [p for p in params if f"grad.{p}" not in defined]
        if missing:
            raise PassError(f"{self.name}: no gradient grad.{missing[0]} in the graph (run tensor-autodiff first)")
        if "loss" not in defined:
            raise PassError(f"{self.name}: the graph defines no value 'loss'")
        return params

    def _input(self, b, v) -> None:
        """An input of the step: one with a batch dimension keeps 1/dp of its rows."""
        if v.shape:
            if v.shape[0] % self.dp:
                raise PassError(f"{self.name}: a batch of {v.shape[0]} ({v.name}) does not divide "
                                f"among dp = {self.dp} ranks")
            b.input(v.name, (v.shape[0] // self.dp, *v.shape[1:]), v.dtype)
        else:
            b.input(v.name, v.shape, v.dtype)

    def _lower_zero(self, graph):
        """The step with the model states sharded (see the module's docstring)."""
        from hpgrem.ir.tensor import Get, Input, Param, State
        from hpgrem.ir.tensor.build import GraphBuilder

        dp, stage = self.dp, self.zero
        params = self._check(graph)
        shapes = {v.name: v.shape for v in graph.values if type(v) is Param}
        size = {p: _size(shapes[p]) for p in params}
        chunk = {p: -(-size[p] // dp) for p in params}
        owner = {f"grad.{p}": p for p in params} | {f"{k}.{p}": p for p in params for k in ("m", "v")}
        optimizer = {f"adamw.{p}": p for p in params}
        b = GraphBuilder()
        count = {"reduce_scatter": 0, "all_gather": 0}

        def collective(kind: str, x: str, name: str, **attrs) -> str:
            count[kind] += 1
            return b.op(kind, x, name=name, group=GROUP, bucket=count[kind] - 1, ranks=dp, **attrs)

        renamed: dict[str, str] = {}  # a value's name in the lowered graph, where it differs
        full: dict[tuple[str, bool], str] = {}  # (parameter, in the backward) -> its gathered value
        backward = False

        def gathered(p: str) -> str:
            """Stage 3: the whole parameter, gathered once for the forward and once again for
            the backward (so the forward's copy is freed after its last forward reader)."""
            if (p, backward) not in full:
                suffix = ".backward" if backward else ""
                flat = collective("all_gather", p, f"{p}.gathered{suffix}", size=size[p])
                full[p, backward] = b.op("reshape", flat, name=f"{p}.full{suffix}", shape=shapes[p])
            return full[p, backward]

        allreduces = 0  # all-reduce buckets so far (the loss, stage 1's gradients, the norm's squares)
        waiting: list[tuple[str, str]] = []  # stage 1: the gradients of the open bucket (name, local name)
        held = 0  # their bytes

        def allreduce(members: list[tuple[str, str]], reduce: str) -> None:
            nonlocal allreduces
            for name, local in members:
                b.op("allreduce", local, name=name, group=GROUP, bucket=allreduces, reduce=reduce)
            allreduces += 1

        def close() -> None:
            """Stage 1: the open bucket's gradients all-reduced whole, then the rank's chunks taken."""
            nonlocal waiting, held
            allreduce([(f"{name}.reduced", local) for name, local in waiting], "mean")
            for name, _ in waiting:
                p = owner[name]
                flat = b.op("reshape", f"{name}.reduced", name=f"{name}.flat", shape=(size[p],))
                b.op("shard", flat, "rank.dp", name=name, ranks=dp)
            waiting, held = [], 0

        def local_name(name: str) -> str:
            """The name of a rank's own value before its reduction: "<loss>.local"; a gradient
            "grad.<p>.local", or from stage 2 on "grad.<p>.bucket" (it waits in its reduce
            bucket, as DeepSpeed copies each gradient into its bucket: communication). Gradients
            accumulated over micro-batches live whole until the step's reduction: "grad.<p>.local",
            a gradient buffer (PyTorch's .grad, DeepSpeed's accumulation buffer)."""
            if name == "loss" or (name in owner and (stage == 1 or self.accumulate)):
                return f"{name}.local"
            if name in owner:
                return f"{name}.bucket"
            if stage > 1 and not self.accumulate and ".part" in name and name.split(".part")[0] in owner:
                renamed[name] = f"{name}.bucket"  # a tied weight's contributions, read by their sum
                return renamed[name]
            return name

        def reduced(name: str, local: str) -> None:
            """The loss all-reduced; a gradient reduce-scattered (its chunk named as it), or
            under stage 1 all-reduced in a bucket."""
            nonlocal held
            if name == "loss":
                allreduce([(name, local)], "mean")
            elif name in owner and stage == 1:
                waiting.append((name, local))
                shape, dtype = b.type_of(local)
                held += _size(shape) * (8 if dtype == "float64" else 4)
                if held >= self.bucket_bytes:
                    close()
            elif name in owner:
                flat = b.op("reshape", local, name=f"{local}.flat", shape=(size[owner[name]],))
                collective("reduce_scatter", flat, name, reduce="mean")

        # stage 3: the parameters the backward reads; each is gathered before the op that makes
        # its gradient (DeepSpeed gathers a module's parameters before its backward begins)
        read_in_backward, seen_seed = set(), False
        for v in graph.values:
            seen_seed = seen_seed or v.name == "grad.loss"
            if seen_seed:
                read_in_backward.update(x for x in getattr(v, "inputs", ()) if x in shapes)
        b.input("rank.dp", (), "int64")
        for v in graph.values:
            backward = backward or v.name == "grad.loss"
            kind = type(v)
            reads = (v.source,) if kind is Get else getattr(v, "inputs", ())
            if waiting and any(name in reads for name, _ in waiting):
                close()  # a reader needs the reduced gradients now
            if kind is Param:
                b.param(v.name, (chunk[v.name],) if stage == 3 else v.shape, v.dtype)
            elif kind is State:
                b.state(v.name, (chunk[owner[v.name]],) if v.name in owner else v.shape, v.dtype)
            elif kind is Input:
                self._input(b, v)
            elif kind is Get:
                if v.source in optimizer and v.index == 0 and stage < 3:
                    p = optimizer[v.source]
                    mine = b.get(v.source, 0, name=f"{v.name}.chunk")
                    flat = collective("all_gather", mine, f"{v.name}.gathered", size=size[p])
                    b.op("reshape", flat, name=v.name, shape=shapes[p])
                else:
                    local = local_name(v.name)
                    b.get(renamed.get(v.source, v.source), v.index, name=local)
                    reduced(v.name, local)
            elif v.name in optimizer:
                p = optimizer[v.name]
                if stage == 3:
                    param = p
                else:
                    param = b.op("shard", b.op("reshape", p, name=f"{p}.flat", shape=(size[p],)), "rank.dp",
                                 name=f"{p}.chunk", ranks=dp)
                b.op(v.op, param, *v.inputs[1:], name=v.name, **dict(v.attrs))
            elif v.op in ("global_norm", "sum_squares") and any(x in owner for x in v.inputs):
                local = b.op("sum_squares", *v.inputs, name=f"{v.name}.chunks")
                whole = f"{v.name}.squares" if v.op == "global_norm" else v.name
                allreduce([(whole, local)], "sum")
                if v.op == "global_norm":
                    b.op("sqrt", whole, name=v.name)
            else:
                if stage == 3 and backward and owner.get(v.name) in read_in_backward:
                    gathered(owner[v.name])
                inputs = tuple(gathered(x) if stage == 3 and x in shapes else renamed.get(x, x) for x in v.inputs)
                local = local_name(v.name)
                b.op(v.op, *inputs, name=local, **self._attrs(v, b))
                reduced(v.name, local)
        if waiting:
            close()
        return b.graph(graph.outputs, dict(graph.updates)), allreduces

    def _attrs(self, v, b) -> dict:
        """The op's own attributes, a target shape that counts the batch scaled by 1/dp."""
        own = dict(v.attrs)
        if "shape" in own and v.op in ("reshape", "sum_to"):
            shape = tuple(own["shape"])
            source = b.type_of(v.inputs[0])[0]
            counts_batch = (_size(shape) != _size(source)) if v.op == "reshape" else \
                (len(shape) == len(source) and shape[:1] != source[:1] and shape[:1] != (1,))
            if counts_batch and shape:
                if shape[0] % self.dp:
                    raise PassError(f"{self.name}: {v.name}'s shape {list(shape)} does not divide among dp = {self.dp}")
                own["shape"] = (shape[0] // self.dp, *shape[1:])
        return own


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
