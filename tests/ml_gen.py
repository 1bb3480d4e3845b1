"""Random well-typed Core-SML programs (spec/ml.md) that terminate quickly and print what they
compute, for differential tests of `hpgrem run` against Poly/ML.

`programs()` is a Hypothesis strategy of program texts; `generate(seed)` builds one program from
a seed without Hypothesis (for scripts and for reproducing a failure by hand). Both go through
`ProgramGen`, which asks a `Chooser` for every decision, so Hypothesis can shrink a program by
shrinking its choices (the first option of every choice is the simplest one).

What a program holds (type-directed: every expression is generated for a type it must have):
- a datatype (2-4 constructors; nullary ones, `of int`, `of string * bool`, `of int list`, and
  sometimes one recursive constructor with a single recursive argument, so values stay small),
  three exceptions (`E0`, `E1 of int`, `E2 of string`), a generated `show` function for the
  datatype, sometimes a counter `ref` with a `tick ()` function, a polymorphic `ident`, a type
  abbreviation `pair`, and a polymorphic `'a tree` with `fromList`/`toList`/`tmap`/`insert`;
- top-level `val`s (with a type annotation, so the value restriction never warns), `fun`s with
  one or several clauses (split patterns), curried and tupled arguments, recursive functions
  over a decreasing int (`fun f 0 = .. | f n = .. f (n - 1) ..`, the fib shape with `f (n - 2)`,
  `if n <= 0`, `val rec f = fn ..`, accumulators), over lists (`f xs` on the tail) and over the
  datatype, and mutually recursive pairs (`and`); every call of a recursive function on an
  int clamps the argument with `mod`, so recursion stops and stays shallow;
- sometimes (always with `deep=True`) one *deep* recursion: a function of one int that recurses
  to it, 1 to 3,000 levels deep and mostly past the 200 Python frames direct code recurses before
  moving to a heap stack (pam/ml/annotations.py), through a handler around or inside its call, after
  an effect, by an exception raised at the bottom and caught some levels up, through a mutually
  recursive partner, or through `ForkJoin.par` at every level; it is called with such depths,
  alone and from both thunks of a `ForkJoin.par`. Its body is small, so a level costs little;
- expressions over int, bool, string, int list, string list, int/string option, pairs and the
  datatype: arithmetic (`div`/`mod` with a safe divisor, floor semantics with negative divisors,
  `Int.quot`/`Int.rem`), comparisons, `andalso`/`orelse`, `^`/`size`/`Int.toString`/
  `String.concatWith`/`explode`/`implode`, `Int.fromString`, `if`, `case` with nested patterns
  (constants, constructors, tuples, lists, `::`, `as`, wildcards), `fn` matches applied or passed
  to `map`/`foldl`/`foldr`/`List.filter`/`List.exists`/`List.all`/`List.find`/`List.tabulate`/
  `List.partition`, `o`, `op +`, `op ^`, `(op * )`, partial application, `let` with local
  `val`/`val .. and ..`/`fun`/`exception` and record patterns, top-level `local`, char constants
  in patterns over `explode`, annotated patterns `(x : t)`, refs (`ref`,
  `!`, `:=`, `while` loops over a local counter), sequences, `before`, records with `#label`,
  `ForkJoin.par` of two thunks (which may print or raise), `raise`/`handle` with user and local
  exceptions (re-raised through a handler's variable), `Fail`, `exnName`, and the basis exceptions raised on purpose (`Div` from `x div 0`, `Empty`,
  `Option`, `Subscript`, `Overflow` next to the largest int);
- print statements: `val _ = print (... ^ "\\n")`, often with `handle e => print ("exn " ^
  exnName e ^ "\\n")`, so one exception does not end the program; sometimes an uncaught
  exception at the end (Poly/ML exits 1, and so must we).

Every program is warning-free (exhaustive, non-redundant matches by construction: a "split" of a
type is a list of patterns whose first-match regions are non-empty and cover the type) unless
`warnings=True`, which allows a non-exhaustive `case` (Match at run time) by design. Costs are
budgeted (calls per declaration, per function body, with a multiplier inside loops and `map`
arguments), so a program runs in well under a second of machine time.

The generator never uses what the spec leaves out (modules, reals in output, user infix).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------
# choices


class Chooser:
    """Every decision of the generator. `integer` is the one primitive; smaller is simpler."""

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def choice(self, options):
        return options[self.integer(0, len(options) - 1)]

    def chance(self, percent: int) -> bool:
        """True with probability percent/100; shrinks toward False."""
        return self.integer(0, 99) >= 100 - percent

    def weighted(self, options):
        """options: [(weight, value)], the simplest first."""
        total = sum(w for w, _ in options)
        r = self.integer(0, total - 1)
        for w, v in options:
            if r < w:
                return v
            r -= w
        raise AssertionError


class RandomChooser(Chooser):
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class DrawChooser(Chooser):
    """Choices drawn from Hypothesis (inside `st.composite`)."""

    def __init__(self, draw):
        from hypothesis import strategies as st
        self.draw = draw
        self.st = st

    def integer(self, lo: int, hi: int) -> int:
        return lo if lo == hi else self.draw(self.st.integers(lo, hi))


# ---------------------------------------------------------------------------------------------
# types: ("int",) ("bool",) ("string",) ("unit",) ("dt",) ("list", t) ("option", t)
# ("tuple", t1, t2) ("fn", a, b) ("ref", t)

INT, BOOL, STRING, UNIT, DT, EXN = ("int",), ("bool",), ("string",), ("unit",), ("dt",), ("exn",)


def LIST(t):
    return ("list", t)


def OPT(t):
    return ("option", t)


def TUP(*ts):
    return ("tuple", *ts)


def FN(a, b):
    return ("fn", a, b)


def REF(t):
    return ("ref", t)


ILIST, SLIST = LIST(INT), LIST(STRING)
VALUE_TYPES = [(12, INT), (5, BOOL), (5, STRING), (6, ILIST), (3, OPT(INT)), (3, DT), (2, TUP(INT, BOOL)),
               (2, TUP(INT, STRING)), (2, TUP(INT, INT)), (2, SLIST), (1, OPT(STRING)),
               (1, TUP(STRING, ILIST))]
EQ_TYPES = [INT, BOOL, STRING, ILIST, OPT(INT), TUP(INT, BOOL), DT]
# argument types of generated functions, and the function types expressions are generated for
ARG_TYPES = [(6, INT), (2, ILIST), (2, STRING), (2, OPT(INT)), (2, DT), (2, TUP(INT, INT)), (1, BOOL),
             (1, TUP(INT, STRING))]
INT_FN, PRED, FOLD_FN = FN(INT, INT), FN(INT, BOOL), FN(TUP(INT, INT), INT)

MAX_INT = 4611686018427387903

TREE_PRELUDE = """datatype 'a tree = Lf | Br of 'a tree * 'a * 'a tree
fun fromList [] = Lf
  | fromList (x :: xs) = Br (Lf, x, fromList xs)
fun toList Lf = []
  | toList (Br (l, x, r)) = toList l @ x :: toList r
fun tmap f Lf = Lf
  | tmap f (Br (l, x, r)) = Br (tmap f l, f x, tmap f r)
fun tsize Lf = 0
  | tsize (Br (l, _, r)) = tsize l + 1 + tsize r
fun insert (x, Lf) = Br (Lf, x, Lf)
  | insert (x, t as Br (l, y, r)) =
      if x < y then Br (insert (x, l), y, r) else if x > y then Br (l, y, insert (x, r)) else t"""


@dataclass
class Var:
    name: str
    ty: tuple
    kind: str = "val"        # val | fun | ref | aref (assignable ref) | exn (ty: its argument or None)
    cost: int = 1            # calls one use of a function makes, roughly
    clamp: int | None = None  # recursive over int: call with (arg mod clamp)


@dataclass
class SelfCall:
    """The calls a recursive function's body may make to itself (or to its partner), and how
    many it has made (weighted by how often each may run); `limit` bounds the branching."""
    calls: list            # [(result type, template, extra argument type or None)]
    made: int = 0
    limit: int = 2


@dataclass
class Ctx:
    env: tuple = ()
    mult: int = 1                 # how often this expression may run per evaluation of the body
    self_call: SelfCall | None = None
    in_rec: bool = False          # inside a recursive function: no calls to costly functions

    def bind(self, *vars_: Var) -> Ctx:
        return Ctx(self.env + tuple(vars_), self.mult, self.self_call, self.in_rec)

    def times(self, k: int) -> Ctx:
        return Ctx(self.env, self.mult * k, self.self_call, self.in_rec)


@dataclass
class Pat:
    text: str
    binds: list = field(default_factory=list)
    atomic: bool = True
    catchall: bool = False

    def sub(self) -> str:
        return self.text if self.atomic else f"({self.text})"


STRINGS = ["", "a", "bc", "hello", "x y", "Z9", "ab", "42", " 7", "~3", "-5", "+8", "12ab", "q"]
PAT_STRINGS = ["", "a", "bc", "hello", "ab"]
CON_NAMES = ["Red", "Leaf", "Pt", "Box", "Tag", "Wrap", "Node", "Cell", "Nada", "Pair"]
EXCEPTIONS = [("E0", None), ("E1", INT), ("E2", STRING)]

# precedence of the initial fixity table; andalso and orelse bind less tightly than any infix
LEVELS = {"*": 7, "div": 7, "mod": 7, "+": 6, "-": 6, "^": 6, "::": 5, "@": 5, "=": 4, "<>": 4, "<": 4,
          ">": 4, "<=": 4, ">=": 4, "o": 3, ":=": 3, "before": 0, "andalso": -1, "orelse": -2}
APPLICATION = 10

RISKY = "risky"             # marks productions that may raise; the others weigh SAFE_WEIGHT times more
SAFE_WEIGHT = 4
BUDGET_STATEMENT = 300       # calls one top-level declaration may make, roughly
BUDGET_FUNCTION = 200


class ProgramGen:
    def __init__(self, ch: Chooser, warnings: bool = False, size: int = 8, deep: bool = False):
        self.ch = ch
        self.warnings = warnings
        self.deep = deep  # one top-level item is always a deep recursion (`deep_decl`)
        self.size = size
        self.counter = 0
        self.cost = [0]          # stack of cost accumulators
        self.out: list[str] = []
        self.labels = 0
        self.levels: dict[str, int] = {}   # generated infix expressions and applications: their level

    # -- helpers ------------------------------------------------------------------------------
    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def ty(self, t) -> str:
        k = t[0]
        if k == "dt":
            return self.dt_name
        if k in ("list", "option", "ref"):
            inner = self.ty(t[1])
            return f"({inner}) {k}" if t[1][0] in ("tuple", "fn") else f"{inner} {k}"
        if k == "tuple":
            if self.has_pair and t == TUP(INT, INT) and self.ch.chance(50):
                return "pair"
            return " * ".join(f"({self.ty(c)})" if c[0] in ("tuple", "fn") else self.ty(c) for c in t[1:])
        if k == "fn":
            a = self.ty(t[1])
            return f"({a}) -> {self.ty(t[2])}" if t[1][0] == "fn" else f"{a} -> {self.ty(t[2])}"
        return k

    def value_type(self):
        return self.ch.weighted(VALUE_TYPES)

    def label(self) -> str:
        self.labels += 1
        return f"p{self.labels}"

    def int_lit(self) -> str:
        kind = self.ch.weighted([(6, "digit"), (3, "negative"), (1, "larger")])
        if kind == "digit":
            return str(self.ch.integer(0, 9))
        if kind == "negative":
            return f"~{self.ch.integer(1, 9)}"
        return str(self.ch.integer(10, 100))

    def str_lit(self, pool=STRINGS) -> str:
        return '"' + self.ch.choice(pool) + '"'

    def vars_of(self, ctx: Ctx, t, kinds=("val",)):
        return [v for v in ctx.env if v.ty == t and v.kind in kinds]

    def spend(self, amount: int) -> None:
        self.cost[-1] += amount

    def affordable(self, ctx: Ctx, f: Var) -> bool:
        limit = BUDGET_FUNCTION if len(self.cost) > 1 else BUDGET_STATEMENT
        if ctx.in_rec and f.cost > 3:
            return False
        return self.cost[-1] + f.cost * ctx.mult <= limit

    # -- the program --------------------------------------------------------------------------
    def program(self) -> str:
        ctx = Ctx()
        self.datatype()
        ctx = ctx.bind()
        for name, arg in EXCEPTIONS:
            self.out.append(f"exception {name}" + (f" of {self.ty(arg)}" if arg else ""))
        self.show_function()
        if self.ch.chance(50):
            self.out.append("val counter = ref 0")
            self.out.append("fun tick () = (counter := !counter + 1; !counter)")
            ctx = ctx.bind(Var("counter", REF(INT), "aref"), Var("tick", FN(UNIT, INT), "fun", 1))
        if self.ch.chance(30):
            self.out.append("fun ident x = x")
            self.has_ident = True
        if self.ch.chance(30):
            self.out.append("type pair = int * int")
            self.has_pair = True
        if self.ch.chance(30):
            self.out.append(TREE_PRELUDE)
            self.has_tree = True
        n = self.ch.integer(3, self.size)
        forced = self.ch.integer(0, n - 1) if self.deep else -1
        for i in range(n):
            if i == forced:
                self.cost = [0]
                self.deep_decl(ctx)
            else:
                ctx = self.top_item(ctx)
        if self.ch.chance(20):
            self.final_raise(ctx)
        return "\n".join(self.out) + "\n"

    has_ident = has_pair = has_tree = False

    def datatype(self):
        self.dt_name = self.ch.choice(["shape", "thing", "item"])
        names = list(CON_NAMES)
        k = self.ch.integer(2, 4)
        cons = []
        recursive = self.ch.chance(40)
        arg_options = [None, INT, TUP(STRING, BOOL), ILIST, STRING]
        for i in range(k):
            name = names.pop(self.ch.integer(0, len(names) - 1))
            if i == 0:
                arg = self.ch.choice([None, INT])      # a constructor that needs no recursion
            elif i == k - 1 and recursive:
                arg = TUP(INT, DT)
            else:
                arg = self.ch.choice(arg_options)
            cons.append((name, arg))
        self.cons = cons
        self.dt_recursive = recursive
        text = " | ".join(n + (f" of {self.ty(a)}" if a else "") for n, a in cons)
        self.out.append(f"datatype {self.dt_name} = {text}")

    def show_function(self):
        clauses = []
        for name, arg in self.cons:
            if arg is None:
                clauses.append(f'show {name} = "{name}"')
            else:
                pat, binds = self.bind_pattern(arg)
                parts = ' ^ "," ^ '.join(self.show(t, n) for n, t in binds)
                clauses.append(f'show ({name} {pat}) = "{name}(" ^ {parts} ^ ")"')
        self.out.append("fun " + "\n  | ".join(clauses))

    def bind_pattern(self, t):
        """A pattern of variables only for type t: (text, [(name, type)])."""
        if t[0] == "tuple":
            names = [self.fresh("c") for _ in t[1:]]
            return "(" + ", ".join(names) + ")", list(zip(names, t[1:]))
        n = self.fresh("c")
        return n, [(n, t)]

    def show(self, t, e: str) -> str:
        """A string expression showing the value of e (an atomic expression) of type t."""
        k = t[0]
        if k == "int":
            return f"Int.toString {e}"
        if k == "bool":
            return f"Bool.toString {e}"
        if k == "string":
            return e
        if k == "unit":
            return f'({e}; "()")'
        if k == "dt":
            return f"show {e}"
        if k == "list":
            x = self.fresh("s")
            return f'"[" ^ String.concatWith "," (map (fn {x} => {self.show(t[1], x)}) {e}) ^ "]"'
        if k == "option":
            x = self.fresh("s")
            return f'(case {e} of NONE => "NONE" | SOME {x} => "SOME " ^ {self.show(t[1], x)})'
        if k == "tuple":
            names = [self.fresh("s") for _ in t[1:]]
            inner = ' ^ "," ^ '.join(self.show(c, n) for c, n in zip(t[1:], names))
            return f'(let val ({", ".join(names)}) = {e} in "(" ^ {inner} ^ ")" end)'
        raise AssertionError(t)

    # -- top level ------------------------------------------------------------------------------
    def top_item(self, ctx: Ctx) -> Ctx:
        kind = self.ch.weighted([(6, "print"), (3, "val"), (3, "fun"), (2, "rec"), (1, "valpat"),
                                 (1, "effect"), (1, "local"), (1, "deep")])
        self.cost = [0]
        if kind == "print":
            self.print_statement(ctx)
            return ctx
        if kind == "deep":
            self.deep_decl(ctx)
            return ctx
        if kind == "val":
            t = self.value_type()
            name = self.fresh("v")
            e = self.expr(t, self.ch.integer(1, 4), ctx)
            if self.ch.chance(50):
                e = f"{e} handle _ => {self.expr(t, 0, ctx)}"
            self.out.append(f"val {name} : {self.ty(t)} = {e}")
            return ctx.bind(Var(name, t))
        if kind == "valpat":
            t1, t2 = self.value_type(), self.value_type()
            a, b = self.fresh("v"), self.fresh("v")
            e = self.expr(TUP(t1, t2), self.ch.integer(1, 3), ctx)
            self.out.append(f"val ({a}, {b}) = ({e} : {self.ty(TUP(t1, t2))})")
            return ctx.bind(Var(a, t1), Var(b, t2))
        if kind == "local":
            # local val x = e in val y = e' end: only y is visible afterwards
            t1, t2 = self.value_type(), self.value_type()
            x, y = self.fresh("lo"), self.fresh("v")
            e1 = self.expr(t1, self.ch.integer(1, 3), ctx)
            e2 = self.expr(t2, self.ch.integer(1, 3), ctx.bind(Var(x, t1)))
            self.out.append(f"local val {x} = {e1} in val {y} : {self.ty(t2)} = {e2} end")
            return ctx.bind(Var(y, t2))
        if kind == "effect":
            e = self.unit_expr(self.ch.integer(1, 3), ctx)
            self.out.append(f"val _ = {e}" + (' handle _ => print "oops\\n"' if self.ch.chance(50) else ""))
            return ctx
        if kind == "fun":
            text, var = self.fun_decl(ctx)
            self.out.append(text)
            return ctx.bind(var)
        text, vars_ = self.rec_decl(ctx)
        self.out.append(text)
        return ctx.bind(*vars_)

    def print_statement(self, ctx: Ctx):
        k = self.ch.weighted([(4, 1), (2, 2), (1, 3)])
        parts = []
        for _ in range(k):
            t = self.value_type()
            e = self.expr(t, self.ch.integer(1, 4), ctx)
            x = self.fresh("w")
            parts.append((x, t, e))
        if k == 1:
            x, t, e = parts[0]
            text = self.show(t, f"({e})")
        else:
            binds = " ".join(f"val {x} = {e}" for x, t, e in parts)
            shown = ' ^ " " ^ '.join(self.show(t, x) for x, t, e in parts)
            text = f"(let {binds} in {shown} end)"
        self.print_line(text, self.ch.chance(75))

    def print_line(self, text: str, guarded: bool) -> None:
        """`val _ = print (text ^ "\\n")`, with a handler that prints the exception's name when
        `guarded`."""
        stmt = f'val _ = print ({text} ^ "\\n")'
        if guarded:
            stmt += ' handle e => print ("exn " ^ exnName e ^ "\\n")'
        self.out.append(stmt)

    def final_raise(self, ctx: Ctx):
        e = self.ch.weighted([(2, "raise E0"), (2, f"raise E1 {self.int_lit()}"),
                              (1, f"raise E2 {self.str_lit()}"), (2, f'raise Fail "{self.ch.choice(["bad", "stop", "x"])}"'),
                              (2, f"{self.int_lit()} div 0"), (1, "hd ([] : int list)"),
                              (1, "valOf (NONE : int option)"), (1, f"{MAX_INT} + {self.ch.integer(1, 5)}"),
                              (1, "List.nth ([1, 2], 5)")])
        self.out.append(f'val _ = print (Int.toString ({e}) ^ "\\n")' if "raise" not in e
                        else f"val _ : unit = {e}")

    # -- functions ------------------------------------------------------------------------------
    def fun_decl(self, ctx: Ctx):
        """A non-recursive function: one or more clauses, one argument (maybe a tuple) or two
        curried ones."""
        name = self.fresh("f")
        arg = self.ch.weighted(ARG_TYPES)
        res = self.value_type() if self.ch.chance(60) else self.ch.choice([INT, BOOL])
        curried = self.ch.chance(25)
        arg2 = self.ch.choice([INT, STRING, ILIST]) if curried else None
        self.cost.append(0)
        depth = self.ch.integer(1, 4)
        if self.ch.chance(40):
            rules = self.match_rules(arg, depth - 1 if depth > 1 else 1)
        else:
            p = self.catchall_or_tuple(arg)
            rules = [p]
        clauses = []
        extra = None
        if curried:
            extra = self.fresh("y")
        for p in rules:
            body_ctx = ctx.bind(*[Var(n, t) for n, t in p.binds])
            if curried:
                body_ctx = body_ctx.bind(Var(extra, arg2))
            body = self.expr(res, depth, body_ctx)
            head = f"{name} {p.sub()}" + (f" {extra}" if curried else "")
            clauses.append(f"{head} = {body}")
        cost = 1 + self.cost.pop()
        fty = FN(arg, FN(arg2, res)) if curried else FN(arg, res)
        return "fun " + "\n  | ".join(clauses), Var(name, fty, "fun", cost)

    def catchall_or_tuple(self, t) -> Pat:
        if t[0] == "tuple" and self.ch.chance(70):
            ps = [self.catchall(c) for c in t[1:]]
            return Pat("(" + ", ".join(p.text for p in ps) + ")", [b for p in ps for b in p.binds])
        return self.catchall(t, var_only=True)

    def rec_decl(self, ctx: Ctx):
        shape = self.ch.weighted([(4, "int"), (2, "fib"), (2, "if"), (1, "valrec"), (2, "acc"),
                                  (2, "curried"), (3, "list"), (2, "dt"), (2, "mutual")])
        if shape == "dt" and not self.dt_recursive:
            shape = "list"
        res = self.value_type() if self.ch.chance(50) else INT
        name = self.fresh("r")
        depth = self.ch.integer(1, 3)
        rctx = Ctx(ctx.env, 1, None, True)
        self.cost.append(0)

        def body(t, extra_binds, calls, d=depth, limit=2):
            """A body of type t that may call itself through `calls`, and does at least once."""
            sc = SelfCall(calls, 0, limit)
            c = Ctx(rctx.env + tuple(extra_binds), 1, sc, True)
            first = None
            if calls and self.ch.chance(30):
                first = self.fresh("k"), *self.self_call_text(calls, max(d - 1, 0), c)
                sc.made += 1
                c = c.bind(Var(first[0], first[1]))
            text = self.expr(t, d, c)
            if calls and sc.made == 0:
                first = self.fresh("k"), *self.self_call_text(calls, max(d - 1, 0), c)
                sc.made += 1
            if first is not None:
                text = f"(let val {first[0]} = {first[2]} in {text} end)"
            return text, sc.made

        made = 1
        if shape in ("int", "fib", "if", "valrec", "curried", "acc"):
            n = self.fresh("n")
            nv = Var(n, INT)
            base, _ = body(res, [], [], max(depth - 1, 0))
            if shape == "int":
                b, made = body(res, [nv], [(res, f"{name} ({n} - 1)", None)])
                text = f"fun {name} 0 = {base}\n  | {name} {n} = {b}"
                fty = FN(INT, res)
            elif shape == "fib":
                base1, _ = body(res, [], [], max(depth - 1, 0))
                b, made = body(res, [nv], [(res, f"{name} ({n} - 1)", None), (res, f"{name} ({n} - 2)", None)])
                text = f"fun {name} 0 = {base}\n  | {name} 1 = {base1}\n  | {name} {n} = {b}"
                fty = FN(INT, res)
            elif shape == "if":
                b, made = body(res, [nv], [(res, f"{name} ({n} - 1)", None)])
                text = f"fun {name} {n} = if {n} <= 0 then {base} else {b}"
                fty = FN(INT, res)
            elif shape == "valrec":
                b, made = body(res, [nv], [(res, f"{name} ({n} - 1)", None)])
                text = f"val rec {name} = fn 0 => {base}\n  | {n} => {b}"
                fty = FN(INT, res)
            elif shape == "acc":
                a = self.fresh("a")
                av = Var(a, res)
                base, _ = body(res, [av], [], max(depth - 1, 0))
                b, made = body(res, [nv, av], [(res, f"{name} ({n} - 1, {{}})", res)])
                text = f"fun {name} (0, {a}) = {base}\n  | {name} ({n}, {a}) = {b}"
                fty = FN(TUP(INT, res), res)
            else:  # curried with a second argument passed along
                y = self.fresh("y")
                yt = self.ch.choice([INT, STRING, ILIST])
                yv = Var(y, yt)
                base, _ = body(res, [yv], [], max(depth - 1, 0))
                b, made = body(res, [nv, yv], [(res, f"{name} ({n} - 1) {{}}", yt)])
                text = f"fun {name} 0 {y} = {base}\n  | {name} {n} {y} = {b}"
                fty = FN(INT, FN(yt, res))
            clamp = self.clamp_for(made, 1 + self.cost[-1])
            self.cost.pop()
            return text, [Var(name, fty, "fun", self.calls(made, clamp - 1) * 2, clamp)]
        if shape == "list":
            x, xs = self.fresh("x"), self.fresh("xs")
            base, _ = body(res, [], [], max(depth - 1, 0))
            b, made = body(res, [Var(x, INT), Var(xs, ILIST)], [(res, f"{name} {xs}", None)], limit=1)
            text = f"fun {name} [] = {base}\n  | {name} ({x} :: {xs}) = {b}"
            cost = (1 + self.cost.pop()) * 16
            return text, [Var(name, FN(ILIST, res), "fun", cost)]
        if shape == "dt":
            clauses = []
            for cname, arg in self.cons:
                if arg is None:
                    b, _ = body(res, [], [], max(depth - 1, 0))
                    clauses.append(f"{name} {cname} = {b}")
                    continue
                pat, binds = self.bind_pattern(arg)
                vs = [Var(n, t) for n, t in binds]
                calls = [(res, f"{name} {n}", None) for n, t in binds if t == DT]
                b, _ = body(res, vs, calls, limit=1)
                clauses.append(f"{name} ({cname} {pat}) = {b}")
            cost = (1 + self.cost.pop()) * 16
            return "fun " + "\n  | ".join(clauses), [Var(name, FN(DT, res), "fun", cost)]
        # mutual recursion over a decreasing int
        g = self.fresh("r")
        n, m = self.fresh("n"), self.fresh("n")
        res2 = self.ch.choice([res, INT, BOOL])
        base_f, _ = body(res, [], [], max(depth - 1, 0))
        base_g, _ = body(res2, [], [], max(depth - 1, 0))
        calls_f = [(res, f"{name} ({n} - 1)", None), (res2, f"{g} ({n} - 1)", None)]
        calls_g = [(res, f"{name} ({m} - 1)", None), (res2, f"{g} ({m} - 1)", None)]
        bf, made_f = body(res, [Var(n, INT)], calls_f)
        if made_f == 0:  # make sure f reaches g
            bf = f"({g} ({n} - 1); {bf})"
            made_f = 1
        bg, made_g = body(res2, [Var(m, INT)], calls_g)
        made = max(made_f, made_g, 1)
        clamp = self.clamp_for(made, 1 + self.cost[-1])
        self.cost.pop()
        text = (f"fun {name} 0 = {base_f}\n  | {name} {n} = {bf}\n"
                f"and {g} 0 = {base_g}\n  | {g} {m} = {bg}")
        cost = self.calls(made, clamp - 1) * 2
        return text, [Var(name, FN(INT, res), "fun", cost, clamp), Var(g, FN(INT, res2), "fun", cost, clamp)]

    def deep_decl(self, ctx: Ctx) -> None:
        """A recursion of one int argument that goes as deep as its argument, declared and then
        called with such depths: alone, and from both thunks of a `ForkJoin.par`. It is not bound
        for later expressions (they would call it with any int). Shapes, by where the handler is:
        around the recursive call and its use, inside (around the call alone), after an effect
        (the call cannot be the first thing its block does), an exception raised at the bottom
        and caught where `n mod m = 0` (or nowhere), a mutually recursive partner, and a
        `ForkJoin.par` of the recursive call at every level."""
        shape = self.ch.weighted([(3, "around"), (2, "inside"), (2, "effect"), (2, "raise"), (1, "mutual"),
                                  (1, "par")])
        res = INT if shape == "raise" or self.ch.chance(70) else self.value_type()
        name, n, k = self.fresh("d"), self.fresh("n"), self.fresh("k")
        # the body runs once per level: small expressions that call no user function
        body_ctx = Ctx(tuple(v for v in ctx.env if v.kind != "fun"), 1, None, True)
        level_ctx = body_ctx.bind(Var(n, INT))
        use_ctx = level_ctx.bind(Var(k, res))
        self.cost.append(0)

        def once(use: str) -> str:
            """`use`, or `k` where `use` names `k` twice or more: a level that doubled its
            callee's string or list (`k ^ k`) would need 2^depth bytes (CI's worker went to
            24 GB and was killed, its -O0 run first)."""
            return use if len(re.findall(rf"\b{k}\b", use)) <= 1 else k

        def level(call: str, wrap: str) -> str:
            """One level: `let val k = call in use end`, the handler where `wrap` says."""
            use = once(self.expr(res, self.ch.integer(0, 2), use_ctx))
            if wrap == "inside":
                return f"let val {k} = ({call} handle {self.handler_rules(res, 1, level_ctx)}) in {use} end"
            if wrap == "effect":
                return f'(print ""; let val {k} = {call} in {use} end) handle {self.handler_rules(res, 1, level_ctx)}'
            return f"(let val {k} = {call} in {use} end handle {self.handler_rules(res, 1, level_ctx)})"

        base = self.expr(res, 1, body_ctx)
        if shape == "raise":
            m, x = self.ch.integer(2, 300), self.fresh("x")
            use = once(self.expr(INT, self.ch.integer(0, 2), use_ctx))
            text = (f"fun {name} 0 = raise E1 {self.atom(self.expr(INT, 0, body_ctx))}\n"
                    f"  | {name} {n} = (let val {k} = {name} ({n} - 1) in {use} end\n"
                    f"      handle E1 {x} => if {n} mod {m} = 0 then {x} + {n} else raise E1 ({x} + 1))")
        elif shape == "mutual":
            partner = self.fresh("d")
            text = (f"fun {name} 0 = {base}\n  | {name} {n} = {level(f'{partner} ({n} - 1)', 'around')}\n"
                    f"and {partner} 0 = {self.expr(res, 1, body_ctx)}\n"
                    f"  | {partner} {n} = {level(f'{name} ({n} - 1)', self.ch.choice(['inside', 'effect']))}")
        elif shape == "par":
            other = self.expr(self.value_type(), 1, level_ctx)
            call = f"#1 (ForkJoin.par (fn () => {name} ({n} - 1), fn () => {other}))"
            if self.ch.chance(50):
                call = f"#2 (ForkJoin.par (fn () => {other}, fn () => {name} ({n} - 1)))"
            text = f"fun {name} 0 = {base}\n  | {name} {n} = {level(call, self.ch.choice(['around', 'inside']))}"
        else:
            text = f"fun {name} 0 = {base}\n  | {name} {n} = {level(f'{name} ({n} - 1)', shape)}"
        self.cost.pop()
        self.out.append(text)
        top = 400 if shape == "par" else 3000  # a fork per level costs more

        def depth() -> int:
            lo, hi = self.ch.weighted([(1, (1, 9)), (4, (190, 260)), (3, (261, min(800, top))),
                                       (1, (min(801, top), top))])
            return self.ch.integer(lo, hi)

        p, q = self.fresh("p"), self.fresh("q")
        self.print_line(self.show(res, f"({name} {depth()})"), True)
        self.print_line(f"(let val ({p}, {q}) = ForkJoin.par (fn () => {name} {depth()}, fn () => {name} {depth()})"
                        f' in {self.show(res, p)} ^ " " ^ {self.show(res, q)} end)', True)

    @staticmethod
    def calls(k: int, n: int) -> int:
        return sum(max(k, 1) ** i for i in range(n + 1))

    def clamp_for(self, k: int, body_cost: int) -> int:
        """The largest modulus (arguments 0 .. clamp-1) that keeps a call within budget."""
        clamp = 2
        for c in range(2, 9):
            if self.calls(k, c - 1) * body_cost <= BUDGET_FUNCTION:
                clamp = c
        return clamp

    # -- patterns -------------------------------------------------------------------------------
    def catchall(self, t, var_only: bool = False) -> Pat:
        if not var_only and self.ch.chance(40):
            return Pat("_", [], True, True)
        n = self.fresh("x")
        if self.ch.chance(10):
            return Pat(f"({n} : {self.ty(t)})", [(n, t)], True, True)
        return Pat(n, [(n, t)], True, True)

    def split(self, t, d: int) -> list[Pat]:
        """Patterns for t in first-match order: every one matches a value no earlier one does,
        and together they match every value."""
        if d <= 0 or self.ch.chance(25):
            return [self.catchall(t)]
        k = t[0]
        pats: list[Pat]
        if k == "int" or k == "string":
            pool = list(range(-2, 6)) if k == "int" else list(PAT_STRINGS)
            consts = []
            for _ in range(self.ch.integer(1, 3)):
                c = pool.pop(self.ch.integer(0, len(pool) - 1))
                consts.append((f"~{-c}" if isinstance(c, int) and c < 0 else str(c)) if k == "int" else f'"{c}"')
            pats = [Pat(c) for c in consts] + [self.catchall(t)]
        elif k == "bool":
            pats = self.shuffle([Pat("true"), Pat("false")])
        elif k == "unit":
            pats = [Pat("()")]
        elif k == "option":
            some = [Pat(f"SOME {p.sub()}", p.binds, False) for p in self.split(t[1], d - 1)]
            pats = [Pat("NONE")] + some if self.ch.chance(50) else some + [Pat("NONE")]
        elif k == "list":
            if self.ch.chance(50):
                heads = self.split(t[1], d - 1)
                conses = []
                for h in heads:
                    tail = self.catchall(t)
                    conses.append(Pat(f"{h.sub()} :: {tail.text}", h.binds + tail.binds, False))
                pats = [Pat("[]")] + conses if self.ch.chance(50) else conses + [Pat("[]")]
            else:
                singles = [Pat(f"[{p.text}]", p.binds) for p in self.split(t[1], d - 1)]
                a, b, r = self.catchall(t[1]), self.catchall(t[1]), self.catchall(t)
                longer = Pat(f"{a.text} :: {b.text} :: {r.text}", a.binds + b.binds + r.binds, False)
                pats = self.shuffle_blocks([[Pat("[]")], singles, [longer]])
        elif k == "tuple":
            comps = [self.split(c, d - 1) for c in t[1:]]
            while _product(len(c) for c in comps) > 6:
                i = max(range(len(comps)), key=lambda j: len(comps[j]))
                comps[i] = [self.catchall(t[1 + i])]
            pats = [Pat("()")]
            for comp in comps:
                pats = [Pat(p.text[:-1] + (", " if p.text != "()" else "") + q.text + ")", p.binds + q.binds)
                        for p in pats for q in comp]
        elif k == "dt":
            blocks = []
            for name, arg in self.cons:
                if arg is None:
                    blocks.append([Pat(name)])
                else:
                    blocks.append([Pat(f"{name} {p.sub()}", p.binds, False) for p in self.split(arg, d - 1)])
            pats = self.shuffle_blocks(blocks)
        else:
            return [self.catchall(t)]
        if self.ch.chance(15) and pats:
            i = self.ch.integer(0, len(pats) - 1)
            if not pats[i].catchall:
                a = self.fresh("z")
                pats[i] = Pat(f"{a} as {pats[i].sub()}", pats[i].binds + [(a, t)], False)
        return pats

    def shuffle(self, items):
        items = list(items)
        out = []
        while items:
            out.append(items.pop(self.ch.integer(0, len(items) - 1)))
        return out

    def shuffle_blocks(self, blocks):
        return [p for b in self.shuffle(blocks) for p in b]

    def match_rules(self, t, d: int) -> list[Pat]:
        """Exhaustive, non-redundant rules for t; sometimes a prefix of them and a wildcard."""
        pats = self.split(t, d)
        if len(pats) > 1 and self.ch.chance(25):
            keep = self.ch.integer(1, len(pats) - 1)
            pats = pats[:keep] + [self.catchall(t)]
        return pats

    # -- expressions ----------------------------------------------------------------------------
    def expr(self, t, d: int, ctx: Ctx) -> str:
        """An expression of type t, at most about d levels deep."""
        options = [(o[0] * (1 if len(o) > 2 else SAFE_WEIGHT), o[1]) for o in self.productions(t, d, ctx)]
        return self.ch.weighted(options)()

    def productions(self, t, d, ctx):
        ch = self.ch
        opts = []
        leaf = lambda: self.leaf(t, ctx)
        opts.append((6 if d > 0 else 10, leaf))
        vs = self.vars_of(ctx, t)
        if vs:
            opts.append((8, lambda: ch.choice(vs).name))
        # self calls
        sc = ctx.self_call
        if sc is not None and sc.made + ctx.mult <= sc.limit:
            mine = [c for c in sc.calls if c[0] == t]
            if mine:
                def self_call():
                    sc.made += ctx.mult
                    return self.self_call_text(mine, max(d - 1, 0), ctx)[1]
                opts.append((6, self_call))
        # calls of user functions returning t
        funs = [v for v in ctx.env if v.kind == "fun" and self.result(v.ty) == t and self.affordable(ctx, v)]
        if funs:
            opts.append((6, lambda: self.call(ch.choice(funs), d, ctx)))
        if d <= 0:
            return opts
        d1 = d - 1
        opts += [
            (3, lambda: f"(if {self.expr(BOOL, d1, ctx)} then {self.expr(t, d1, ctx)} else {self.expr(t, d1, ctx)})"),
            (3, lambda: self.case_expr(t, d1, ctx)),
            (3, lambda: self.let_expr(t, d1, ctx)),
            (1, lambda: self.fn_app(t, d1, ctx)),
            (2, lambda: self.handle_expr(t, d1, ctx)),
            (1, lambda: f"({self.unit_expr(d1, ctx)}; {self.expr(t, d1, ctx)})"),
            (1, lambda: self.par_expr(t, d1, ctx)),
            (1, lambda: self.record_expr(t, d1, ctx)),
            (1, lambda: f"({self.expr(t, d1, ctx)} before {self.unit_expr(d1, ctx)})"),
            (1, lambda: self.raise_expr(t, d1, ctx), RISKY),
            (1, lambda: f"({self.expr(t, d1, ctx)} : {self.ty(t)})"),
        ]
        if self.has_ident:
            opts.append((1, lambda: f"(ident {self.atom(self.expr(t, d1, ctx))})"))
        if t in (INT, STRING, BOOL):
            opts.append((1, lambda: f"(Option.getOpt ({self.expr(OPT(t), d1, ctx)}, {self.expr(t, d1, ctx)}))"))
            opts.append((1, lambda: f"(valOf {self.atom(self.expr(OPT(t), d1, ctx))})", RISKY))
            opts.append((1, lambda: f"(hd {self.atom(self.expr(LIST(t), d1, ctx))})", RISKY))
        if t == INT:
            opts += self.int_productions(d1, ctx)
        elif t == BOOL:
            opts += self.bool_productions(d1, ctx)
        elif t == STRING:
            opts += self.string_productions(d1, ctx)
        elif t == ILIST:
            opts += self.list_productions(d1, ctx)
        elif t[0] == "list":
            e = t[1]
            opts += [(3, lambda: self.binop("::", self.expr(e, d1, ctx), self.expr(t, d1, ctx))),
                     (2, lambda: f"(rev {self.atom(self.expr(t, d1, ctx))})"),
                     (2, lambda: self.binop("@", self.expr(t, d1, ctx), self.expr(t, d1, ctx)))]
            if e == STRING and self.has_tree:
                opts.append((1, lambda: f"(toList (tmap Int.toString (fromList {self.atom(self.expr(ILIST, d1, ctx))})))"))
            if e == STRING:
                opts.append((3, lambda: f"(map {self.fn_expr(FN(INT, STRING), d1, ctx.times(8))} "
                                        f"{self.atom(self.expr(ILIST, d1, ctx))})"))
        elif t[0] == "option":
            opts.append((2, lambda: f"(SOME {self.atom(self.expr(t[1], d1, ctx))})"))
            if t == OPT(INT):
                opts.append((2, lambda: f"(List.find {self.fn_expr(PRED, d1, ctx.times(8))} "
                                        f"{self.atom(self.expr(ILIST, d1, ctx))})"))
                opts.append((2, lambda: f"(Int.fromString {self.atom(self.expr(STRING, d1, ctx))})"))
        elif t[0] == "tuple":
            opts.append((4, lambda: "(" + ", ".join(self.expr(c, d1, ctx) for c in t[1:]) + ")"))
            opts.append((1, lambda: "(ForkJoin.par (" + ", ".join(
                f"fn () => {self.expr(c, d1, ctx)}" for c in t[1:]) + "))"))
            if t == TUP(INT, INT):
                opts.append((1, lambda: f"(let val (pa, pb) = List.partition {self.fn_expr(PRED, d1, ctx.times(8))} "
                                        f"{self.atom(self.expr(ILIST, d1, ctx))} in (length pa, length pb) end)"))
        elif t == DT:
            opts.append((4, lambda: self.construct(d1, ctx)))
        return opts

    def self_call_text(self, calls, d, ctx):
        """(result type, text) of one of a recursive body's calls to itself."""
        rt, tmpl, extra = self.ch.choice(calls)
        if extra is None:
            return rt, f"({tmpl})"
        return rt, f"({tmpl.format(self.atom(self.expr(extra, d, ctx)))})"

    def char_case(self, d, ctx) -> str:
        """A case over the characters of a string: char constants in patterns."""
        c1, c2 = self.ch.choice([('#"a"', '#"b"'), ('#"h"', '#"4"'), ('#" "', '#"~"'), ('#"Z"', '#"q"')])
        x, y = self.fresh("x"), self.fresh("x")
        arms = [f"{c1} :: {x} => {self.expr(INT, d, ctx.bind(Var(x, LIST(('char',)))))}",
                f"[{c2}] => {self.expr(INT, d, ctx)}",
                f"[] => {self.expr(INT, d, ctx)}",
                f"{y} :: _ => ord {y}"]
        return f"(case explode {self.atom(self.expr(STRING, d, ctx))} of {' | '.join(arms)})"

    def partition(self, d, ctx) -> str:
        a, b = self.fresh("pa"), self.fresh("pb")
        return (f"(let val ({a}, {b}) = List.partition {self.fn_expr(PRED, d, ctx.times(8))} "
                f"{self.atom(self.expr(ILIST, d, ctx))} in (length {a}, length {b}) end)")

    @staticmethod
    def result(ty):
        while ty[0] == "fn":
            ty = ty[2]
        return ty

    @staticmethod
    def atom(e: str) -> str:
        """e as an application argument (generated compound expressions are parenthesized)."""
        if e.startswith("(") and _balanced_outer(e):
            return e
        if e.replace("_", "").replace("~", "").isalnum() or (e.startswith('"') and e.count('"') == 2) \
                or (e.startswith("[") and _balanced_outer(e, "[", "]")):
            return e
        return f"({e})"

    def binop(self, op: str, a: str, b: str) -> str:
        """`(a op b)`; an operand that is itself an infix expression (or an application) loses its
        parentheses, sometimes, where the fixity table makes them redundant: the parser's
        precedence and associativity are tested against Poly/ML's."""
        level = LEVELS[op]
        right = op in ("::", "@")
        a = self.unparen(a, level, strict=right)
        b = self.unparen(b, level, strict=not right)
        text = f"({a} {op} {b})"
        self.levels[text] = level
        return text

    def unparen(self, e: str, level: int, strict: bool) -> str:
        mine = self.levels.get(e)
        if mine is None or not (mine > level or (mine == level and not strict)):
            return e
        return e[1:-1] if self.ch.chance(60) else e

    def call(self, f: Var, d: int, ctx: Ctx) -> str:
        self.spend(f.cost * ctx.mult)
        args = []
        ty = f.ty
        while ty[0] == "fn":
            a = ty[1]
            if a == UNIT:
                args.append("()")
            elif f.clamp is not None and not args and a[0] == "tuple":   # (n, acc): clamp n
                first = self.expr(a[1], max(d - 1, 0), ctx)
                rest = [self.expr(c, max(d - 1, 0), ctx) for c in a[2:]]
                args.append("(" + ", ".join([f"{self.atom(first)} mod {f.clamp}"] + rest) + ")")
            else:
                e = self.expr(a, max(d - 1, 0), ctx)
                if f.clamp is not None and not args:
                    e = f"({self.atom(e)} mod {f.clamp})"
                args.append(self.atom(e))
            ty = ty[2]
        text = f"({f.name} {' '.join(args)})"
        self.levels[text] = APPLICATION
        return text

    # leaves: no recursion into expressions (except tiny fixed ones)
    def leaf(self, t, ctx: Ctx) -> str:
        ch = self.ch
        k = t[0]
        if k == "int":
            refs = self.vars_of(ctx, REF(INT), ("ref", "aref"))
            if refs and ch.chance(20):
                return f"(!{ch.choice(refs).name})"
            return self.int_lit()
        if k == "bool":
            return ch.choice(["true", "false"])
        if k == "string":
            return self.str_lit()
        if k == "unit":
            return "()"
        if k == "list":
            n = ch.weighted([(2, 0), (3, 1), (3, 2), (2, 3), (1, 4)])
            if n == 0:
                return f"([] : {self.ty(t)})" if ch.chance(50) else "[]"
            return "[" + ", ".join(self.leaf(t[1], ctx) for _ in range(n)) + "]"
        if k == "option":
            if ch.chance(30):
                return f"(NONE : {self.ty(t)})" if ch.chance(50) else "NONE"
            return f"(SOME {self.leaf(t[1], ctx)})"
        if k == "tuple":
            return "(" + ", ".join(self.leaf(c, ctx) for c in t[1:]) + ")"
        if k == "dt":
            simple = [(n, a) for n, a in self.cons if a != TUP(INT, DT)]
            name, arg = ch.choice(simple)
            return name if arg is None else f"({name} {self.atom(self.leaf(arg, ctx))})"
        if k == "fn":
            return self.fn_expr(t, 0, ctx)
        raise AssertionError(t)

    def construct(self, d, ctx):
        name, arg = self.ch.choice(self.cons)
        if arg is None:
            return name
        return f"({name} {self.atom(self.expr(arg, d, ctx))})"

    def int_productions(self, d, ctx):
        ch = self.ch
        e = lambda t=INT: self.expr(t, d, ctx)
        small = lambda: self.atom(self.expr(INT, max(d - 1, 0), ctx))
        opts = [
            (6, lambda: self.binop(ch.choice(['+', '-']), e(), e())),
            (3, lambda: self.binop("*", self.binop("mod", e(), str(ch.integer(5, 40))),
                                   self.binop("mod", e(), str(ch.integer(5, 40))))),
            (2, lambda: self.binop(ch.choice(['div', 'mod']), e(),
                                   self.binop("+", self.binop("mod", e(), str(ch.integer(2, 9))), "1"))),
            (1, lambda: self.binop(ch.choice(['div', 'mod']), e(), ch.choice(['~3', '~2', '~7', '4', '3']))),
            (1, lambda: f"({ch.choice(['Int.quot', 'Int.rem'])} ({e()}, {ch.choice(['~3', '2', '5', '~4'])}))"),
            (1, lambda: f"({e()} {ch.choice(['div', 'mod'])} 0)", RISKY),
            (1, lambda: f"(~ {small()})"),
            (1, lambda: f"({ch.choice(['abs', 'Int.abs'])} {small()})"),
            (2, lambda: f"({ch.choice(['Int.min', 'Int.max'])} ({e()}, {e()}))"),
            (2, lambda: f"(size {self.atom(e(STRING))})"),
            (2, lambda: f"({ch.choice(['length', 'List.length'])} {self.atom(e(ILIST))})"),
            (2, lambda: f"({ch.choice(['foldl', 'foldr', 'List.foldl'])} {self.fold_fn(INT, d, ctx.times(8))} "
                        f"{self.atom(e())} {self.atom(e(ILIST))})"),
            (1, lambda: f"(List.nth ({e(ILIST)}, {e()} mod 4))", RISKY),
            (1, lambda: f"({MAX_INT} + {small()})", RISKY),
            (1, lambda: f"(ord (String.sub ({e(STRING)}, {e()} mod 3)))", RISKY),
            (1, lambda: f"(length (List.filter {ch.choice(['Char.isDigit', 'Char.isAlpha'])} (explode {self.atom(e(STRING))})))"),
            (1, lambda: f"(foldl (op * ) 1 (map (fn x => x mod 3 - 1) {self.atom(e(ILIST))}))"),
            (1, lambda: self.char_case(d, ctx)),
        ] + ([(1, lambda: f"(tsize (foldl insert Lf {self.atom(e(ILIST))}))")] if self.has_tree else []) + [
        ]
        if self.vars_of(ctx, REF(INT), ("ref", "aref")):
            opts.append((2, lambda: f"(!{ch.choice(self.vars_of(ctx, REF(INT), ('ref', 'aref'))).name})"))
        opts.append((2, lambda: self.while_expr(d, ctx)))
        return opts

    def bool_productions(self, d, ctx):
        ch = self.ch
        e = lambda t: self.expr(t, d, ctx)
        return [
            (4, lambda: self.binop(ch.choice(['<', '<=', '>', '>=', '=', '<>']), e(INT), e(INT))),
            (1, lambda: self.binop(ch.choice(['<', '>=', '=', '<>']), e(STRING), e(STRING))),
            (3, lambda: self.binop(ch.choice(['andalso', 'orelse']), e(BOOL), e(BOOL))),
            (2, lambda: f"(not {self.atom(e(BOOL))})"),
            (2, lambda: self.equality(d, ctx)),
            (1, lambda: f"(null {self.atom(e(ILIST))})"),
            (2, lambda: f"({ch.choice(['List.exists', 'List.all'])} {self.fn_expr(PRED, d, ctx.times(8))} "
                        f"{self.atom(e(ILIST))})"),
            (1, lambda: f"({ch.choice(['isSome', 'Option.isSome'])} {self.atom(e(OPT(INT)))})"),
            (1, lambda: f"(String.isPrefix {self.atom(e(STRING))} {self.atom(e(STRING))})"),
        ]

    def equality(self, d, ctx) -> str:
        t = self.ch.choice(EQ_TYPES)
        return self.binop(self.ch.choice(['=', '<>']), self.expr(t, d, ctx), self.expr(t, d, ctx))

    def string_productions(self, d, ctx):
        ch = self.ch
        e = lambda t: self.expr(t, d, ctx)
        return [
            (5, lambda: self.binop("^", e(STRING), e(STRING))),
            (3, lambda: f"(Int.toString {self.atom(e(INT))})"),
            (1, lambda: f"(Bool.toString {self.atom(e(BOOL))})"),
            (2, lambda: f"(String.concatWith {self.atom(e(STRING))} {self.atom(e(SLIST))})"),
            (1, lambda: f"(implode (rev (explode {self.atom(e(STRING))})))"),
            (1, lambda: f"(String.substring ({e(STRING)}, {e(INT)} mod 3, {e(INT)} mod 3))", RISKY),
            (1, lambda: f"(str (Char.toUpper (String.sub ({e(STRING)}, {e(INT)} mod 4))))", RISKY),
            (1, lambda: f"(concat [{e(STRING)}, {e(STRING)}])"),
            (1, lambda: f"(show {self.atom(e(DT))})"),
            (1, lambda: f"(foldl (op ^) {self.atom(e(STRING))} {self.atom(e(SLIST))})"),
            (1, lambda: f"(implode (map {ch.choice(['Char.toUpper', 'Char.toLower'])} (explode {self.atom(e(STRING))})))"),
        ] + ([(3, lambda: f"(exnName {ch.choice(self.vars_of(ctx, EXN)).name})")] if self.vars_of(ctx, EXN) else [])

    def list_productions(self, d, ctx):
        ch = self.ch
        e = lambda t=ILIST: self.expr(t, d, ctx)
        return [
            (3, lambda: "[" + ", ".join(e(INT) for _ in range(ch.integer(1, 3))) + "]"),
            (3, lambda: self.binop("::", e(INT), e())),
            (2, lambda: self.binop("@", e(), e())),
            (2, lambda: f"({ch.choice(['rev', 'List.rev'])} {self.atom(e())})"),
            (3, lambda: f"({ch.choice(['map', 'List.map'])} {self.fn_expr(INT_FN, d, ctx.times(8))} {self.atom(e())})"),
            (2, lambda: f"(List.filter {self.fn_expr(PRED, d, ctx.times(8))} {self.atom(e())})"),
            (2, lambda: f"(List.tabulate ({e(INT)} mod 6, {self.fn_expr(INT_FN, d, ctx.times(6))}))"),
            (1, lambda: f"(tl {self.atom(e())})", RISKY),
            (1, lambda: f"(List.{ch.choice(['take', 'drop'])} ({e()}, {e(INT)} mod 3))"),
            (1, lambda: f"(#{ch.choice(['1', '2'])} (List.partition {self.fn_expr(PRED, d, ctx.times(8))} "
                        f"{self.atom(e())}))"),
            (1, lambda: f"(foldr (op ::) [] {self.atom(e())})"),
            (1, lambda: f"(foldl (op ::) [] {self.atom(e())})"),
            (1, lambda: f"(List.concat [{e()}, {e()}])"),
        ] + ([(1, lambda: f"(toList (tmap {self.fn_expr(INT_FN, d, ctx.times(8))} (fromList {self.atom(e())})))"),
              (1, lambda: f"(toList (foldl insert Lf {self.atom(e())}))")] if self.has_tree else [])

    # function-valued expressions (arguments of map, filter, folds)
    def fn_expr(self, t, d, ctx) -> str:
        ch = self.ch
        a, r = t[1], t[2]
        opts = []
        funs = [v for v in ctx.env if v.kind == "fun" and v.ty == t and self.affordable(ctx, v)]
        if funs:
            def use():
                f = ch.choice(funs)
                self.spend(f.cost * ctx.mult)
                if f.clamp is None:
                    return f.name
                if a[0] == "tuple":
                    return f"(fn (q, q2) => {f.name} (q mod {f.clamp}, q2))"
                return f"(fn q => {f.name} (q mod {f.clamp}))"
            opts.append((4, use))
        curried = [v for v in ctx.env if v.kind == "fun" and v.ty[0] == "fn" and v.ty[2] == t
                   and v.clamp is None and self.affordable(ctx, v)]
        if curried:
            def partial():
                f = ch.choice(curried)
                self.spend(f.cost * ctx.mult)
                return f"({f.name} {self.atom(self.expr(f.ty[1], max(d - 1, 0), ctx.times(1)))})"
            opts.append((2, partial))

        def lam():
            x = self.fresh("x")
            return f"(fn {x} => {self.expr(r, max(d - 1, 0), ctx.bind(Var(x, a)))})"
        opts.append((6, lam))

        def lam_match():
            rules = self.match_rules(a, 2)
            bodies = [f"{p.text} => {self.expr(r, max(d - 1, 0), ctx.bind(*[Var(n, ty) for n, ty in p.binds]))}"
                      for p in rules]
            return "(fn " + " | ".join(bodies) + ")"
        opts.append((2, lam_match))
        if t == INT_FN and d > 0:
            opts.append((1, lambda: self.binop("o", self.fn_expr(t, d - 1, ctx), self.fn_expr(t, d - 1, ctx))))
            opts.append((1, lambda: f"(fn x => x {ch.choice(['+', '-', '*'])} {self.int_lit()})"))
        return ch.weighted(opts)()

    def fold_fn(self, acc_t, d, ctx) -> str:
        ch = self.ch
        opts = [(3, lambda: self.fn_expr(FN(TUP(INT, acc_t), acc_t), d, ctx))]
        if acc_t == INT:
            opts.append((2, lambda: f"(op {ch.choice(['+', '-'])})"))
            opts.append((1, lambda: ch.choice(["Int.min", "Int.max"])))
        return ch.weighted(opts)()

    # compound forms
    def case_expr(self, t, d, ctx) -> str:
        st = self.ch.weighted([(4, INT), (2, BOOL), (2, STRING), (3, ILIST), (3, OPT(INT)), (3, DT),
                               (2, TUP(INT, BOOL)), (1, TUP(INT, INT)), (1, TUP(STRING, ILIST))])
        scrut = self.expr(st, d, ctx)
        rules = self.match_rules(st, self.ch.integer(1, 3))
        if self.warnings and len(rules) > 1 and self.ch.chance(30):
            rules = rules[:-1]              # by design: not exhaustive, Match at run time
        arms = [f"{p.text} => {self.expr(t, d, ctx.bind(*[Var(n, ty) for n, ty in p.binds]))}" for p in rules]
        return f"(case {scrut} of " + " | ".join(arms) + ")"

    def fn_app(self, t, d, ctx) -> str:
        at = self.value_type()
        rules = self.match_rules(at, self.ch.integer(0, 2))
        arms = [f"{p.text} => {self.expr(t, d, ctx.bind(*[Var(n, ty) for n, ty in p.binds]))}" for p in rules]
        return f"((fn {' | '.join(arms)}) {self.atom(self.expr(at, d, ctx))})"

    def let_expr(self, t, d, ctx) -> str:
        decs = []
        inner = ctx
        for _ in range(self.ch.integer(1, 3)):
            kind = self.ch.weighted([(5, "val"), (2, "fun"), (2, "ref"), (1, "pat"), (1, "and"), (1, "exn")])
            if kind == "and":
                # simultaneous: neither right-hand side sees the other
                t1, t2 = self.value_type(), self.value_type()
                a, b = self.fresh("l"), self.fresh("l")
                decs.append(f"val {a} = {self.expr(t1, d, inner)} and {b} = {self.expr(t2, d, inner)}")
                inner = inner.bind(Var(a, t1), Var(b, t2))
            elif kind == "exn":
                x = self.fresh("L")
                arg = self.ch.choice([None, INT, STRING])
                decs.append(f"exception {x}" + (f" of {self.ty(arg)}" if arg else ""))
                inner = inner.bind(Var(x, arg, "exn"))
            elif kind == "val":
                vt = self.value_type()
                x = self.fresh("l")
                e = self.expr(vt, d, inner)
                ann = f" : {self.ty(vt)}" if self.ch.chance(30) else ""
                decs.append(f"val {x}{ann} = {e}")
                inner = inner.bind(Var(x, vt))
            elif kind == "fun":
                x, p = self.fresh("g"), self.fresh("x")
                ft, text, cost = self.let_fun(t, d, inner, x, self.ch.choice([INT, STRING, ILIST]), p)
                decs.append(text)
                inner = inner.bind(Var(x, ft, "fun", cost))
            elif kind == "ref":
                x = self.fresh("rf")
                decs.append(f"val {x} = ref {self.atom(self.expr(INT, d, inner))}")
                inner = inner.bind(Var(x, REF(INT), "aref"))
            else:
                t1, t2 = self.value_type(), self.value_type()
                a, b = self.fresh("l"), self.fresh("l")
                if self.ch.chance(50):
                    decs.append(f"val ({a}, {b}) = ({self.expr(t1, d, inner)}, {self.expr(t2, d, inner)})")
                else:
                    decs.append(f"val {{fa = {a}, fb = {b}}} = {{fb = {self.expr(t2, d, inner)}, "
                                f"fa = {self.expr(t1, d, inner)}}}")
                inner = inner.bind(Var(a, t1), Var(b, t2))
        body = self.expr(t, d, inner)
        if self.ch.chance(25):
            body = f"{self.unit_expr(max(d - 1, 0), inner)}; {body}"
        return f"(let {' '.join(decs)} in {body} end)"

    def let_fun(self, t, d, ctx, name, a, p):
        """A local function; its body makes no calls a recursive caller would have to count."""
        rt = t if self.ch.chance(50) else INT
        self.cost.append(0)
        body = self.expr(rt, d, Ctx(ctx.env, 1, None, ctx.in_rec).bind(Var(p, a)))
        cost = 1 + self.cost.pop()
        return FN(a, rt), f"fun {name} {p} = {body}", cost

    def handle_expr(self, t, d, ctx) -> str:
        body = self.expr(t, d, ctx)
        return f"({body} handle {self.handler_rules(t, d, ctx)})"

    def handler_rules(self, t, d, ctx) -> str:
        """The rules of a handler whose expressions have type t: one to three exceptions (user,
        local or basis ones, some with an argument), sometimes a variable or `_` last."""
        ch = self.ch
        pool = [("E0", None), ("E1", INT), ("E2", STRING), ("Div", None), ("Overflow", None),
                ("Empty", None), ("Option", None), ("Subscript", None), ("Fail", STRING), ("Match", None)]
        pool += [(v.name, v.ty) for v in ctx.env if v.kind == "exn"] * 3
        rules = []
        for _ in range(ch.integer(1, 3)):
            name, arg = pool.pop(ch.integer(0, len(pool) - 1))
            pool = [(n, a) for n, a in pool if n != name]
            if arg is None:
                rules.append(f"{name} => {self.expr(t, d, ctx)}")
            else:
                x = self.fresh("h")
                rules.append(f"{name} {x} => {self.expr(t, d, ctx.bind(Var(x, arg)))}")
        if ch.chance(30):
            x = self.fresh("h")
            rules.append(f"{x} => {self.expr(t, d, ctx.bind(Var(x, EXN)))}")
        elif ch.chance(20):
            rules.append(f"_ => {self.expr(t, d, ctx)}")
        return " | ".join(rules)

    def raise_expr(self, t, d, ctx) -> str:
        ch = self.ch
        local = [v for v in ctx.env if v.kind == "exn"]
        caught = self.vars_of(ctx, EXN)
        which = ch.weighted([(3, "E0"), (3, "E1"), (2, "E2"), (2, "Fail"), (1, "Div")]
                            + ([(4, "local")] if local else []) + ([(3, "again")] if caught else []))
        if which == "local":
            v = ch.choice(local)
            if v.ty is None:
                return f"(raise {v.name})"
            return f"(raise {v.name} {self.atom(self.expr(v.ty, d, ctx))})"
        if which == "again":
            return f"(raise {ch.choice(caught).name})"
        if which == "E1":
            return f"(raise E1 {self.atom(self.expr(INT, d, ctx))})"
        if which == "E2":
            return f"(raise E2 {self.atom(self.expr(STRING, d, ctx))})"
        if which == "Fail":
            return f'(raise Fail "{ch.choice(["oops", "no", "bad"])}")'
        return f"(raise {which})"

    def par_expr(self, t, d, ctx) -> str:
        t2 = self.value_type()
        a, b = self.fresh("pa"), self.fresh("pb")
        left_first = self.ch.chance(50)
        ta, tb = (t, t2) if left_first else (t2, t)
        ea, eb = self.expr(ta, d, ctx), self.expr(tb, d, ctx)
        body = self.expr(t, d, ctx.bind(Var(a, ta), Var(b, tb)))
        if self.ch.chance(50):
            return f"(let val ({a}, {b}) = ForkJoin.par (fn () => {ea}, fn () => {eb}) in {body} end)"
        return f"(case ForkJoin.par (fn () => {ea}, fn () => {eb}) of ({a}, {b}) => {body})"

    def record_expr(self, t, d, ctx) -> str:
        other = self.value_type()
        fields = [("a", self.expr(other, d, ctx)), ("b", self.expr(t, d, ctx))]
        if self.ch.chance(50):
            fields.reverse()
        if self.ch.chance(40):   # effects in both fields: they happen in source order, not label order
            fields = [(k, f'({v} before print "{self.label()}\\n")') for k, v in fields]
        return "(#b {" + ", ".join(f"{k} = {v}" for k, v in fields) + "})"

    def while_expr(self, d, ctx) -> str:
        i, acc, j = self.fresh("i"), self.fresh("acc"), self.fresh("j")
        k = self.ch.integer(0, 4)
        inner = ctx.times(k + 1).bind(Var(j, INT), Var(acc, REF(INT), "ref"))
        step = self.expr(INT, d, inner)
        return (f"(let val {i} = ref 0 val {acc} = ref {self.atom(self.expr(INT, d, ctx))} in "
                f"while !{i} < {k} do (let val {j} = !{i} in {acc} := {step} end; {i} := !{i} + 1); "
                f"!{acc} end)")

    def unit_expr(self, d, ctx) -> str:
        ch = self.ch
        opts = [(4, lambda: f'print "{self.label()}\\n"'),
                (2, lambda: f'print ({self.show(INT, self.atom(self.expr(INT, d, ctx)))} ^ "\\n")')]
        refs = self.vars_of(ctx, REF(INT), ("aref",))
        if refs:
            opts.append((3, lambda: f"{ch.choice(refs).name} := {self.expr(INT, d, ctx)}"))
        opts.append((1, lambda: f"{ch.choice(['app', 'List.app'])} (fn {self.fresh('x')} => print \"{self.label()}\\n\") "
                                f"{self.atom(self.expr(ILIST, d, ctx))}"))
        if d > 0:
            opts.append((1, lambda: f"(if {self.expr(BOOL, d - 1, ctx)} then {self.unit_expr(d - 1, ctx)} "
                                    f"else {self.unit_expr(d - 1, ctx)})"))
        return f"({ch.weighted(opts)()})"


def _product(xs):
    r = 1
    for x in xs:
        r *= x
    return r


def _balanced_outer(e: str, open_: str = "(", close: str = ")") -> bool:
    """Whether e's first bracket closes at its last character (so e is one bracketed atom)."""
    depth = 0
    in_str = escaped = False
    for i, c in enumerate(e):
        if escaped:
            escaped = False
            continue
        if in_str:
            if c == "\\":
                escaped = True
            elif c == '"':
                in_str = False
            continue
        if c == '"':
            in_str = True
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0 and i != len(e) - 1:
                return False
    return depth == 0 and e.endswith(close)


# ---------------------------------------------------------------------------------------------


def generate(seed: int, warnings: bool = False, size: int = 8, deep: bool = False) -> str:
    """One program from a seed (no Hypothesis)."""
    return ProgramGen(RandomChooser(seed), warnings, size, deep).program()


def programs(warnings: bool | None = False, size: int = 8, deep: bool = False):
    """Hypothesis strategy of program texts. warnings=None: about one program in eight may
    hold a non-exhaustive `case` by design (a warning, and maybe Match at run time). deep: every
    program holds a deep recursion (`ProgramGen.deep_decl`)."""
    from hypothesis import strategies as st

    @st.composite
    def build(draw):
        ch = DrawChooser(draw)
        allow = ch.chance(12) if warnings is None else warnings
        return ProgramGen(ch, allow, size, deep).program()

    return build()


# Poly/ML has no ForkJoin structure: tests prepend this (spec/ml.md)
FORKJOIN_SHIM = "structure ForkJoin = struct fun par (f, g) = (f (), g ()) end\n"
