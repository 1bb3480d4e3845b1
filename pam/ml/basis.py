"""The first-order values of the ML initial basis (spec/ml.md, "Basis slice"), as plain Python.

Every function takes the ML argument as one Python value in the representation of `values.py`
(a pair arrives as a 2-tuple) and returns an ML value, raising a `Packet` for an ML exception.
None of them is a generator and none recurses on data: lists may have millions of elements, so
they are walked with loops. The reference for every corner case is Poly/ML 5.7 on a 64-bit
machine (63-bit ints); the notes below record where it does something the Definition does not
force.

Tables:
- `PRIMITIVES[name]`: the value named `name` in `frontend.ml.basis.VALUES`, for the names that
  are not overloaded. Curried values (`String.concatWith`, `String.isPrefix`, `Real.fmt`) take
  their first argument and return a Python function of the second.
- `OVERLOADED[(name, ty)]`: `+ - * ~ abs` at `int`/`real` and `< > <= >=` at
  `int`/`real`/`string`/`char`.

Not here (written in ML or in the run time): `print`, `o`, `ForkJoin.par` and the higher-order
list functions.
"""

from __future__ import annotations

import math
from decimal import Decimal

from pam.ml.values import (BASIS_EXCEPTIONS, CHR, DIV, EMPTY, FAIL, MAX_INT, MIN_INT, NONE, OPTION, OVERFLOW,
                           SIZE, SUBSCRIPT, ExnCon, Packet)

# Poly/ML raises Domain (from General) for floor/ceil/round/trunc of a NaN. Domain is not one of
# the subset's nameable exceptions, but a program can still observe it (`exnName`, or as an
# uncaught exception), so it is raised faithfully under its own constructor.
DOMAIN: ExnCon = BASIS_EXCEPTIONS.get("Domain") or ExnCon("Domain")


def _check(n: int) -> int:
    if MIN_INT <= n <= MAX_INT:
        return n
    raise Packet(OVERFLOW)


# ---------------------------------------------------------------------------------------------
# int arithmetic (63-bit, Overflow outside MIN_INT..MAX_INT)

def int_add(p):
    r = p[0] + p[1]
    if MIN_INT <= r <= MAX_INT:
        return r
    raise Packet(OVERFLOW)


def int_sub(p):
    r = p[0] - p[1]
    if MIN_INT <= r <= MAX_INT:
        return r
    raise Packet(OVERFLOW)


def int_mul(p):
    r = p[0] * p[1]
    if MIN_INT <= r <= MAX_INT:
        return r
    raise Packet(OVERFLOW)


def int_neg(a):
    if a == MIN_INT:
        raise Packet(OVERFLOW)
    return -a


def int_abs(a):
    if a < 0:
        if a == MIN_INT:
            raise Packet(OVERFLOW)
        return -a
    return a


def idiv(a: int, b: int) -> int:
    """`div`: quotient rounded toward negative infinity; Div on zero, Overflow for minInt div ~1
    (the only quotient outside the range). Generated code calls it with the two operands."""
    if b == 0:
        raise Packet(DIV)
    q = a // b
    if q > MAX_INT:
        raise Packet(OVERFLOW)
    return q


def imod(a: int, b: int) -> int:
    """`mod`: remainder with the sign of the divisor (minInt mod ~1 is 0, as in Poly/ML)."""
    if b == 0:
        raise Packet(DIV)
    return a % b


def int_div(p):
    return idiv(*p)


def int_mod(p):
    return imod(*p)


def int_quot(p):
    """`Int.quot`: quotient rounded toward zero; Div on zero, Overflow for quot (minInt, ~1)."""
    a, b = p
    if b == 0:
        raise Packet(DIV)
    q = abs(a) // abs(b)
    return _check(q if (a < 0) == (b < 0) else -q)


def int_rem(p):
    """`Int.rem`: remainder with the sign of the dividend (rem (minInt, ~1) is 0)."""
    a, b = p
    if b == 0:
        raise Packet(DIV)
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def int_min(p):
    a, b = p
    return min(a, b)


def int_max(p):
    a, b = p
    return max(a, b)


def int_to_string(n) -> str:
    return str(n) if n >= 0 else "~" + str(-n)


_SPACE = frozenset(" \t\n\v\f\r")     # Char.isSpace
_DIGITS = frozenset("0123456789")


def int_from_string(s):
    """`Int.fromString`, as Poly/ML's `Int.scan StringCvt.DEC`: skip leading white space
    (space, \\t \\n \\v \\f \\r), then an optional sign (`+`, `-` or `~`; no space after it),
    then the longest run of decimal digits; the rest of the string is ignored. NONE when there
    is no digit; Overflow when the number is out of range (it is read at arbitrary precision
    first, so leading zeros never overflow)."""
    n = len(s)
    i = 0
    while i < n and s[i] in _SPACE:
        i += 1
    negative = False
    if i < n and s[i] in "+-~":
        negative = s[i] != "+"
        i += 1
    start = i
    while i < n and s[i] in _DIGITS:
        i += 1
    if i == start:
        return NONE
    value = int(s[start:i])
    return (1, _check(-value if negative else value))


# ---------------------------------------------------------------------------------------------
# reals

def real_add(p):
    return p[0] + p[1]


def real_sub(p):
    return p[0] - p[1]


def real_mul(p):
    return p[0] * p[1]


def rdiv(a: float, b: float) -> float:
    """IEEE division (Python raises on a zero divisor; ML gives an infinity or a NaN)."""
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def real_div(p):
    return rdiv(*p)


def real_neg(a):
    return -a


def real_abs(a):
    return abs(a)


def real_from_int(n):
    return float(n)


def math_sqrt(x):
    if x < 0.0:
        return math.nan          # Poly/ML prints it "nan" (the sign of a NaN is never shown)
    return math.sqrt(x)          # also nan -> nan, inf -> inf, ~0.0 -> ~0.0


def _finite(x: float) -> None:
    """What Poly/ML's real-to-int conversions raise before converting: Domain for a NaN,
    Overflow for an infinity (a finite value out of the int range raises Overflow later)."""
    if math.isnan(x):
        raise Packet(DOMAIN)
    if math.isinf(x):
        raise Packet(OVERFLOW)


def real_floor(x):
    _finite(x)
    return _check(math.floor(x))


def real_ceil(x):
    _finite(x)
    return _check(math.ceil(x))


def real_trunc(x):
    _finite(x)
    return _check(math.trunc(x))


def real_round(x):
    """`round`, exactly as Poly/ML's run time computes it (libpolyml/reals.cpp, PolyRealRound):
    halves go to even, but the rest is floor (x + 0.5) computed in floating point, so
    round 0.49999999999999994 = 1 and round 4503599627370497.0 = 4503599627370498 there too."""
    _finite(x)
    rem = math.fmod(x, 2.0)
    if rem == 0.5 or rem == -1.5:
        return _check(math.ceil(x - 0.5))
    return _check(math.floor(x + 0.5))


# Real.fmt. Poly/ML formats with David Gay's dtoa (mode 3 for FIX, mode 2 for SCI and GEN, mode
# 0 for EXACT), which rounds the exact binary value correctly, ties to even. Python's float
# formatting is the same algorithm, so only the layout is reproduced here.

def _special(x) -> str | None:
    if math.isnan(x):
        return "nan"
    if x == math.inf:
        return "inf"
    if x == -math.inf:
        return "~inf"
    return None


def _fix(ndigs: int, x: float) -> str:
    s = _special(x)
    if s is not None:
        return s
    return f"{x:.{ndigs}f}".replace("-", "~")


def _digits(x: float, ndigs: int) -> tuple[str, int]:
    """dtoa mode 2: `ndigs` (>= 1) significant digits of |x|, trailing zeros removed, and the
    decimal exponent (the value is 0.DIGITS * 10^exp). Zero gives ("0", 1) like dtoa."""
    if x == 0.0:
        return "0", 1
    mant, _, e = f"{abs(x):.{ndigs - 1}e}".partition("e")
    digits = mant.replace(".", "").rstrip("0")
    return digits, int(e) + 1


def _sci(ndigs: int, x: float) -> str:
    s = _special(x)
    if s is not None:
        return s
    digits, exp = _digits(x, ndigs + 1)
    if len(digits) == 1:
        numb = digits + ("." + "0" * ndigs if ndigs else "")
    else:
        numb = digits[0] + "." + digits[1:] + "0" * (ndigs - len(digits) + 1)
    numb += "E" + int_to_string(exp - 1)
    return "~" + numb if math.copysign(1.0, x) < 0 else numb


def _tie_kept_zeros(x: float, ndigs: int) -> str | None:
    """dtoa mode 2's one quirk: an integral |x| < 1e15 whose rounding to `ndigs` (<= 14) digits
    is an exact tie, rounded down to even, defeats dtoa's floating-point fast path; its exact
    small-integer path then stops at the last digit without removing trailing zeros
    (28050.0 to 3 digits is "280", so GEN gives 2.80E4). None where the quirk does not apply."""
    if ndigs > 14 or not x.is_integer() or abs(x) >= 1e15:
        return None
    m = abs(int(x))
    scale = 10 ** (len(str(m)) - ndigs)
    if scale <= 1 or 2 * (m % scale) != scale or (m // scale) % 2:
        return None
    return str(m // scale)


def _gen(ndigs: int, x: float) -> str:
    s = _special(x)
    if s is not None:
        return s
    digits, exp = _digits(x, ndigs)
    kept = _tie_kept_zeros(x, ndigs)
    if kept is not None:
        digits = kept
    n = len(digits)
    if exp > ndigs or exp < -5:
        numb = (digits if n == 1 else digits[0] + "." + digits[1:]) + "E" + int_to_string(exp - 1)
    elif exp <= 0:
        numb = "0." + "0" * -exp + digits
    elif n <= exp:
        numb = digits + "0" * (exp - n) + ".0"
    else:
        numb = digits[:exp] + "." + digits[exp:]
    return "~" + numb if math.copysign(1.0, x) < 0 else numb


def _exact(x: float) -> str:
    """IEEEReal.toString (Real.toDecimal x): "0.DIGITS" with the shortest round-tripping digits
    and "E<exp>" unless the exponent is 0; "0.0" for a zero; the sign bit shown as "~" except
    on a NaN."""
    if math.isnan(x):
        return "nan"
    sign = "~" if math.copysign(1.0, x) < 0 else ""
    if x in (math.inf, -math.inf):
        return sign + "inf"
    if x == 0.0:
        return sign + "0.0"
    _, digit_tuple, e = Decimal(repr(abs(x))).as_tuple()
    digits = "".join(map(str, digit_tuple))
    stripped = digits.rstrip("0")
    exp = e + len(digits)                        # value = 0.DIGITS * 10^exp
    return sign + "0." + stripped + ("" if exp == 0 else "E" + int_to_string(exp))


def real_fmt(spec):
    """`Real.fmt spec`, returning the function of the real. The digit count is checked as soon
    as the format is given (Poly/ML raises Size before any real is supplied): FIX and SCI need
    0..200 digits, GEN 1..200; NONE means 6 for FIX and SCI and 12 for GEN."""
    if spec == 0:                                           # EXACT
        return _exact
    tag, opt = spec
    if tag == 1:                                            # FIX
        ndigs, lo, fn = (6 if opt == NONE else opt[1]), 0, _fix
    elif tag == 2:                                          # GEN
        ndigs, lo, fn = (12 if opt == NONE else opt[1]), 1, _gen
    elif tag == 3:                                          # SCI
        ndigs, lo, fn = (6 if opt == NONE else opt[1]), 0, _sci
    else:
        raise Packet(FAIL, "Real.fmt: not a StringCvt.realfmt")
    if ndigs < lo or ndigs > 200:
        raise Packet(SIZE)
    return lambda x: fn(ndigs, x)


# ---------------------------------------------------------------------------------------------
# comparisons and equality

def lt(p):
    return p[0] < p[1]


def gt(p):
    return p[0] > p[1]


def le(p):
    return p[0] <= p[1]


def ge(p):
    return p[0] >= p[1]


def ml_equal(a, b) -> bool:
    """Structural equality on equality types, iteratively (an explicit stack, so lists of any
    length and deep data are fine). Refs (Python lists) are equal when they are the same ref;
    reals compare by value; everything else (ints, bools, strings, chars, nil, constructors and
    tuples) structurally. Values that are the same object are equal without being walked (for
    a real inside them that could only matter for a NaN, and real is not an equality type)."""
    stack = []
    while True:
        if a is not b:
            ta = type(a)
            if ta is tuple:
                if type(b) is not tuple or len(a) != len(b):
                    return False
                n = len(a)
                if n == 2:                      # list cells and constructors: walk the tail
                    stack.append((a[1], b[1]))  # after the head, keeping the stack shallow
                    a, b = a[0], b[0]
                    continue
                i = n - 1
                while i > 0:
                    stack.append((a[i], b[i]))
                    i -= 1
                if n:
                    a, b = a[0], b[0]
                    continue
            elif ta is list or a != b:      # refs: equal only when the same ref
                return False
        elif type(a) is float and math.isnan(a):
            return False
        if not stack:
            return True
        a, b = stack.pop()


def equal(p):
    return ml_equal(p[0], p[1])


def not_equal(p):
    return not ml_equal(p[0], p[1])


# ---------------------------------------------------------------------------------------------
# general

def ml_not(b):
    return not b


def before(p):
    return p[0]


def deref(r):
    return r[0]


def assign(p):
    p[0][0] = p[1]
    return ()


def bool_to_string(b):
    return "true" if b else "false"


def exn_name(packet) -> str:
    return packet.con.name


def exn_message(packet) -> str:
    """How hpgrem names an uncaught exception: `NAME`, or `Fail: msg` for Fail."""
    if packet.con is FAIL:
        return "Fail: " + packet.arg
    return packet.con.name


# ---------------------------------------------------------------------------------------------
# strings and chars (ML strings hold chars 0..255; Python str of code points 0..255)

def string_concat2(p):
    return p[0] + p[1]


def size(s):
    return len(s)


def ml_str(c):
    return c


def ord_(c):
    return ord(c)


def chr_(n):
    if 0 <= n <= 255:
        return chr(n)
    raise Packet(CHR)


def explode(s):
    out = None
    i = len(s) - 1
    while i >= 0:
        out = (s[i], out)
        i -= 1
    return out


def _py_list(xs) -> list:
    out = []
    while xs is not None:
        out.append(xs[0])
        xs = xs[1]
    return out


def implode(cs):
    return "".join(_py_list(cs))


def concat(ss):
    return "".join(_py_list(ss))


def string_concat_with(sep):
    return lambda ss: sep.join(_py_list(ss))


def string_sub(p):
    s, i = p
    if 0 <= i < len(s):
        return s[i]
    raise Packet(SUBSCRIPT)


def string_substring(p):
    s, i, j = p
    if i < 0 or j < 0 or i + j > len(s):
        raise Packet(SUBSCRIPT)
    return s[i:i + j]


def string_is_prefix(prefix):
    return lambda s: s.startswith(prefix)


def char_is_digit(c):
    return "0" <= c <= "9"


def char_is_alpha(c):
    """ASCII letters only: chr 200 is not alphabetic in SML."""
    return "a" <= c <= "z" or "A" <= c <= "Z"


def char_to_upper(c):
    return chr(ord(c) - 32) if "a" <= c <= "z" else c


def char_to_lower(c):
    return chr(ord(c) + 32) if "A" <= c <= "Z" else c


# ---------------------------------------------------------------------------------------------
# lists (None is nil, (head, tail) is ::)

def _build(items: list, tail=None):
    """items prepended (in order) to `tail`."""
    out = tail
    i = len(items) - 1
    while i >= 0:
        out = (items[i], out)
        i -= 1
    return out


def append(p):
    xs, ys = p
    if ys is None:
        return xs
    return _build(_py_list(xs), ys)


def hd(xs):
    if xs is None:
        raise Packet(EMPTY)
    return xs[0]


def tl(xs):
    if xs is None:
        raise Packet(EMPTY)
    return xs[1]


def null(xs):
    return xs is None


def length(xs):
    n = 0
    while xs is not None:
        n += 1
        xs = xs[1]
    return n


def rev(xs):
    out = None
    while xs is not None:
        out = (xs[0], out)
        xs = xs[1]
    return out


def list_nth(p):
    xs, i = p
    if i < 0:
        raise Packet(SUBSCRIPT)
    while xs is not None:
        if i == 0:
            return xs[0]
        i -= 1
        xs = xs[1]
    raise Packet(SUBSCRIPT)


def list_take(p):
    xs, i = p
    if i < 0:
        raise Packet(SUBSCRIPT)
    items = []
    while i > 0:
        if xs is None:
            raise Packet(SUBSCRIPT)
        items.append(xs[0])
        xs = xs[1]
        i -= 1
    return _build(items)


def list_drop(p):
    xs, i = p
    if i < 0:
        raise Packet(SUBSCRIPT)
    while i > 0:
        if xs is None:
            raise Packet(SUBSCRIPT)
        xs = xs[1]
        i -= 1
    return xs


def list_concat(xss):
    lists = _py_list(xss)
    out = None
    k = len(lists) - 1
    while k >= 0:
        out = _build(_py_list(lists[k]), out) if out is not None else lists[k]
        k -= 1
    return out


# ---------------------------------------------------------------------------------------------
# options (NONE is 0, SOME x is (1, x))

def option_val_of(opt):
    if opt == NONE:
        raise Packet(OPTION)
    return opt[1]


def option_is_some(opt):
    return opt != NONE


def option_get_opt(p):
    opt, default = p
    return default if opt == NONE else opt[1]


# ---------------------------------------------------------------------------------------------
# tables

PRIMITIVES: dict = {
    "/": real_div, "div": int_div, "mod": int_mod,
    "=": equal, "<>": not_equal,
    "^": string_concat2, "@": append,
    ":=": assign, "before": before, "!": deref, "not": ml_not,
    "Int.toString": int_to_string, "Int.fromString": int_from_string,
    "Int.min": int_min, "Int.max": int_max, "Int.abs": int_abs,
    "Int.quot": int_quot, "Int.rem": int_rem,
    "Bool.toString": bool_to_string,
    "real": real_from_int, "floor": real_floor, "ceil": real_ceil, "round": real_round,
    "trunc": real_trunc, "Real.fromInt": real_from_int, "Real.fmt": real_fmt,
    "Math.sqrt": math_sqrt,
    "size": size, "str": ml_str, "ord": ord_, "chr": chr_, "explode": explode,
    "implode": implode, "concat": concat,
    "String.size": size, "String.sub": string_sub, "String.concat": concat,
    "String.concatWith": string_concat_with, "String.explode": explode,
    "String.implode": implode, "String.substring": string_substring,
    "String.isPrefix": string_is_prefix,
    "Char.ord": ord_, "Char.chr": chr_, "Char.isDigit": char_is_digit,
    "Char.isAlpha": char_is_alpha, "Char.toUpper": char_to_upper, "Char.toLower": char_to_lower,
    "hd": hd, "tl": tl, "null": null, "length": length, "rev": rev,
    "List.rev": rev, "List.length": length, "List.nth": list_nth, "List.take": list_take,
    "List.drop": list_drop, "List.concat": list_concat,
    "Option.valOf": option_val_of, "Option.isSome": option_is_some,
    "Option.getOpt": option_get_opt, "valOf": option_val_of, "isSome": option_is_some,
    "exnName": exn_name,
}

OVERLOADED: dict = {
    ("+", "int"): int_add, ("-", "int"): int_sub, ("*", "int"): int_mul,
    ("~", "int"): int_neg, ("abs", "int"): int_abs,
    ("+", "real"): real_add, ("-", "real"): real_sub, ("*", "real"): real_mul,
    ("~", "real"): real_neg, ("abs", "real"): real_abs,
}
for _ty in ("int", "real", "string", "char"):
    OVERLOADED[("<", _ty)] = lt
    OVERLOADED[(">", _ty)] = gt
    OVERLOADED[("<=", _ty)] = le
    OVERLOADED[(">=", _ty)] = ge
del _ty

# Basis names implemented elsewhere (in ML or by the run time), not by this module.
NOT_HERE = frozenset({
    "print", "o", "ForkJoin.par", "map", "app", "foldl", "foldr", "List.map", "List.filter",
    "List.foldl", "List.foldr", "List.app", "List.exists", "List.all", "List.find",
    "List.partition", "List.tabulate"})

__all__ = ["DOMAIN", "NOT_HERE", "OVERLOADED", "PRIMITIVES", "exn_message", "ml_equal"]
