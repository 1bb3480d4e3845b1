"""The text rendering of a rewrite trace (`hpgrem trace`, docs/trace.md): one entry per event in
file order, numbered by its step (its place in the stream, from 1), reductions indented by goal
depth and followed by the source line of the clause or function used, what they bound and what
they spawned. A selection (rules, a step range, a PE) picks the events shown; a cut stream ends
with a note that says where it was cut."""

from __future__ import annotations

from dataclasses import dataclass

MAX_INDENT = 16  # levels of indentation; deeper goals show their depth instead of more spaces


@dataclass(frozen=True, slots=True)
class Selection:
    """Which events to show: rewrites of these `rules` only (by key, or by name/arity without
    the key's module prefix, `append/3` for `prelude:append/3`), steps `first` to `last`, and
    events of PE `pe`. None selects all."""

    rules: frozenset[str] | None = None
    first: int | None = None
    last: int | None = None
    pe: int | None = None

    def shows(self, step: int, event: dict) -> bool:
        if self.first is not None and step < self.first or self.last is not None and step > self.last:
            return False
        if self.pe is not None and event["pe"] != self.pe:
            return False
        if self.rules is not None:
            return event["ev"] == "rewrite" and (event["rule"] in self.rules
                                                  or event["rule"].rsplit(":", 1)[-1] in self.rules)
        return True


def render(header: dict, events: list[dict], end: dict, selection: Selection = Selection()) -> str:
    """The text of a trace (header, events, end line as read by hpgrem.trace.events)."""
    sources = header.get("sources") or {}
    lines = [_title(header, events)]
    shown = 0
    for step, event in enumerate(events, 1):
        if not selection.shows(step, event):
            continue
        shown += 1
        lines += _entry(step, event, sources)
    if shown == 0:
        lines.append("(no event matches the selection)")
    if end.get("cut"):
        lines.append(f"-- trace cut after step {len(events)}: --trace-limit {end.get('limit')} reached; "
                     "the run went on unrecorded --")
    return "\n".join(lines) + "\n"


def _title(header: dict, events: list[dict]) -> str:
    pes = header["pes"]
    rewrites = sum(1 for e in events if e["ev"] == "rewrite")
    parts = [header.get("language") or "?", f"{pes} PE" + ("s" if pes != 1 else "")]
    if header.get("topology"):
        parts.append(header["topology"])
    if header.get("opt") is not None:
        parts.append(f"-O{header['opt']}")
    if header.get("mode"):
        parts.append(header["mode"])
    clock = "virtual µs" if header.get("clock", "virtual") == "virtual" else "wall µs"
    return (f"# trace of {header['program']} ({', '.join(parts)}): {len(events)} events, "
            f"{rewrites} rewrites; times in {clock}")


def _prefix(step: int, event: dict) -> str:
    return f"{step:>6} PE{event['pe']:<3} {event['t']:>12.3f}  "


def _indent(depth: int) -> str:
    if depth <= MAX_INDENT:
        return "  " * depth
    return "  " * MAX_INDENT + f"[{depth}] "


def _entry(step: int, e: dict, sources: dict) -> list[str]:
    head = _prefix(step, e)
    kind = e["ev"]
    if kind != "rewrite":
        return [head + _other(e)]
    pad = " " * (len(head) + len(_indent(e["depth"])) + 3)
    rule = e["rule"] + (f" clause {e['clause']}" if e.get("clause") is not None else "")
    span = e.get("span")
    where = f" at {span[0]}:{span[1]}" if span else ""
    lines = [f"{head}{_indent(e['depth'])}{e['redex']}  => {rule}{where}"
             + (" (inline)" if e.get("inline") else "") + f"  [task {_id(e['task'])}]"]
    source = _source_line(sources, span)
    if source is not None:
        lines.append(f"{pad}| {source}")
    bind = e.get("bind") or {}
    if bind:
        lines.append(pad + "bound " + ", ".join(f"{k} = {v}" for k, v in bind.items()))
    spawn = e.get("spawn") or []
    if spawn:
        lines.append(pad + "spawns " + "; ".join(f"[task {s['task']}] {s['goal']}" for s in spawn))
    return lines


def _source_line(sources: dict, span) -> str | None:
    if not span:
        return None
    lines = sources.get(span[0])
    if not lines or not 1 <= span[1] <= len(lines) or not lines[span[1] - 1].strip():
        return None
    return f"{span[1]:>4}  {lines[span[1] - 1].rstrip()}"


def _id(value) -> str:
    return "?" if value is None else str(value)


def _other(e: dict) -> str:
    kind = e["ev"]
    if kind == "suspend":
        on = ", ".join(e.get("on") or []) or "nothing"
        return f"suspend [task {_id(e['task'])}] {e.get('goal', '')} on {on}"
    if kind == "resume":
        return f"resume [task {_id(e['task'])}]" + (f" by {e['by']}" if e.get("by") else "")
    if kind == "fail":
        span = e.get("span")
        return f"fail [task {_id(e.get('task'))}] {e.get('goal') or ''}" + (f" at {span[0]}:{span[1]}" if span else "")
    if kind == "send":
        task = f", task {e['task']}" if e.get("task") is not None else ""
        return (f"send msg {e['msg']} {e['kind']} to PE{e['to']}, {e.get('bytes', '?')} bytes, "
                f"{e.get('hops', '?')} hop(s){task}")
    if kind == "receive":
        return f"receive msg {_id(e['msg'])} {e['kind']} from PE{e['from']}, {e.get('bytes', '?')} bytes"
    if kind == "steal":
        to = f" to PE{e['to']}" if e.get("to") is not None else ""
        return f"steal [task {_id(e['task'])}] from PE{e['from']}{to}"
    if kind == "idle":
        return "idle"
    suspended = e.get("suspended") or []
    text = f"terminate: {e['status']}"
    if suspended:
        text += "; left suspended: " + ", ".join(f"task {i}" for i in suspended)
    if e.get("in_flight"):
        text += "; messages in flight: " + ", ".join(map(str, e["in_flight"]))
    return text


__all__ = ["Selection", "render"]
