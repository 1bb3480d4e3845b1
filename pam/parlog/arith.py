"""Arithmetic evaluation for `is` and comparisons, with SWI-Prolog's functions and results.

Every evaluation ends in a number or an ArithError (a program failure, exit 1), never in a Python
exception: a float that overflows or is undefined (SWI's evaluation errors), a division by zero,
an integer result over MAX_INT_BITS bits (refused before it is computed, where it would take
long: `2 ** 10000000000`, `1 << 10**12`), a cyclic expression (`X = X + 1`).
"""

from __future__ import annotations

import math

from pam.terms import CHECK_AFTER, Cons, Struct, Var, is_acyclic

# The largest integer result, in bits (512 KiB, about 1.26 million decimal digits): computing,
# printing or sending one takes well under a second.
MAX_INT_BITS = 1 << 22


class ArithError(Exception):
    """Evaluation failed: not a number, an unknown function, division by zero..."""


def _int_div(x, y):
    if y == 0:
        raise ArithError("division by zero")
    if type(x) is int and type(y) is int:
        q = abs(x) // abs(y)  # SWI's // truncates toward zero
        return q if (x >= 0) == (y >= 0) else -q
    raise ArithError("// expects integers")


def _div(x, y):
    if type(x) is int and type(y) is int:
        if y == 0:
            raise ArithError("division by zero")
        q, r = divmod(x, y)
        return q if r == 0 else x / y
    if y == 0:
        raise ArithError("undefined result" if x == 0 else "division by zero")  # as SWI: 0.0/0
    return x / y


def _mod(x, y):
    _need_ints("mod", x, y)
    if y == 0:
        raise ArithError("division by zero")
    return x % y


def _rem(x, y):
    _need_ints("rem", x, y)
    if y == 0:
        raise ArithError("division by zero")
    return x - y * _int_div(x, y)


def _too_big():
    return ArithError(f"integer overflow (a result over {MAX_INT_BITS} bits)")


def _mul(x, y):
    if type(x) is int and type(y) is int and x.bit_length() + y.bit_length() > MAX_INT_BITS + 1:
        raise _too_big()
    return x * y


def _pow(x, y):
    if type(x) is int and type(y) is int:
        if y >= 0:
            if abs(x) > 1 and y * math.log2(abs(x)) > MAX_INT_BITS:
                raise _too_big()
            return x ** y
        if x in (1, -1):
            return 1 if y % 2 == 0 or x == 1 else -1  # an integer, as SWI's (Python's `1 ** -3` is 1.0)
        if x == 0:
            raise ArithError("division by zero")
        return float(x) ** y
    # SWI-Prolog 9's exact cases of a float operand: a zero exponent gives the integer 1 (also
    # `2.5 ** 0`, `nan ** 0.0`), so do the integer bases 1 (`1 ** 0.5`) and 0 (`0 ** 0.5` is 0)
    if y == 0 or x == 1 and type(x) is int:
        return 1
    if x == 0 and type(x) is int and not math.isnan(y):
        if y < 0:
            raise ArithError("division by zero")
        return 0
    try:
        r = float(x) ** float(y)
    except ZeroDivisionError:
        raise ArithError("division by zero") from None
    if type(r) is complex:  # a negative number to a fractional power
        raise ArithError("undefined result")
    return r


def _need_ints(op, *xs):
    for x in xs:
        if type(x) is not int:
            raise ArithError(f"{op} expects integers, got {x!r}")


def _shift(op):
    def f(x, y):
        _need_ints(op, x, y)
        if op == ">>":
            y = -y
        # A shift by a negative amount shifts the other way, as in SWI-Prolog (1 << -1 is 0).
        if y <= 0:
            return x >> -y if -y <= MAX_INT_BITS else (-1 if x < 0 else 0)
        if x and x.bit_length() + y > MAX_INT_BITS:
            raise _too_big()
        return x << y
    return f


def _bit(op, fn):
    def f(x, y):
        _need_ints(op, x, y)
        return fn(x, y)
    return f


def _round(x):
    if type(x) is int:
        return x
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def _sqrt(x):
    if x < 0:
        raise ArithError("sqrt of a negative number")
    return math.sqrt(x)


def _sign(x):
    if type(x) is int:
        return (x > 0) - (x < 0)
    return math.copysign(1.0, x) if x != 0 else 0.0


def _max(x, y):
    return y if y > x or (y == x and type(y) is float) else x


def _min(x, y):
    return y if y < x or (y == x and type(y) is float) else x


def _gcd(x, y):
    _need_ints("gcd", x, y)
    return math.gcd(x, y)


def _truncate(x):
    return x if type(x) is int else int(x)


BINARY = {
    "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": _mul,
    "/": _div, "//": _int_div, "mod": _mod, "rem": _rem, "min": _min, "max": _max,
    "**": _pow, "^": _pow, "<<": _shift("<<"), ">>": _shift(">>"),
    "/\\": _bit("/\\", lambda x, y: x & y), "\\/": _bit("\\/", lambda x, y: x | y), "gcd": _gcd,
}
UNARY = {
    "-": lambda x: -x, "+": lambda x: x, "abs": abs, "sign": _sign, "sqrt": _sqrt,
    "float": float, "integer": _round, "truncate": _truncate,
    "\\": lambda x: ~x if type(x) is int else _need_ints("\\", x),
}


def evaluate(expr):
    """The value of `expr`, or the first unbound variable met (the caller suspends on it)."""
    # Post-order with an explicit stack: ("apply", name, arity) markers follow their operands.
    stack = [expr]
    values: list = []
    budget = CHECK_AFTER  # operations to evaluate before checking the expression for cycles
    while stack:
        e = stack.pop()
        while type(e) is Var:
            v = e.val
            if v is None:
                return e
            e = v
        te = type(e)
        if te is int or te is float:
            values.append(e)
        elif te is Struct:
            n = len(e.args)
            if n == 2 and e.name in BINARY or n == 1 and e.name in UNARY:
                stack.append(_Apply(e.name, n))
                stack.extend(reversed(e.args))
            else:
                raise ArithError(f"{e.name}/{n} is not an arithmetic function")
            budget -= 1
            if not budget:
                if not is_acyclic(expr):
                    raise ArithError("cyclic term")
                budget = -1  # never again: evaluating binds nothing
        elif te is _Apply:
            try:
                if e.arity == 2:
                    y = values.pop()
                    x = values.pop()
                    r = BINARY[e.name](x, y)
                else:
                    r = UNARY[e.name](values.pop())
            except OverflowError:  # a float out of range, or an integer too large for a float
                raise ArithError("float overflow") from None
            except ZeroDivisionError:
                raise ArithError("division by zero") from None
            except ValueError:  # a math domain error
                raise ArithError("undefined result") from None
            tr = type(r)
            if tr is float:
                if math.isinf(r):
                    raise ArithError("float overflow")
                if math.isnan(r):
                    raise ArithError("undefined result")
            elif tr is int and r.bit_length() > MAX_INT_BITS:
                raise _too_big()
            values.append(r)
        elif te is Cons and type(e.tail) is str and e.tail == "[]":
            stack.append(e.head)  # "a" evaluates to its code, as in SWI
        elif te is str:
            if e == "pi":
                values.append(math.pi)
            elif e == "e":
                values.append(math.e)
            elif e in ("inf", "infinite"):
                values.append(math.inf)
            elif e == "max_tagged_integer":
                values.append((1 << 60) - 1)
            else:
                raise ArithError(f"{e} is not a number")
        else:
            raise ArithError("not a number")
    return values[0]


class _Apply:
    __slots__ = ("name", "arity")

    def __init__(self, name: str, arity: int) -> None:
        self.name = name
        self.arity = arity


def compare(op: str, x, y) -> bool:
    """An arithmetic comparison of two numbers."""
    if op == "<":
        return x < y
    if op == ">":
        return x > y
    if op == "=<":
        return x <= y
    if op == ">=":
        return x >= y
    if op == "=:=":
        return x == y
    return x != y
