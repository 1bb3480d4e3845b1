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

from dataclasses import replace

import numpy as np

from backend.layout import Layout
from backend.planner.memory import (
    Precision,
    buffer_bytes,
    model_states,
    params_on_gpu,
    runtime_precision,
    stage_activations,
)
from backend.planner.models import ModelConfig
from backend.tensor.config import TrainConfig
from hpgrem.passes.tensor.data_parallel import DataParallel
from pam.tensor.memory import CATEGORIES

TOLERANCE = 0.10
"""How far a measured peak may be from the prediction and still be called a match."""


def plan_layout(config: TrainConfig) -> Layout:
    """The planner's layout of a run: its micro-batch is one rank's share of the batch."""
    p, t = config.parallel, config.train
    return replace(Layout.of_config(config), micro_batch=t.batch // (p.dp * t.micro_batches))


def plan_model(config: TrainConfig) -> ModelConfig:
    m = config.model
    return ModelConfig("train", m.n_layer, m.d_model, m.n_head, m.vocab, m.seq_len)


def stage_name(stage: int, stages: int) -> str:
    """The planner's name of pipeline stage `stage` of `stages`."""
    if stages == 1:
        return "only"
    return "first" if stage == 0 else "last" if stage == stages - 1 else "middle"


VOCAB_PARALLEL = False
"""The runtime keeps the tied embedding and LM head whole on every tensor-parallel rank
(tensor-parallel splits attention and MLP only): the planner is told so."""


def largest_parameter(model: ModelConfig, tp: int, stage: str) -> float:
    """The elements of the largest parameter PE of `stage` holds: an MLP matrix (4h²/t), or the
    replicated embedding (V·h) on a stage that holds it."""
    h = model.hidden
    return max(4 * h * h / tp, model.vocab * h if stage in ("first", "only", "last") else 0)


def runtime_buffers(config: TrainConfig, layout: Layout, model: ModelConfig, psi: float, stage: str,
                    precision: Precision) -> float:
    """The communication buffers of hpgrem's tensor runtime, where they differ from the
    planner's Megatron and DeepSpeed (docs/tensor.md, "Memory, recomputation and offload"): a
    collective's buffer exists while it is in flight, so a data-parallel bucket of
    `tensor-data-parallel`'s bucket_bytes is held once, not DeepSpeed's reduce and all-gather
    buckets together; ZeRO-2 and -3 reduce-scatter each gradient as backward makes it, so the
    largest parameter's gradient sits in its bucket and in the transport's buffer, beside the
    tied embedding's first contribution waiting in its own, and one more collective in flight
    (a parameter's gather under ZeRO-3: the runtime gathers one at a time, not the planner's
    in-use and prefetched layers; an input gradient's tp all-reduce); a pipeline receives into the
    stage's activations (already counted), with no buffers of its own; without ZeRO-2/3 tensor
    and data parallelism's collectives are not in flight together (the larger counts)."""
    p, e = config.parallel, precision.value
    tensor_parallel = buffer_bytes(model, replace(layout, pp=1, dp=1), psi, precision)  # a gathered activation
    if p.dp == 1:
        return tensor_parallel
    if p.zero >= 2 and accumulates(config):
        return max(tensor_parallel, pipeline_zero_buffers(model, p.tp, p.zero, stage, precision))
    if p.zero < 2:
        return max(tensor_parallel, min(DataParallel.bucket_bytes, e * psi))
    largest = e * largest_parameter(model, p.tp, stage)
    reduce = 2 * largest + (e * model.vocab * model.hidden if stage == "only" else 0)
    # beside the largest gradient's reduce-scatter, one more collective is in flight: under
    # tp the all-reduce of the layer's input gradient (started as soon as it is made, as the
    # weight gradient's reduce-scatter is), under ZeRO-3 the gather of a parameter (one
    # all-gather at a time, a module's parameters gathered before its backward); the larger
    other = max(tensor_parallel if p.tp > 1 else 0, largest if p.zero == 3 else 0)
    return max(tensor_parallel, reduce + other)


def accumulates(config: TrainConfig) -> bool:
    """Whether the run sums micro-batch gradients before their reduction (a pipeline's action
    runner: one compute action, collective or message at a time)."""
    return config.parallel.pp > 1 or config.train.micro_batches > 1


def pipeline_zero_buffers(model: ModelConfig, tp: int, zero: int, stage: str, precision: Precision) -> float:
    """ZeRO-2/3 beside a pipeline (the action runner waits for each collective it starts, so
    one is in flight at a time): a stage reduce-scatters each accumulated gradient once, after
    its last micro-batch, the transport's buffer holding the largest (the gradient itself is
    the accumulation buffer, a gradient); under ZeRO-3 each micro-batch gathers, just before
    an op, the parameters that op reads, held until it has run: a linear layer's weight and
    bias (4h²/t + 4h/t, the MLP's first), or the tied embedding on a stage that reads it; on a
    stage that is the whole model (micro-batches without pp) the embedding's gathered table is
    held from the embedding to the LM head, beside each op's."""
    e, h = precision.value, model.hidden
    reduce = e * largest_parameter(model, tp, stage)
    if zero < 3:
        return reduce
    layer = 4 * h * h / tp + 4 * h / tp
    embedding = model.vocab * h
    gathered = {"only": embedding + layer, "first": max(layer, embedding), "last": max(layer, embedding)}
    return max(reduce, e * gathered.get(stage, layer))


def backward_working_set(model: ModelConfig, layout: Layout, stage: str, precision: Precision) -> float:
    """The activations' gradients live at a stage's peak beside what the planner counts as
    stored (Korthikanti's tensors; the planner's working set of recomputation apart): during a
    layer's backward, the residual stream's gradient (sbh) and the MLP's hidden layer's
    (4sbh/t); on a stage with the output layer, whose micro-batch in backward has by then
    freed its final LayerNorm's input and output and its probabilities (2sbh + sbV), the
    larger of that and the cross-entropy's gradient beside the probabilities (sbV)."""
    e, s, b, h, t = precision.value, model.seq, layout.micro_batch, model.hidden, layout.tp
    layer = e * s * b * h * (1 + 4 / t)
    if stage not in ("last", "only"):
        return layer
    vocab = model.vocab / (t if VOCAB_PARALLEL else 1)
    logits = precision.logits * s * b * vocab
    return max(layer - 2 * e * s * b * h - logits, logits)


def predicted(config: TrainConfig, rank: int) -> dict[str, float]:
    """The planner's bytes for each category (and "host") on PE `rank` of the run, told how
    this runtime differs from the systems it models (`VOCAB_PARALLEL`, `runtime_buffers`,
    `backward_working_set`; a micro-batch's gradient of the largest parameter, made before it
    is added into the sum; under a pipeline, the tied embedding's gradient and AdamW state on
    the first stage alone)."""
    p = config.parallel
    model, layout = plan_model(config), plan_layout(config)
    precision = runtime_precision(np.dtype(config.train.dtype).itemsize)
    stage = stage_name(rank // (p.tp * p.dp), p.pp)
    psi = params_on_gpu(model, p.tp, p.pp, stage, VOCAB_PARALLEL)
    states = model_states(psi, p.zero, p.dp, p.offload, precision)
    acts = stage_activations(model, layout, "first" if stage == "middle" else stage, precision, VOCAB_PARALLEL)
    activations = acts.total + backward_working_set(model, layout, stage, precision)
    parameters, gradients, optimizer = states.parameters, states.gradients, states.optimizer
    embedding = model.vocab * model.hidden  # the tied wte, replicated under tp
    accumulated = accumulates(config)
    if accumulated and p.zero >= 2:
        # the micro-batches' gradients are summed whole and reduce-scattered once, after the
        # last: the whole accumulated gradient is held until then, as under ZeRO-1
        gradients = model_states(psi, 1, p.dp, p.offload, precision).gradients
    if accumulated and p.zero in (1, 2):
        # the optimizer action updates one parameter after another: the rank's chunk (a copy
        # taken from the whole parameter, which then dies) lives while its update is gathered
        # whole, so the largest one's chunk is beside the stage's own whole parameters (the
        # last stage's copy of wte is replaced by the first's update only after the optimizer)
        own = psi - (embedding if p.pp > 1 and stage == "last" else 0)
        largest = largest_parameter(model, p.tp, "middle" if stage == "last" else stage)
        parameters = max(parameters, precision.value * (own + largest / p.dp))
    transient = 0.0  # a gradient made beside the sum it is added into, for a moment
    if config.train.micro_batches > 1 and gradients:
        transient = precision.value * largest_parameter(model, p.tp, stage) / \
            (p.dp if p.zero >= 2 and not accumulated else 1)
    if p.pp > 1 and stage == "first":
        # the last stage's contribution to wte's gradient, received beside the stage's own;
        # their sum is a new array (a received one is never written into)
        gradients += precision.value * embedding
        transient = max(transient, precision.value * embedding)
    if p.pp > 1 and stage == "last":  # the first stage updates wte and sends it: no state for it here
        optimizer -= model_states(embedding, p.zero, p.dp, p.offload, precision).optimizer
    return {"parameters": parameters, "gradients": gradients + transient, "optimizer": optimizer,
            "activations": activations,
            "communication": runtime_buffers(config, layout, model, psi, stage, precision), "host": states.host}


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
