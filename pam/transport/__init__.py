"""Transports move messages between PEs; the PE code is the same over every transport.

A node that leaves its PE is named globally as `(owner PE, id)`. The machine's message kinds
follow DESIGN.md ("Distribution"); a runtime may add kinds of its own (Net.add_handler). Each
message records the hops it took and the bytes it is charged (Net.send: its packed size).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

KINDS = ("SPAWN", "FETCH", "VALUE", "BIND", "STEAL", "NOWORK", "FREE", "TOKEN", "HALT", "FINISH",
         "PEEK", "PEEKED")


@dataclass(slots=True)
class Message:
    """One message: its `kind` (one of KINDS or a runtime's own), its endpoints, its payload, the
    PEs it passed through and the bytes it is charged on each link."""

    kind: str
    src: int
    dst: int
    payload: object = None
    hops: list[int] = field(default_factory=list)
    nbytes: int = 8
    trace: tuple | None = None  # in a traced run: its id and the task it carries (pam.trace)


class Transport(Protocol):
    """What a PE's `Net` needs from the network: deliver `message` to `message.dst`, hop by hop.
    How messages arrive is the driver's business (pam.driver: `Simulated`, `Rank`)."""

    pes: int

    def send(self, message: Message) -> None: ...
