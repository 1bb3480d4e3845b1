"""Gradients agree with finite differences in float64: each backward kernel against its forward
kernel (pam/tensor/kernels.py), then the gradients the tensor-autodiff pass builds in the IR,
for small graphs and for a whole tiny GPT-2 (backend/tensor/gpt.py), run by the sequential
evaluator. Directional derivatives: for a random direction U, (f(x + eU) - f(x - eU)) / 2e
against <gradient, U>."""

from __future__ import annotations

import numpy as np
import pytest

from backend.tensor.gpt import ModelShape, build_forward, build_training_step, init_params, init_states
from hpgrem.ir.tensor.build import GraphBuilder
from hpgrem.passes.tensor.autodiff import differentiate, grad_name
from hpgrem.verify import verify
from pam.tensor.kernels import KERNELS, evaluate

EPS = 1e-6
RTOL = 1e-6


def run(op: str, *inputs, **attrs):
    from hpgrem.ir.tensor.dialect import OPS
    full = {k: d for k, (_, d) in OPS[op].attrs.items()}
    full.update(attrs)
    return KERNELS[op].run(full, *inputs)


def numeric(f, x: np.ndarray, u: np.ndarray) -> float:
    """The derivative of the scalar f at x in direction u, by central differences."""
    return (f(x + EPS * u) - f(x - EPS * u)) / (2 * EPS)


def check_vjp(forward, grads, inputs: list[np.ndarray], which: list[int], rng) -> None:
    """`grads(r)` are the gradients of sum(r * forward(*inputs)) with respect to the inputs
    `which` (in that order); each must match finite differences of `forward`."""
    out = forward(*inputs)
    r = rng.standard_normal(np.shape(out))
    analytic = grads(r)
    for g, i in zip(analytic, which):
        u = rng.standard_normal(inputs[i].shape)

        def f(x, i=i):
            args = list(inputs)
            args[i] = x
            return float(np.sum(r * forward(*args)))
        assert g.shape == inputs[i].shape
        assert np.isclose(np.vdot(g, u), numeric(f, inputs[i], u), rtol=RTOL, atol=1e-9), (i, g.shape)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_matmul_and_linear(rng):
    a, b, w = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((5, 4))
    check_vjp(lambda a, b: run("matmul", a, b), lambda r: (run("matmul", r, b, transpose_b=True),
                                                           run("matmul", a, r, transpose_a=True)), [a, b], [0, 1], rng)
    check_vjp(lambda a, w: run("matmul", a, w, transpose_b=True),
              lambda r: (run("matmul", r, w), run("matmul", r, a, transpose_a=True)), [a, w], [0, 1], rng)
    bias = rng.standard_normal(5)
    check_vjp(lambda x, w, c: run("linear", x, w, c),
              lambda r: (run("matmul", r, b, transpose_b=True), run("matmul", a, r, transpose_a=True),
                         run("sum_to", r, shape=(5,))), [a, b, bias], [0, 1, 2], rng)


def test_sum_to_is_the_adjoint_of_broadcasting(rng):
    x = rng.standard_normal((3, 1, 4))
    check_vjp(lambda x: x + np.zeros((2, 3, 5, 4)), lambda r: (run("sum_to", r, shape=(3, 1, 4)),), [x], [0], rng)


def test_layernorm(rng):
    x, w, b = rng.standard_normal((2, 3, 6)), rng.standard_normal(6), rng.standard_normal(6)
    check_vjp(lambda x, w, b: run("layernorm", x, w, b), lambda r: run("layernorm_grad", r, x, w),
              [x, w, b], [0, 1, 2], rng)
    y = run("layernorm", x, np.ones(6), np.zeros(6))
    assert np.allclose(y.mean(-1), 0) and np.allclose(y.var(-1), 1, atol=1e-4)  # eps 1e-5 shows


def test_gelu_and_softmax(rng):
    x = rng.standard_normal((3, 7)) * 2
    y, t = run("gelu", x)
    check_vjp(lambda x: run("gelu", x)[0], lambda r: (run("gelu_grad", r, x, t),), [x], [0], rng)
    check_vjp(lambda x: run("softmax", x), lambda r: (run("softmax_grad", r, run("softmax", x)),), [x], [0], rng)
    # the tanh approximation, as GPT-2 computes it
    assert np.allclose(y, 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))))


def test_causal_attention(rng):
    qkv = rng.standard_normal((2, 5, 12))
    y, probs = run("causal_attention", qkv, n_head=2)
    assert np.allclose(np.triu(probs[0, 1], k=1), 0) and np.allclose(probs.sum(-1), 1)
    check_vjp(lambda q: run("causal_attention", q, n_head=2)[0],
              lambda r: (run("causal_attention_grad", r, qkv, probs, n_head=2),), [qkv], [0], rng)
    # head 0 written out (C = 4, two heads of 2): row i attends to positions 0..i only
    q, k, v = qkv[0, :, 0:2], qkv[0, :, 4:6], qkv[0, :, 8:10]
    s = q @ k.T / np.sqrt(2) + np.triu(np.full((5, 5), -np.inf), 1)
    p = np.exp(s - s.max(-1, keepdims=True))
    assert np.allclose(y[0, :, 0:2], (p / p.sum(-1, keepdims=True)) @ v)


def test_embedding_and_cross_entropy(rng):
    tokens = rng.integers(0, 4, (2, 6))  # repeated tokens: the scatter-add adds
    table = rng.standard_normal((4, 3))
    check_vjp(lambda t: run("embedding", tokens, t), lambda r: (run("embedding_grad", r, tokens, vocab=4),),
              [table], [0], rng)
    logits = rng.standard_normal((2, 6, 4))
    loss, probs = run("cross_entropy", logits, tokens)
    rows = logits.reshape(-1, 4)
    expect = np.mean(np.log(np.exp(rows).sum(-1)) - rows[np.arange(12), tokens.ravel()])
    assert np.isclose(loss, expect)
    check_vjp(lambda lg: run("cross_entropy", lg, tokens)[0],
              lambda r: (run("cross_entropy_grad", np.asarray(r), probs, tokens),), [logits], [0], rng)


def test_autodiff_of_a_small_graph(rng):
    """softmax, reshape, matmul, a broadcast add and a value used twice, through the pass."""
    b = GraphBuilder()
    x, w, c = b.param("x", (2, 3, 4), "float64"), b.param("w", (4, 5), "float64"), b.param("c", (5,), "float64")
    t = b.input("t", (6,), "int64")
    s = b.op("softmax", x)
    h = b.op("add", b.op("matmul", s, w), c)
    h = b.op("add", h, h)
    logits = b.op("reshape", h, shape=(6, 5))
    (loss,) = b.op_parts("cross_entropy", logits, t, names=("loss",))
    module = differentiate(b.module("small", outputs=(loss,)))
    assert verify(module) == []
    values = {"x": rng.standard_normal((2, 3, 4)), "w": rng.standard_normal((4, 5)),
              "c": rng.standard_normal(5), "t": rng.integers(0, 5, 6)}
    _check_model_grads(module, values, ["x", "w", "c"], rng)


def _check_model_grads(module, values: dict, params: list[str], rng) -> None:
    env = evaluate(module, values)
    for p in params:
        u = rng.standard_normal(values[p].shape)

        def f(x, p=p):
            return float(evaluate(module, {**values, p: x})["loss"])
        assert np.isclose(np.vdot(env[grad_name(p)], u), numeric(f, values[p], u), rtol=RTOL, atol=1e-8), p


def test_whole_model_in_float64(rng):
    shape = ModelShape(n_layer=2, n_head=2, d_model=8, seq_len=5, vocab=11)
    module = differentiate(build_forward(shape, batch=2, dtype="float64"))
    params = init_params(shape, seed=3, dtype="float64")
    params = {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in params.items()}  # biases, LN off their init
    tokens = rng.integers(0, shape.vocab, (2, shape.seq_len))
    values = {**params, "tokens": tokens, "targets": np.roll(tokens, -1, axis=1)}
    _check_model_grads(module, values, list(params), rng)


def test_training_step_updates_every_parameter_and_state():
    shape = ModelShape(n_layer=1, n_head=2, d_model=8, seq_len=4, vocab=7)
    module = build_training_step(shape, batch=2, dtype="float64", weight_decay=0.1, clip=1.0)
    graph = module.rules["step"]
    assert verify(module) == []
    assert set(graph.outputs) == {"loss", "grad_norm"}
    params = init_params(shape, seed=0, dtype="float64")
    assert {t for t, _ in graph.updates} == set(params) | set(init_states(params))
    tokens = np.arange(8).reshape(2, 4) % 7
    env = evaluate(module, {**params, **init_states(params), "tokens": tokens, "targets": tokens,
                            "lr": np.float64(1e-2), "step": np.int64(1)})
    norm = np.sqrt(sum(np.vdot(env[grad_name(p)], env[grad_name(p)]) for p in params))
    assert np.isclose(env["grad_norm"], norm)
    for p in params:  # Adam's first step moves each element by about lr (clipped or not)
        moved = env[f"new.{p}"] - params[p]
        assert np.all(np.abs(moved) <= 1e-2 * (1 + 1e-6) + 1e-2 * 0.1 * np.abs(params[p]))
