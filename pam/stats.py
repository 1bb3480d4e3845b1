"""Per-PE counters and the run's totals, as `--stats` and `--stats-json` report them (spec/cli.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(slots=True)
class PEStats:
    """What one PE did: the machine's counters, and `counters`, the dialect runtime's own (the
    names its `counters` declares, counted by code made to count: `runtime_for(..., counting=True)`)."""

    pe: int
    reductions: int = 0
    suspensions: int = 0
    resumptions: int = 0
    sent: int = 0
    received: int = 0
    bytes_sent: int = 0
    packets: int = 0  # link messages sent: one per message, or per packet of messages (aggregate)
    bytes_received: int = 0
    hops: int = 0
    steals: int = 0
    exported: int = 0  # tasks sent to run on another PE (stolen or placed)
    looped: int = 0  # reductions run by a step looping inside itself (tail-loop), not by the PE loop
    busy_time: float = 0.0
    counters: dict[str, int] = field(default_factory=dict)  # the runtime's own, by name
    bytes_by_kind: dict[str, int] = field(default_factory=dict)  # bytes sent, by message kind

    def count(self, name: str) -> int:
        """A counter by name: the machine's or the runtime's."""
        counters = self.counters
        return counters[name] if name in counters else getattr(self, name)


@dataclass(slots=True)
class RunStats:
    """A whole run: `time` is virtual seconds (sim) or wall seconds (mpi); `work` the PEs' busy time."""

    pes: int
    topology: str
    mode: str
    time: float
    per_pe: list[PEStats]
    wall_s: float = 0.0  # wall-clock seconds of the machine's run alone (no compiling, no start-up)

    @property
    def work(self) -> float:
        return sum(p.busy_time for p in self.per_pe)

    @property
    def reductions(self) -> int:
        return sum(p.reductions for p in self.per_pe)

    def to_json(self) -> dict:
        rows = []
        for p in self.per_pe:
            row = asdict(p)
            row.update(row.pop("counters"))  # the runtime's counters sit beside the machine's
            row["idle_share"] = 0.0 if self.time <= 0 else max(0.0, 1.0 - p.busy_time / self.time)
            rows.append(row)
        return {
            "pes": self.pes, "topology": self.topology, "mode": self.mode, "time": self.time,
            "work": self.work, "wall_s": self.wall_s, "reductions": self.reductions,
            "speedup": (self.work / self.time) if self.time > 0 else None,
            "per_pe": rows,
        }

    def table(self) -> str:
        data = self.to_json()
        head = ["pe", "reductions", "suspensions", "resumptions", "sent", "received", "bytes_sent",
                "bytes_received", "hops", "steals", "idle_share", "busy_time"]
        lines = ["  ".join(f"{h:>14}" for h in head)]
        for row in data["per_pe"]:
            lines.append("  ".join(_cell(row[h]) for h in head))
        lines.append(f"total: {data['reductions']} reductions in {data['time']:.6f} s ({self.mode}), "
                     f"work {data['work']:.6f} s, speedup {data['speedup'] or 0:.2f} on {self.pes} PE(s), "
                     f"topology {self.topology}")
        rate = data["reductions"] / data["time"] if data["time"] > 0 else 0.0
        lines.append(f"rate: {rate:,.0f} reductions/s; wall {self.wall_s:.6f} s")
        names = ("suspensions", "exported", "looped", *(self.per_pe[0].counters if self.per_pe else ()))
        counted = {h: sum(row[h] for row in data["per_pe"]) for h in names}
        lines.append("counters: " + ", ".join(f"{h} {n}" for h, n in counted.items()))
        return "\n".join(lines)


def _cell(x) -> str:
    if isinstance(x, float):
        return f"{x:>14.6f}"
    return f"{x:>14}"
