"""Terms as text, the way SWI-Prolog 9's `write/1` prints them (operators, spacing, floats).

Spacing follows SWI's rule: a space goes between two tokens only where they would otherwise
read as one (two alphanumeric tokens, or two symbol-char tokens), plus a space after a prefix
`-` before a number (`- 1` is not the number -1) and before a parenthesised operand (`- (a+b)`).
The writer works from an explicit stack, so a list of a million elements or a deeply nested term
prints without recursion. A cyclic term prints as SWI-Prolog 9 prints it, `@(Skeleton, [S_1=...])`
(`write_cyclic`); the writer looks for cycles only once it has met CHECK_AFTER compound terms.
Integers print in full however long (`int_text`).
"""

from __future__ import annotations

import decimal
import math

from pam.terms import CHECK_AFTER, Cons, Struct, Var, is_acyclic, var_name

# SWI-Prolog 9's default operator table (what write/1 consults): name -> (priority, type).
INFIX = {
    ":-": (1200, "xfx"), "-->": (1200, "xfx"), "=>": (1200, "xfx"),
    ";": (1100, "xfy"), "|": (1100, "xfy"), "->": (1050, "xfy"), "*->": (1050, "xfy"),
    ",": (1000, "xfy"), ":=": (990, "xfx"),
    "=": (700, "xfx"), "\\=": (700, "xfx"), "==": (700, "xfx"), "\\==": (700, "xfx"),
    "=..": (700, "xfx"), "is": (700, "xfx"), "<": (700, "xfx"), ">": (700, "xfx"),
    "=<": (700, "xfx"), ">=": (700, "xfx"), "=:=": (700, "xfx"), "=\\=": (700, "xfx"),
    "@<": (700, "xfx"), "@>": (700, "xfx"), "@=<": (700, "xfx"), "@>=": (700, "xfx"),
    "=@=": (700, "xfx"), "\\=@=": (700, "xfx"), "as": (700, "xfx"), ">:<": (700, "xfx"),
    ":<": (700, "xfx"), ":": (200, "xfy"),
    "+": (500, "yfx"), "-": (500, "yfx"), "/\\": (500, "yfx"), "\\/": (500, "yfx"),
    "xor": (500, "yfx"),
    "*": (400, "yfx"), "/": (400, "yfx"), "//": (400, "yfx"), "mod": (400, "yfx"),
    "rem": (400, "yfx"), "<<": (400, "yfx"), ">>": (400, "yfx"), "div": (400, "yfx"),
    "rdiv": (400, "yfx"), "divmod": (400, "yfx"),
    "**": (200, "xfx"), "^": (200, "xfy"),
}
PREFIX = {
    ":-": (1200, "fx"), "?-": (1200, "fx"), "\\+": (900, "fy"), "-": (200, "fy"),
    "+": (200, "fy"), "\\": (200, "fy"), "?": (500, "fx"), "$": (1, "fx"),
    "dynamic": (1150, "fx"), "discontiguous": (1150, "fx"), "initialization": (1150, "fx"),
    "meta_predicate": (1150, "fx"), "module_transparent": (1150, "fx"), "multifile": (1150, "fx"),
    "public": (1150, "fx"), "thread_local": (1150, "fx"), "table": (1150, "fx"),
}
SYMBOL_CHARS = frozenset("#$&*+-./:<=>?@^~\\")


def format_float(x: float) -> str:
    """Shortest round-trip digits, laid out as SWI-Prolog does: positional when the point falls
    inside the digits or the magnitude is from 1.0e-4 up to below 1.0e15; else `1.0e+15`, `1.5e-7`."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "nan"
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    digits, point = _shortest_digits(abs(x))
    e = point - 1
    if 0 < point < len(digits) or -4 <= e < 15:  # SWI: a point inside the digits is never moved
        if point <= 0:
            text = "0." + "0" * -point + digits
        elif point >= len(digits):
            text = digits + "0" * (point - len(digits)) + ".0"
        else:
            text = digits[:point] + "." + digits[point:]
    else:
        frac = digits[1:] or "0"
        text = f"{digits[0]}.{frac}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + text


def _shortest_digits(x: float) -> tuple[str, int]:
    """The shortest digit string d and decimal point position p with x = 0.d * 10**p."""
    if x == 0:
        return "0", 1
    r = repr(x)
    mant, _, exp = r.partition("e")
    whole, _, frac = mant.partition(".")
    digits = (whole + frac).lstrip("0")
    lead_zeros = len(whole + frac) - len((whole + frac).lstrip("0"))
    point = len(whole) - lead_zeros + (int(exp) if exp else 0)
    return digits.rstrip("0") or "0", point


def _char_class(c: str) -> int:
    if c.isalnum() or c == "_":
        return 1
    if c in SYMBOL_CHARS:
        return 2
    return 0


class _Writer:
    """Tokens out, with SWI's spacing between them."""

    __slots__ = ("parts", "last", "names", "root", "budget")

    def __init__(self, names: dict[int, str], root) -> None:
        self.parts: list[str] = []
        self.last = ""
        self.names = names
        self.root = root
        self.budget = CHECK_AFTER  # compound terms to write before checking the term for cycles

    def spend(self, n: int) -> None:
        """Count `n` compound terms written; past the budget, a cyclic term stops this writer."""
        self.budget -= n
        if self.budget <= 0:
            if not is_acyclic(self.root):
                raise _Cyclic
            self.budget = math.inf

    def token(self, text: str) -> None:
        if self.last and text:
            a = _char_class(self.last)
            if a and a == _char_class(text[0]):
                self.parts.append(" ")
        self.parts.append(text)
        if text:
            self.last = text[-1]

    def punct(self, text: str) -> None:
        self.parts.append(text)
        self.last = text[-1]

    def infix(self, name: str) -> None:
        if self.last and _char_class(self.last) and _char_class(self.last) == _char_class(name[0]):
            self.parts.append(f" {name} ")
            self.last = " "
        else:
            self.token(name)

    def space(self) -> None:
        self.parts.append(" ")
        self.last = " "


class _Cyclic(Exception):
    """The term being written is cyclic: it is written factorized instead."""


class _Punct(str):
    """A piece of punctuation on the work stack (never spaced)."""


def _deref(t):
    while type(t) is Var and t.val is not None:
        t = t.val
    return t


def write_term(t, var_names: dict[int, str] | None = None) -> str:
    """`t` as `write/1` prints it; unbound variables print as `_G<n>` (numbered per `var_names`)."""
    names = var_names if var_names is not None else {}
    try:
        return _write_tree(t, names)
    except _Cyclic:
        return write_cyclic(t, names)


def _write_tree(t, names: dict[int, str]) -> str:
    w = _Writer(names, t)
    stack: list = [(t, 1200)]
    while stack:
        item = stack.pop()
        if type(item) is _Punct:
            w.punct(item)
        elif type(item) is str:
            w.token(item)
        elif type(item) is _Infix:
            w.infix(item.name)
        elif type(item) is _Operand:
            _write(w, item.term, item.prec, stack, True)
        else:
            _write(w, item[0], item[1], stack, False)
    return "".join(w.parts)


def write_cyclic(t, names: dict[int, str]) -> str:
    """A cyclic term as SWI-Prolog 9's write/1 prints it: `@(Skeleton, [S_1=Value, ...])`.

    As SWI's '$factorize_term' and its `only_cycles` do: a depth-first, left-to-right walk finds
    the compound terms met twice (in the order of their second meeting); each becomes a variable
    S bound to a copy of it whose parts are those variables. Then, in that order, a variable
    whose binding is acyclic is bound for good (its term is written in place); the others stay
    unbound and are listed, named S_1, S_2, ... in order."""
    shared: dict[int, Var] = {}  # id of a term met twice -> its variable, in order
    terms: dict[int, object] = {}  # id of a term met twice -> the term
    met: set[int] = set()
    stack = [t]
    while stack:
        x = _deref(stack.pop())
        tx = type(x)
        if tx is not Cons and tx is not Struct:
            continue
        if id(x) in met:
            if id(x) not in shared:
                shared[id(x)] = Var()
                terms[id(x)] = x
            continue
        met.add(id(x))
        if tx is Cons:
            stack.append(x.tail)
            stack.append(x.head)
        else:
            stack.extend(reversed(x.args))
    # Terms met once form trees between the shared ones, so these copies end.
    skeleton = _copy(t, shared, False)
    values = {i: _copy(terms[i], shared, True) for i in shared}
    kept = []
    for i, v in shared.items():
        v.val = values[i]
        if not is_acyclic(v):
            v.val = None
            kept.append((v, values[i]))
    for n, (v, _) in enumerate(kept, 1):
        v.val = _Name(f"S_{n}")  # not a variable: `names` numbers the term's own ones
    return _write_tree(Struct("@", (skeleton, _list([Struct("=", pair) for pair in kept]))), names)


class _Name(str):
    """A name written as it is (S_1 of a factorized cyclic term)."""


_VISIT, _VISIT_ITSELF, _BUILD = 0, 1, 2


def _copy(t, shared: dict[int, Var], itself: bool):
    """A copy of `t` in which every term of `shared` is its variable (but `t` itself, at the top,
    when `itself`). Built bottom-up from a post-order walk: a deep term needs no recursion."""
    out: list = []
    stack: list = [(t, _VISIT_ITSELF if itself else _VISIT)]
    while stack:
        x, state = stack.pop()
        if state == _BUILD:
            if type(x) is Cons:
                tail = out.pop()
                out.append(Cons(out.pop(), tail))
            else:
                n = len(x.args)
                args = tuple(out[len(out) - n:])
                del out[len(out) - n:]
                out.append(Struct(x.name, args))
            continue
        x = _deref(x)
        tx = type(x)
        if tx is not Cons and tx is not Struct:
            out.append(x)
        elif state == _VISIT and id(x) in shared:
            out.append(shared[id(x)])
        else:
            stack.append((x, _BUILD))
            if tx is Cons:
                stack.append((x.tail, _VISIT))
                stack.append((x.head, _VISIT))
            else:
                stack.extend((a, _VISIT) for a in reversed(x.args))
    return out[0]


def _list(items):
    result = "[]"
    for x in reversed(items):
        result = Cons(x, result)
    return result


def int_text(n: int) -> str:
    """The decimal digits of `n`, however many: Python's `str` refuses more than 4,300 digits
    (and is quadratic), so long ones are converted as CPython 3.12's _pylong does, by halves
    through `decimal`, whose multiplication is fast."""
    if -_STR_LIMIT < n < _STR_LIMIT:
        return str(n)
    D = decimal.Decimal
    powers: dict[int, decimal.Decimal] = {}

    def power(w: int):  # 2 ** w as a Decimal, memoised
        p = powers.get(w)
        if p is None:
            p = D(2) ** w if w <= 128 else power(w >> 1) * power(w - (w >> 1))
            powers[w] = p
        return p

    def convert(x: int, w: int):  # `x` (< 2 ** w) as a Decimal; depth log2(w / 128)
        if w <= 128:
            return D(x)
        half = w >> 1
        hi = x >> half
        return convert(x - (hi << half), half) + convert(hi, w - half) * power(half)

    with decimal.localcontext() as ctx:
        ctx.prec = decimal.MAX_PREC
        ctx.Emax = decimal.MAX_EMAX
        ctx.Emin = decimal.MIN_EMIN
        ctx.traps[decimal.Inexact] = True
        text = str(convert(abs(n), abs(n).bit_length()))
    return "-" + text if n < 0 else text


_STR_LIMIT = 10 ** 3000  # below this, `str` is fast and allowed


class _Infix:
    """An infix operator: spaced on both sides when it must be spaced before (`a is [1]`,
    but `f(a)is[1]`), as SWI does."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class _Operand:
    """An operand of an operator: an operator atom there is written in parentheses, `a=(-)`."""

    __slots__ = ("term", "prec")

    def __init__(self, term, prec: int) -> None:
        self.term = term
        self.prec = prec


def _write(w: _Writer, term, prec: int, stack: list, operand: bool) -> None:
    term = _deref(term)
    tt = type(term)
    if tt is Var:
        w.token(var_name(term, w.names))
    elif tt is int:
        w.token(str(term) if -_STR_LIMIT < term < _STR_LIMIT else int_text(term))
    elif tt is float:
        w.token(format_float(term))
    elif tt is str:
        if operand and (term in INFIX or term in PREFIX):
            w.punct("(")
            w.token(term)
            w.punct(")")
        else:
            w.token(term)
    elif tt is Cons:
        _push_list(w, term, stack)
    elif tt is Struct:
        w.budget -= 1
        if w.budget <= 0:
            w.spend(0)
        _push_struct(w, term, prec, stack)
    else:
        w.token(str(term))


def _push_list(w: _Writer, term: Cons, stack: list) -> None:
    w.punct("[")
    items = []
    t = term
    pending = 0  # cells not yet counted against the writer's budget
    while True:
        items.append(t.head)
        pending += 1
        tail = _deref(t.tail)
        if type(tail) is not Cons:
            break
        t = tail
        if pending >= w.budget:
            w.spend(pending)  # a cyclic list stops the writer here
            pending = 0
    w.budget -= pending
    if w.budget <= 0:
        w.spend(0)
    stack.append(_Punct("]"))
    if not (type(tail) is str and tail == "[]"):
        stack.append((tail, 999))
        stack.append(_Punct("|"))
    for i in range(len(items) - 1, -1, -1):
        stack.append((items[i], 999))
        if i:
            stack.append(_Punct(","))


def _push_struct(w: _Writer, term: Struct, prec: int, stack: list) -> None:
    name, args = term.name, term.args
    n = len(args)
    if name == "{}" and n == 1:
        w.punct("{")
        stack.append(_Punct("}"))
        stack.append((args[0], 1200))
        return
    if n == 2 and name in INFIX:
        p, typ = INFIX[name]
        left = p - 1 if typ[0] == "x" else p
        right = p - 1 if typ[2] == "x" else p
        if p > prec:
            w.punct("(")
            stack.append(_Punct(")"))
        stack.append(_Operand(args[1], right))
        stack.append(_Punct(",") if name == "," else _Infix(name))
        stack.append(_Operand(args[0], left))
        return
    if n == 1 and name in PREFIX:
        p, typ = PREFIX[name]
        operand_max = p - 1 if typ == "fx" else p
        arg = _deref(args[0])
        if p > prec:
            w.punct("(")
            stack.append(_Punct(")"))
        w.token(name)
        if type(arg) is str and (arg in INFIX or arg in PREFIX):
            w.space()
            stack.append(_Punct(")"))
            stack.append(arg)
            stack.append(_Punct("("))
            return
        if _priority(arg) > operand_max or arg == "{}" or type(arg) is Struct and arg.name == "{}":
            w.space()
        elif name == "-" and _starts_with_digit(arg):
            w.space()  # `- 1` is the term -(1); `-1` would be the number
        stack.append((arg, operand_max))
        return
    w.token(name)
    w.punct("(")
    stack.append(_Punct(")"))
    for i in range(n - 1, -1, -1):
        stack.append((args[i], 999))
        if i:
            stack.append(_Punct(","))


def _priority(t) -> int:
    """The priority a term prints at (0 for anything that is not an operator term)."""
    if type(t) is Struct:
        if len(t.args) == 2 and t.name in INFIX:
            return INFIX[t.name][0]
        if len(t.args) == 1 and t.name in PREFIX:
            return PREFIX[t.name][0]
    return 0


def _starts_with_digit(t) -> bool:
    """Whether the text of `t` begins with a digit (a non-negative number, or an infix term
    whose leftmost operand does)."""
    met = None  # past CHECK_AFTER operators, those met: a cycle of left operands ends the walk
    budget = CHECK_AFTER
    while True:
        t = _deref(t)
        if type(t) in (int, float):
            return t >= 0 and math.copysign(1.0, t) > 0
        if type(t) is Struct and len(t.args) == 2 and t.name in INFIX:
            if met is not None:
                if id(t) in met:
                    return False  # the writer finds the cycle and writes the term factorized
                met.add(id(t))
            else:
                budget -= 1
                if not budget:
                    met = set()
            t = t.args[0]
            continue
        return False
