"""Reading a rewrite trace (docs/trace.md): JSON lines, checked field by field, since a `.jsonl`
file given to `hpgrem trace` is untrusted input. The machine writes the stream (pam.trace); this
module reads it back for the renderings (text, Graphviz, the HTML viewer), which may then rely
on every field they use having its documented type."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from hpgrem.files import read_text

VERSION = 1
KINDS = ("rewrite", "suspend", "resume", "fail", "send", "receive", "steal", "idle", "terminate")
STATUSES = ("success", "failure", "deadlock", "limit")
MAX_PES = 1 << 20  # more PEs than any run has: a header claiming more is not a trace of ours


class TraceFormatError(ValueError):
    """The file is not a valid trace: the message names the line and what is wrong there."""


@dataclass(slots=True)
class Stream:
    """A trace read back: its header, its events in file order, and its end line."""

    header: dict
    events: list[dict] = field(default_factory=list)
    end: dict = field(default_factory=dict)

    @property
    def cut(self) -> bool:
        return bool(self.end.get("cut"))


def read_trace(path: str | Path) -> Stream:
    """The trace in `path`; TraceFormatError (naming the line) if it is not a valid one."""
    return parse_trace(read_text(path, TraceFormatError), str(path))


def parse_trace(text: str, name: str = "<trace>") -> Stream:
    """A trace from its text (see `read_trace`)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise TraceFormatError(f"{name}: empty: a trace starts with its header line")
    header = _object(lines[0], name, 1)
    _check_header(header, f"{name}:1")
    stream = Stream(header)
    pes = header["pes"]
    seqs: dict[int, int] = {}
    for number, line in enumerate(lines[1:], 2):
        where = f"{name}:{number}"
        obj = _object(line, name, number)
        if obj.get("ev") == "end":
            if number != len(lines):
                raise TraceFormatError(f"{where}: the end line is followed by more lines")
            _check_end(obj, len(stream.events), where)
            stream.end = obj
            return stream
        _check_event(obj, pes, where)
        expected = seqs.get(obj["pe"], 0)
        if obj["seq"] != expected:
            raise TraceFormatError(f"{where}: seq {obj['seq']} on PE {obj['pe']}, expected {expected}")
        seqs[obj["pe"]] = expected + 1
        stream.events.append(obj)
    raise TraceFormatError(f"{name}: no end line (the file was cut short?)")


def _object(line: str, name: str, number: int) -> dict:
    try:
        obj = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise TraceFormatError(f"{name}:{number}: not a JSON line ({_reason(e)})") from None
    if not isinstance(obj, dict):
        raise TraceFormatError(f"{name}:{number}: expected a JSON object")
    return obj


def _reason(e: Exception) -> str:
    if isinstance(e, RecursionError):
        return "nested too deeply"
    return str(e).split(":")[0] if isinstance(e, json.JSONDecodeError) else str(e)


def _no_constant(text: str):
    raise ValueError(f"{text} is not a number a trace holds")


def _check_header(h: dict, where: str) -> None:
    if h.get("trace") != "hpgrem":
        raise TraceFormatError(f"{where}: not an hpgrem trace (its first line has no \"trace\": \"hpgrem\")")
    if h.get("version") != VERSION:
        raise TraceFormatError(f"{where}: trace version {h.get('version')!r} (this hpgrem reads version {VERSION})")
    _need(h, "program", str, where)
    pes = _need(h, "pes", int, where)
    if not 1 <= pes <= MAX_PES:
        raise TraceFormatError(f"{where}: \"pes\" must be 1 to {MAX_PES}, got {pes}")
    for key in ("language", "topology", "mode", "clock"):
        _optional(h, key, str, where)
    _optional(h, "opt", int, where)
    sources = h.get("sources")
    if sources is not None:
        if not isinstance(sources, dict) or not all(
                isinstance(lines, list) and all(isinstance(x, str) for x in lines) for lines in sources.values()):
            raise TraceFormatError(f"{where}: \"sources\" must map file names to lists of lines")


def _check_end(e: dict, count: int, where: str) -> None:
    if e.get("events") != count:
        raise TraceFormatError(f"{where}: the end line counts {e.get('events')!r} events, the file has {count}")
    if not isinstance(e.get("cut"), bool):
        raise TraceFormatError(f"{where}: the end line's \"cut\" must be true or false")
    limit = e.get("limit")
    if limit is not None and (type(limit) is not int or limit < 0):
        raise TraceFormatError(f"{where}: the end line's \"limit\" must be a count or null")


# what each kind holds besides ev, pe, seq and t: (field, type, required)
_TASK = (int, type(None))
FIELDS: dict[str, tuple] = {
    "rewrite": (("task", _TASK, True), ("rule", str, True), ("clause", int, False), ("span", (list, type(None)), False),
                ("redex", str, True), ("vars", list, False), ("bind", (dict, type(None)), False),
                ("spawn", list, False), ("depth", int, True), ("inline", bool, False)),
    "suspend": (("task", _TASK, True), ("goal", str, False), ("on", list, False)),
    "resume": (("task", _TASK, True), ("by", (str, type(None)), False)),
    "fail": (("task", _TASK, False), ("goal", (str, type(None)), False), ("span", (list, type(None)), False)),
    "send": (("msg", int, True), ("kind", str, True), ("to", int, True), ("bytes", int, False),
             ("hops", int, False), ("task", _TASK, False)),
    "receive": (("msg", (int, type(None)), True), ("kind", str, True), ("from", int, True), ("bytes", int, False),
                ("hops", int, False)),
    "steal": (("task", _TASK, True), ("from", int, True), ("to", int, False)),
    "idle": (),
    "terminate": (("status", str, True), ("suspended", list, True), ("in_flight", list, False)),
}


def _check_event(e: dict, pes: int, where: str) -> None:
    kind = e.get("ev")
    if type(kind) is not str or kind not in FIELDS:
        raise TraceFormatError(f"{where}: unknown event kind {_short(kind)} (kinds: {', '.join(KINDS)}, end)")
    pe = _need(e, "pe", int, where)
    if not 0 <= pe < pes:
        raise TraceFormatError(f"{where}: PE {pe} outside the header's {pes} PE(s)")
    if _need(e, "seq", int, where) < 0:
        raise TraceFormatError(f"{where}: \"seq\" must not be negative")
    t = e.get("t")
    if type(t) not in (int, float) or not math.isfinite(t):
        raise TraceFormatError(f"{where}: \"t\" must be a number")
    for name, kinds, required in FIELDS[kind]:
        if name not in e:
            if required:
                raise TraceFormatError(f"{where}: a {kind} event needs \"{name}\"")
            continue
        if type(e[name]) is bool and bool not in _tuple(kinds) or not isinstance(e[name], kinds):
            raise TraceFormatError(f"{where}: \"{name}\" of a {kind} event has the wrong type "
                                   f"({type(e[name]).__name__})")
    if kind == "rewrite":
        _check_rewrite(e, where)
    elif kind in ("send", "receive"):
        other = e["to"] if kind == "send" else e["from"]
        if not 0 <= other < pes:
            raise TraceFormatError(f"{where}: PE {other} outside the header's {pes} PE(s)")
    elif kind == "terminate":
        if e["status"] not in STATUSES:
            raise TraceFormatError(f"{where}: terminate status {_short(e['status'])} "
                                   f"(one of {', '.join(STATUSES)})")
        for key in ("suspended", "in_flight"):
            if not all(type(x) is int for x in e.get(key, ())):
                raise TraceFormatError(f"{where}: \"{key}\" must list ids")
    for key in ("on", "vars"):
        if key in e and not all(isinstance(x, str) for x in e[key]):
            raise TraceFormatError(f"{where}: \"{key}\" must list variable names")


def _check_rewrite(e: dict, where: str) -> None:
    span = e.get("span")
    if span is not None and not (len(span) == 3 and isinstance(span[0], str)
                                 and type(span[1]) is int and type(span[2]) is int):
        raise TraceFormatError(f"{where}: \"span\" must be [file, line, column]")
    bind = e.get("bind") or {}
    if not all(isinstance(v, str) for v in bind.values()):
        raise TraceFormatError(f"{where}: \"bind\" must map variable names to texts")
    for s in e.get("spawn", ()):
        if not (isinstance(s, dict) and type(s.get("task")) is int and isinstance(s.get("goal"), str)
                and isinstance(s.get("vars", []), list) and all(isinstance(x, str) for x in s.get("vars", []))):
            raise TraceFormatError(f"{where}: each \"spawn\" entry needs a task id and a goal text")
    if e["depth"] < 0:
        raise TraceFormatError(f"{where}: \"depth\" must not be negative")


def _need(obj: dict, key: str, kind: type, where: str):
    value = obj.get(key)
    if type(value) is not kind:
        raise TraceFormatError(f"{where}: \"{key}\" must be {_article(kind)}")
    return value


def _optional(obj: dict, key: str, kind: type, where: str) -> None:
    if obj.get(key) is not None:
        _need(obj, key, kind, where)


def _article(kind: type) -> str:
    return {int: "an integer", str: "a string"}.get(kind, kind.__name__)


def _tuple(kinds) -> tuple:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = ["KINDS", "Stream", "TraceFormatError", "parse_trace", "read_trace"]
