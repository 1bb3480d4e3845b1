"""Redundancy in memory, and a failed PE recovered from it (simulated PEs).

With `[checkpoint] peer_copy = "step"` (after every step) or `"checkpoint"` (at each
checkpoint), each PE r keeps its shard of the state (the tensors it writes to a checkpoint,
backend/tensor/checkpoint.py `owners`) and sends a copy to its peer, PE (r + 1) mod n. When PE K
fails, every PE rolls back to the copies: K's shard comes from its peer's memory, the others'
from their own, put together by an all-gather; the steps since the copies are run again. No
disk is read.

`hpgrem train --fail-pe K@STEP` kills PE K in step STEP of a simulated run: the step runs with
K's tensors lost (NaN), its work is thrown away, and the run recovers as above (or, without
peer copies, from the newest disk checkpoint, as a restart would). The virtual time lost is
reported beside what a restart from disk would lose: the failed step, reading the newest
checkpoint at `DISK_BYTES_PER_S`, and the steps run again since it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from backend.tensor.checkpoint import owners
from hpgrem.errors import UsageError
from pam.costs import CostModel

DISK_BYTES_PER_S = 1.5e6
"""A disk of the transputer's era (a SCSI-1 drive, about 1.5 MB/s), read by one PE for all:
an assumption of ours, like the links' rates in pam/costs.py."""

_FAILURE = re.compile(r"(\d+)@(\d+)")


@dataclass(frozen=True, slots=True)
class Failure:
    """PE `pe` dies during step `step` (1-based)."""

    pe: int
    step: int


def parse_failure(text: str, pes: int) -> Failure:
    """`--fail-pe K@STEP`; UsageError when it is not one, or K is not a PE of the run."""
    m = _FAILURE.fullmatch(text.strip())
    if m is None:
        raise UsageError(f"--fail-pe {text!r}: expected K@STEP, e.g. 1@5 (PE 1 fails in step 5)")
    pe, step = int(m.group(1)), int(m.group(2))
    if pe >= pes:
        raise UsageError(f"--fail-pe {text}: the run has PEs 0 to {pes - 1}")
    if step < 1:
        raise UsageError(f"--fail-pe {text}: steps count from 1")
    return Failure(pe, step)


@dataclass(slots=True)
class Recovery:
    """What a failure cost, in virtual seconds: `lost_s` as recovered, `restart_s` had the run
    restarted from its newest disk checkpoint (step `disk_step`, 0 for none)."""

    failure: Failure
    source: str  # "peer copies" or "disk checkpoint"
    from_step: int
    lost_s: float
    restart_s: float
    disk_step: int
    copy_bytes: int  # one PE's shard, sent to its peer at each copy

    def message(self) -> str:
        f = self.failure
        return (f"hpgrem: PE {f.pe} failed in step {f.step}: recovered from the {self.source} of step "
                f"{self.from_step}, {self.lost_s:.6g} s of virtual time lost (a restart from the disk "
                f"checkpoint of step {self.disk_step} would lose {self.restart_s:.6g} s)")


@dataclass(slots=True)
class PeerCopies:
    """Each PE's shard of the state, in its own memory and in its peer's."""

    pes: int
    costs: CostModel
    step: int = -1  # the step of the copies; -1: none yet
    own: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    held: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)  # PE r's shard, on PE r+1

    def take(self, step: int, states: dict[int, dict[str, np.ndarray]]) -> None:
        """Copies of step `step`'s state (local rank -> whole state by name)."""
        names = list(next(iter(states.values())))
        owner = owners(names, self.pes)
        for r, values in states.items():
            shard = {n: np.array(values[n], copy=True) for n in names if owner[n] == r}
            self.own[r] = shard
            self.held[r] = {n: v.copy() for n, v in shard.items()}  # travels to PE (r + 1) mod pes
        self.step = step

    def copy_bytes(self) -> int:
        return max((sum(v.nbytes for v in shard.values()) for shard in self.own.values()), default=0)

    def recover(self, failed: int) -> dict[str, np.ndarray]:
        """The whole state of the copies' step without PE `failed`'s memory: its shard from
        its peer, the others' from their own."""
        whole: dict[str, np.ndarray] = {}
        for r in range(self.pes):
            whole.update(self.held[r] if r == failed else self.own[r])
        return whole

    def gather_s(self) -> float:
        """Virtual time of the all-gather that gives every PE the whole state again (a ring:
        each PE receives the other PEs' shards over one link)."""
        total = sum(v.nbytes for shard in self.own.values() for v in shard.values())
        received = total - min(sum(v.nbytes for v in s.values()) for s in self.own.values())
        return (self.pes - 1) * self.costs.hop_startup + received * self.costs.byte_one_way


def disk_read_s(state_bytes: int) -> float:
    """Virtual time to read a checkpoint of `state_bytes` from the disk."""
    return state_bytes / DISK_BYTES_PER_S


__all__ = ["DISK_BYTES_PER_S", "Failure", "PeerCopies", "Recovery", "disk_read_s", "parse_failure"]
