"""Profiles for users (`hpgrem run --profile`, docs/profile.md): where a run spends its time,
by the program's own names and source lines.

Programs run as generated Python. Each loader registers, under the file name it passes to
`compile()`, how to name its generated functions (`register_code`): a table from a generated
name's prefix to the function or relation it was made from (`Where`). The run goes under
cProfile (its C profiler costs far less than a Python hook), and `rows()` turns its entries
into rows of a table:

- a generated function is charged to the program function or relation whose prefix is the
  longest that its Python name starts with (ML's `f3`, `f3_d`, `f3_h1`: one row, `fib`);
- the machine's own code is grouped by what it does: `(machine: scheduler)`, `(machine:
  unification)`, ..., and ML's basis functions written in Python by their basis name,
  `(basis: Int.toString)`;
- everything else (a builtin such as `len`, a helper of the generated code, the standard
  library) is charged to whoever called it, in proportion to the time each caller spent in
  it: `len` called by `fib` is `fib`'s time.

So the rows' self times add up to the profiled run. A row's total time (itself and what it
called) is cProfile's, with the calls between the Python functions of one row taken out; it
is exact for a row of one Python function and for direct calls among its functions, and may
count twice the time of a call chain that leaves the row and comes back into it. The
machine's rows have none (the scheduler's would be the whole run).
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, field

# -- what the loaders register ------------------------------------------------------------------


@dataclass(frozen=True)
class Where:
    """What a row stands for: `name` as a user writes it (`fib`, `nrev/2`, `(basis: map)`,
    `(machine: scheduler)`), its source position (file None when it has none), and `kind`:
    "program" (the program's own code, the prelude's too), "basis" (a basis function written
    in Python) or "machine" (the machine's own code: no calls or total time of its own)."""

    name: str
    file: str | None = None
    line: int = 0
    col: int = 0
    kind: str = "program"

    def place(self) -> str:
        return "" if self.file is None else f"{self.file}:{self.line}"


def machine(part: str) -> Where:
    """The row of a part of the machine: `(machine: scheduler)`."""
    return Where(f"(machine: {part})", kind="machine")


@dataclass
class CodeNames:
    """How a dialect names its code in a profile (what its `register_code` builder returns)."""

    prefixes: dict  # prefix of a generated function's name -> Where (the longest prefix wins)
    functions: dict = field(default_factory=dict)  # a runtime function's code object -> Where (basis functions)
    files: dict = field(default_factory=dict)  # absolute path of a runtime file -> part, or None: charged to callers

    def where(self, name: str) -> Where | None:
        """The row of the generated function `name`: its longest registered prefix's (None: a
        lambda or comprehension of the generated code, charged to its caller)."""
        prefixes = self.prefixes
        for end in range(len(name), 0, -1):
            found = prefixes.get(name[:end])
            if found is not None:
                return found
        return None


# compile() file name -> (a function making the CodeNames of that code, weak references to its
# arguments); made only when a profile is read, so loading pays nothing, and forgotten with the
# code's compiler (a process that runs many programs keeps none of them). A later load under
# the same file name replaces the entry: a process profiles the module it loaded last.
_CODE: dict[str, tuple] = {}


def register_code(filename: str, names, *args) -> None:
    """A loader compiles generated code under `filename`: `names(*args)` is its CodeNames
    (each argument an object that the loaded code keeps alive: its compiler, its analysis)."""
    _CODE[filename] = (names, tuple(weakref.ref(a) for a in args))


def _registered() -> dict:
    """{file name: CodeNames} of the registered code still alive."""
    out = {}
    for file, (names, refs) in list(_CODE.items()):
        args = [r() for r in refs]
        if any(a is None for a in args):
            _CODE.pop(file, None)
        else:
            out[file] = names(*args)
    return out


# -- the machine's own code ---------------------------------------------------------------------

# The core's files (relative to pam/) by what they do; a dialect names its own (CodeNames.files),
# and a file named nowhere is "(machine: ITS PATH)". None: charged to the callers.
MACHINE_PARTS = {
    "driver.py": "scheduler", "pe.py": "scheduler", "machine.py": "scheduler", "task.py": "scheduler",
    "step.py": "scheduler", "stats.py": "scheduler", "runtimes.py": "scheduler",
    "unify.py": "unification", "terms.py": "unification",
    "distribution.py": "distribution", "pack.py": "distribution", "termination.py": "distribution",
    "topology.py": "distribution", "ranks.py": "distribution", "sentinel.py": "distribution",
    "transport/mpi.py": "distribution", "transport/sim.py": "simulation",
    "limits.py": "limits", "trace.py": "trace", "emit.py": None, "errors.py": None,
}
OUTPUT = {("machine.py", "Output.write"), ("machine.py", "Output.flush")}  # print, write/1
PAM_DIR = os.path.dirname(os.path.abspath(__file__))
OTHER = machine("other")
_THIS = os.path.abspath(__file__)


class _Classifier:
    """Which row a code object's time goes to: a Where, or None (charged to its callers)."""

    def __init__(self):
        self.names: dict[str, CodeNames] = {}  # by compile() file name
        self.functions: dict = {}
        self.files: dict = {}
        for file, made in _registered().items():
            self.names[file] = made
            self.functions.update(made.functions)
            self.files.update(made.files)
        self.memo: dict = {}

    def __call__(self, code) -> Where | None:
        if isinstance(code, str):  # a builtin (in a profile made with them): its caller's
            return None
        known = self.memo.get(code, self)
        if known is self:
            known = self.memo[code] = self._classify(code)
        return known

    def _classify(self, code) -> Where | None:
        names = self.names.get(code.co_filename)
        if names is not None:
            return names.where(code.co_name)
        if code in self.functions:
            return self.functions[code]
        path = os.path.abspath(code.co_filename)
        if path in self.files:
            part = self.files[path]
            return None if part is None else machine(part)
        if not path.startswith(PAM_DIR + os.sep):
            return None  # the standard library, a package: its caller's
        rel = os.path.relpath(path, PAM_DIR).replace(os.sep, "/")
        if (rel, code.co_qualname) in OUTPUT:
            return machine("output")
        part = MACHINE_PARTS.get(rel, rel[:-3] if rel.endswith(".py") else rel)
        return None if part is None else machine(part)


# -- rows ---------------------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the profile: a program function or relation, or a part of the machine."""

    where: Where
    self_s: float = 0.0
    total_s: float | None = 0.0  # None: not meaningful (the machine's rows)
    calls: int | None = 0  # None: not meaningful (the machine's rows)

    def to_json(self, profiled: float) -> dict:
        w = self.where
        return {"name": w.name, "kind": w.kind, "file": w.file, "line": w.line or None, "col": w.col or None,
                "self_s": round(self.self_s, 6), "total_s": None if self.total_s is None else round(self.total_s, 6),
                "calls": self.calls, "share": round(self.self_s / profiled, 6) if profiled > 0 else 0.0}


def rows(entries) -> list[Row]:
    """The rows of cProfile's entries (`Profile.getstats()`), by self time, largest first."""
    group = _Classifier()
    table: dict[Where, list] = {}  # where -> [self, total, calls]
    callers: dict = {}  # code -> [(caller's code, seconds spent in code when called by it)]
    own: list = []  # (code, self seconds) of entries charged to their callers
    for e in entries:
        if _is_profiler(e.code):
            continue
        for s in e.calls or ():
            callers.setdefault(s.code, []).append((e.code, s.inlinetime, s.callcount))
        g = group(e.code)
        if g is None:
            own.append((e.code, e.inlinetime))
            continue
        acc = table.setdefault(g, [0.0, 0.0, 0])
        acc[0] += e.inlinetime
        acc[1] += e.totaltime
        acc[2] += e.callcount
        for s in e.calls or ():  # a call between two functions of one row is no call of the row
            if s.code is not e.code and group(s.code) == g:
                acc[1] -= s.totaltime
                acc[2] -= s.callcount
    shares = _Shares(group, callers)
    for code, seconds in own:
        for g, part in shares(code).items():
            table.setdefault(g, [0.0, 0.0, 0])[0] += seconds * part
    profiled = sum(acc[0] for acc in table.values())
    out = []
    for g, (self_s, total, calls) in table.items():
        if g.kind == "machine":
            out.append(Row(g, self_s, None, None))
        else:
            out.append(Row(g, self_s, min(max(total, self_s), max(profiled, self_s)), calls))
    out.sort(key=lambda r: (-r.self_s, r.where.name))
    return out


class _Shares:
    """How the time of a function charged to its callers divides among rows (by the time it
    spent for each caller; a caller charged to its own callers passes its share on)."""

    def __init__(self, group, callers: dict):
        self.group = group
        self.callers = callers
        self.memo: dict = {}

    def __call__(self, code, seen: frozenset = frozenset()) -> dict[Where, float]:
        g = self.group(code)
        if g is not None:
            return {g: 1.0}
        if code in self.memo:
            return self.memo[code]
        seen = seen | {code}
        # a recursive helper's calls of itself (or of a helper that called it) divide like the
        # calls from outside: those edges are left out
        by = [c for c in self.callers.get(code, ()) if c[0] not in seen]
        weight = sum(t for _, t, _ in by)
        count = sum(n for _, _, n in by)
        out: dict[Where, float] = {}
        for caller, t, n in by:
            part = t / weight if weight > 0 else n / count if count else 1 / len(by)
            if part:
                for g, p in self(caller, seen).items():
                    out[g] = out.get(g, 0.0) + part * p
        if not out:  # called from nowhere the profile saw
            out = {OTHER: 1.0}
        if len(seen) == 1:
            self.memo[code] = out
        return out


def _is_profiler(code) -> bool:
    """The profiler's own entries (its `__exit__` and cProfile's `disable`): not the run's."""
    if isinstance(code, str):
        return "_lsprof.Profiler" in code
    return os.path.abspath(code.co_filename) == _THIS


def merge(parts: list[list[Row]]) -> list[Row]:
    """The rows of several processes (MPI ranks) summed, by what they name."""
    table: dict[Where, Row] = {}
    for rows_ in parts:
        for r in rows_:
            m = table.get(r.where)
            if m is None:
                table[r.where] = Row(r.where, r.self_s, r.total_s, r.calls)
            else:
                m.self_s += r.self_s
                m.calls = None if m.calls is None or r.calls is None else m.calls + r.calls
                m.total_s = None if m.total_s is None or r.total_s is None else m.total_s + r.total_s
    out = list(table.values())
    out.sort(key=lambda r: (-r.self_s, r.where.name))
    return out


# -- running and reporting ----------------------------------------------------------------------


class Profiler:
    """cProfile around a run: `with Profiler() as p: machine.run()`, then `p.rows()`."""

    def __init__(self):
        import cProfile
        # builtins (len, type, list.append) are not timed apart: their time is their caller's
        # self time, as the rows would charge it anyway, and the profile costs a third less
        self.profile = cProfile.Profile(builtins=False)

    def __enter__(self):
        self.profile.enable()
        return self

    def __exit__(self, *exc) -> None:
        self.profile.disable()

    def rows(self) -> list[Row]:
        return rows(self.profile.getstats())


TOP = 20  # rows the table shows; the JSON has them all


def table(rows_: list[Row], title: str, top: int = TOP) -> str:
    """The profile as text: the `top` rows by self time, then what the others add up to."""
    profiled = sum(r.self_s for r in rows_)
    shown = rows_[:top]
    seen: dict[tuple, int] = {}
    for r in shown:
        seen[r.where.name, r.where.place()] = seen.get((r.where.name, r.where.place()), 0) + 1
    lines = [f"profile of {title}: {profiled:.4f} s profiled",
             f"{'self s':>10} {'self %':>7} {'total s':>10} {'calls':>12}  {'function':<24} where"]

    def share(s: float) -> str:
        return f"{100 * s / profiled:6.1f}%" if profiled > 0 else "     -%"

    for r in shown:
        w = r.where
        total = "-" if r.total_s is None else f"{r.total_s:.4f}"
        calls = "" if r.calls is None else f"{r.calls:,}"
        place = w.place()
        if seen[w.name, place] > 1:  # two functions on one line (`fn`s): the column tells them apart
            place += f":{w.col}"
        lines.append(f"{r.self_s:10.4f} {share(r.self_s):>7} {total:>10} {calls:>12}  {w.name:<24} {place}".rstrip())
    rest = rows_[top:]
    if rest:
        s = sum(r.self_s for r in rest)
        lines.append(f"{s:10.4f} {share(s):>7} {'':>10} {'':>12}  ({len(rest)} more rows: --profile-json has them all)")
    lines.append(f"{profiled:10.4f} {share(profiled):>7} {'':>10} {'':>12}  total")
    return "\n".join(lines)


def to_json(rows_: list[Row], **about) -> str:
    """Every row as JSON: {**about, "profiled_s", "rows": [{"name", "kind", "file", "line",
    "col", "self_s", "total_s", "calls", "share"}]} (docs/profile.md)."""
    import json
    profiled = sum(r.self_s for r in rows_)
    return json.dumps({**about, "profiled_s": round(profiled, 6),
                       "rows": [r.to_json(profiled) for r in rows_]}, indent=1) + "\n"
