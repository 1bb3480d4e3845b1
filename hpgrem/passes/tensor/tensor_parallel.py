"""tensor-parallel: a training step lowered for `tp` tensor-parallel ranks (Megatron-LM).

The pass finds the transformer's two split points by the graph's structure, not by names: an
attention (`causal_attention` reading a `linear` and read by a `linear`) and an MLP (`gelu`
likewise). Around each, the first linear becomes *column-parallel*: every rank keeps the output
columns of its 1/tp of the heads (the fused q|k|v weight keeps q, k and v of the same heads) or
of the MLP's width, with its part of the bias, and the attention runs on n_head/tp heads. The
second becomes *row-parallel*: each rank keeps the matching rows of the weight, computes a
partial product, and an `allreduce` "sum" over the group "tp" adds the parts before the bias is
added once (Megatron's g: in the backward, the identity). The input of a column-parallel linear
passes through `parallel_copy` (Megatron's f: the identity forward; in the backward, the
all-reduce of the input's gradient over "tp"). LayerNorms, embeddings and the LM head stay
replicated; since every value they see is the same on every rank (the all-reduces hand the same
bits to all), so are their gradients.

The pass rewrites the forward part of the step (every value before the loss's gradient), then
differentiates it again and appends clipping and AdamW with the optimizer's own settings, the
gradient norm summing the squares of the split parameters over "tp" and counting the
replicated ones once. Each rank is loaded with its own part of every split parameter
(backend/tensor/shards.py). Records on the step graph: `tp`, `splits` (linears split).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from hpgrem import ir
from hpgrem.passes import Option, PassError, annotated

GROUP = "tp"


@dataclass(frozen=True)
class TensorParallel:
    """Split attention heads and the MLP's width over `tp` ranks."""

    name: ClassVar[str] = "tensor-parallel"
    dialects: ClassVar[tuple[str, ...]] = ("tensor",)
    records: ClassVar[tuple[str, ...]] = ("tp", "splits")
    options: ClassVar[dict[str, Option]] = {
        "tp": Option("tensor-parallel ranks: each holds 1/tp of the heads and of the MLP's width", minimum=1),
    }
    tp: int = 1

    def apply(self, module: ir.Module) -> ir.Module:
        from hpgrem.ir.tensor import STEP, graph_of

        if self.tp == 1:
            return module
        done = module.annotation(STEP, f"{self.name}.tp")
        if done is not None:
            raise PassError(f"{self.name}: the graph is already lowered for tp = {done}")
        if module.annotation(STEP, "tensor-data-parallel.dp") is not None:
            raise PassError(f"{self.name}: run it before tensor-data-parallel")
        graph = graph_of(module)
        forward, settings = self._split_step(graph)
        lowered, splits = self._lower(module, forward, settings)
        return annotated(lowered, self, {STEP: {"tp": self.tp, "splits": splits}})

    def _split_step(self, graph) -> tuple[list, dict]:
        """The forward values (before "grad.loss") and the optimizer's settings."""
        from hpgrem.ir.tensor import Op

        names = [v.name for v in graph.values]
        if "grad.loss" not in names or "clip_scale" not in names:
            raise PassError(f"{self.name}: the graph is no training step (build_training_step: "
                            "tensor-autodiff, clipping and AdamW)")
        forward = list(graph.values[:names.index("grad.loss")])
        ops = [v for v in graph.values if type(v) is Op]
        clip = next(v for v in ops if v.op == "clip_scale").attr("clip")
        adamw = [v for v in ops if v.op == "adamw"]
        first = adamw[0]
        settings = {"clip": clip, "betas": (first.attr("beta1"), first.attr("beta2")), "eps": first.attr("eps"),
                    "weight_decay": max(v.attr("weight_decay") for v in adamw)}
        return forward, settings

    def _lower(self, module: ir.Module, forward: list, settings: dict) -> tuple[ir.Module, int]:
        from hpgrem.ir.tensor import Get, Input, Op, Param, State, graph_of
        from hpgrem.ir.tensor.build import GraphBuilder
        from hpgrem.passes.tensor.autodiff import differentiate
        from hpgrem.passes.tensor.optimizer import append_adamw

        tp = self.tp
        by_name = {v.name: v for v in forward}
        readers: dict[str, list] = {}
        for v in forward:
            for x in ((v.source,) if type(v) is Get else getattr(v, "inputs", ())):
                readers.setdefault(x, []).append(v)
        column: dict[str, int] = {}  # linear -> blocks of its output (3 for q|k|v)
        row: set[str] = set()
        for v in forward:
            if type(v) is Op and v.op in ("causal_attention", "gelu"):
                source = by_name.get(v.inputs[0])
                out = [g for g in readers.get(v.name, ()) if type(g) is Get and g.index == 0]
                after = [r for g in out for r in readers.get(g.name, ())]
                if type(source) is not Op or source.op != "linear" or len(after) != 1 or \
                        type(after[0]) is not Op or after[0].op != "linear" or after[0].inputs[0] != out[0].name:
                    raise PassError(f"{self.name}: {v.name} is not between two linears: no split")
                column[source.name] = 3 if v.op == "causal_attention" else 1
                row.add(after[0].name)
                if v.op == "causal_attention" and v.attr("n_head") % tp:
                    raise PassError(f"{self.name}: {v.attr('n_head')} heads ({v.name}) do not divide among tp = {tp}")
        split: dict[str, tuple[int, int]] = {}  # parameter -> (axis, blocks)
        for name in column:
            _, w, bias = by_name[name].inputs
            split[w] = split[bias] = (-1, column[name])
        for name in row:
            split[by_name[name].inputs[1]] = (0, 1)
        b = GraphBuilder()
        for v in forward:
            if type(v) is Param:
                b.param(v.name, self._shape(v, split.get(v.name)), v.dtype)
            elif type(v) is Input:
                b.input(v.name, v.shape, v.dtype)
            elif type(v) is State:
                b.state(v.name, v.shape, v.dtype)
            elif type(v) is Get:
                b.get(v.source, v.index, name=v.name)
            elif v.name in column:
                copy = b.op("parallel_copy", v.inputs[0], name=f"{v.name}.in", group=GROUP)
                b.op("linear", copy, *v.inputs[1:], name=v.name)
            elif v.name in row:
                y, w, bias = v.inputs
                partial = b.op("matmul", y, w, name=f"{v.name}.partial")
                whole = b.op("allreduce", partial, name=f"{v.name}.sum", group=GROUP, reduce="sum")
                b.op("add", whole, bias, name=v.name)
            else:
                attrs = dict(v.attrs)
                if v.op == "causal_attention":
                    attrs["n_head"] = attrs["n_head"] // tp
                b.op(v.op, *v.inputs, name=v.name, **attrs)
        step = differentiate(b.module(module.source, outputs=("loss",)))
        step = append_adamw(step, sharded={p: GROUP for p in split}, **settings)
        graph = graph_of(step)
        values, bucket = [], 0
        for v in graph.values:  # each all-reduce of the group its own collective
            if type(v) is Op and v.op == "allreduce":
                v = replace(v, attrs=tuple(sorted({**dict(v.attrs), "bucket": bucket}.items())))
                bucket += 1
            values.append(v)
        graph = replace(graph, values=tuple(values))
        key = next(iter(module.rules))
        lowered = ir.Module(module.source, {**module.rules, key: graph}, module.entry, module.language,
                            module.annotations, module.source_lines)
        return lowered, len(column) + len(row)

    def _shape(self, v, split: tuple[int, int] | None) -> tuple[int, ...]:
        if split is None:
            return v.shape
        axis, blocks = split
        n = v.shape[axis]
        if n % (blocks * self.tp):
            raise PassError(f"{self.name}: {v.name}'s {n} {'columns' if axis else 'rows'} do not divide "
                            f"among tp = {self.tp}")
        shape = list(v.shape)
        shape[axis] = n // self.tp
        return tuple(shape)
