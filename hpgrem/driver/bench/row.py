"""One line of `hpgrem bench`'s report."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Row:
    """One line of the report (the keys `hpgrem bench --json` promises)."""

    name: str
    metric: str
    value: float
    unit: str
    peer: str | None = None
    peer_value: float | None = None
