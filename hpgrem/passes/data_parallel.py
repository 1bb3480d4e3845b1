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

The lowering names no transport: simulated PEs and MPI ranks run the same graph
(pam/tensor/runtime.py). Records on the step graph: `dp`, `buckets` (how many), `bucket_bytes`.
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
    records: ClassVar[tuple[str, ...]] = ("dp", "buckets", "bucket_bytes")
    options: ClassVar[dict[str, Option]] = {
        "dp": Option("data-parallel ranks: each runs the step on 1/dp of the batch", minimum=1),
        "bucket_bytes": Option("gradient bytes all-reduced together (a bucket closes when it holds this many)",
                               minimum=1),
    }
    dp: int = 1
    bucket_bytes: int = 1 << 20

    def apply(self, module: ir.Module) -> ir.Module:
        from hpgrem.ir.tensor import STEP, graph_of

        if self.dp == 1:
            return module
        done = module.annotation(STEP, f"{self.name}.dp")
        if done is not None:
            raise PassError(f"{self.name}: the graph is already lowered for dp = {done}")
        graph, buckets = self._lower(graph_of(module))
        lowered = ir.Module(module.source, {**module.rules, STEP: graph}, module.entry, module.language,
                            module.annotations, module.source_lines)
        return annotated(lowered, self, {STEP: {"dp": self.dp, "buckets": buckets,
                                                "bucket_bytes": self.bucket_bytes}})

    def _lower(self, graph):
        from hpgrem.ir.tensor import Get, Input, Param, State
        from hpgrem.ir.tensor_build import GraphBuilder

        dp = self.dp
        params = [v.name for v in graph.values if type(v) is Param]
        defined = {v.name for v in graph.values}
        missing = [p for p in params if f"grad.{p}" not in defined]
        if missing:
            raise PassError(f"{self.name}: no gradient grad.{missing[0]} in the graph (run tensor-autodiff first)")
        if "loss" not in defined:
            raise PassError(f"{self.name}: the graph defines no value 'loss'")
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
                if v.shape:
                    if v.shape[0] % dp:
                        raise PassError(f"{self.name}: a batch of {v.shape[0]} ({v.name}) does not divide "
                                        f"among dp = {dp} ranks")
                    b.input(v.name, (v.shape[0] // dp, *v.shape[1:]), v.dtype)
                else:
                    b.input(v.name, v.shape, v.dtype)
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
