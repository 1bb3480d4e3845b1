"""Accelerators and the nodes that hold them: memory, peak FLOP/s, links.

Datasheet figures are cited beside each preset. Latencies, the achievable fraction of peak and
the host's Adam rate are assumptions, marked as such; docs/planner.md lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from backend.planner.errors import PlanError

GIB = 2**30


@dataclass(frozen=True, slots=True)
class Hardware:
    """One GPU model in a node of identical GPUs."""

    name: str
    memory_bytes: int
    """Device memory (GiB as ``nvidia-smi`` reports it)."""
    peak_flops: dict[str, float]
    """Dense peak FLOP/s by data type (tensor cores where the type has them)."""
    training_dtype: str
    """The 16-bit type mixed-precision training runs its matrix products in."""
    hbm_bandwidth: float
    """Device memory bandwidth, bytes/s (bounds the optimizer step)."""
    intra_node_bandwidth: float
    """NVLink/NVSwitch bandwidth per GPU, one direction, bytes/s."""
    intra_node_latency: float
    """Per step of a ring collective inside a node, seconds (assumed)."""
    inter_node_bandwidth: float
    """Network bandwidth per GPU (its share of the node's NICs), one direction, bytes/s."""
    inter_node_latency: float
    """Per step of a ring collective across nodes, seconds (assumed)."""
    gpus_per_node: int
    pcie_bandwidth: float
    """Host-device bandwidth per GPU, one direction, bytes/s (offload traffic)."""
    achievable_fraction: float = 0.65
    """Fraction of peak that large transformer matrix products sustain (assumed; calibrated
    against Korthikanti et al. 2022, Table 5, see docs/planner.md)."""
    host_adam_params_per_s: float = 1e9
    """Parameters per second one node's CPUs update with Adam when the optimizer is offloaded
    (assumed), shared by its GPUs."""

    @property
    def peak(self) -> float:
        """Peak FLOP/s of the training data type."""
        return self.peak_flops[self.training_dtype]

    @property
    def achievable_flops(self) -> float:
        """FLOP/s per GPU the hardware model assumes for matrix products."""
        return self.peak * self.achievable_fraction

    def with_gpus_per_node(self, gpus_per_node: int) -> Hardware:
        """The same GPU in nodes of a different size."""
        if gpus_per_node <= 0:
            raise PlanError(f"--gpus-per-node must be positive, got {gpus_per_node}")
        return replace(self, gpus_per_node=gpus_per_node)


GPUS: dict[str, Hardware] = {
    # V100 SXM3 32GB in a DGX-2 (the ZeRO paper's machine): 125 TFLOP/s fp16 tensor core,
    # 15.7 fp32, 900 GB/s HBM2, NVSwitch 300 GB/s per GPU (150 each way), 16 GPUs and
    # 8x 100 Gb/s EDR InfiniBand per node (6.25 GB/s per GPU), PCIe Gen3 x16.
    "v100-32gb": Hardware(
        name="v100-32gb", memory_bytes=32 * GIB,
        peak_flops={"fp16": 125e12, "fp32": 15.7e12, "fp64": 7.8e12},
        training_dtype="fp16", hbm_bandwidth=900e9,
        intra_node_bandwidth=150e9, intra_node_latency=3e-6,
        inter_node_bandwidth=6.25e9, inter_node_latency=6e-6,
        gpus_per_node=16, pcie_bandwidth=16e9),
    # A100 SXM4 in a DGX A100: 312 TFLOP/s bf16/fp16, 156 tf32, 19.5 fp32; HBM2 1,555 GB/s (40GB)
    # or 2,039 GB/s (80GB); NVLink3 600 GB/s per GPU (300 each way); 8 GPUs and 8x 200 Gb/s
    # HDR InfiniBand per node (25 GB/s per GPU); PCIe Gen4 x16.
    "a100-40gb": Hardware(
        name="a100-40gb", memory_bytes=40 * GIB,
        peak_flops={"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
        training_dtype="bf16", hbm_bandwidth=1555e9,
        intra_node_bandwidth=300e9, intra_node_latency=2e-6,
        inter_node_bandwidth=25e9, inter_node_latency=5e-6,
        gpus_per_node=8, pcie_bandwidth=32e9),
    "a100-80gb": Hardware(
        name="a100-80gb", memory_bytes=80 * GIB,
        peak_flops={"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
        training_dtype="bf16", hbm_bandwidth=2039e9,
        intra_node_bandwidth=300e9, intra_node_latency=2e-6,
        inter_node_bandwidth=25e9, inter_node_latency=5e-6,
        gpus_per_node=8, pcie_bandwidth=32e9),
    # H100 SXM5 in a DGX H100: 989 TFLOP/s bf16/fp16 dense, 1,979 fp8, 495 tf32, 67 fp32;
    # HBM3 3.35 TB/s; NVLink4 900 GB/s per GPU (450 each way); 8 GPUs and 8x 400 Gb/s NDR
    # InfiniBand per node (50 GB/s per GPU); PCIe Gen5 x16.
    "h100-80gb": Hardware(
        name="h100-80gb", memory_bytes=80 * GIB,
        peak_flops={"fp8": 1979e12, "bf16": 989.4e12, "fp16": 989.4e12, "tf32": 494.7e12,
                    "fp32": 66.9e12},
        training_dtype="bf16", hbm_bandwidth=3.35e12,
        intra_node_bandwidth=450e9, intra_node_latency=2e-6,
        inter_node_bandwidth=50e9, inter_node_latency=5e-6,
        gpus_per_node=8, pcie_bandwidth=64e9),
}


def find_gpu(name: str) -> Hardware:
    """The preset called ``name`` (case-insensitive), or a PlanError."""
    key = name.lower()
    if key not in GPUS:
        raise PlanError(f"unknown GPU '{name}' (known: {', '.join(GPUS)})")
    return GPUS[key]
