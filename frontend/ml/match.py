"""Pattern-match compilation: the rules of a match become a decision tree (`typed.Tree`) that
tests each part of the matched values at most once on any path, left to right.

Rules are rows of a clause matrix (one column per root: one for `fn`/`case`/`handle`/`val`, one
per curried argument for `fun`). The compiler takes the first row: if nothing in it still needs
a test it is the leaf; otherwise it switches on the first part of that row that needs one (a
constructor of a datatype with more than one constructor, an exception, a constant) and
compiles, for each key met in that column, the rows that agree with it, plus a default for the
rows that do not test it, unless the keys cover the datatype. Records, tuples, refs and
constructors of one-constructor datatypes need no test: their parts are spread into the row.

Warnings (as Poly/ML gives them, in our `FILE:LINE:COL: warning: MESSAGE` form):
- `matches are not exhaustive` at the `fn`, `case` or `fun` whose tree can reach `Fail`
  (never for `handle`, whose failure re-raises);
- `pattern N is redundant` at the N-th rule (1-based) when no leaf reaches it;
- `pattern is not exhaustive` at the pattern of a `val` that may raise `Bind`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.diagnostics import Diagnostic
from frontend.ml.typed import Arm, ExnName, Expr, Fail, Leaf, Match, Path, Switch, Tree, Var
from frontend.ml.types import Constructor, Type
from hpgrem.ir import Span

# ---------------------------------------------------------------------------------------------
# Patterns as elaboration hands them over (names resolved, types checked)


@dataclass(frozen=True, slots=True)
class MWild:
    pass


@dataclass(frozen=True, slots=True)
class MVar:
    var: Var


@dataclass(frozen=True, slots=True)
class MConst:
    """An int, string or char constant; `kind` says which."""

    value: int | str
    kind: str


@dataclass(frozen=True, slots=True)
class MCon:
    """A datatype constructor (never `ref`: that is `MRef`)."""

    con: Constructor
    arg: MPat | None


@dataclass(frozen=True, slots=True)
class MExn:
    exn: ExnName
    arg: MPat | None


@dataclass(frozen=True, slots=True)
class MRecord:
    """A record or tuple pattern: one pattern per field, in canonical label order."""

    fields: tuple[MPat, ...]


@dataclass(frozen=True, slots=True)
class MRef:
    pat: MPat


@dataclass(frozen=True, slots=True)
class MLayer:
    """`x as p`."""

    var: Var
    pat: MPat


MPat = MWild | MVar | MConst | MCon | MExn | MRecord | MRef | MLayer


@dataclass(frozen=True, slots=True)
class Rule:
    """One row: a pattern per root, the body, and where the rule's pattern starts."""

    pats: tuple[MPat, ...]
    body: Expr
    span: Span


# ---------------------------------------------------------------------------------------------
# The compiler


@dataclass(frozen=True, slots=True)
class _Row:
    pending: tuple[tuple[Path, MPat], ...]  # parts still to test, left to right
    arm: int


def _spread(path: Path, pat: MPat, out: list[tuple[Path, MPat]]) -> None:
    """Append the tests `pat` needs at `path`, spreading the parts that need none."""
    if isinstance(pat, MLayer):
        _spread(path, pat.pat, out)
    elif isinstance(pat, MRecord):
        for i, sub in enumerate(pat.fields):
            _spread(path.then(i), sub, out)
    elif isinstance(pat, MRef):
        _spread(path.then("deref"), pat.pat, out)
    elif isinstance(pat, MCon) and len(pat.con.tycon.constructors) == 1:
        if pat.arg is not None:
            _spread(path.then(_arg_step(pat)), pat.arg, out)
    elif isinstance(pat, (MCon, MExn, MConst)):
        out.append((path, pat))


def _arg_step(pat: MCon | MExn) -> str:
    """The path step to a constructor's argument: `cons` for `::` (whose argument, the pair, is
    the cell itself at run time), `exnarg` for an exception, `arg` for other constructors."""
    if isinstance(pat, MExn):
        return "exnarg"
    return "cons" if pat.con.tycon.name == "list" else "arg"


def _key(pat: MPat) -> Constructor | ExnName | int | str:
    if isinstance(pat, MCon):
        return pat.con
    if isinstance(pat, MExn):
        return pat.exn
    assert isinstance(pat, MConst)
    return pat.value


def _kind(pat: MPat) -> str:
    return "con" if isinstance(pat, MCon) else "exn" if isinstance(pat, MExn) else pat.kind


def _same(a, b) -> bool:
    return a is b if isinstance(a, Constructor) else a == b


class _Compiler:
    def __init__(self):
        self.reached: set[int] = set()
        self.can_fail = False

    def compile(self, rows: list[_Row]) -> Tree:
        if not rows:
            self.can_fail = True
            return Fail()
        first = rows[0]
        if not first.pending:
            self.reached.add(first.arm)
            return Leaf(first.arm)
        path, pat = first.pending[0]
        kind = _kind(pat)
        # One pass to find each row's test at `path` and the keys in order of appearance, one
        # to give each key its rows (those testing for it, specialized, and those not testing
        # `path`, in order): linear in the rows, so a `case` of thousands of constants is quick.
        found_at = [_find(row, path) for row in rows]
        keys: list = []
        index_of: dict = {}
        for found in found_at:
            if found is not None:
                key = _key(found[1])
                if _index(index_of, keys, key) is None:
                    index_of[_hashable(key)] = len(keys)
                    keys.append(key)
        subs: list[list[_Row]] = [[] for _ in keys]
        for row, found in zip(rows, found_at):
            if found is None:
                for sub in subs:
                    sub.append(row)
                continue
            index, p = found
            spread: list[tuple[Path, MPat]] = []
            arg = p.arg if isinstance(p, (MCon, MExn)) else None
            if arg is not None:
                _spread(path.then(_arg_step(p)), arg, spread)
            subs[_index(index_of, keys, _key(p))].append(
                _Row(row.pending[:index] + tuple(spread) + row.pending[index + 1:], row.arm))
        cases = [(key, self.compile(sub)) for key, sub in zip(keys, subs)]
        complete = kind == "con" and len(keys) == len(pat.con.tycon.constructors)
        default = None if complete else self.compile([r for r, f in zip(rows, found_at) if f is None])
        return Switch(path, kind, tuple(cases), default)


def _hashable(key):
    """A dictionary key for a test's key: constructors by identity (as `_same` compares them),
    constants by value; None for an exception name (compared by equality, not hashed)."""
    if isinstance(key, Constructor):
        return ("con", id(key))
    if isinstance(key, (int, str)):
        return (type(key).__name__, key)
    return None


def _index(index_of: dict, keys: list, key) -> int | None:
    """Where `key` is in `keys` (None if it is not there)."""
    h = _hashable(key)
    if h is not None:
        return index_of.get(h)
    return next((i for i, k in enumerate(keys) if _same(k, key)), None)


def _find(row: _Row, path: Path) -> tuple[int, MPat] | None:
    for i, (p, pat) in enumerate(row.pending):
        if p == path:
            return i, pat
    return None


def bindings(roots: tuple[Var, ...], pats: tuple[MPat, ...]) -> tuple[tuple[Var, Path], ...]:
    """Each variable of the patterns with the path of the value it names."""
    out: list[tuple[Var, Path]] = []

    def walk(path: Path, pat: MPat) -> None:
        if isinstance(pat, MVar):
            out.append((pat.var, path))
        elif isinstance(pat, MLayer):
            out.append((pat.var, path))
            walk(path, pat.pat)
        elif isinstance(pat, MRecord):
            for i, sub in enumerate(pat.fields):
                walk(path.then(i), sub)
        elif isinstance(pat, MRef):
            walk(path.then("deref"), pat.pat)
        elif isinstance(pat, (MCon, MExn)) and pat.arg is not None:
            walk(path.then(_arg_step(pat)), pat.arg)

    for root, pat in zip(roots, pats):
        walk(Path(root), pat)
    return tuple(out)


def _tree(roots: tuple[Var, ...], rules: list[tuple[MPat, ...]]) -> tuple[Tree, _Compiler]:
    rows = []
    for arm, pats in enumerate(rules):
        pending: list[tuple[Path, MPat]] = []
        for root, pat in zip(roots, pats):
            _spread(Path(root), pat, pending)
        rows.append(_Row(tuple(pending), arm))
    compiler = _Compiler()
    return compiler.compile(rows), compiler


def compile_match(roots: tuple[Var, ...], rules: list[Rule], failure: str, type: Type,
                  span: Span) -> tuple[Match, list[Diagnostic]]:
    """The decision tree of a match, and its warnings. `failure` is `Match` (for `fn`, `case`,
    `fun`) or `reraise` (for `handle`: no exhaustiveness warning)."""
    tree, compiler = _tree(roots, [r.pats for r in rules])
    warnings = []
    if compiler.can_fail and failure != "reraise":
        warnings.append(Diagnostic(span, "matches are not exhaustive", "warning"))
    for i, rule in enumerate(rules):
        if i not in compiler.reached:
            warnings.append(Diagnostic(rule.span, f"pattern {i + 1} is redundant", "warning"))
    arms = tuple(Arm(bindings(roots, r.pats), r.body, r.span) for r in rules)
    return Match(roots, tree, arms, failure, type, span), warnings


def compile_binding(root: Var, pat: MPat, span: Span) -> tuple[Tree, tuple[tuple[Var, Path], ...], list[Diagnostic]]:
    """The tree of a `val` pattern (its `Fail` raises `Bind`), its bindings and warning."""
    tree, compiler = _tree((root,), [(pat,)])
    warnings = [Diagnostic(span, "pattern is not exhaustive", "warning")] if compiler.can_fail else []
    return tree, bindings((root,), (pat,)), warnings
