"""Memory per GPU by category: model states (ZeRO), activations (Korthikanti et al.), buffers.

Mixed precision throughout: 2-byte parameters, gradients and activations, K = 12 bytes of fp32
Adam state per parameter (fp32 master weights, momentum and variance), as in ZeRO §3.1.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.planner.errors import PlanError
from backend.planner.layout import Layout
from backend.planner.models import ModelConfig

PARAM_BYTES = 2
GRAD_BYTES = 2
ADAM_K = 12
"""Bytes of optimizer state per parameter for mixed-precision Adam (ZeRO's K)."""



@dataclass(frozen=True, slots=True)
class Precision:
    """What one stored element costs. The default is the mixed precision of the papers: 2-byte
    parameters, gradients and activations, K = 12 bytes of Adam state per parameter, fp32
    logits for the cross-entropy, 1-byte dropout masks. hpgrem's own runtime (`runtime_precision`)
    trains in one dtype throughout, without dropout, and its GELU keeps its tanh for the backward."""

    value: int = PARAM_BYTES
    """Bytes of one parameter, gradient or activation element."""
    optimizer: int = ADAM_K
    """Bytes of optimizer state per parameter."""
    logits: int = 4
    """Bytes of one logit kept for the cross-entropy's backward."""
    dropout: bool = True
    """Dropout masks (1 byte per element) are kept for the backward."""
    gelu_tanh: bool = False
    """The GELU's backward reads its tanh (4sbh/t elements) beside its input."""


MIXED = Precision()


def runtime_precision(itemsize: int) -> Precision:
    """hpgrem's tensor runtime in a dtype of `itemsize` bytes: AdamW's m and v (no master copy),
    no dropout, the GELU's tanh kept (pam/tensor/kernels.py)."""
    return Precision(itemsize, 2 * itemsize, itemsize, False, True)


DDP_BUCKET_BYTES = 25 * 2**20
"""PyTorch DistributedDataParallel's default gradient bucket (bucket_cap_mb = 25)."""
DEEPSPEED_BUCKET_ELEMENTS = 500_000_000
"""DeepSpeed's default reduce_bucket_size and allgather_bucket_size (deepspeed/runtime/zero/config.py)."""


def zero_model_state_bytes(params: float, stage: int, dp: int, k: int = ADAM_K) -> float:
    """Model-state bytes per device under ZeRO-DP, Rajbhandari et al. 2020, Figure 1 and Table 1.

    Baseline (2 + 2 + K)Ψ; P_os 4Ψ + KΨ/N_d; P_os+g 2Ψ + (2 + K)Ψ/N_d; P_os+g+p (2 + 2 + K)Ψ/N_d.
    """
    psi, n = params, dp
    if stage == 0:
        return (2 + 2 + k) * psi
    if stage == 1:
        return 4 * psi + k * psi / n
    if stage == 2:
        return 2 * psi + (2 + k) * psi / n
    if stage == 3:
        return (2 + 2 + k) * psi / n
    raise PlanError(f"ZeRO stage must be 0 to 3, got {stage}")


@dataclass(frozen=True, slots=True)
class ModelStates:
    """Bytes of parameters, gradients and optimizer state on one GPU, and what was offloaded."""

    parameters: float
    gradients: float
    optimizer: float
    host: float
    """Bytes moved to host memory by ``--offload``."""

    @property
    def total(self) -> float:
        return self.parameters + self.gradients + self.optimizer


def model_states(params_on_gpu: float, zero: int, dp: int, offload: str = "none",
                 precision: Precision = MIXED) -> ModelStates:
    """Split ``params_on_gpu`` parameters' states by ZeRO stage and offload choice.

    ZeRO-1 shards the optimizer state over the ``dp`` group, ZeRO-2 the gradients too, ZeRO-3 the
    parameters too (Rajbhandari et al. 2020, §5). Offloading the optimizer (ZeRO-Offload) moves
    the optimizer state, and the gradient partitions from ZeRO-2 on, to host memory; offloading
    parameters (ZeRO-Infinity, ZeRO-3 only) moves all three.
    """
    psi = params_on_gpu
    parameters = precision.value * psi / (dp if zero >= 3 else 1)
    gradients = precision.value * psi / (dp if zero >= 2 else 1)
    optimizer = precision.optimizer * psi / (dp if zero >= 1 else 1)
    host = 0.0
    if offload in ("optimizer", "params"):
        host, optimizer = host + optimizer, 0.0
        if zero >= 2:
            host, gradients = host + gradients, 0.0
    if offload == "params":
        host, parameters = host + parameters, 0.0
    return ModelStates(parameters, gradients, optimizer, host)


def max_params(gpu_memory: float, zero: int, dp: int, model_parallel: int = 1,
               offload: str = "none") -> float:
    """The largest Ψ whose model states fit ``gpu_memory`` bytes per GPU, activations ignored.

    Rajbhandari et al. 2020, Table 2: with N_m-way model parallelism each GPU holds Ψ/N_m of the
    states, so Ψ_max = memory · N_m / (bytes per parameter at this ZeRO stage and DP degree).
    """
    per_param = model_states(1.0, zero, dp, offload).total
    if per_param == 0:
        raise PlanError("with --offload params no model state stays on the GPU; the size is unbounded")
    return gpu_memory * model_parallel / per_param


def params_on_gpu(model: ModelConfig, tp: int, pp: int, stage: str, vocab_parallel: bool = True) -> float:
    """Parameters one GPU of pipeline stage ``stage`` (``first``, ``last`` or ``only``) holds.

    Megatron splits the QKV and MLP weights and their biases t ways and replicates the two
    LayerNorms and the two output biases: 12h²/t + 7h/t + 6h per layer. The vocabulary-parallel
    token embedding (V·h/t; V·h where ``vocab_parallel`` is false: a runtime that replicates it)
    and the replicated position embedding (s·h) sit on the first stage; the last stage holds the
    final LayerNorm and, when p > 1, its own copy of the tied embedding.
    """
    h = model.hidden
    vocab = model.vocab * h / (tp if vocab_parallel else 1)
    n = (model.layers / pp) * (12 * h * h / tp + 7 * h / tp + 6 * h)
    if stage in ("first", "only"):
        n += vocab + model.seq * h
    if stage in ("last", "only"):
        n += 2 * h
    if stage == "last":
        n += vocab
    return n


def stages(layout: Layout) -> tuple[str, ...]:
    """The pipeline stages worth examining: the first holds the most activations, the last the
    output layer; middle stages hold less than the first."""
    return ("only",) if layout.pp == 1 else ("first", "last")


def activation_bytes_per_layer(model: ModelConfig, micro_batch: int, tp: int = 1,
                               sequence_parallel: bool = False, recompute: str = "none",
                               precision: Precision = MIXED) -> float:
    """Activation bytes one transformer layer keeps for backward, for one micro-batch.

    Korthikanti et al. 2022, Table 2 (2-byte activations, 1-byte dropout masks):
    no parallelism sbh(34 + 5as/h); tensor parallel sbh(10 + 24/t + 5as/(ht)); tensor + sequence
    parallel sbh(34/t + 5as/(ht)); selective recomputation drops the 5as/(ht) term; full
    recomputation keeps only the layer input, 2sbh, which sequence parallelism also splits t ways
    (Megatron checkpoints the sequence-parallel input; the paper's row assumes no split).

    Another `precision` re-counts the same stored tensors: e bytes per element, the replicated
    4sbh elements (two LayerNorm inputs, the QKV and MLP inputs) and 2sbh mask bytes, the split
    12sbh elements (Q, K, V, the projection's input, the MLP's 4h GELU input and output; with
    the GELU's tanh 4sbh more), and per attention score e bytes of softmax, 1 of mask and e of
    dropout output.
    """
    s, b, h, a, t = model.seq, micro_batch, model.hidden, model.heads, tp
    sbh = s * b * h
    e, masks = precision.value, 1 if precision.dropout else 0
    if recompute == "full":
        return e * sbh / t if sequence_parallel else e * sbh
    replicated = 4 * e + 2 * masks
    split = 12 * e + (4 * e if precision.gelu_tanh else 0)
    linear = (replicated + split) / t if sequence_parallel else replicated + split / t
    if recompute == "selective":
        return sbh * linear
    return sbh * (linear + (e + masks * (1 + e)) * a * s / (h * t))


def chunks_in_flight(layout: Layout, rank: int) -> int:
    """Model chunks (each l/(p·v) layers) whose activations pipeline rank ``rank`` holds at peak.

    GPipe runs all m forwards first. 1F1B (PipeDream-Flush) keeps at most p - rank micro-batches in
    flight (Narayanan et al. 2021, §2.2.1). Megatron's interleaved schedule warms up with
    2(p - rank - 1) + (v - 1)p chunks and then holds one more, so rank 0 holds the activations of
    l·(1 + (p - 1)/(p·v)) layers (Korthikanti et al. 2022, §4.2.3).
    """
    p, v, m = layout.pp, layout.virtual_stages, layout.micro_batches
    if layout.schedule == "gpipe":
        return m * v
    if v == 1:
        return min(p - rank, m)
    return min(2 * (p - rank - 1) + (v - 1) * p + 1, m * v)


def microbatches_in_flight(layout: Layout, rank: int) -> int:
    """Micro-batches whose embedding or output-layer activations rank ``rank`` holds at peak."""
    if layout.schedule == "gpipe":
        return layout.micro_batches
    return min(layout.pp - rank, layout.micro_batches)


@dataclass(frozen=True, slots=True)
class StageActivations:
    """Activation bytes one GPU of a pipeline stage holds at its peak."""

    layers: float
    """Transformer layers: per-layer bytes times the layers of every chunk in flight."""
    embedding: float
    """Dropout masks of the embedding output, s·b·h bytes (/t with sequence parallelism) each."""
    output: float
    """Final LayerNorm and output-projection inputs, 4sbh (/t with sequence parallelism), and the
    fp32 logits for the cross-entropy, 4sbV/t, per micro-batch in flight."""
    working_set: float
    """One layer's activations rebuilt during its backward when recomputing."""

    @property
    def total(self) -> float:
        return self.layers + self.embedding + self.output + self.working_set


def stage_activations(model: ModelConfig, layout: Layout, stage: str,
                      precision: Precision = MIXED, vocab_parallel: bool = True) -> StageActivations:
    """Peak activation bytes on one GPU of ``stage``, Korthikanti et al. 2022, §4.2.3 and §4.3.

    For the first stage under 1F1B with m ≥ p this is their Eq. 5, (sbhL/t)(34 + 5as/h) with
    sequence parallelism, plus the embedding's sbhp/t. The logits are split t ways unless the
    output layer is replicated (``vocab_parallel`` false).
    """
    t, p, v = layout.tp, layout.pp, layout.virtual_stages
    s, b, h = model.seq, layout.micro_batch, model.hidden
    split = t if layout.sequence_parallel else 1
    rank = 0 if stage in ("first", "only") else p - 1
    per_layer = activation_bytes_per_layer(model, b, t, layout.sequence_parallel, layout.recompute, precision)
    layers = per_layer * chunks_in_flight(layout, rank) * model.layers / (p * v)
    in_flight = microbatches_in_flight(layout, rank)
    embedding = 0.0
    if stage in ("first", "only") and precision.dropout:
        embedding = s * b * h / split * in_flight
    output = 0.0
    if stage in ("last", "only"):
        vocab = model.vocab / (t if vocab_parallel else 1)
        output = (2 * precision.value * s * b * h / split + precision.logits * s * b * vocab) * in_flight
    working_set = 0.0
    if layout.recompute != "none":
        full = activation_bytes_per_layer(model, b, t, layout.sequence_parallel, "none", precision)
        working_set = full - per_layer
    return StageActivations(layers, embedding, output, working_set)


def buffer_bytes(model: ModelConfig | None, layout: Layout, params_gpu: float,
                 precision: Precision = MIXED) -> float:
    """Communication buffers on one GPU (assumed sizes; docs/planner.md).

    Tensor parallel: one gathered activation, 2sbh. Pipeline: send and receive buffers for the
    forward activation and the backward gradient, 4 · 2sbh/t (Megatron's scatter/gather splits
    them t ways). Data parallel: a 25 MiB DDP bucket (ZeRO-0); DeepSpeed's reduce and all-gather
    buckets of 5e8 elements each (ZeRO-1/2), both capped by the gradients held; for ZeRO-3 the
    gathered largest layer twice (in use and prefetched) plus the reduce bucket. ZeRO's constant
    size buffers (Rajbhandari et al. 2020, §6.2) are why these do not grow with the model.
    """
    total = 0.0
    t, p, d = layout.tp, layout.pp, layout.dp
    if model is not None:
        activation = precision.value * model.seq * layout.micro_batch * model.hidden
        if t > 1:
            total += activation
        if p > 1:
            total += 4 * activation / t
    grads = precision.value * params_gpu
    bucket = min(precision.value * DEEPSPEED_BUCKET_ELEMENTS, grads)
    if d > 1 and layout.zero == 0:
        total += min(DDP_BUCKET_BYTES, grads)
    elif d > 1 and layout.zero in (1, 2):
        total += 2 * bucket
    elif d > 1 and layout.zero == 3:
        largest = model.largest_layer_params / t if model is not None else 0.0
        total += 2 * precision.value * largest + bucket
    return total


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Bytes per GPU by category on the pipeline stage that needs the most."""

    stage: str
    parameters: float
    gradients: float
    optimizer: float
    activations: float | None
    """None when only a parameter count is known (no shape, no activations)."""
    buffers: float
    host: float
    """Bytes offloaded to host memory (not counted in ``total``)."""

    @property
    def total(self) -> float:
        return (self.parameters + self.gradients + self.optimizer + (self.activations or 0.0)
                + self.buffers)


def memory_of_stage(model: ModelConfig, layout: Layout, stage: str,
                    precision: Precision = MIXED) -> MemoryBreakdown:
    """The memory of one GPU of pipeline stage ``stage`` (``first``, ``last`` or ``only``)."""
    psi = params_on_gpu(model, layout.tp, layout.pp, stage)
    states = model_states(psi, layout.zero, layout.dp, layout.offload, precision)
    acts = stage_activations(model, layout, stage, precision).total
    return MemoryBreakdown(stage, states.parameters, states.gradients, states.optimizer,
                           acts, buffer_bytes(model, layout, psi, precision), states.host)


def memory_per_gpu(model: ModelConfig, layout: Layout, precision: Precision = MIXED) -> MemoryBreakdown:
    """The largest per-GPU memory over the pipeline's stages."""
    best: MemoryBreakdown | None = None
    for stage in stages(layout):
        candidate = memory_of_stage(model, layout, stage, precision)
        if best is None or candidate.total > best.total:
            best = candidate
    assert best is not None
    return best


def memory_from_params(params: float, layout: Layout) -> MemoryBreakdown:
    """Model states and data-parallel buffers when only the parameter count is known."""
    psi = params / layout.model_parallel
    states = model_states(psi, layout.zero, layout.dp, layout.offload)
    return MemoryBreakdown("all", states.parameters, states.gradients, states.optimizer, None,
                           buffer_bytes(None, layout, psi), states.host)
