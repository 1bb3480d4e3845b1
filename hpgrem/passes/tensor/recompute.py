"""tensor-recompute: activation recomputation, a lowering of a training step.

The backward pass reads values the forward made (activations). With `mode` "full" each
transformer layer (the forward ops named "h.<i>.*", as backend/tensor/gpt.py names them) keeps
only what other forward ops read of it (its output, the next layer's input); everything else
the backward reads of it is made again, by a copy of the layer's forward ops placed right before
the first backward op that needs it, from the layer's input and parameters. With "selective"
(Korthikanti et al. 2022) the same is done for each attention core alone (`causal_attention`):
its softmax probabilities, a*s*s per sequence, are rebuilt from the kept q|k|v before the core's
backward, and nothing else is. "none" leaves the graph as it is.

The copies run the same kernels on the same inputs, so every value, and so the losses and the
parameters, are the same bits as without recomputation. The runtime drops a value after its last
reader (pam/tensor/memory.py), so what is recomputed is not held from the forward to the
backward: the activation peak goes down by it and the step does the unit's forward work twice.

The backward region is the gradients and what depends on them; the forward region is the
rest, wherever it stands (a pipeline stage interleaves micro-batches' forwards and backwards;
their layers are "mb<k>.h.<i>.*", each recomputed apart). A recomputed copy is named "<name>.recomputed";
a copied collective gets a bucket of its own. Records on the step graph: `mode`, `recomputed`
(the ops copied).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import ClassVar

from hpgrem import ir
from hpgrem.passes import Option, PassError, annotated

MODES = ("none", "selective", "full")
SUFFIX = ".recomputed"
GRAD = "grad"
_LAYER = re.compile(r"^(?:[^.]+\.)*?h\.\d+\.")
"""A transformer layer's value: "h.<i>." after a prefix of the lowerings ("mb0." a micro-batch)."""


@dataclass(frozen=True)
class Recompute:
    """Rebuild activations before the backward reads them instead of keeping them."""

    name: ClassVar[str] = "tensor-recompute"
    dialects: ClassVar[tuple[str, ...]] = ("tensor",)
    records: ClassVar[tuple[str, ...]] = ("mode", "recomputed")
    options: ClassVar[dict[str, Option]] = {
        "mode": Option("none, selective (the attention cores) or full (every transformer layer)"),
    }
    mode: str = "none"

    def apply(self, module: ir.Module) -> ir.Module:
        from hpgrem.ir.tensor import STEP, graph_of

        if self.mode not in MODES:
            raise PassError(f"{self.name}: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.mode == "none":
            return module
        done = module.annotation(STEP, f"{self.name}.mode")
        if done is not None:
            raise PassError(f"{self.name}: the graph is already lowered for recomputation ({done})")
        graph, copied = self._lower(graph_of(module))
        lowered = ir.Module(module.source, {**module.rules, STEP: graph}, module.entry, module.language,
                            module.annotations, module.source_lines)
        return annotated(lowered, self, {STEP: {"mode": self.mode, "recomputed": copied}})

    def _lower(self, graph):
        from hpgrem.ir.tensor.build import GraphBuilder

        values = list(graph.values)
        backward = _backward(values)
        if not backward:
            raise PassError(f"{self.name}: the graph has no backward pass (run tensor-autodiff first)")
        forward = [v for v in values if v.name not in backward]
        units = self._units(forward)
        unit_of = {name: k for k, members in enumerate(units) for name in members}
        # what forward ops outside a unit read of it stays stored: a checkpoint
        stored = {x for v in forward if v.name not in unit_of
                  for x in _reads(v) if x in unit_of}
        stored |= {x for v in forward if v.name in unit_of
                   for x in _reads(v) if x in unit_of and unit_of[x] != unit_of[v.name]}
        stored |= set(graph.outputs) | {source for _, source in graph.updates}
        wanted = {x for v in values if v.name in backward for x in _reads(v) if x in unit_of and x not in stored}
        for u in reversed(forward):  # and what they are made from, inside their unit
            if u.name in wanted:
                wanted.update(x for x in _reads(u) if unit_of.get(x) == unit_of[u.name] and x not in stored)
        renamed = [{name: name + SUFFIX for name in members if name in wanted} for members in units]
        emitted: set[int] = set()
        buckets = _next_buckets(values)
        out = []
        copied = 0
        for v in values:
            if v.name not in backward:
                out.append(v)
                continue
            needed = sorted({unit_of[x] for x in _reads(v) if x in unit_of and x not in stored})
            for k in needed:
                if k in emitted:
                    continue
                emitted.add(k)
                names = {**{n: n for n in units[k]}, **renamed[k]}
                for u in forward:
                    if u.name in renamed[k]:  # a stored value is read where it is
                        out.append(_copy(u, names, buckets))
                        copied += 1
            rename = {x: renamed[unit_of[x]][x] for x in _reads(v) if x in unit_of and x not in stored}
            if rename:
                v = _with_reads(v, rename)
            out.append(v)
        GraphBuilder(out)  # every name defined once, before its readers
        return replace(graph, values=tuple(out)), copied

    def _units(self, forward) -> list[set[str]]:
        """The groups recomputed together: a transformer layer's forward ops (full), or one
        attention core and its components (selective)."""
        from hpgrem.ir.tensor import Get, Op

        units: dict[object, set[str]] = {}
        for v in forward:
            if self.mode == "full":
                m = _LAYER.match(v.name)
                if m is not None and type(v) in (Op, Get):
                    units.setdefault(m.group(0), set()).add(v.name)
            elif type(v) is Op and v.op == "causal_attention":
                units[v.name] = {v.name}
            elif type(v) is Get and v.source in units:
                units[v.source].add(v.name)
        return list(units.values())


def _reads(v) -> tuple[str, ...]:
    from hpgrem.ir.tensor import Get, Op

    if type(v) is Get:
        return (v.source,)
    if type(v) is Op:
        return tuple(v.inputs)
    return ()


def _backward(values) -> set[str]:
    """The backward region: the gradients (a name with the word "grad": "grad.x", a
    micro-batch's "mb0.grad.x") and every value that depends on one (the optimizer too). The
    rest is the forward region, wherever it stands (a pipeline interleaves micro-batches)."""
    out: set[str] = set()
    for v in values:
        if GRAD in v.name.split(".") or any(x in out for x in _reads(v)):
            out.add(v.name)
    return out


def _next_buckets(values) -> dict[str, int]:
    """Per collective group, the first bucket number no collective of the graph uses."""
    from hpgrem.ir.tensor import Op

    top: dict[str, int] = {}
    for v in values:
        if type(v) is Op and v.attr("bucket") is not None:
            group = str(v.attr("group"))
            top[group] = max(top.get(group, 0), int(v.attr("bucket")) + 1)
    return top


def _copy(v, names: dict[str, str], buckets: dict[str, int]):
    """A copy of forward value `v` under its recomputed name, reading the recomputed values."""
    from hpgrem.ir.tensor import Get

    if type(v) is Get:
        return replace(v, name=names[v.name], source=names.get(v.source, v.source))
    copy = replace(v, name=names[v.name], inputs=tuple(names.get(x, x) for x in v.inputs))
    if v.attr("bucket") is not None:
        group = str(v.attr("group"))
        copy = _with_attr(copy, "bucket", buckets[group])
        buckets[group] += 1
    return copy


def _with_attr(v, key: str, value):
    attrs = tuple((k, value if k == key else x) for k, x in v.attrs)
    return replace(v, attrs=attrs)


def _with_reads(v, rename: dict[str, str]):
    from hpgrem.ir.tensor import Get

    if type(v) is Get:
        return replace(v, source=rename.get(v.source, v.source))
    return replace(v, inputs=tuple(rename.get(x, x) for x in v.inputs))
