"""The same training in PyTorch: a small GPT-2 written here with the conventions of docs/tensor.md
(tanh GELU, LayerNorm eps 1e-5, tied LM head, AdamW betas (0.9, 0.95) and eps 1e-8 with decay
on the 2-D parameters only, clip_grad_norm_) starts from the same weights and trains on the
same batches with the same learning rates as the tensor back end's step graph (run by the
sequential evaluator, pam/tensor/kernels.py). In float32, the step-0 gradients and ten per-step
losses agree to 1e-5. Without PyTorch (the optional extra `torch`) the test is skipped."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backend.tensor.gpt import ModelShape, build_training_step, init_params, init_states
from pam.tensor.kernels import evaluate

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'hpgrem[torch]')")
F = torch.nn.functional

SHAPE = ModelShape(n_layer=2, n_head=2, d_model=16, seq_len=8, vocab=32)
BATCH, STEPS, DECAY, CLIP = 2, 10, 0.1, 1.0
TOLERANCE = 1e-5


def torch_loss(p: dict, tokens, targets):
    """GPT-2's forward in PyTorch, linear weights in GPT-2's [in, out] layout."""
    b, t = tokens.shape
    c, h = SHAPE.d_model, SHAPE.n_head
    x = p["wte"][tokens] + p["wpe"][:t]
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    for i in range(SHAPE.n_layer):
        n = f"h.{i}."
        a = F.layer_norm(x, (c,), p[n + "ln_1.weight"], p[n + "ln_1.bias"], eps=1e-5)
        q, k, v = (a @ p[n + "attn.c_attn.weight"] + p[n + "attn.c_attn.bias"]).split(c, dim=2)
        q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // h)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + y @ p[n + "attn.c_proj.weight"] + p[n + "attn.c_proj.bias"]
        m = F.layer_norm(x, (c,), p[n + "ln_2.weight"], p[n + "ln_2.bias"], eps=1e-5)
        f = F.gelu(m @ p[n + "mlp.c_fc.weight"] + p[n + "mlp.c_fc.bias"], approximate="tanh")
        x = x + f @ p[n + "mlp.c_proj.weight"] + p[n + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (c,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)
    logits = x @ p["wte"].T
    return F.cross_entropy(logits.reshape(-1, SHAPE.vocab), targets.reshape(-1))


def batches(seed: int):
    """Counting from a random start (modulo the vocabulary): learnable."""
    rng = np.random.default_rng(seed)
    for _ in range(STEPS):
        seq = (rng.integers(0, SHAPE.vocab, (BATCH, 1)) + np.arange(SHAPE.seq_len + 1)) % SHAPE.vocab
        yield seq[:, :-1], seq[:, 1:]


def learning_rate(k: int) -> float:
    return 1e-2 * min(1.0, (k + 1) / 4)  # a warmup, so the graph's lr input is exercised


def test_same_gradients_and_losses_as_pytorch():
    torch.manual_seed(0)
    params = init_params(SHAPE, seed=11, dtype="float32")
    module = build_training_step(SHAPE, BATCH, "float32", weight_decay=DECAY, clip=CLIP)
    state = {**params, **init_states(params)}
    updates = dict(module.rules["step"].updates)

    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    groups = [{"params": [t for t in tp.values() if t.dim() >= 2], "weight_decay": DECAY},
              {"params": [t for t in tp.values() if t.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=learning_rate(0), betas=(0.9, 0.95), eps=1e-8)

    ours, theirs = [], []
    for k, (tokens, targets) in enumerate(batches(seed=5)):
        env = evaluate(module, {**state, "tokens": tokens, "targets": targets,
                                "lr": np.asarray(learning_rate(k), np.float32), "step": np.asarray(k + 1)})
        state = {name: env[value] for name, value in updates.items()}
        ours.append(float(env["loss"]))

        for g in opt.param_groups:
            g["lr"] = learning_rate(k)
        opt.zero_grad()
        loss = torch_loss(tp, torch.tensor(tokens), torch.tensor(targets))
        loss.backward()
        if k == 0:
            for name, t in tp.items():
                grad = env[f"grad.{name}"]
                assert grad.dtype == np.float32
                assert np.allclose(grad, t.grad.numpy(), rtol=0, atol=TOLERANCE), name
        norm = torch.nn.utils.clip_grad_norm_(list(tp.values()), CLIP)
        assert np.isclose(float(env["grad_norm"]), float(norm), rtol=TOLERANCE)
        opt.step()
        theirs.append(loss.item())
    assert np.allclose(ours, theirs, rtol=0, atol=TOLERANCE), (ours, theirs)
    assert ours[-1] < ours[0] - 0.1  # it learns
    for name, t in tp.items():
        assert np.allclose(state[name], t.detach().numpy(), rtol=0, atol=1e-4), name
