"""The primitives of spec/parlog.md, implemented once for every PE.

Each primitive is a function of its arguments and the call's source span that returns None
(done), a list of unbound variables (suspend on them), or raises ProgramFailure. Rules call the
pure ones inline at commit; `task_proc` wraps any of them as a task's step.
"""

from __future__ import annotations

import math
import re

from pam.parlog.arith import MAX_INT_BITS, ArithError, compare, evaluate
from pam.costs import DEFAULT
from hpgrem.ir.parlog.primitives import INLINE  # run at commit rather than as tasks (the table every layer agrees on)
from pam.errors import Halt, ProgramFailure
from pam.parlog.goal import Goal
from pam.step import declare
from pam.task import Seq
from pam.terms import (NIL, Cons, GroundCheck, Struct, Var, args_of, deref, from_list, functor_of,
                       make_struct, mkatom, to_list)
from pam.unify import match_eq
from pam.parlog.write import write_term


# The largest arity functor/3 builds (a structure of a million variables is about 60 MB).
MAX_ARITY = 1_000_000


def _fail(name: str, args: tuple, site, why: str = "failed") -> ProgramFailure:
    goal = write_term(Struct(name, args)) if args else name
    return ProgramFailure(why, goal, site)


def _arith(value, name, args, site):
    """Evaluate, turning arithmetic errors into a failure that names the goal."""
    try:
        return evaluate(value)
    except ArithError as e:
        raise _fail(name, args, site, f"arithmetic error: {e}") from None


def arith_test(op: str, x, y, site):
    """An arithmetic comparison: True, False, or the variables it waits for."""
    a = _arith(x, op, (x, y), site)
    if type(a) is Var:
        return [a]
    b = _arith(y, op, (x, y), site)
    if type(b) is Var:
        return [b]
    return compare(op, a, b)


def build(pe, lookup) -> dict:
    """The primitives of `pe` by key: {"inline": the inline ones (a clause calls them in its own
    step), "procs": every primitive's step}; `lookup(name, arity)` finds a relation's step for
    `call/1`."""
    prims = {**_tests(pe), **_terms(pe), **_output(pe)}
    procs = {key: task_proc(fn, key) for key, fn in prims.items()}
    procs.update(_waiting_steps(pe))
    procs["call/1"] = _call(pe, lookup, procs)
    if pe.number != 0:
        # Output happens on PE 0, the root transputer that talks to the host, in program
        # order: an output goal elsewhere is sent there to run.
        for key in ("write/1", "nl/0", "halt/0"):
            procs[key] = to_root(pe, procs[key])
    return {"inline": {k: v for k, v in prims.items() if k in INLINE}, "procs": procs}


def _tests(pe) -> dict:
    """Unification, arithmetic and comparisons, and the type tests, by key."""
    unify = pe.unify

    def eq(x, y, site):
        if not unify(x, y):
            raise _fail("=", (x, y), site)

    def is_(x, e, site):
        v = _arith(e, "is", (x, e), site)
        if type(v) is Var:
            return [v]
        x = deref(x)
        if type(x) is Var:
            pe.bind(x, v)
        elif type(x) is not type(v) or x != v:
            raise _fail("is", (x, e), site)

    def comparison(op):
        def test(x, y, site):
            r = arith_test(op, x, y, site)
            if r is False:
                raise _fail(op, (x, y), site)
            if r is not True:
                return r
        return test

    def identical(x, y, site):
        r = match_eq(x, y)
        if r is False:
            raise _fail("==", (x, y), site)
        if r is not True:
            return r

    def not_identical(x, y, site):
        r = match_eq(x, y)
        if r is True:
            raise _fail("\\==", (x, y), site)
        if r is not False:
            return r

    def type_test(name, ok):
        def test(x, site):
            x = deref(x)
            if type(x) is Var:
                return [x]
            if not ok(x):
                raise _fail(name, (x,), site)
        return test

    def data(x, site):
        x = deref(x)
        if type(x) is Var:
            return [x]

    def var(x, site):
        if type(deref(x)) is not Var:
            raise _fail("var", (x,), site)

    def true(site):
        return None

    prims = {
        "=/2": eq, "is/2": is_, "==/2": identical, "\\==/2": not_identical,
        "data/1": data, "var/1": var, "true/0": true,
        "atom/1": type_test("atom", lambda x: type(x) is str),
        "integer/1": type_test("integer", lambda x: type(x) is int),
        "float/1": type_test("float", lambda x: type(x) is float),
        "number/1": type_test("number", lambda x: type(x) in (int, float)),
        "atomic/1": type_test("atomic", lambda x: type(x) in (str, int, float)),
        "compound/1": type_test("compound", lambda x: type(x) in (Struct, Cons)),
    }
    for op in ("<", ">", "=<", ">=", "=:=", "=\\="):
        prims[f"{op}/2"] = comparison(op)
    return prims


def _terms(pe) -> dict:
    """The primitives that take terms apart and make them (functor/3, arg/3, =../2, atom_codes/2,
    number_codes/2, length/2), by key."""
    unify = pe.unify

    def functor(t, n, a, site):
        t = deref(t)
        if type(t) is not Var:
            name, arity = functor_of(t)
            if not (unify(n, name) and unify(a, arity)):
                raise _fail("functor", (t, n, a), site)
            return None
        n, a = deref(n), deref(a)
        waits = [v for v in (n, a) if type(v) is Var]
        if waits:
            return waits
        if type(a) is not int or a < 0 or (a > 0 and type(n) is not str):
            raise _fail("functor", (t, n, a), site, "functor/3: bad name or arity")
        if a > MAX_ARITY:  # SWI runs out of stack; the structure would take gigabytes here
            raise _fail("functor", (t, n, a), site, f"functor/3: arity over {MAX_ARITY}")
        term = n if a == 0 else make_struct(n, tuple(Var() for _ in range(a)))
        pe.bind(t, term)

    def arg(n, t, a, site):
        n, t = deref(n), deref(t)
        waits = [v for v in (n, t) if type(v) is Var]
        if waits:
            return waits
        args = args_of(t)
        if type(n) is not int or not 1 <= n <= len(args) or not unify(a, args[n - 1]):
            raise _fail("arg", (n, t, a), site)

    def univ(t, lst, site):
        t = deref(t)
        if type(t) is not Var:
            name, _ = functor_of(t)
            if not unify(lst, from_list([name, *args_of(t)])):
                raise _fail("=..", (t, lst), site)
            return None
        items, tail = to_list(lst)
        if type(tail) is Var:
            return [tail]
        if tail is not NIL:  # improper, or cyclic
            raise _fail("=..", (t, lst), site, "=..: not a list")
        if not items:
            raise _fail("=..", (t, lst), site, "=..: empty list")
        head = deref(items[0])
        if type(head) is Var:
            return [head]
        if len(items) > 1 and type(head) is not str:
            raise _fail("=..", (t, lst), site, "=..: the functor must be an atom")
        pe.bind(t, make_struct(head, tuple(items[1:])) if len(items) > 1 else head)

    def codes_of(lst, name, args, site):
        """The text of a ground code list, a list of variables to wait on, or a failure."""
        items, tail = to_list(lst)
        if type(tail) is Var:
            return None, [tail]
        if tail is not NIL:  # improper, or cyclic
            raise _fail(name, args, site, f"{name}/2: not a list")
        codes = []
        for c in items:
            c = deref(c)
            if type(c) is Var:
                return None, [c]
            # A code is a Unicode scalar value: surrogates are not characters (SWI's char_code/2
            # refuses them too), so text stays printable in UTF-8.
            if type(c) is not int or not 0 <= c <= 0x10FFFF or 0xD800 <= c <= 0xDFFF:
                raise _fail(name, args, site, f"{name}/2: not a character code: {write_term(c)}")
            codes.append(chr(c))
        return "".join(codes), None

    def atom_codes(a, lst, site):
        a = deref(a)
        if type(a) is not Var:
            text = a if type(a) is str else write_term(a)
            if not unify(lst, from_list([ord(c) for c in text])):
                raise _fail("atom_codes", (a, lst), site)
            return None
        text, waits = codes_of(lst, "atom_codes", (a, lst), site)
        if waits:
            return waits + [a]
        pe.bind(a, mkatom(text))

    def number_codes(num, lst, site):
        num = deref(num)
        if type(num) is not Var:
            if not unify(lst, from_list([ord(c) for c in write_term(num)])):
                raise _fail("number_codes", (num, lst), site)
            return None
        text, waits = codes_of(lst, "number_codes", (num, lst), site)
        if waits:
            return waits + [num]
        value = parse_number(text)
        if value is None:
            raise _fail("number_codes", (num, lst), site, f"number_codes/2: '{text}' is not a number")
        pe.bind(num, value)

    def length(lst, n, site):
        items, tail = to_list(lst)
        if type(tail) is Var:
            return [tail]
        if type(tail) is Cons:
            raise _fail("length", (lst, n), site, "length/2: not a list (a cyclic term)")
        if tail != NIL or not unify(n, len(items)):
            raise _fail("length", (lst, n), site)

    return {"functor/3": functor, "arg/3": arg, "=../2": univ, "atom_codes/2": atom_codes,
            "number_codes/2": number_codes, "length/2": length}


def _output(pe) -> dict:
    """nl/0 and halt/0 (write/1 waits for its term: `_waiting_steps`)."""
    emit = pe.output

    def nl(site):
        emit("\n")

    def halt(site):
        raise Halt()

    return {"nl/0": nl, "halt/0": halt}


def _waiting_steps(pe) -> dict:
    """The primitives whose step waits as a task and resumes where it stopped (length/2 over
    a list still being made, write/1 until its term is ground), by key."""
    unify = pe.unify
    emit = pe.output

    def length_step(t):
        """length/2 as a waiting task: it remembers how far it has counted."""
        lst, n, *counted = t.args
        count = counted[0] if counted else 0
        x = deref(lst)
        mark, power, steps = None, 1, 0  # Brent's cycle detection: a cyclic list is no list
        while type(x) is Cons:
            count += 1
            x = deref(x.tail)
            if x is mark:
                raise _fail("length", t.args[:2], t.site, "length/2: not a list (a cyclic term)")
            steps += 1
            if steps == power:
                mark, power, steps = x, power * 2, 0
        if type(x) is Var:
            t.args = (x, n, count)
            return [x]
        if x != NIL or not unify(n, count):
            raise _fail("length", t.args[:2], t.site)

    def write_step(t):
        """write/1 as a waiting task: it resumes its ground check where it stopped."""
        term, *rest = t.args
        check = rest[0] if rest else GroundCheck(term)
        v = check.first_unbound()
        if v is not None:
            t.args = (term, check)
            return [v]
        emit(write_term(term))

    return {key: primitive_step(key)(step) for key, step in (("length/2", length_step), ("write/1", write_step))}


def _call(pe, lookup, procs: dict):
    """The step of `call/1`: the task becomes its goal (`lookup` finds a relation's step,
    `procs` the primitives')."""
    @primitive_step("call/1")
    def call(t):
        """`call(G)`: the task becomes the goal G (a conjunction becomes its plan)."""
        g = deref(t.args[0])
        if type(g) is Var:
            return [g]
        plan = goal_plan(g, t.site)
        if type(plan) is Goal:
            plan.group = t.group
            return plan
        pe.spawn(plan, t)
        return None

    def goal_plan(g, site):
        g = deref(g)
        if type(g) is Struct and len(g.args) == 2 and g.name in (",", "&"):
            left, right = goal_plan(g.args[0], site), goal_plan(g.args[1], site)
            return [left, right] if g.name == "," else Seq([left, right])
        if type(g) is Var:
            return Goal(procs["call/1"], (g,), None, site)
        if type(g) not in (str, Struct):
            raise ProgramFailure("call/1: not a callable goal", write_term(g), site)
        name, arity = (g, 0) if type(g) is str else (g.name, len(g.args))
        proc = lookup(name, arity) or procs.get(f"{name}/{arity}")
        if proc is None:
            raise ProgramFailure(f"call/1: unknown relation {name}/{arity}", write_term(g), site)
        return Goal(proc, args_of(g), None, site)

    return call


def to_root(pe, step):
    """`step` on a PE other than 0: the goal is sent to PE 0 and runs there."""
    @declare(step.goal_name, step.goal_arity, step.cost, key=step.key)
    def send(t):
        pe.net.export_task(t, 0)  # the task is done here
    return send


def primitive_step(key: str):
    """Declares the step of the primitive `key` (`name/arity`)."""
    name, arity = key.rsplit("/", 1)
    return declare(name, int(arity), DEFAULT.primitive_step, key=key)


def task_proc(fn, key: str):
    """A primitive as a task's step."""
    @primitive_step(key)
    def step(t):
        return fn(*t.args, t.site)
    return step


def parse_number(text: str):
    """Number syntax of `number_codes/2` (leading layout allowed, as in SWI), or None. ASCII
    digits only; a float must be finite (`1.0e400` is not a number, as in SWI); an integer may
    have any number of digits up to arith.MAX_INT_BITS bits."""
    s = text.strip()
    if not s.isascii():
        return None  # Python would take other scripts' digits
    try:
        if s.startswith("0'") and len(s) == 3:
            return ord(s[2])
        if any(c in s for c in ".eE") and not s.lower().startswith(("0x", "-0x")):
            value = float(s)
            return value if math.isfinite(value) else None
        sign = -1 if s[:1] == "-" else 1
        body = s[1:] if s[:1] in ("-", "+") else s
        if body[:2] in ("0x", "0o", "0b"):
            return sign * int(body, 0)
        if not _DIGITS.match(body):
            return None
        body = body.replace("_", "")
        if len(body) * 3.33 > MAX_INT_BITS + 4:
            return None
        return sign * int_of_digits(body)
    except ValueError:
        return None


_DIGITS = re.compile(r"[0-9]+(?:_[0-9]+)*\Z")


def int_of_digits(digits: str) -> int:
    """The integer of a string of decimal digits, however long: Python's `int` refuses more than
    4,300 digits (and is quadratic), so a long one is split in halves (multiplication is fast)."""
    if len(digits) <= 3000:
        return int(digits)
    half = len(digits) // 2
    return int_of_digits(digits[:half]) * 10 ** (len(digits) - half) + int_of_digits(digits[half:])


__all__ = ["INLINE", "arith_test", "build", "parse_number", "task_proc"]
