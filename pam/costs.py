"""The transputer cost model of simulated mode: every constant in one place, with its source.

Virtual time on a PE advances by the instructions its reductions execute; a message costs
store-and-forward time on every link it crosses: h · (start-up + L · byte time).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CostModel:
    """Times in seconds."""

    # INMOS T800-20 datasheet: 10 MIPS.
    instruction: float = 100e-9
    # Transputer scheduler: a process switch "as little as one microsecond".
    process_switch: float = 1e-6
    # Link protocol at 20 Mbit/s: 11-bit data packets and 2-bit acks, ~1.75 MB/s one way.
    byte_one_way: float = 0.57e-6
    # T800/T805 datasheet: ~2.35 MB/s in total when both directions are busy.
    byte_both_ways: float = 0.85e-6
    # Not published: software through-routing costs 20-100 us; we assume 5 us per hop.
    hop_startup: float = 5e-6
    # Instructions to receive and act on one message (unpack and dispatch): ours.
    message_handling: int = 20
    # Instructions of a primitive run as a task (write, nl, a waiting `is`): ours.
    primitive_step: int = 10


DEFAULT = CostModel()
