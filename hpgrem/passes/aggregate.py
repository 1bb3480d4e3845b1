"""aggregate: messages to the same PE in one slice travel as one packet.

A pass of the machine, not of the code: it records the module fact `aggregate.messages` = "aggregate",
which the machine reads (pam/machine.py). Then a simulated PE packs what one batch of its
steps (a slice) sent to the same destination PE into one packet, which crosses each link of
its route with one link start-up (`CostModel.hop_startup`) for the bytes of all its messages,
instead of one start-up per message; the receiver handles each message as before, after one
process switch for the packet. The messages, their order per destination and their bytes are
unchanged, so every program gives the same output; what changes is virtual time and the
per-PE count `packets` of `--stats-json` (`sent` still counts messages). Under MPI a rank
always sends what one turn queued for one neighbour as one MPI send (pam/transport/mpi.py),
with or without this pass.

Effect: a task that finishes on a thief sends BIND and FINISH home in the same slice (one
packet instead of two); an idle PE's steal traffic, one request per turn, gains nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem import ir
from hpgrem.passes import annotated

@dataclass(frozen=True)
class Aggregate:
    name: str = "aggregate"  # of every dialect: it is about messages, not code
    records: tuple[str, ...] = ("messages",)

    def apply(self, module: ir.Module) -> ir.Module:
        return annotated(module, self, {ir.MODULE_FACTS: {"messages": "aggregate"}})


def aggregates(module: ir.Module) -> bool:
    """Whether the machine packs a slice's messages to one PE together (the pass ran)."""
    return module.annotation(ir.MODULE_FACTS, "aggregate.messages") == "aggregate"
