"""The GPT-2 model as a graph of the tensor dialect: its forward pass, its training step
(forward, reverse-mode gradients by the `tensor-autodiff` pass, global-norm clipping and AdamW
by hpgrem/passes/tensor/optimizer.py), and its initial parameters.

The conventions (docs/tensor.md, "The model's conventions"): pre-LayerNorm blocks with epsilon
1e-5, causal multi-head attention with a fused q|k|v projection, an MLP of width 4*d_model with
GELU in its tanh approximation, a final LayerNorm, the LM head tied to the token embedding
(logits = x @ wte^T, no bias), mean cross-entropy over all tokens. Parameter names and weight
layouts are GPT-2's (a linear weight is [in, out], as GPT-2's Conv1D).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hpgrem.ir.core import Module
from hpgrem.ir.tensor.build import GraphBuilder

FLOAT_DTYPES = ("float32", "float64")
LN_EPS = 1e-5
INIT_STD = 0.02


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The GPT-2 shape: blocks, heads, width, context length (the tokens of one sequence) and
    vocabulary size."""

    n_layer: int
    n_head: int
    d_model: int
    seq_len: int
    vocab: int

    def check(self) -> None:
        """ValueError naming the key when the shape cannot be built."""
        for key in ("n_head", "d_model", "seq_len", "vocab"):
            value = getattr(self, key)
            if type(value) is not int or value < 1:
                raise ValueError(f"model.{key} must be a positive integer, not {value!r}")
        if type(self.n_layer) is not int or self.n_layer < 0:
            raise ValueError(f"model.n_layer must be a non-negative integer, not {self.n_layer!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"model.d_model ({self.d_model}) is not divisible by model.n_head ({self.n_head})")

    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every parameter's GPT-2 name and shape, in GPT-2's order."""
        c = self.d_model
        out: dict[str, tuple[int, ...]] = {"wte": (self.vocab, c), "wpe": (self.seq_len, c)}
        for i in range(self.n_layer):
            h = f"h.{i}."
            out.update({
                h + "ln_1.weight": (c,), h + "ln_1.bias": (c,),
                h + "attn.c_attn.weight": (c, 3 * c), h + "attn.c_attn.bias": (3 * c,),
                h + "attn.c_proj.weight": (c, c), h + "attn.c_proj.bias": (c,),
                h + "ln_2.weight": (c,), h + "ln_2.bias": (c,),
                h + "mlp.c_fc.weight": (c, 4 * c), h + "mlp.c_fc.bias": (4 * c,),
                h + "mlp.c_proj.weight": (4 * c, c), h + "mlp.c_proj.bias": (c,),
            })
        out.update({"ln_f.weight": (c,), "ln_f.bias": (c,)})
        return out

    def n_params(self) -> int:
        """The number of parameters (the tied embedding counted once)."""
        return sum(math.prod(s) for s in self.param_shapes().values())


def _check(shape: ModelShape, batch: int, dtype: str) -> None:
    shape.check()
    if type(batch) is not int or batch < 1:
        raise ValueError(f"train.batch must be a positive integer, not {batch!r}")
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"train.dtype must be float32 or float64, not {dtype!r}")


def forward(b: GraphBuilder, shape: ModelShape, batch: int, dtype: str) -> str:
    """Append the parameters, the inputs "tokens" and "targets" (int64 [batch, seq_len]) and
    the forward pass to `b`; returns the name of the loss."""
    for name, s in shape.param_shapes().items():
        b.param(name, s, dtype)
    bt = (batch, shape.seq_len)
    tokens, targets = b.input("tokens", bt, "int64"), b.input("targets", bt, "int64")
    x = b.op("add", b.op("embedding", tokens, "wte", name="tok_emb"), "wpe", name="emb")
    for i in range(shape.n_layer):
        h = f"h.{i}."
        a = b.op("layernorm", x, h + "ln_1.weight", h + "ln_1.bias", name=h + "ln_1", eps=LN_EPS)
        qkv = b.op("linear", a, h + "attn.c_attn.weight", h + "attn.c_attn.bias", name=h + "attn.qkv")
        (y,) = b.op_parts("causal_attention", qkv, names=(h + "attn.y",), name=h + "attn.core",
                          n_head=shape.n_head)
        proj = b.op("linear", y, h + "attn.c_proj.weight", h + "attn.c_proj.bias", name=h + "attn.out")
        x = b.op("add", x, proj, name=h + "res_1")
        m = b.op("layernorm", x, h + "ln_2.weight", h + "ln_2.bias", name=h + "ln_2", eps=LN_EPS)
        f = b.op("linear", m, h + "mlp.c_fc.weight", h + "mlp.c_fc.bias", name=h + "mlp.fc")
        (g,) = b.op_parts("gelu", f, names=(h + "mlp.gelu",), name=h + "mlp.act")
        p = b.op("linear", g, h + "mlp.c_proj.weight", h + "mlp.c_proj.bias", name=h + "mlp.out")
        x = b.op("add", x, p, name=h + "res_2")
    xf = b.op("layernorm", x, "ln_f.weight", "ln_f.bias", name="ln_f", eps=LN_EPS)
    logits = b.op("matmul", xf, "wte", name="logits", transpose_b=True)
    (loss,) = b.op_parts("cross_entropy", logits, targets, names=("loss",), name="cross_entropy")
    return loss


def build_forward(shape: ModelShape, batch: int, dtype: str = "float32") -> Module:
    """The forward pass of GPT-2 on a batch of `batch` sequences: a tensor module whose graph
    "step" has the output "loss". ValueError (naming the key) for a shape that cannot be built."""
    _check(shape, batch, dtype)
    b = GraphBuilder()
    loss = forward(b, shape, batch, dtype)
    return b.module("gpt2", outputs=(loss,))


def build_training_step(shape: ModelShape, batch: int, dtype: str = "float32", weight_decay: float = 0.0,
                        clip: float = 1.0, betas: tuple[float, float] = (0.9, 0.95), eps: float = 1e-8) -> Module:
    """One training step: the forward pass, its gradients ("grad.<param>", by the
    tensor-autodiff pass), the global gradient norm "grad_norm", clipping to `clip` (0: none)
    and AdamW. Inputs: "tokens", "targets", "lr" (a scalar of `dtype`), "step" (int64 scalar,
    the 1-based number of this update, for Adam's bias correction). States "m.<param>" and
    "v.<param>" (zero before the first step). Outputs "loss" and "grad_norm"; updates: every
    parameter and state."""
    from hpgrem.passes.tensor.autodiff import differentiate
    from hpgrem.passes.tensor.optimizer import append_adamw

    module = differentiate(build_forward(shape, batch, dtype))
    return append_adamw(module, weight_decay=weight_decay, clip=clip, betas=betas, eps=eps)


def init_params(shape: ModelShape, seed: int, dtype: str = "float32") -> dict[str, np.ndarray]:
    """GPT-2's initialization, deterministic in `seed`: every weight normal(0, 0.02), the
    residual projections (attn.c_proj.weight, mlp.c_proj.weight) normal(0, 0.02 / sqrt(2 *
    n_layer)), biases 0, LayerNorm weights 1. The draws are made in float64 in the order of
    `param_shapes` from numpy's default generator, then cast."""
    shape.check()
    rng = np.random.default_rng(seed)
    resid_std = INIT_STD / math.sqrt(2 * max(shape.n_layer, 1))
    out: dict[str, np.ndarray] = {}
    for name, s in shape.param_shapes().items():
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            value = np.ones(s)
        elif name.endswith(".bias"):
            value = np.zeros(s)
        else:
            std = resid_std if name.endswith("c_proj.weight") else INIT_STD
            value = rng.normal(0.0, std, size=s)
        out[name] = value.astype(dtype)
    return out


def init_states(params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """AdamW's states before the first step: "m.<param>" and "v.<param>", zeros."""
    return {f"{k}.{name}": np.zeros_like(p) for name, p in params.items() for k in ("m", "v")}
