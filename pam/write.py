"""Terms as text, the way SWI-Prolog 9's `write/1` prints them (operators, spacing, floats).

Spacing follows SWI's rule: a space goes between two tokens only where they would otherwise
read as one (two alphanumeric tokens, or two symbol-char tokens), plus a space after a prefix
`-` before a number (`- 1` is not the number -1) and before a parenthesised operand (`- (a+b)`).
The writer works from an explicit stack, so a list of a million elements or a deeply nested term
prints without recursion.
"""

from __future__ import annotations

import math

from pam.terms import Cons, Struct, Var, var_name

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

    __slots__ = ("parts", "last", "names")

    def __init__(self, names: dict[int, str]) -> None:
        self.parts: list[str] = []
        self.last = ""
        self.names = names

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


class _Punct(str):
    """A piece of punctuation on the work stack (never spaced)."""


def _deref(t):
    while type(t) is Var and t.val is not None:
        t = t.val
    return t


def write_term(t, var_names: dict[int, str] | None = None) -> str:
    """`t` as `write/1` prints it; unbound variables print as `_G<n>` (numbered per `var_names`)."""
    w = _Writer(var_names if var_names is not None else {})
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
        w.token(str(term))
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
        _push_struct(w, term, prec, stack)
    else:
        w.token(str(term))


def _push_list(w: _Writer, term: Cons, stack: list) -> None:
    w.punct("[")
    items = []
    t = term
    while True:
        items.append(t.head)
        tail = _deref(t.tail)
        if type(tail) is not Cons:
            break
        t = tail
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
    while True:
        t = _deref(t)
        if type(t) in (int, float):
            return t >= 0 and math.copysign(1.0, t) > 0
        if type(t) is Struct and len(t.args) == 2 and t.name in INFIX:
            t = t.args[0]
            continue
        return False
