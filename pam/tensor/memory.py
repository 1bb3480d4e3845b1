"""Memory accounting of a training step: the live tensor bytes of one PE by category.

Every value of the step graph is counted from the moment its op binds it to the moment its
last reader has run (the runtime then drops it, so the peak is the one a freeing allocator
reaches, not the sum of every value of the step). A value's category follows from its name
and from the graph's parameters and states (the passes name what they make, see
`category_of`); the runtime's own buffers (a collective's flattened bucket) are
"communication". `host` counts the bytes an offload moved off the device (backend's offload
pass): device and host are reported apart.

The figures are numpy's `nbytes` of each value as if it had its own buffer (a view, such as a
collective's outputs over its bucket, is counted once the buffer is released).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

CATEGORIES = ("parameters", "gradients", "optimizer", "activations", "communication")
"""The categories, in the order reports list them."""

GRAD = "grad."
NEW = "new."
MICRO_BATCH = re.compile(r"mb\d+\.")
"""A pipeline's micro-batch prefix: a value of micro-batch k has the category of the value it
copies ("mb1.grad.<param>": that micro-batch's contribution, a gradient like the sum it is added
into; "mb1.<param>.full": ZeRO-3's parameter gathered for that micro-batch, communication)."""


BUCKET = "bucket"
"""The suffix word of a gradient waiting in its reduce-scatter's bucket under ZeRO-2 and -3
("grad.<param>.bucket"): DeepSpeed's reduce bucket holds it, the planner's communication."""

GATHERED = frozenset({"gathered", "full"})
"""Suffix words of a whole parameter that ZeRO-3 gathers from the shards for the step's use
("<param>.gathered", "<param>.full", "<param>.gathered.backward", ...)."""


def category_of(name: str, params: frozenset[str], states: frozenset[str]) -> str:
    """The category of the value `name`. "grad.<param>" and what the passes build it from or
    into ("grad.<param>.part", ".local", ".flat", ...) and a micro-batch's contribution
    "mb<k>.grad.<param>" are gradients, except a gradient in its ZeRO reduce bucket
    ("grad.<param>.bucket", communication); a state (AdamW's
    "m.<param>", "v.<param>"), its update "new.<state>" and their pieces are optimizer state; a
    parameter, its update "new.<param>" and their pieces ("<param>.chunk", ...) are parameters,
    except a whole parameter gathered from ZeRO-3 shards ("<param>.gathered", ".full"), which is
    communication (the planner's gathered-layer buffers); everything else (inputs, forward
    values, activations' gradients, scalars) is an activation."""
    name = MICRO_BATCH.sub("", name, count=1) if name.startswith("mb") else name
    if name.startswith(GRAD):
        suffix = _suffix_of(name[len(GRAD):], params)
        if suffix is None:
            return "activations"
        return "communication" if BUCKET in suffix else "gradients"
    new = name.startswith(NEW)
    base = name[len(NEW):] if new else name
    if _names_one_of(base, states):
        return "optimizer"
    suffix = _suffix_of(base, params)
    if suffix is None:
        return "activations"
    return "communication" if not new and GATHERED & set(suffix) else "parameters"


def _suffix_of(name: str, params: frozenset[str]) -> list[str] | None:
    """The dotted words after the parameter `name` starts with (None: it names none)."""
    parts = name.split(".")
    for k in range(1, len(parts) + 1):
        if ".".join(parts[:k]) in params:
            return parts[k:]
    return None


def _names_one_of(name: str, params: frozenset[str]) -> bool:
    """Whether `name` is a parameter's name or one with a dotted suffix."""
    return _suffix_of(name, params) is not None


@dataclass(slots=True)
class MemoryReport:
    """One PE's step: the peak of each category (each its own maximum), the peak of the sum and
    the categories at that moment; `host` the bytes held off the device by category (peak)."""

    peak: dict[str, int] = field(default_factory=dict)
    peak_total: int = 0
    at_peak: dict[str, int] = field(default_factory=dict)
    host: dict[str, int] = field(default_factory=dict)
    stalls: int = 0  # times a fetch waited for room under the device budget (back-pressure)

    def to_json(self) -> dict:
        return asdict(self)


class MemoryMeter:
    """Live bytes by category on one PE, with the peaks since `reset`."""

    __slots__ = ("live", "peak", "total", "peak_total", "at_peak", "host", "host_peak", "stalls")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """A new step: nothing live."""
        self.live = dict.fromkeys(CATEGORIES, 0)
        self.peak = dict.fromkeys(CATEGORIES, 0)
        self.host = dict.fromkeys(CATEGORIES, 0)
        self.host_peak = dict.fromkeys(CATEGORIES, 0)
        self.total = self.peak_total = self.stalls = 0
        self.at_peak = dict(self.live)

    def alloc(self, category: str, nbytes: int, host: bool = False) -> None:
        """`nbytes` of `category` become live on the device (or in the host store)."""
        if host:
            live = self.host[category] + nbytes
            self.host[category] = live
            self.host_peak[category] = max(self.host_peak[category], live)
            return
        live = self.live[category] + nbytes
        self.live[category] = live
        if live > self.peak[category]:
            self.peak[category] = live
        self.total += nbytes
        if self.total > self.peak_total:
            self.peak_total = self.total
            self.at_peak = dict(self.live)

    def free(self, category: str, nbytes: int, host: bool = False) -> None:
        if host:
            self.host[category] -= nbytes
            return
        self.live[category] -= nbytes
        self.total -= nbytes

    def report(self) -> MemoryReport:
        return MemoryReport(dict(self.peak), self.peak_total, dict(self.at_peak), dict(self.host_peak),
                            self.stalls)


def nbytes(value) -> int:
    """The bytes of a bound value (a tuple-valued op's result counts nothing: its parts do)."""
    return 0 if type(value) is tuple else int(getattr(value, "nbytes", 0))


__all__ = ["CATEGORIES", "MemoryMeter", "MemoryReport", "category_of", "nbytes"]
