"""What one training step cost on each PE, as `--stats` reports it.

Per PE: `compute_s` (kernels), `comm_s` (collectives: starting them, taking and adding parts,
handling messages, testing MPI requests), `idle_s` (no task ready: waiting for peers' parts or
for the others to finish) and `loop_s` (the PE loop's own work: taking tasks, counted waits,
binding results), which add up to the step's `time_s`. In simulated mode (one process, any
number of PEs) these are virtual seconds of the cost model (a kernel is its FLOPs at the PE's
rate; a message its bytes at the link's byte time); under mpiexec, wall seconds of each rank.
`loop_share` is measured on the wall clock in both modes: the share of the step's wall time
that is neither kernels nor collectives nor idle waiting, i.e. the PE loop's own time (in
simulated mode the event loop of the simulation is part of it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from pam.tensor.memory import CATEGORIES


@dataclass(slots=True)
class PEStepStats:
    """One PE's step; the four times add up to the step's time."""

    pe: int
    compute_s: float
    comm_s: float
    idle_s: float
    loop_s: float
    kernels: int = 0
    collectives: int = 0
    reduced_bytes: int = 0  # bytes of the buckets this PE all-reduced
    bytes_sent: int = 0  # bytes of the messages it sent (simulated mode: collectives' parts and the machine's own)
    loop_share: float = 0.0  # wall clock: its PE loop's share of the step
    memory: dict = field(default_factory=dict)  # pam.tensor.memory.MemoryReport.to_json()


@dataclass(slots=True)
class StepStats:
    """A step on every PE: `time_s` in the mode's time (virtual for "sim", wall for "mpi")."""

    mode: str
    time_s: float
    wall_s: float
    loop_share: float
    per_pe: list[PEStepStats] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"mode": self.mode, "time_s": self.time_s, "wall_s": self.wall_s,
                "loop_share": self.loop_share, "per_pe": [asdict(p) for p in self.per_pe]}

    def table(self) -> str:
        """A line per PE and the step's totals."""
        head = ("pe", "compute_s", "comm_s", "idle_s", "loop_s", "kernels", "collectives", "loop_share")
        lines = ["  ".join(f"{h:>12}" for h in head)]
        for p in self.per_pe:
            lines.append("  ".join(f"{x:>12.6f}" if isinstance(x, float) else f"{x:>12}"
                                   for x in (p.pe, p.compute_s, p.comm_s, p.idle_s, p.loop_s,
                                             p.kernels, p.collectives, p.loop_share)))
        if any(p.memory for p in self.per_pe):
            lines.append(memory_table(self.per_pe))
        time = "virtual" if self.mode == "sim" else "wall"
        lines.append(f"step: {self.time_s:.6f} s {time} on {len(self.per_pe)} PE(s) ({self.mode}), "
                     f"wall {self.wall_s:.6f} s, PE loop {100 * self.loop_share:.1f}% of the wall time")
        return "\n".join(lines)


def memory_table(per_pe: list[PEStepStats]) -> str:
    """Each PE's peak bytes by category (each its own peak), the peak of their sum, and the
    bytes held on the host (offload)."""
    head = ("pe", *CATEGORIES, "peak", "host")
    lines = ["  ".join(f"{h:>13}" for h in head)]
    for p in per_pe:
        m = p.memory
        row = (p.pe, *(m["peak"][c] for c in CATEGORIES), m["peak_total"], sum(m["host"].values()))
        lines.append("  ".join(f"{x:>13}" for x in row))
    return "peak memory (bytes):\n" + "\n".join(lines)


__all__ = ["PEStepStats", "StepStats", "memory_table"]
