"""What `hpgrem plan` predicts for a training run's memory, per PE, beside what the runtime
measured (pam/tensor/memory.py): the planner's own functions called with the run's model shape,
layout and dtype (backend/planner/memory.py with `runtime_precision`).

Where the two differ (docs/tensor.md, "Memory, recomputation and offload"): the measured peak of
each category is its own maximum over the step, so it includes transients the planner does not
model (a gradient's partial sums, the activations' gradients live at the peak, the cross-entropy's
probabilities beside its logits for a moment); the planner's buffers are DDP's and DeepSpeed's
bucket sizes, capped by the gradients held, the runtime's the largest bucket it reduced.
"""

from __future__ import annotations

import numpy as np

from backend.planner.layout import Layout as PlanLayout
from backend.planner.memory import (
    buffer_bytes,
    model_states,
    params_on_gpu,
    runtime_precision,
    stage_activations,
)
from backend.planner.models import ModelConfig
from backend.tensor.config import TrainConfig
from pam.tensor.memory import CATEGORIES

TOLERANCE = 0.10
"""How far a measured peak may be from the prediction and still be called a match."""


def plan_layout(config: TrainConfig) -> PlanLayout:
    """The planner's layout of a run: its micro-batch is one rank's share of the batch."""
    p, t = config.parallel, config.train
    return PlanLayout(tp=p.tp, pp=p.pp, dp=p.dp, virtual_stages=p.virtual_stages,
                      micro_batch=t.batch // (p.dp * t.micro_batches), global_batch=t.batch, zero=p.zero,
                      recompute=p.recompute, offload=p.offload, schedule=p.schedule)


def plan_model(config: TrainConfig) -> ModelConfig:
    m = config.model
    return ModelConfig("train", m.n_layer, m.d_model, m.n_head, m.vocab, m.seq_len)


def stage_name(stage: int, stages: int) -> str:
    """The planner's name of pipeline stage `stage` of `stages`."""
    if stages == 1:
        return "only"
    return "first" if stage == 0 else "last" if stage == stages - 1 else "middle"


def predicted(config: TrainConfig, rank: int) -> dict[str, float]:
    """The planner's bytes for each category (and "host") on PE `rank` of the run."""
    p = config.parallel
    model, layout = plan_model(config), plan_layout(config)
    precision = runtime_precision(np.dtype(config.train.dtype).itemsize)
    stage = stage_name(rank // (p.tp * p.dp), p.pp)
    psi = params_on_gpu(model, p.tp, p.pp, stage)
    states = model_states(psi, p.zero, p.dp, p.offload, precision)
    acts = stage_activations(model, layout, "first" if stage == "middle" else stage, precision)
    return {"parameters": states.parameters, "gradients": states.gradients, "optimizer": states.optimizer,
            "activations": acts.total, "communication": buffer_bytes(model, layout, psi, precision),
            "host": states.host}


def device_budget(config: TrainConfig) -> int | None:
    """The device bytes per PE an offloading run keeps its fetches under (the runtime's
    back-pressure): the planner's device total for the PE that needs the most, plus the
    tolerance; None when nothing is offloaded."""
    if config.parallel.offload == "none":
        return None
    totals = [sum(v for k, v in predicted(config, rank).items() if k != "host") for rank in range(config.ranks)]
    return round(max(totals) * (1 + TOLERANCE))


def comparison(config: TrainConfig, per_pe) -> list[dict]:
    """Per PE (pam.tensor.stats.PEStepStats with its memory report), per category: the measured
    peak, the prediction and their ratio (None where the prediction is 0)."""
    rows = []
    for pe in per_pe:
        want = predicted(config, pe.pe)
        got = dict(pe.memory["peak"], host=sum(pe.memory["host"].values()))
        rows.append({c: {"measured": got[c], "predicted": round(want[c]),
                         "ratio": got[c] / want[c] if want[c] else None} for c in (*CATEGORIES, "host")})
    return rows


def comparison_table(config: TrainConfig, per_pe) -> str:
    """`--stats`'s lines: each PE's measured peak by category beside `hpgrem plan`'s."""
    head = ("pe", "category", "measured", "hpgrem plan", "ratio")
    lines = ["peak memory per PE beside hpgrem plan's prediction (bytes):",
             "  ".join(f"{h:>13}" for h in head)]
    for pe, row in zip(per_pe, comparison(config, per_pe)):
        for category, figures in row.items():
            if not figures["measured"] and not figures["predicted"]:
                continue
            ratio = "-" if figures["ratio"] is None else f"{figures['ratio']:.3f}"
            lines.append("  ".join(f"{x:>13}" for x in (pe.pe, category, figures["measured"],
                                                        figures["predicted"], ratio)))
    return "\n".join(lines)


__all__ = ["TOLERANCE", "comparison", "comparison_table", "device_budget", "plan_layout", "plan_model", "predicted"]
