"""Time per training step: compute, collectives, the pipeline bubble and the optimizer.

Collectives follow the ring algorithms' α-β cost: a ring all-reduce over n ranks moves
2(n-1)/n of the message through each GPU's link in 2(n-1) steps (reduce-scatter then all-gather,
half each); a point-to-point send moves it once. Bandwidths are per GPU and per direction.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.planner.hardware import Hardware
from backend.planner.layout import Layout
from backend.planner.memory import GRAD_BYTES, PARAM_BYTES
from backend.planner.models import ModelConfig

ADAM_STEP_BYTES = 28
"""Device-memory traffic of one fused Adam update per parameter: read and write fp32 master
weight, momentum and variance (24), read the 16-bit gradient and write the 16-bit weight (4)."""


def ring_all_reduce_s(message: float, n: int, bandwidth: float, latency: float) -> float:
    """Ring all-reduce of ``message`` bytes over ``n`` ranks: 2(n-1)/n · M/β + 2(n-1)·α."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * message / bandwidth + 2 * (n - 1) * latency


def ring_reduce_scatter_s(message: float, n: int, bandwidth: float, latency: float) -> float:
    """Ring reduce-scatter (or all-gather) of a ``message``-byte buffer: (n-1)/n · M/β + (n-1)·α."""
    if n <= 1:
        return 0.0
    return (n - 1) / n * message / bandwidth + (n - 1) * latency


ring_all_gather_s = ring_reduce_scatter_s


def point_to_point_s(message: float, bandwidth: float, latency: float) -> float:
    """One send of ``message`` bytes: α + M/β."""
    return latency + message / bandwidth


def bubble_fraction(pp: int, microbatches: int, virtual_stages: int = 1) -> float:
    """Pipeline bubble time over ideal compute time, Narayanan et al. 2021, §2.2.

    (p - 1)/m for GPipe and 1F1B, (p - 1)/(v·m) for the interleaved schedule.
    """
    return (pp - 1) / (virtual_stages * microbatches)


def narayanan_training_time_s(tokens: float, params: float, gpus: int, flops_per_gpu: float,
                              flops_per_param_token: float = 8) -> float:
    """End-to-end training time ≈ 8·T·P/(n·X), Narayanan et al. 2021, Eq. 4.

    The 8 is 2 (forward) + 4 (backward) + 2 (recomputed forward); without full recomputation the
    same derivation gives 6.
    """
    return flops_per_param_token * tokens * params / (gpus * flops_per_gpu)


def utilization(flops: float, step_s: float, gpus: int, peak: float) -> float:
    """FLOPs of one step over what ``gpus`` GPUs could do at ``peak`` in ``step_s`` (MFU, HFU)."""
    return flops / (step_s * gpus * peak)


@dataclass(frozen=True, slots=True)
class StepTime:
    """Seconds of one training step, by where they go (summing to ``total``)."""

    compute: float
    """m micro-batches of matrix products on one GPU."""
    tensor_parallel: float
    """Tensor/sequence-parallel collectives on the critical path (m micro-batches)."""
    pipeline_p2p: float
    """Activation and gradient sends between stages (m micro-batches)."""
    bubble: float
    """Idle pipeline time: (p - 1)/v micro-batch times."""
    data_parallel: float
    """Gradient and parameter collectives not hidden behind the backward pass."""
    optimizer: float
    """The Adam update of this GPU's shard (on the host when offloaded)."""

    @property
    def total(self) -> float:
        return (self.compute + self.tensor_parallel + self.pipeline_p2p + self.bubble
                + self.data_parallel + self.optimizer)


def _link(hardware: Hardware, group_span: int) -> tuple[float, float]:
    """Bandwidth and latency of a group spanning ``group_span`` consecutive ranks.

    Ranks are numbered tensor-parallel fastest, then data parallel, then pipeline (Megatron's
    order), so a group stays inside a node while its span fits one.
    """
    if group_span <= hardware.gpus_per_node:
        return hardware.intra_node_bandwidth, hardware.intra_node_latency
    return hardware.inter_node_bandwidth, hardware.inter_node_latency


def step_time(model: ModelConfig | None, params_gpu: float, layout: Layout, hardware: Hardware,
              flops_per_iteration: float) -> StepTime:
    """Predict one step of ``layout`` from the hardware description.

    Every GPU computes flops_per_iteration / (N·m) per micro-batch at the achievable FLOP/s.
    Tensor-parallel collectives (four all-reduces per layer and micro-batch, six with full
    recomputation; sequence parallelism swaps each for a reduce-scatter and an all-gather of the
    same volume, Korthikanti et al. 2022 §4.2.2) and pipeline sends are not overlapped. The
    pipeline runs (m + (p-1)/v) micro-batch times. Data parallel: the gradient all-reduce
    (ZeRO-0) or reduce-scatter (ZeRO-1/2) overlaps the last micro-batch's backward, ZeRO-1/2's
    parameter all-gather follows the optimizer step, and ZeRO-3 gathers parameters twice and
    reduce-scatters gradients on every micro-batch, overlapped with its compute (Rajbhandari et
    al. 2020, §7: 2Ψ per step for stages 1-2, 3Ψ per micro-batch for stage 3).
    """
    t, p, d, v = layout.tp, layout.pp, layout.dp, layout.virtual_stages
    m, b = layout.micro_batches, layout.micro_batch
    gpus = layout.gpus
    compute_mb = flops_per_iteration / (gpus * m) / hardware.achievable_flops
    backward_share = 3 / 4 if layout.recompute == "full" else 2 / 3

    tp_mb = 0.0
    p2p_mb = 0.0
    if model is not None:
        activation = 2 * model.seq * b * model.hidden
        if t > 1:
            bw, lat = _link(hardware, t)
            collectives = 6 if layout.recompute == "full" else 4
            tp_mb = (model.layers / p) * collectives * ring_all_reduce_s(activation, t, bw, lat)
        if p > 1:
            bw, lat = _link(hardware, gpus)
            # forward activation and backward gradient, split t ways (Narayanan et al. 2021, §4.1),
            # v times as many with interleaving (§2.2.2)
            p2p_mb = 2 * v * point_to_point_s(activation / t, bw, lat)

    dp_bw, dp_lat = _link(hardware, t * d)
    grads = GRAD_BYTES * params_gpu
    zero3_mb = 0.0
    if layout.zero == 3 and d > 1:
        zero3_mb = (2 * ring_all_gather_s(PARAM_BYTES * params_gpu, d, dp_bw, dp_lat)
                    + ring_reduce_scatter_s(grads, d, dp_bw, dp_lat))
        if layout.offload == "params":
            zero3_mb += 2 * PARAM_BYTES * params_gpu / d / hardware.pcie_bandwidth
    zero3_exposed = max(0.0, zero3_mb - compute_mb)
    micro = compute_mb + zero3_exposed + tp_mb + p2p_mb

    overlap = backward_share * compute_mb
    if layout.zero == 0:
        data_parallel = max(0.0, ring_all_reduce_s(grads, d, dp_bw, dp_lat) - overlap)
    elif layout.zero in (1, 2):
        data_parallel = (max(0.0, ring_reduce_scatter_s(grads, d, dp_bw, dp_lat) - overlap)
                         + ring_all_gather_s(PARAM_BYTES * params_gpu, d, dp_bw, dp_lat))
    else:
        data_parallel = m * zero3_exposed

    shard = params_gpu / (d if layout.zero >= 1 else 1)
    if layout.offload == "none":
        optimizer = ADAM_STEP_BYTES * shard / hardware.hbm_bandwidth
    else:
        host_rate = hardware.host_adam_params_per_s / hardware.gpus_per_node
        optimizer = shard / host_rate + (GRAD_BYTES + PARAM_BYTES) * shard / hardware.pcie_bandwidth

    bubble = (p - 1) / v * micro
    return StepTime(
        compute=m * compute_mb,
        tensor_parallel=m * tp_mb,
        pipeline_p2p=m * p2p_mb,
        bubble=bubble,
        data_parallel=data_parallel,
        optimizer=optimizer,
    )


def step_time_from_achieved(flops_per_iteration: float, gpus: int, flops_per_gpu: float) -> StepTime:
    """One step at a measured end-to-end rate (``--achieved-flops``), as Narayanan et al. 2021's
    X: it already contains the bubble and the communication."""
    return StepTime(flops_per_iteration / (gpus * flops_per_gpu), 0.0, 0.0, 0.0, 0.0, 0.0)
