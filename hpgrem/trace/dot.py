"""Graphviz snapshots of the goal graph at chosen steps of a trace (docs/teaching.md).

A step is one event of the stream in file order, numbered from 1 (the final `end` line is not a
step), as in the HTML viewer. The snapshot of step N shows the machine just before event N: the
live goals (boxes filled with the colour of their PE, dashed orange when suspended) and the
variables they mention (ellipses, one node per variable however many goals share it, filled and
labelled with the value once bound). When step N is a rewrite its redex is drawn in bold red and
the goals it creates in dashed green beside it. Labels are data: every trace text is quoted and
escaped, and nodes are named by number, never by trace text.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_SNAPSHOTS = 6
MAX_GOALS = 60  # goals drawn in one snapshot; more are counted in the caption
LABEL_CHARS = 60


@dataclass(slots=True)
class _Goal:
    """A live task as the trace describes it."""

    task: Any
    goal: str
    vars: list[str]
    pe: int
    waits_on: list[str] = field(default_factory=list)  # empty when ready
    depth: int = 0


@dataclass(slots=True)
class _Replay:
    """The goals alive and the variables bound after the events applied so far."""

    last_use: dict[Any, int]  # task id -> the index of the last event naming it as its task
    goals: dict[Any, _Goal] = field(default_factory=dict)
    bound: dict[str, str] = field(default_factory=dict)
    message_task: dict[Any, Any] = field(default_factory=dict)
    applied: int = 0

    def apply(self, event: dict[str, Any]) -> None:
        kind, pe, task = event.get("ev"), _int(event.get("pe")), event.get("task")
        old = self.goals.get(task) if _hashable(task) else None
        if kind == "rewrite":
            depth = _int(event.get("depth"), old.depth if old else 0)
            # A task named again later goes on (an ML evaluation runs many reductions as one
            # task); otherwise the rewrite consumed it.
            if _hashable(task) and self.last_use.get(task, -1) > self.applied:
                after = f"task {task}, after {_text(event.get('rule'))}"
                self.goals[task] = _Goal(task, after, [], pe, depth=depth)
            else:
                self.goals.pop(task, None)
            bind = event.get("bind")
            if isinstance(bind, dict):
                self.bound.update({str(v): _text(value) for v, value in bind.items()})
            for spawned in _spawns(event):
                self.goals[spawned.task] = _Goal(
                    spawned.task, spawned.goal, spawned.vars, pe, depth=depth + 1
                )
        elif kind == "suspend" and _hashable(task):
            on = _names(event.get("on"))
            goal = _text(event.get("goal")) or (old.goal if old else "")
            self.goals[task] = _Goal(
                task, goal, old.vars if old else on, pe, on, old.depth if old else 0
            )
        elif kind == "resume" and old:
            old.pe, old.waits_on = pe, []
        elif kind == "steal" and old:  # reported by the victim: "to" names the thief
            old.pe, old.waits_on = _int(event.get("to"), pe), []
        elif kind == "fail" and _hashable(task):
            self.goals.pop(task, None)
        elif kind == "send":
            moved = self.goals.get(task) if _hashable(task) else None
            if moved and _hashable(event.get("msg")):
                moved.pe = _int(event.get("to"), moved.pe)
                self.message_task[event["msg"]] = task
        elif kind == "receive" and _hashable(event.get("msg")):
            moved = self.goals.get(self.message_task.pop(event["msg"], None))
            if moved:
                moved.pe = pe
        self.applied += 1


def _hashable(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _spawns(event: dict[str, Any]) -> list[_Goal]:
    spawn = event.get("spawn")
    return [
        _Goal(s["task"], _text(s.get("goal")), _names(s.get("vars")), _int(event.get("pe")))
        for s in (spawn if isinstance(spawn, list) else [])
        if isinstance(s, dict) and _hashable(s.get("task"))
    ]


def _quote(text: str) -> str:
    """A DOT quoted string showing `text` literally: backslashes (DOT's escapes such as \\N and
    \\l) and quotes escaped, line ends kept as DOT line breaks, other control characters blanked."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    lines = ("".join(c if c.isprintable() else " " for c in line) for line in escaped.split("\n"))
    return '"' + "\\n".join(lines) + '"'


def _clip(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _pe_colour(pe: int) -> str:
    """A light fill for each PE, as Graphviz HSV."""
    return f"{(pe * 0.618034) % 1:.3f} 0.22 1.000"


def steps_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events that are steps: all but a final `end` line."""
    return events[:-1] if events and events[-1].get("ev") == "end" else events


def default_steps(events: list[dict[str, Any]], count: int = DEFAULT_SNAPSHOTS) -> list[int]:
    """About `count` steps spread over the run: rewrites where there are any, first and last."""
    steps = steps_of(events)
    chosen = [i + 1 for i, e in enumerate(steps) if e.get("ev") == "rewrite"] or list(
        range(1, len(steps) + 1)
    )
    if len(chosen) <= count:
        return chosen
    return sorted({chosen[round(k * (len(chosen) - 1) / (count - 1))] for k in range(count)})


def _nearest(goals: list[_Goal], pe: int) -> list[_Goal]:
    """MAX_GOALS of `goals`: the first (the step's own, if any), those sharing its variables,
    then the others of PE `pe`, then the rest."""
    shared = set(goals[0].vars)
    ranked = sorted(
        range(len(goals)),
        key=lambda i: (i != 0, not shared.intersection(goals[i].vars), goals[i].pe != pe, i),
    )
    return [goals[i] for i in ranked[:MAX_GOALS]]


def snapshot(header: dict[str, Any], replay: _Replay, step: int, event: dict[str, Any]) -> str:
    """The DOT text of the goal graph just before `event`, which is step `step`."""
    lines = [f"digraph {_quote(f'step {step}')} {{"]
    redex_task = event.get("task") if event.get("ev") == "rewrite" else None
    has_redex = _hashable(redex_task)
    goals = list(replay.goals.values())
    if has_redex:
        # The redex as the rewrite saw it (a goal the trace never created, such as the root,
        # appears here first).
        redex = _Goal(
            redex_task,
            _text(event.get("redex")),
            _names(event.get("vars")),
            _int(event.get("pe")),
            depth=_int(event.get("depth")),
        )
        goals = [redex] + [g for g in goals if g.task != redex_task]
    elif _hashable(event.get("task")) and event["task"] in replay.goals:
        goals.sort(key=lambda g: g.task != event["task"])  # the step's own goal first
    hidden = max(0, len(goals) - MAX_GOALS)
    goals = _nearest(goals, _int(event.get("pe"))) if hidden else goals
    created = _spawns(event) if has_redex else []
    caption = [
        f"{header.get('program', 'trace')}: step {step}, {_text(event.get('ev'))}"
        f" on PE {_int(event.get('pe'))}, t={_text(event.get('t'))}"
    ]
    if has_redex:
        clause = event.get("clause")
        caption.append(
            f"rule {_text(event.get('rule'))}" + (f" clause {clause}" if clause is not None else "")
        )
    caption.append(
        "boxes: goals filled by PE (red: redex, green dashed: created, orange dashed: suspended);"
        " ellipses: variables (blue: bound)"
    )
    if hidden:
        caption.append(f"{hidden} more live goals not drawn")
    lines.append(
        f"  graph [label={_quote(chr(10).join(caption))}, labelloc=t, fontname=monospace,"
        " fontsize=11];"
    )
    lines.append("  node [fontname=monospace, fontsize=10];")
    lines.append("  edge [fontname=monospace, fontsize=9];")
    var_ids: dict[str, str] = {}
    for g in goals + created:
        for v in g.vars:
            var_ids.setdefault(v, f"v{len(var_ids)}")
    for v, node in var_ids.items():
        value = replay.bound.get(v)
        label = v if value is None else f"{v} = {_clip(value, 30)}"
        fill = "#dfe9ff" if value is not None else "white"
        lines.append(f"  {node} [shape=ellipse, style=filled, fillcolor={_quote(fill)}, label={_quote(label)}];")
    for n, g in enumerate(goals + created):
        node = f"g{n}"
        is_redex = n == 0 and has_redex
        is_created = n >= len(goals)
        style, colour, width = "filled,rounded", "gray40", "1"
        if is_redex:
            colour, width = "#d7263d", "3"
        elif is_created:
            style, colour, width = "filled,rounded,dashed", "#1b998b", "2"
        elif g.waits_on:
            style, colour, width = "filled,rounded,dashed", "#f18f01", "2"
        label = f"{_clip(g.goal or f'task {g.task}')}\ntask {g.task}, PE {g.pe}"
        lines.append(
            f"  {node} [shape=box, style={_quote(style)}, fillcolor={_quote(_pe_colour(g.pe))},"
            f" color={_quote(colour)}, penwidth={width}, label={_quote(label)}];"
        )
        for v in g.vars:
            waits = v in g.waits_on
            attrs = "dir=none" + (", style=dashed, color=\"#f18f01\", label=\"waits\"" if waits else "")
            lines.append(f"  {node} -> {var_ids[v]} [{attrs}];")
        if is_created:
            lines.append(f'  g0 -> {node} [style=dashed, color="#1b998b", label="creates"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_snapshots(
    header: dict[str, Any],
    events: list[dict[str, Any]],
    directory: str | Path,
    steps: Iterable[int] | None = None,
) -> list[Path]:
    """Write `step-N.dot` for each chosen step (default: `default_steps`) into `directory`, and
    `step-N.svg` beside it when Graphviz's `dot` program is installed (without it, a note on
    standard error). Returns the files written. Raises ValueError for a step outside the trace."""
    stream = steps_of([e for e in events if isinstance(e, dict)])
    chosen = sorted(set(default_steps(stream) if steps is None else steps))
    for step in chosen:
        if not 1 <= step <= len(stream):
            raise ValueError(f"step {step} is outside the trace, whose steps are 1..{len(stream)}")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    dot = shutil.which("dot")
    if dot is None and chosen:
        print("hpgrem: note: Graphviz's dot program is not installed: writing .dot files only",
              file=sys.stderr)
    written: list[Path] = []
    replay = _Replay({e["task"]: i for i, e in enumerate(stream) if _hashable(e.get("task"))})
    done = 0
    for step in chosen:
        for event in stream[done : step - 1]:
            replay.apply(event)
        done = step - 1
        path = folder / f"step-{step}.dot"
        path.write_text(snapshot(header, replay, step, stream[step - 1]), encoding="utf-8")
        written.append(path)
        if dot is not None:
            svg = _render_svg(dot, path)
            if svg is not None:
                written.append(svg)
    return written


def _render_svg(dot: str, path: Path) -> Path | None:
    """`path` rendered by Graphviz beside it as SVG; None, with a note, when dot fails."""
    svg = path.with_suffix(".svg")
    try:
        result = subprocess.run(
            [dot, "-Tsvg", str(path), "-o", str(svg)], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        problem = str(error)
    else:
        if result.returncode == 0:
            return svg
        problem = result.stderr.strip()
    print(f"hpgrem: note: dot could not render {path}: {problem}", file=sys.stderr)
    return None
