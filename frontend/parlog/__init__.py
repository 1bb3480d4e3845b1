"""The PARLOG front end: parse, check modes and guards, lower to an HPGREM module.

A program may be several files (spec/parlog.md, "Programs in several files"): `:- import(File).`
reads `File` (relative to the importing file's folder, `.par` added) once, however often it is
imported; the relations of every file form one name space, and a relation defined in two files
is an error naming both.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from frontend import Compiled
from hpgrem.diagnostics import CompileError, Diagnostic
from hpgrem.files import read_text
from frontend.parlog.check import PRELUDE_PREFIX, collect_relations, resolve
from frontend.parlog.lower import lower_clause, module_message, module_qualifier
from frontend.parlog.search_check import check_searches
from frontend.parlog.parser import ClauseItem, Directive, Item, parse_goal, parse_program, read_terms
from hpgrem.ir import Entry, Module, Span
from hpgrem.ir.parlog import CONSTRUCTS, AllSolutions, Atom, Relation, Struct, Term, term_vars
from hpgrem.ir.parlog.primitives import PRIMITIVES, SEARCH_PRIMITIVES

PRELUDE_FILE = Path(__file__).parent / "prelude.par"

MAX_FILES = 1000
"""The most files one program may be made of (the importing file included)."""

SOURCE_EXTENSIONS = (".par", ".parlog")


@lru_cache(maxsize=1)
def prelude() -> dict[str, Relation]:
    """The prelude's relations, keyed `prelude:name/arity`, calling each other."""
    diagnostics: list[Diagnostic] = []
    text = PRELUDE_FILE.read_text()
    rels = collect_relations(parse_program(text, "<prelude>"), PRELUDE_PREFIX, diagnostics)
    visible = {k[len(PRELUDE_PREFIX):]: k for k in rels}
    rels = resolve(rels, visible, diagnostics)
    assert not diagnostics, diagnostics
    return rels


def compile_program(text: str, file: str, goal: str | None = None) -> Compiled:
    """Source text -> checked HPGREM module, or the CompileError with every error found (the
    program is checked whole: an error leaves no module). `goal` replaces `main`."""
    warnings: list[Diagnostic] = []
    try:
        return Compiled(_lower_program(text, file, goal, warnings), warnings)
    except CompileError as error:
        return Compiled(None, warnings, error=error)


@dataclass(slots=True)
class _Unit:
    """One file of the program: its name (as spans give it), text and items."""

    file: str
    text: str
    items: list[Item]


class _ImportFailed(Exception):
    """An imported file could not be read (hpgrem.files' one-line message)."""


@dataclass(frozen=True, slots=True)
class _Quoted(Diagnostic):
    """A diagnostic about an imported file, which carries the line it quotes: the command
    line quotes only the text it read itself (the program file, `--goal`), and the front end
    read this file."""

    quote: str | None = None

    def render_line(self, line: str | None) -> str:
        return Diagnostic.render_line(self, self.quote if line is None else line)


def _lower_program(text: str, file: str, goal: str | None, warnings: list[Diagnostic]) -> Module:
    diagnostics: list[Diagnostic] = []
    units = _read_units(text, file, diagnostics)
    order = {u.file: i for i, u in enumerate(units)}
    texts = {u.file: u.text for u in units[1:]}

    def place(d: Diagnostic) -> tuple[int, int, int]:
        return order.get(d.span.file, len(order)), d.span.line, d.span.col

    def fail() -> CompileError:
        warnings[:] = sorted((_quoted(d, texts) for d in warnings), key=place)
        return CompileError(sorted((_quoted(d, texts) for d in diagnostics), key=place))

    if diagnostics:  # a file that could not be read or parsed: what follows would be noise
        raise fail()
    lib = prelude()
    defined = {f"{name}/0" for u in units for item in u.items if isinstance(item, ClauseItem)
               for name in map(_atom_head, item.clauses) if name is not None}
    known = PRIMITIVES | SEARCH_PRIMITIVES | {k[len(PRELUDE_PREFIX):] for k in lib} | defined
    user: dict[str, Relation] = {}
    groups: list[tuple[dict[str, Relation], dict[str, str]]] = []  # each file's relations, its constructs
    for index, unit in enumerate(units):
        items = _module_checked(unit.items, known, diagnostics)
        if "~" in unit.text:
            _warn_negation_terms(items, warnings)
        rels = collect_relations(items, "", diagnostics)
        own: dict[str, Relation] = {}
        renamed: dict[str, str] = {}
        for key, rel in rels.items():
            if isinstance(rel, AllSolutions) and rel.construct in CONSTRUCTS:
                # a construct's key is its line and column: unique in its file only
                new = key if index == 0 else f"{index}:{key}"
                renamed[key] = new
                own[new] = replace(rel, key=new) if new != key else rel
            elif key in user:
                first = user[key].span
                diagnostics.append(Diagnostic(rel.span, f"{key} is defined in two files: here and at "
                                                        f"{first.file}:{first.line}:{first.col} (a relation "
                                                        "belongs to one file)"))
            else:
                own[key] = rel
        user.update(own)
        groups.append((own, renamed))
    visible = {k[len(PRELUDE_PREFIX):]: k for k in lib}
    visible.update({k: k for k in user})
    entry = None
    if goal is not None:
        goal_rel, constructs = _goal_relation(goal, diagnostics, warnings)
        if goal_rel is not None:
            own = {goal_rel.key: goal_rel, **{c.key: c for c in constructs}}
            user.update(own)
            visible.update((c.key, c.key) for c in constructs)
            groups.append((own, {}))
            entry = Entry(goal_rel.key, tuple(_goal_outputs(goal_rel)))
    elif "main/0" in user:
        entry = Entry("main/0", ())
    modes = {**{k: r.modes for k, r in lib.items()}, **{k: r.modes for k, r in user.items()}}
    resolved: dict[str, Relation] = {}
    for own, renamed in groups:  # each file's calls of its constructs go to its own
        resolved.update(resolve(own, {**visible, **renamed}, diagnostics, modes))
    user = {k: resolved[k] for k in user}
    check_searches(user, diagnostics)
    if diagnostics:
        raise fail()
    warnings[:] = sorted((_quoted(d, texts) for d in warnings), key=place)
    return Module(file, {**lib, **user}, entry, "parlog")


def _atom_head(clause: Term) -> str | None:
    """The name of a clause's relation when it has arity 0, else None."""
    if isinstance(clause, Struct) and clause.name in ("<-", ":-") and len(clause.args) == 2:
        clause = clause.args[0]
    return clause.name if isinstance(clause, Atom) else None


def _quoted(d: Diagnostic, texts: dict[str, str]) -> Diagnostic:
    """`d` with the line it quotes, when it is about an imported file."""
    text = texts.get(d.span.file)
    if text is None or isinstance(d, _Quoted):
        return d
    lines = text.split("\n", d.span.line)
    line = lines[d.span.line - 1] if 1 <= d.span.line <= len(lines) else None
    return _Quoted(d.span, d.message, d.severity, line)


# -- files ------------------------------------------------------------------------------------
def _read_units(text: str, file: str, diagnostics: list[Diagnostic]) -> list[_Unit]:
    """The program's files, the given one first, then those it imports (breadth first), each
    once. The given file's syntax error is raised at once, as for a program of one file; the
    imported files' problems go to `diagnostics`."""
    units = [_Unit(file, text, parse_program(text, file))]
    seen = {os.path.realpath(file) if file else file}
    at = 0
    while at < len(units):
        unit = units[at]
        at += 1
        kept: list[Item] = []
        for item in unit.items:
            if not isinstance(item, Directive):
                kept.append(item)
                continue
            path, where = _import_path(item, unit.file, diagnostics)
            if path is None:
                continue
            real = os.path.realpath(path)
            if real in seen:
                continue  # imported before (a cycle, or twice): each file once
            if len(units) >= MAX_FILES:
                diagnostics.append(Diagnostic(where, f"too many files: a program may be made of at most "
                                                     f"{MAX_FILES} files"))
                continue
            seen.add(real)
            try:
                source = _read_import(path)
            except _ImportFailed as err:
                diagnostics.append(Diagnostic(where, f"cannot import {path}: {err}"))
                continue
            try:
                units.append(_Unit(path, source, parse_program(source, path)))
            except CompileError as err:
                diagnostics.extend(err.diagnostics)
                # its text, to quote
                units.append(_Unit(path, source, []))
        unit.items = kept
    return units


def _import_path(item: Directive, importer: str, diagnostics: list[Diagnostic]) -> tuple[str | None, Span]:
    """The path `:- import(File).` names (relative to `importer`'s folder), or None after a
    located error for a directive that is no import."""
    term = item.term
    if isinstance(term, Struct) and term.name == "module":
        diagnostics.append(Diagnostic(item.span, "modules are not supported: ':- module(...)' declares "
                                                 "nothing here; a program's files share one name space of "
                                                 "relations, and a file uses another's with "
                                                 "':- import(File).'"))
        return None, item.span
    if not (isinstance(term, Struct) and term.name == "import" and len(term.args) == 1):
        diagnostics.append(Diagnostic(item.span, "unknown directive: the only directive is ':- import(File).' "
                                                 "(File an atom such as lib or 'sub/lib.par')"))
        return None, item.span
    name = term.args[0]
    if not isinstance(name, Atom) or not name.name or name.name == "[]":
        diagnostics.append(Diagnostic(name.span, "import expects a file name, an atom such as lib or "
                                                 "'sub/lib.par'"))
        return None, name.span
    if os.path.isabs(name.name) or name.name.startswith("~"):
        diagnostics.append(Diagnostic(name.span, f"import path '{name.name}' is absolute: an import is "
                                                 "relative to the importing file's folder"))
        return None, name.span
    relative = name.name if name.name.endswith(SOURCE_EXTENSIONS) else name.name + ".par"
    return os.path.join(os.path.dirname(importer), relative), name.span


def _read_import(path: str) -> str:
    """The text of an imported file; _ImportFailed for a missing, unreadable or non-UTF-8 file
    and for anything but a regular file (a FIFO or a device could block or never end)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise _ImportFailed("not a regular file")
    try:
        return read_text(path, _ImportFailed)
    except _ImportFailed as err:  # its message starts with the path, which the caller names
        raise _ImportFailed(str(err).removeprefix(f"{path}: ")) from None


# -- checks on the items ------------------------------------------------------------------------
def _module_checked(items: list[Item], known: set[str], diagnostics: list[Diagnostic]) -> list[Item]:
    """The items, each `H <- m : B` whose guard's last goal is an atom `m` that is no relation
    of arity 0 (of the program, the prelude or the primitives) reported as a module-qualified
    goal `m:B` (and read as `H <- B`, so that m/0 is not reported again)."""
    out = items
    for i, item in enumerate(items):
        if not isinstance(item, ClauseItem):
            continue
        clauses = list(item.clauses)
        for j, c in enumerate(clauses):
            if not (isinstance(c, Struct) and c.name == "<-" and len(c.args) == 2):
                continue
            m = module_qualifier(c.args[1])
            if m is None or f"{m.name}/0" in known:
                continue
            diagnostics.append(Diagnostic(c.args[1].span, module_message(m.name, guard=True)))
            clauses[j] = Struct("<-", (c.args[0], _unqualified(c.args[1])), c.span)
        if clauses != list(item.clauses):
            if out is items:
                out = list(items)
            out[i] = replace(item, clauses=tuple(clauses))
    return out


def _unqualified(colon: Struct) -> Term:
    """`(a, m) : B` as `a, B`: the module atom dropped."""
    spine = []
    left = colon.args[0]
    while isinstance(left, Struct) and left.name in (",", "&") and len(left.args) == 2:
        spine.append(left)
        left = left.args[1]
    term = colon.args[1]
    for node in reversed(spine):
        term = Struct(node.name, (node.args[0], term), node.span)
    return term


_GOAL_ARGS = {(",", 2): (0, 1), ("&", 2): (0, 1), (":", 2): (0, 1), (";", 2): (0, 1), ("<-", 2): (0, 1),
              (":-", 2): (0, 1), ("@", 2): (0,), ("~", 1): (0,), ("set", 3): (2,), ("subset", 3): (2,),
              ("call", 1): (0,), ("call", 3): (0,)}
"""The arguments of a goal that are goals themselves (every other one is a term)."""


def _warn_negation_terms(items: list[Item], warnings: list[Diagnostic]) -> None:
    """A warning at each `~` in an argument (`p(~(1+2))`, KLIC's argument arithmetic): there
    it is a term, PARLOG's negation, passed on unevaluated."""
    for item in items:
        if isinstance(item, ClauseItem):
            for c in item.clauses:
                if isinstance(c, Struct) and c.name in ("<-", ":-") and len(c.args) == 2:
                    _negation_terms(c.args[0], False, warnings)
                    _negation_terms(c.args[1], True, warnings)
                else:
                    _negation_terms(c, False, warnings)


def _negation_terms(top: Term, goal: bool, warnings: list[Diagnostic]) -> None:
    """`top` a goal (`goal`) or a clause head: warn at each `~` in an argument of it."""
    stack = [(top, goal)]
    while stack:
        t, is_goal = stack.pop()
        if not isinstance(t, Struct):
            continue
        if not is_goal and t.name == "~" and len(t.args) == 1:
            warnings.append(Diagnostic(t.span, "'~' in an argument is a term here (PARLOG's '~' is negation, "
                                               "a goal), passed on unevaluated: KLIC's argument arithmetic "
                                               "p(~(E)) is not supported; compute X is E first and pass X",
                                       "warning"))
            continue
        goals = _GOAL_ARGS.get((t.name, len(t.args)), ()) if is_goal else ()
        stack.extend((a, i in goals) for i, a in enumerate(t.args))


def _goal_relation(goal: str, diagnostics: list[Diagnostic],
                   warnings: list[Diagnostic]) -> tuple[Relation | None, list[Relation]]:
    """`--goal 'Conj'` becomes `'$goal'(V1..Vn) <- Conj` with every Vi an output; with it come
    the relations its constructs (set/3, subset/3, ~) became. A goal has no guard: a ':' in it
    is a module qualification (`lists:append(...)`) or an error."""
    body = parse_goal(goal)
    if isinstance(body, Struct) and body.name == ":" and len(body.args) == 2:
        m = module_qualifier(body)
        diagnostics.append(Diagnostic(body.span, module_message(m.name) if m is not None else
                                      "':' cannot appear in a goal (a goal has no guard)"))
        return None, []
    if "~" in goal:
        _negation_terms(body, True, warnings)
    names = [v for v in term_vars(Struct("$goal", tuple(_outside_constructs(body))))
             if not v.name.startswith("_")]
    raw = lower_clause(Struct("<-", (Struct("$goal", tuple(names)) if names else Atom("$goal"), body),
                              body.span), diagnostics, "goal:")
    if raw is None or raw.broken:
        return None, []
    key = f"$goal/{len(names)}"
    return Relation(key, "$goal", ("^",) * len(names), ((raw.clause,),), body.span), raw.constructs


def _outside_constructs(goal: Term) -> list[Term]:
    """The goal's goals with its set/3, subset/3 and ~ cut down to their lists: the variables
    that occur only in a construct are its own, not the goal's outputs."""
    out: list[Term] = []
    stack = [goal]
    while stack:
        g = stack.pop()
        if isinstance(g, Struct) and g.name in (",", "&") and len(g.args) == 2:
            stack.extend(reversed(g.args))
        elif isinstance(g, Struct) and g.name in ("set", "subset") and len(g.args) == 3:
            out.append(g.args[0])
        elif not (isinstance(g, Struct) and g.name == "~" and len(g.args) == 1):
            out.append(g)
    return out


def _goal_outputs(rel: Relation) -> list[str]:
    clause = rel.groups[0][0]
    return [v.name for a in clause.head for v in term_vars(a)]


__all__ = ["CompileError", "Compiled", "compile_program", "prelude", "read_terms"]
