"""Transports move messages between PEs; the PE code is the same over every transport.

A node that leaves its PE is named globally as `(owner PE, id)`. Message kinds follow
DESIGN.md ("Distribution"); each message records the hops it took.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

KINDS = ("SPAWN", "FETCH", "VALUE", "BIND", "STEAL", "NOWORK", "FREE", "TOKEN", "HALT", "FINISH",
         "PEEK", "PEEKED")


@dataclass(slots=True)
class Message:
    """One message: `kind` from KINDS, its endpoints, its payload and the PEs it passed through."""

    kind: str
    src: int
    dst: int
    payload: object = None
    hops: list[int] = field(default_factory=list)
    nbytes: int = 8


class Transport(Protocol):
    """What a PE's `Net` needs from the network: deliver `message` to `message.dst`, hop by hop.
    How messages arrive is the driver's business (pam.driver: `Simulated`, `Rank`)."""

    pes: int

    def send(self, message: Message) -> None: ...
