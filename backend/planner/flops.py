"""Floating-point operations of one training iteration (matrix products only).

Per layer and sequence the forward pass costs 24·s·h² (the four weight matrices) plus 4·s²·h
(QKᵀ and attention over V), the logits 2·s·h·V; backward costs twice the forward. Narayanan et al.
2021 (§5.1, Appendix) and Korthikanti et al. 2022 (§6) sum these into the closed forms below.
"""

from __future__ import annotations

from backend.planner.models import ModelConfig


def model_flops(model: ModelConfig, global_batch: int) -> float:
    """FLOPs without recomputation: 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)).

    Korthikanti et al. 2022, §6 ("model FLOPs", the numerator of MFU).
    """
    B, s, l, h, V = global_batch, model.seq, model.layers, model.hidden, model.vocab
    return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))


def hardware_flops(model: ModelConfig, global_batch: int, recompute: str) -> float:
    """FLOPs the GPUs execute, recomputation included (the numerator of HFU).

    - ``none``: the model FLOPs.
    - ``selective``: 72·B·s·l·h²·(1 + s/(3h) + V/(12·l·h)), Korthikanti et al. 2022, §6; the
      paper's convention charges s/(6h) for recomputing the attention core (their Table 5 HFU
      follows from it), although one extra forward pass of it is 4·B·s²·h per layer, s/(18h).
    - ``full``: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)), Narayanan et al. 2021, Eq. 3 (one more
      forward pass of every layer; the logits are not recomputed).
    """
    B, s, l, h, V = global_batch, model.seq, model.layers, model.hidden, model.vocab
    if recompute == "full":
        return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    if recompute == "selective":
        return 72 * B * s * l * h * h * (1 + s / (3 * h) + V / (12 * l * h))
    return model_flops(model, global_batch)


def flops_from_params(params: float, tokens: float, recompute: str) -> tuple[float, float]:
    """(model, hardware) FLOPs for ``tokens`` tokens when only the parameter count is known.

    6·P per token (forward 2P, backward 4P), 8·P with full recomputation: the approximation
    behind Narayanan et al. 2021, Eq. 4. Attention's s²-terms are unknown without a shape.
    """
    model = 6 * params * tokens
    return model, (8 * params * tokens if recompute == "full" else model)
