"""Safra's termination detection (Dijkstra, "Shmuel Safra's version of termination detection",
EWD998): a token travels the ring of PEs 0 -> 1 -> ... -> N-1 -> 0 carrying the sum of the
PEs' message counters and whether any PE received a message since the token last passed.

Each PE counts basic messages sent minus received and turns black on receipt. A PE forwards the
token only while passive. PE 0 declares termination when the token returns white, PE 0 is white
and the counters sum to zero: then no PE is active and no message is in flight.
"""

from __future__ import annotations


class Safra:
    """One PE's part; `step()` is called whenever the PE is passive and says what to do."""

    def __init__(self, me: int, pes: int):
        self.me = me
        self.pes = pes
        self.count = 0
        self.black = False
        self.token: tuple[int, bool] | None = None
        self.round_open = False

    def sent(self) -> None:
        self.count += 1

    def received(self) -> None:
        self.count -= 1
        self.black = True

    def got_token(self, token: tuple[int, bool]) -> None:
        self.token = tuple(token)

    def step(self) -> tuple[str, object]:
        """While passive: ("send", (next PE, token)), ("terminated", None) or ("wait", None)."""
        nxt = (self.me + 1) % self.pes
        if self.me == 0:
            if self.token is not None:
                q, black = self.token
                self.token = None
                self.round_open = False
                if not black and not self.black and q + self.count == 0:
                    return ("terminated", None)
            if not self.round_open:
                self.round_open = True
                self.black = False
                return ("send", (nxt, (0, False)))
            return ("wait", None)
        if self.token is not None:
            q, black = self.token
            self.token = None
            out = (q + self.count, black or self.black)
            self.black = False
            return ("send", (nxt, out))
        return ("wait", None)
