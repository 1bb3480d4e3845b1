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
    """What a PE needs from the network around it."""

    pes: int

    def send(self, message: Message) -> None: ...

    def receive(self, pe: int) -> list[Message]: ...


class Loopback:
    """The transport of a single PE: there is no one else to talk to."""

    pes = 1

    def __init__(self) -> None:
        self.queue: list[Message] = []

    def send(self, message: Message) -> None:
        if message.dst != 0:
            raise ValueError(f"PE {message.dst} does not exist on a single-PE machine")
        self.queue.append(message)

    def receive(self, pe: int) -> list[Message]:
        out, self.queue = self.queue, []
        return out
