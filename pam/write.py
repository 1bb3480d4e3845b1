"""Terms as text, the way SWI-Prolog 9's `write/1` prints them (operators, spacing, floats).

The writer works from an explicit stack, so a list of a million elements or a deeply nested
term prints without recursion.
"""

from __future__ import annotations

import math

from pam.terms import Cons, Struct, Var

# SWI-Prolog 9's default operator table (only what write/1 needs): name -> (priority, type).
INFIX = {
    ":-": (1200, "xfx"), "-->": (1200, "xfx"), "=>": (1200, "xfx"),
    ";": (1100, "xfy"), "|": (1100, "xfy"), "->": (1050, "xfy"), "*->": (1050, "xfy"),
    ",": (1000, "xfy"), ":=": (990, "xfx"),
    "=": (700, "xfx"), "\\=": (700, "xfx"), "==": (700, "xfx"), "\\==": (700, "xfx"),
    "=..": (700, "xfx"), "is": (700, "xfx"), "<": (700, "xfx"), ">": (700, "xfx"),
    "=<": (700, "xfx"), ">=": (700, "xfx"), "=:=": (700, "xfx"), "=\\=": (700, "xfx"),
    "@<": (700, "xfx"), "@>": (700, "xfx"), "@=<": (700, "xfx"), "@>=": (700, "xfx"),
    "=@=": (700, "xfx"), "\\=@=": (700, "xfx"), "as": (700, "xfx"), ">:<": (700, "xfx"),
    ":<": (700, "xfx"),
    ":": (200, "xfy"),
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
SYMBOL_CHARS = set("#$&*+-./:<=>?@^~\\")


def format_float(x: float) -> str:
    """Shortest round-trip digits, written as SWI-Prolog does (`1.0e22`, `1.5e-7`, `0.1`)."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "nan"
    r = repr(x)
    if "e" in r:
        mant, exp = r.split("e")
        if "." not in mant:
            mant += ".0"
        sign = "-" if exp.startswith("-") else ""
        return f"{mant}e{sign}{exp.lstrip('+-').lstrip('0') or '0'}"
    return r


def _char_class(c: str) -> int:
    if c.isalnum() or c == "_":
        return 1
    if c in SYMBOL_CHARS:
        return 2
    return 0


class _Out:
    """Collects tokens, inserting a space where two would otherwise read as one."""

    __slots__ = ("parts", "last")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.last = ""

    def token(self, text: str) -> None:
        if text and self.last:
            a = _char_class(self.last)
            if a and a == _char_class(text[0]):
                self.parts.append(" ")
        self.parts.append(text)
        if text:
            self.last = text[-1]

    def raw(self, text: str) -> None:
        self.parts.append(text)
        if text:
            self.last = text[-1]


class _Close:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def write_term(t, var_names: dict[int, str] | None = None) -> str:
    """`t` as `write/1` prints it; unbound variables print as `_G<n>`."""
    names = var_names if var_names is not None else {}
    out = _Out()
    stack: list = [(t, 1200)]
    while stack:
        item = stack.pop()
        if type(item) is _Close:
            out.raw(item.text)
            continue
        if type(item) is str:
            out.token(item)
            continue
        if type(item) is _Spaced:
            out.raw(f" {item.name} ")
            continue
        term, prec = item
        while type(term) is Var and term.val is not None:
            term = term.val
        tt = type(term)
        if tt is Var:
            key = id(term)
            if key not in names:
                names[key] = f"_G{len(names) + 1}"
            out.token(names[key])
        elif tt is int:
            out.token(str(term))
        elif tt is float:
            out.token(format_float(term))
        elif tt is str:
            out.token(term)
        elif tt is Cons:
            _push_list(term, stack, out)
        elif tt is Struct:
            _push_struct(term, prec, stack, out)
        else:
            out.token(str(term))
    return "".join(out.parts)


def _push_list(term: Cons, stack: list, out: _Out) -> None:
    out.raw("[")
    items = []
    t = term
    while True:
        items.append(t.head)
        tail = t.tail
        while type(tail) is Var and tail.val is not None:
            tail = tail.val
        if type(tail) is Cons:
            t = tail
            continue
        break
    stack.append(_Close("]"))
    if not (type(tail) is str and tail == "[]"):
        stack.append((tail, 999))
        stack.append(_Close("|"))
    for i in range(len(items) - 1, -1, -1):
        stack.append((items[i], 999))
        if i:
            stack.append(_Close(","))


def _push_struct(term: Struct, prec: int, stack: list, out: _Out) -> None:
    name, args = term.name, term.args
    n = len(args)
    if name == "{}" and n == 1:
        out.token("{")
        stack.append(_Close("}"))
        stack.append((args[0], 1200))
        return
    if n == 2 and name in INFIX:
        p, typ = INFIX[name]
        lp = p - 1 if typ[0] == "x" else p
        rp = p - 1 if typ[2] == "x" else p
        open_paren = p > prec
        if open_paren:
            out.raw("(")
            stack.append(_Close(")"))
        stack.append((args[1], rp))
        if name == ",":
            stack.append(_Close(","))
        elif name[0].isalpha():
            stack.append(_Spaced(name))
        else:
            stack.append(name)
        stack.append((args[0], lp))
        return
    if n == 1 and name in PREFIX:
        p, typ = PREFIX[name]
        ap = p - 1 if typ == "fx" else p
        open_paren = p > prec
        if open_paren:
            out.raw("(")
            stack.append(_Close(")"))
        arg = args[0]
        while type(arg) is Var and arg.val is not None:
            arg = arg.val
        out.token(name)
        if type(arg) in (int, float) or _is_operator_term(arg, ap):
            out.raw(" ")
        stack.append((arg, ap))
        return
    out.token(name)
    out.raw("(")
    stack.append(_Close(")"))
    for i in range(n - 1, -1, -1):
        stack.append((args[i], 999))
        if i:
            stack.append(_Close(","))


def _is_operator_term(arg, max_prec: int) -> bool:
    """An operand that prints with its own parentheses or as an operator atom needs a space."""
    if type(arg) is str and (arg in INFIX or arg in PREFIX):
        return True
    if type(arg) is Struct:
        n = len(arg.args)
        if n == 2 and arg.name in INFIX and INFIX[arg.name][0] > max_prec:
            return True
        if n == 1 and arg.name in PREFIX and PREFIX[arg.name][0] > max_prec:
            return True
    return False


class _Spaced:
    """An alphanumeric operator (`is`, `mod`): always spaced on both sides."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
