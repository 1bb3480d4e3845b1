"""The optimizer step as graph nodes: global-norm clipping and AdamW, appended to a graph that
holds "grad.<param>" for every parameter (tensor-autodiff's result).

What it appends: the inputs "lr" (a scalar of the parameters' dtype) and "step" (int64 scalar,
the 1-based number of the update), the states "m.<param>" and "v.<param>", the value
"grad_norm" (the global L2 norm of all gradients: each parameter's gradient once, so the tied
token embedding "wte" counts once, with both its uses summed), "clip_scale" (min(1, clip /
(grad_norm + 1e-6)), as torch.nn.utils.clip_grad_norm_; 1 when clip <= 0), and per parameter
one `adamw` op and its three results "new.<param>", "new.m.<param>", "new.v.<param>", which
the graph's updates name. Weight decay (decoupled, as torch.optim.AdamW) applies to the
parameters of two or more dimensions only: the embeddings and the linear weights, not biases
or LayerNorm weights. Outputs: the graph's own plus "grad_norm".
"""

from __future__ import annotations

from dataclasses import replace

from hpgrem.ir.core import Module
from hpgrem.ir.tensor.build import GraphBuilder
from hpgrem.passes.tensor.autodiff import grad_name


def decays(shape: tuple[int, ...]) -> bool:
    """Whether a parameter of this shape gets weight decay (2-D and more)."""
    return len(shape) >= 2


def append_adamw(module: Module, *, weight_decay: float = 0.0, clip: float = 1.0,
                 betas: tuple[float, float] = (0.9, 0.95), eps: float = 1e-8,
                 sharded: dict[str, str] | None = None) -> Module:
    """`module` with clipping and AdamW appended (see the module's docstring). `sharded` maps
    a parameter that each rank of a group holds a part of to that group's name: the norm then
    sums its squares over the group ("sum_squares", an allreduce "sum", "sqrt"), and counts
    each other parameter once."""
    key, graph = next(iter(module.rules.items()))
    params = graph.params()
    if not params:
        raise ValueError("the graph has no parameters to update")
    b = GraphBuilder.extending(graph)
    missing = [p.name for p in params if grad_name(p.name) not in b.types]
    if missing:
        raise ValueError(f"no gradient of {missing[0]!r}: run tensor-autodiff first")
    dtype = params[0].dtype
    lr, step = b.input("lr", (), dtype), b.input("step", (), "int64")
    norm = _norm(b, [p.name for p in params], sharded or {})
    scale = b.op("clip_scale", norm, name="clip_scale", clip=float(clip))
    updates = dict(graph.updates)
    for p in params:
        m, v = b.state(f"m.{p.name}", p.shape, p.dtype), b.state(f"v.{p.name}", p.shape, p.dtype)
        new_p, new_m, new_v = b.op_parts(
            "adamw", p.name, grad_name(p.name), m, v, scale, lr, step,
            names=(f"new.{p.name}", f"new.{m}", f"new.{v}"), name=f"adamw.{p.name}",
            beta1=float(betas[0]), beta2=float(betas[1]), eps=float(eps),
            weight_decay=float(weight_decay) if decays(p.shape) else 0.0)
        updates.update({p.name: new_p, m: new_m, v: new_v})
    outputs = tuple(graph.outputs) + ((norm,) if norm not in graph.outputs else ())
    new = b.graph(outputs, updates, key=graph.key)
    return replace(module, rules={**module.rules, key: replace(new, name=graph.name, span=graph.span)})


def _norm(b: GraphBuilder, params: list[str], sharded: dict[str, str]) -> str:
    """"grad_norm": the global L2 norm of the gradients, each parameter once."""
    if not sharded:
        return b.op("global_norm", *(grad_name(p) for p in params), name="grad_norm")
    total = b.op("sum_squares", *(grad_name(p) for p in params if p not in sharded), name="grad_norm.replicated")
    for group in sorted(set(sharded.values())):
        local = b.op("sum_squares", *(grad_name(p) for p in params if sharded.get(p) == group),
                     name=f"grad_norm.{group}.local")
        whole = b.op("allreduce", local, name=f"grad_norm.{group}", group=group, reduce="sum")
        total = b.op("add", total, whole, name=f"grad_norm.sum.{group}")
    return b.op("sqrt", total, name="grad_norm")
