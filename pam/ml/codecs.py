"""How ML values travel between PEs (`pam.pack` codecs, registered by the ML runtime)."""

from __future__ import annotations

from pam.ml.values import Closure, ExnCon, Packet, exn_by_uid
from pam.pack import WORD


class ClosureCodec:
    """A closure travels as its function's key and its environment; the receiving PE makes it
    of its own copy of the function. `place` is that PE's ML code (pam.ml.loader.MLPlace)."""

    name = "closure"
    value_class = Closure

    def __init__(self, place) -> None:
        self.place = place

    def flatten(self, c: Closure) -> tuple:
        return c.key, c.env

    def rebuild(self, key: str, env: tuple) -> Closure:
        return self.place.closure(key, env)

    def size(self, key: str) -> int:
        return WORD  # a code address on a transputer


class PacketCodec:
    """An exception value: its constructor, then its argument when it has one."""

    name = "packet"
    value_class = Packet

    def flatten(self, p: Packet) -> tuple:
        return None, ((p.con,) if p.arg is None and not p.con.has_arg else (p.con, p.arg))

    def rebuild(self, data, parts: tuple) -> Packet:
        return Packet(parts[0], parts[1] if len(parts) == 2 else None)

    def size(self, data) -> int:
        return WORD


class ExnConCodec:
    """An exception constructor, known on every PE by its global uid (basis ones by name)."""

    name = "exn"
    value_class = ExnCon

    def flatten(self, con: ExnCon) -> tuple:
        return (con.name, con.has_arg, con.global_uid()), ()

    def rebuild(self, data: tuple, parts: tuple) -> ExnCon:
        return exn_by_uid(*data)

    def size(self, data) -> int:
        return WORD  # a global number on a transputer


class RefCodec:
    """An ML ref travels as a copy (only pure code, which never reads one, moves)."""

    name = "ref"
    value_class = list

    def flatten(self, ref: list) -> tuple:
        return None, (ref[0],)

    def rebuild(self, data, parts: tuple) -> list:
        return [parts[0]]

    def size(self, data) -> int:
        return WORD


def codecs(place) -> list:
    """The codecs of ML values for the PE whose ML code is `place`."""
    return [ClosureCodec(place), PacketCodec(), ExnConCodec(), RefCodec()]
