"""The body of one relation's step function (pam/parlog/rules.py): its search groups, each a
decision graph (a switch on one argument, shared matching) or clauses one after another, and,
for a relation that loops, the whole inside `while True:`. Which shapes a relation gets is
what the passes recorded (`Shape`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpgrem.ir.parlog import Atom, Clause, Float, Int, Relation, Struct, Term, Var, calls_in
from pam.parlog.clause_code import ClauseCode, deref_line
from pam.parlog.notes import ARITH_TASKS, COST, DEST, FED, LIFT, LOOP, SCHEDULE, SHARE, SWITCH

if TYPE_CHECKING:
    from pam.parlog.rules import RuleCompiler


class Shape:
    """The code shapes the passes asked for, for one relation (docs/passes.md): each is an
    annotation, absent at -O0, so -O0 gives the plain shape. Annotations may come from a
    `.hpg` file: a value of the wrong type or out of range is ignored, never pasted in code."""

    __slots__ = ("switch", "share", "loop", "dest", "arith_tasks", "lift", "schedule", "fed")

    def __init__(self, notes: dict, rel: Relation):
        def position(name: str, mode: str) -> int | None:
            k = notes.get(name)
            return k if type(k) is int and 0 <= k < rel.arity and rel.modes[k] == mode else None

        self.switch = position(SWITCH, "?")
        self.share = notes.get(SHARE) is True  # shared matching, complementary guards
        self.loop = notes.get(LOOP) is True
        self.dest = position(DEST, "^") if self.loop else None  # it needs the loop
        self.arith_tasks = notes.get(ARITH_TASKS) is True
        self.schedule = notes.get(SCHEDULE) is True  # its goals may run in their caller's step
        lift = notes.get(LIFT)  # (size position, growth per unit)
        self.lift = None
        if type(lift) is tuple and len(lift) == 2 and type(lift[0]) is int and 0 <= lift[0] < rel.arity \
                and type(lift[1]) is float and 1.0 < lift[1] < 4.0:
            self.lift = (lift[0], lift[1], int(notes[COST]))
        self.fed = _fed(notes.get(FED), rel)


def _fed(note, rel: Relation) -> dict[tuple[int, int], set[int]] | None:
    """The flow analysis's note: (clause, goal) -> the goals of that clause's flat body that
    feed the goal (None when absent or malformed: then every goal counts as fed)."""
    if type(note) is not tuple:
        return None
    sizes = [len(calls_in(c.body)) for c in rel.clauses()]
    out: dict[tuple[int, int], set[int]] = {}
    for triple in note:
        if not (type(triple) is tuple and len(triple) == 3 and all(type(x) is int for x in triple)):
            return None
        k, i, j = triple
        if not (0 <= k < len(sizes) and 0 <= i < sizes[k] and 0 <= j < sizes[k]):
            return None
        out.setdefault((k, i), set()).add(j)
    return out


def principal(pat: Term):
    """The key a switch dispatches a head pattern on (None: a variable matches anything)."""
    if isinstance(pat, Var):
        return None
    if isinstance(pat, Atom):
        return ("atom", pat.name)
    if isinstance(pat, Int):
        return ("int", pat.value)
    if isinstance(pat, Float):
        return ("float", repr(pat.value))
    if pat.name == "[|]" and len(pat.args) == 2:
        return ("cons",)
    return ("struct", pat.name, len(pat.args))


class RelationCode:
    """The body of one relation's step function: the search groups, each a decision graph
    (a switch on one argument, shared matching) or clauses one after another; with a loop, the
    whole inside `while True:`, a self tail call going round again."""

    def __init__(self, rc: RuleCompiler, rel: Relation, shape: Shape):
        self.rc = rc
        self.rel = rel
        self.shape = shape
        self.e = rc.out
        self.blocks = 0  # `while True:` blocks around the code being emitted, inside the loop
        self.loop_site = "ls"  # the call site a loop's task holds: a constant, or the local `ls`

    def args(self) -> str:
        return "(" + "".join(f"a{i}, " for i in range(self.rel.arity)) + ")"

    def close_hole(self) -> None:
        """The list cell built in place still has no tail: give it a variable, which is the
        output argument from now on."""
        d = self.shape.dest
        if d is not None:
            self.e(f"if d{d} is not None:")
            self.e(f"    a{d} = d{d}.tail = Var()")
            self.e(f"    d{d} = None")

    def fill_hole(self, x: str) -> None:
        """A value read as None is the cell this loop is building (the call's input holds its
        own output): the cell gets its variable now, as at -O0 it would have had one."""
        d = self.shape.dest
        e = self.e
        e(f"if {x} is None:")
        e(f"    if d{d} is not None:")
        e(f"        a{d} = d{d}.tail = Var()")
        e(f"        d{d} = None")
        e(f"    {x} = a{d}")

    def leave(self) -> None:
        """Before the step returns anything but its loop state: the task holds this iteration's
        goal and the PE learns the reductions the loop ran."""
        if not self.shape.loop:
            return
        self.close_hole()
        e = self.e
        e("if n:")
        e("    METER[1] = n")
        e(f"    t.args = {self.args()}")
        e(f"    t.site = {self.loop_site}")

    def emit(self) -> None:
        e, rel, shape = self.e, self.rel, self.shape
        if shape.loop:
            sites = {c.self_call().span for g in rel.groups for cl in g if (c := ClauseCode(self, cl)).self_call()}
            self.loop_site = self.rc.site(next(iter(sites))) if len(sites) == 1 else "ls"
            e("n = 0")
            e("m = METER[0]")
            e("lp = False")
            if self.loop_site == "ls":
                e("ls = None")
            if shape.dest is not None:
                e(f"d{shape.dest} = None")
            e("while True:")
            e.indent()
        # Dereference each input argument once, if some clause looks inside it.
        for i, mode in enumerate(rel.modes):
            if mode == "?" and any(not isinstance(c.head[i], Var) for g in rel.groups for c in g):
                if shape.dest is not None:  # only a call whose input holds its own output meets the hole
                    self.fill_hole(f"a{i}")
                e(deref_line(f"a{i}"))
        e("s = None")
        for group in rel.groups:
            if shape.switch is not None and any(principal(c.head[shape.switch]) for c in group):
                self.switch(group, shape.switch)
            else:
                self.clauses([(c, None) for c in group])
            e("if s is not None:")
            e.indent()
            self.leave()
            e("return s")
            e.dedent()
        self.leave()
        e("raise fail_goal(t)")
        if shape.loop:
            e.dedent()

    def switch(self, group, k: int) -> None:
        """One test of argument k picks the clauses that can match; a variable there suspends
        the clauses that need its structure (once), in their place among the others."""
        e = self.e
        x = f"a{k}"
        keys: list = []
        for c in group:
            key = principal(c.head[k])
            if key is not None and key not in keys:
                keys.append(key)
        keys.sort(key=lambda k: k[0] not in ("cons", "struct"))  # recursive clauses' keys first: disjoint tests
        first = True
        for key in keys:
            e(("if " if first else "elif ") + self.key_test(key, x) + ":")
            first = False
            e.indent()
            self.clauses([(c, key if principal(c.head[k]) == key else None) for c in group
                          if principal(c.head[k]) in (key, None)])
            e.dedent()
        e(f"elif type({x}) is Var:")
        e.indent()
        suspended = False
        todo = []
        for c in group:
            if principal(c.head[k]) is None:
                todo.append((c, None))
            elif not suspended:
                suspended = True
                self.clauses(todo)
                todo = []
                e(f"s = susp1(s, {x})")
        self.clauses(todo)
        e("pass")
        e.dedent()
        rest = [(c, None) for c in group if principal(c.head[k]) is None]
        if rest:
            e("else:")
            e.indent()
            self.clauses(rest)
            e.dedent()

    def key_test(self, key, x: str) -> str:
        kind = key[0]
        if kind == "cons":
            return f"type({x}) is Cons"
        if kind == "atom":
            return f"{x} is {self.rc.atom(key[1])}"
        if kind == "int":
            return f"type({x}) is int and {x} == {key[1]!r}"
        if kind == "float":
            return f"type({x}) is float and {x} == {self.rc.ground(Float(float(key[1])))}"
        return f"type({x}) is Struct and {x}.name is {self.rc.atom(key[1])} and len({x}.args) == {key[2]}"

    def clauses(self, items: list) -> None:
        """Clauses of one group in order, `known` being the key a switch already tested. With
        `share`, neighbours whose input patterns are the same match once."""
        i = 0
        while i < len(items):
            j = i + 1
            if self.shape.share:
                while j < len(items) and items[j][1] == items[i][1] and \
                        self.inputs_of(items[j][0]) == self.inputs_of(items[i][0]):
                    j += 1
            if j - i == 1:
                self.clause_block(items[i])
            else:
                self.shared_block(items[i:j])
            i = j

    def inputs_of(self, clause: Clause) -> tuple:
        return tuple(p for m, p in zip(self.rel.modes, clause.head) if m == "?")

    def after_block(self) -> None:
        """After a block that may have looped back: go round (or out of the enclosing block)."""
        if not self.shape.loop:
            return
        e = self.e
        if self.blocks:
            e("if lp: break")
        else:
            e("if lp:")
            e("    lp = False")
            e("    continue")

    def clause_block(self, item) -> None:
        clause, known = item
        e = self.e
        code = ClauseCode(self, clause)
        if known and not self.can_mismatch(clause):  # it commits: no block to break out of
            self.rc.count("clause_tries")
            code.match_head(self.shape.switch)
            code.commit()
            return
        e("while True:")
        e.indent()
        self.blocks += 1
        self.rc.count("clause_tries")
        code.match_head(self.shape.switch if known else None)
        code.guards(clause.guard)
        code.commit()
        self.blocks -= 1
        e.dedent()
        self.after_block()

    def can_mismatch(self, clause: Clause) -> bool:
        """Whether the clause, its switch key tested, may still fail to match or suspend: a
        guard, or an input pattern that is more than new variables (below the switched one's
        principal functor)."""
        if clause.guard:
            return True
        seen: set[int] = set()
        for i, (mode, pat) in enumerate(zip(self.rel.modes, clause.head)):
            if mode != "?":
                continue
            if i != self.shape.switch or isinstance(pat, Var):
                parts = (pat,)
            else:  # its principal functor was tested: what is below it must be new variables
                parts = pat.args if isinstance(pat, Struct) else ()
            for p in parts:
                if not isinstance(p, Var) or p.index in seen:
                    return True
                seen.add(p.index)
        return False

    def shared_block(self, items) -> None:
        """Clauses with the same input patterns: one match; then each clause's guard and
        commit, a complementary pair of one-test guards deciding with one test."""
        e = self.e
        e("while True:")
        e.indent()
        self.blocks += 1
        self.rc.count("clause_tries")
        first = ClauseCode(self, items[0][0])
        first.match_head(self.shape.switch if items[0][1] else None)
        i = 0
        while i < len(items):
            clause = items[i][0]
            code = ClauseCode(self, clause, bound=set(first.bound), temps=first.temps)
            if i + 1 < len(items) and code.complementary(items[i + 1][0]):
                code.complementary_pair(items[i + 1][0], first)
                i += 2
                continue
            if i:
                self.rc.count("clause_tries")
            e("while True:")
            e.indent()
            self.blocks += 1
            code.guards(clause.guard)
            code.commit()
            self.blocks -= 1
            e.dedent()
            self.after_block()
            i += 1
        e("break")
        self.blocks -= 1
        e.dedent()
        self.after_block()

