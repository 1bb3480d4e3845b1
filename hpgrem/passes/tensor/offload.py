"""tensor-offload: model states held in host memory (or a file-backed store) between uses, a
lowering of a training step.

With `mode` "optimizer" the optimizer states (AdamW's m and v) live on the host: each reader
of a state reads a device copy made by a `fetch` op, and each updated state is written back by
an `evict` op, which the graph's updates then name. With "params" the parameters live there too
(ZeRO-Infinity's parameter offload): every op that reads a parameter, forward, backward or the
optimizer, reads its own fetched copy, which the runtime drops after that op
(pam/tensor/memory.py), so a parameter occupies the device only around its uses. "none" leaves
the graph as it is.

A fetch stands `prefetch` values ahead of its reader (0: right before it), so the copy is made
while earlier ops still run; when it may actually run is the runtime's back-pressure (a device
budget: pam/tensor/runtime.py), so fetching ahead cannot fill the device. `store` is "memory"
(host arrays) or "file" (numpy memmaps in a temporary directory, pam/tensor/offload.py). The
values are copied, never changed: the results are the same bits as without offloading.
Records on the step graph: `mode`, `fetches`, `evictions`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from hpgrem import ir
from hpgrem.passes import Option, PassError, annotated

MODES = ("none", "optimizer", "params")
STORES = ("memory", "file")


@dataclass(frozen=True)
class Offload:
    """Keep model states on the host; fetch them ahead of each use, evict their updates."""

    name: ClassVar[str] = "tensor-offload"
    dialects: ClassVar[tuple[str, ...]] = ("tensor",)
    records: ClassVar[tuple[str, ...]] = ("mode", "fetches", "evictions")
    options: ClassVar[dict[str, Option]] = {
        "mode": Option("none, optimizer (AdamW's states) or params (parameters and states)"),
        "store": Option("memory (host arrays) or file (memmaps in a temporary directory)"),
        "prefetch": Option("how many values ahead of its reader a fetch stands", minimum=0),
    }
    mode: str = "none"
    store: str = "memory"
    prefetch: int = 4

    def apply(self, module: ir.Module) -> ir.Module:
        from hpgrem.ir.tensor import STEP, graph_of

        if self.mode not in MODES:
            raise PassError(f"{self.name}: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.store not in STORES:
            raise PassError(f"{self.name}: store must be one of {', '.join(STORES)}, got {self.store!r}")
        if self.mode == "none":
            return module
        done = module.annotation(STEP, f"{self.name}.mode")
        if done is not None:
            raise PassError(f"{self.name}: the graph is already offloaded ({done})")
        graph, fetches, evictions = self._lower(graph_of(module))
        lowered = ir.Module(module.source, {**module.rules, STEP: graph}, module.entry, module.language,
                            module.annotations, module.source_lines)
        return annotated(lowered, self, {STEP: {"mode": self.mode, "fetches": fetches, "evictions": evictions}})

    def _lower(self, graph):
        from hpgrem.ir.tensor import Get, Op, Param, State
        from hpgrem.ir.tensor.build import GraphBuilder

        kinds = (State,) if self.mode == "optimizer" else (Param, State)
        updates = dict(graph.updates)
        made = {v.name for v in graph.values if type(v) in (Op, Get)}
        # a value whose update arrives from another rank (a pipeline's tied wte) stays put
        held = {v.name: v for v in graph.values if type(v) in kinds and updates.get(v.name, v.name) in made | {v.name}}
        if not held:
            raise PassError(f"{self.name}: the graph has no {'states' if self.mode == 'optimizer' else 'parameters'}"
                            " to offload")
        evicted = {updates[name]: name for name in held if name in updates}
        values = list(graph.values)
        first_op = next((i for i, v in enumerate(values) if type(v) not in (Param, State) and
                         not _is_input(v)), len(values))
        # each reader's fetches, placed `prefetch` values before it (never before the first op)
        before: dict[int, list] = {}
        renamed: dict[int, dict[str, str]] = {}
        count = 0
        for i, v in enumerate(values):
            if type(v) is not Op:
                continue
            mine = {}
            for x in dict.fromkeys(v.inputs):
                if x in held:
                    count += 1
                    p = held[x]
                    name = f"{x}.fetch.{count}"
                    mine[x] = name
                    at = max(first_op, i - self.prefetch)
                    before.setdefault(at, []).append(Op(name, "fetch", (x,), (), p.shape, p.dtype))
            if mine:
                renamed[i] = mine
        out = []
        for i, v in enumerate(values):
            out.extend(before.get(i, ()))
            if i in renamed:
                v = replace(v, inputs=tuple(renamed[i].get(x, x) for x in v.inputs))
            out.append(v)
            if v.name in evicted:
                out.append(Op(f"{v.name}.host", "evict", (v.name,), (("store", self.store),), v.shape, v.dtype))
                updates[evicted[v.name]] = f"{v.name}.host"
        GraphBuilder(out)  # every name defined once, before its readers
        return replace(graph, values=tuple(out), updates=tuple(updates.items())), count, len(evicted)


def _is_input(v) -> bool:
    from hpgrem.ir.tensor import Input

    return type(v) is Input
