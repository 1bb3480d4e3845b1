"""The first-order ML basis (pam/ml/basis.py): unit tests of every value with its corner cases,
long lists, and differential tests against Poly/ML (one `poly` process per test) where it is
installed."""

from __future__ import annotations

import math
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontend.ml.basis import VALUES
from pam.ml.basis import DOMAIN, NOT_HERE, OVERLOADED, exn_message, ml_equal
from pam.ml.basis import PRIMITIVES as P
from pam.ml.values import (CHR, DIV, EMPTY, FAIL, MAX_INT, MIN_INT, NONE, OPTION, OVERFLOW, SIZE, SUBSCRIPT,
                           ExnCon, Packet, ml_list, py_list)

POLY = shutil.which("poly")
needs_poly = pytest.mark.skipif(POLY is None, reason="Poly/ML is not installed")

BIG = 1_000_000


def raises(con: ExnCon, fn, *args):
    with pytest.raises(Packet) as info:
        fn(*args)
    assert info.value.con is con, info.value
    return info.value


def ov(name: str, ty: str):
    return OVERLOADED[(name, ty)]


FIX = lambda k: P["Real.fmt"]((1, (1, k)))          # StringCvt.FIX (SOME k)


# ---- the tables

def test_every_first_order_basis_value_is_implemented():
    names = {v.name for v in VALUES}
    overloaded = {v.name for v in VALUES if v.overload}
    assert set(P) | {name for name, _ in OVERLOADED} | NOT_HERE == names
    assert not set(P) & overloaded and not set(P) & NOT_HERE
    for v in VALUES:
        if v.overload:
            for ty in v.overload:
                assert (v.name, ty.name) in OVERLOADED, (v.name, ty.name)
    assert {ty for name, ty in OVERLOADED if name == "<"} == {"int", "real", "string", "char"}


# ---- int

def test_int_arithmetic_and_overflow_boundaries():
    add, sub, mul, neg, absi = (ov(n, "int") for n in ("+", "-", "*", "~", "abs"))
    assert MAX_INT == 4611686018427387903 and MIN_INT == -4611686018427387904
    assert add((MAX_INT - 1, 1)) == MAX_INT and sub((MIN_INT + 1, 1)) == MIN_INT
    assert add((MAX_INT, MIN_INT)) == -1
    raises(OVERFLOW, add, (MAX_INT, 1))
    raises(OVERFLOW, sub, (MIN_INT, 1))
    raises(OVERFLOW, sub, (0, MIN_INT))
    raises(OVERFLOW, mul, (MAX_INT, 2))
    raises(OVERFLOW, mul, (MIN_INT, -1))
    assert mul((MIN_INT // 2, 2)) == MIN_INT and mul((-3, 4)) == -12
    assert neg(MAX_INT) == -MAX_INT and neg(0) == 0
    raises(OVERFLOW, neg, MIN_INT)
    assert absi(-5) == 5 and absi(MAX_INT) == MAX_INT and P["Int.abs"](-7) == 7
    raises(OVERFLOW, absi, MIN_INT)
    raises(OVERFLOW, P["Int.abs"], MIN_INT)


def test_div_mod_floor_and_quot_rem_truncate():
    div, mod, quot, rem = P["div"], P["mod"], P["Int.quot"], P["Int.rem"]
    assert [div((a, b)) for a, b in ((7, 2), (-7, 2), (7, -2), (-7, -2))] == [3, -4, -4, 3]
    assert [mod((a, b)) for a, b in ((7, 2), (-7, 2), (7, -2), (-7, -2))] == [1, 1, -1, -1]
    assert [quot((a, b)) for a, b in ((7, 2), (-7, 2), (7, -2), (-7, -2))] == [3, -3, -3, 3]
    assert [rem((a, b)) for a, b in ((7, 2), (-7, 2), (7, -2), (-7, -2))] == [1, -1, 1, -1]
    for fn in (div, mod, quot, rem):
        raises(DIV, fn, (5, 0))
        raises(DIV, fn, (0, 0))
    raises(OVERFLOW, div, (MIN_INT, -1))
    raises(OVERFLOW, quot, (MIN_INT, -1))
    assert mod((MIN_INT, -1)) == 0 and rem((MIN_INT, -1)) == 0       # as Poly/ML
    assert div((MIN_INT, 1)) == MIN_INT and quot((MIN_INT, 2)) == MIN_INT // 2
    assert div((MAX_INT, -1)) == -MAX_INT and rem((MIN_INT, 3)) == -1 and mod((MIN_INT, 3)) == 2


def test_int_min_max_and_comparisons():
    assert P["Int.min"]((3, -4)) == -4 and P["Int.max"]((3, -4)) == 3
    assert P["Int.min"]((MIN_INT, MAX_INT)) == MIN_INT
    lt, gt, le, ge = (ov(n, "int") for n in ("<", ">", "<=", ">="))
    assert lt((1, 2)) and not lt((2, 2)) and le((2, 2)) and ge((2, 2)) and gt((3, 2)) and not gt((2, 3))


def test_int_to_string():
    s = P["Int.toString"]
    assert [s(n) for n in (0, 7, -7, MAX_INT, MIN_INT)] == \
        ["0", "7", "~7", "4611686018427387903", "~4611686018427387904"]


@pytest.mark.parametrize("text, expected", [
    ("42", (1, 42)), ("  42", (1, 42)), (" \t\n\v\f\r12abc", (1, 12)), ("~5", (1, -5)), ("-5", (1, -5)),
    ("+5", (1, 5)), ("12 34", (1, 12)), ("1.5", (1, 1)), ("0x10", (1, 0)), ("007", (1, 7)),
    ("0" * 40 + "42", (1, 42)), ("~0", (1, 0)), ("4611686018427387903", (1, MAX_INT)),
    ("~4611686018427387904", (1, MIN_INT)), ("-4611686018427387904junk", (1, MIN_INT)),
    ("", NONE), ("   ", NONE), ("abc", NONE), ("~", NONE), ("- 5", NONE), ("+-5", NONE), ("--5", NONE),
    ("\xa05", NONE), ("\x1c5", NONE), ("x12", NONE),
])
def test_int_from_string(text, expected):
    assert P["Int.fromString"](text) == expected


@pytest.mark.parametrize("text", ["4611686018427387904", "~4611686018427387905", "99999999999999999999x",
                                  "  -99999999999999999999999999999999"])
def test_int_from_string_overflow(text):
    raises(OVERFLOW, P["Int.fromString"], text)


def test_bool_not_before():
    assert P["Bool.toString"](True) == "true" and P["Bool.toString"](False) == "false"
    assert P["not"](False) is True and P["not"](True) is False
    assert P["before"]((5, ())) == 5


# ---- reals

def test_real_arithmetic():
    add, sub, mul, neg, absr = (ov(n, "real") for n in ("+", "-", "*", "~", "abs"))
    div = P["/"]
    assert add((0.1, 0.2)) == 0.1 + 0.2 and sub((1.0, 2.5)) == -1.5 and mul((1.5, -2.0)) == -3.0
    assert div((1.0, 4.0)) == 0.25
    assert div((1.0, 0.0)) == math.inf and div((-1.0, 0.0)) == -math.inf
    assert div((1.0, -0.0)) == -math.inf and div((-1.0, -0.0)) == math.inf
    assert math.isnan(div((0.0, 0.0))) and math.isnan(div((math.nan, 0.0)))
    assert mul((1e308, 10.0)) == math.inf and math.isnan(sub((math.inf, math.inf)))
    assert math.copysign(1.0, neg(0.0)) == -1.0 and absr(-2.5) == 2.5
    assert ov("<", "real")((-0.0, 0.0)) is False and ov("<=", "real")((-0.0, 0.0)) is True
    assert not ov("<", "real")((math.nan, 1.0)) and not ov(">=", "real")((math.nan, 1.0))


def test_real_from_int_and_sqrt():
    assert P["real"](3) == 3.0 and P["Real.fromInt"](-2) == -2.0
    assert P["real"](MAX_INT) == 4611686018427387904.0
    assert P["Math.sqrt"](16.0) == 4.0 and P["Math.sqrt"](math.inf) == math.inf
    assert math.isnan(P["Math.sqrt"](-1.0)) and math.isnan(P["Math.sqrt"](math.nan))
    assert math.copysign(1.0, P["Math.sqrt"](-0.0)) == -1.0
    assert FIX(2)(P["Math.sqrt"](-1.0)) == "nan"


def test_floor_ceil_trunc():
    f, c, t = P["floor"], P["ceil"], P["trunc"]
    assert (f(-1.7), c(-1.7), t(-1.7)) == (-2, -1, -1)
    assert (f(1.7), c(1.7), t(1.7)) == (1, 2, 1)
    assert (f(-0.5), c(-0.5), t(-0.5)) == (-1, 0, 0)
    assert f(-4611686018427387904.0) == MIN_INT and t(4611686018427387000.0) == 4611686018427386880
    for fn in (f, c, t, P["round"]):
        raises(OVERFLOW, fn, 4611686018427387904.0)      # 2^62
        raises(OVERFLOW, fn, -4611686018427389000.0)
        raises(OVERFLOW, fn, 1e19)
        raises(OVERFLOW, fn, math.inf)
        raises(OVERFLOW, fn, -math.inf)
        raises(DOMAIN, fn, math.nan)                      # Poly/ML: Domain, not Overflow
    assert DOMAIN.name == "Domain"


def test_round_halves_to_even_like_poly():
    r = P["round"]
    assert [r(x) for x in (0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, -3.5, 2.4, -2.6)] == \
        [0, 2, 2, 4, 0, -2, -2, -4, 2, -3]
    # Poly/ML computes floor (x + 0.5) in floating point when x is not a half:
    assert r(0.49999999999999994) == 1 and r(-0.49999999999999994) == 0
    assert r(4503599627370497.0) == 4503599627370498 and r(-4503599627370497.0) == -4503599627370496
    assert r(4611686018427387392.0) == 4611686018427387392 and r(-4611686018427387904.0) == MIN_INT


@pytest.mark.parametrize("k, x, expected", [
    (2, 0.125, "0.12"), (2, 0.375, "0.38"), (2, 0.625, "0.62"), (2, -0.125, "~0.12"), (2, -0.001, "~0.00"),
    (2, -0.0, "~0.00"), (0, -0.0, "~0"), (2, 0.0, "0.00"), (0, 0.5, "0"), (0, 1.5, "2"), (0, 2.5, "2"),
    (0, -0.5, "~0"), (0, -2.5, "~2"), (0, 0.6, "1"), (2, 2.675, "2.67"), (1, 0.05, "0.1"), (1, 0.25, "0.2"),
    (3, 1.0005, "1.000"), (20, 0.1, "0.10000000000000000555"), (0, 123456789012345678901234567890.0,
                                                               "123456789012345677877719597056"),
    (2, 1e21, "1000000000000000000000.00"), (3, -1234.5678, "~1234.568"), (0, 3.0, "3"), (1, 9.96, "10.0"),
    (2, math.inf, "inf"), (2, -math.inf, "~inf"), (2, math.nan, "nan"), (0, -math.nan, "nan"),
    (5, 5e-324, "0.00000"), (2, 4611686018427387904.0, "4611686018427387904.00"),
])
def test_real_fmt_fix(k, x, expected):
    assert FIX(k)(x) == expected


def test_real_fmt_fix_extremes():
    assert FIX(2)(1e300).startswith("10000000000000000525047602552044202487044685811081591549158541155118")
    assert FIX(2)(1e300).endswith(".00") and len(FIX(2)(1e300)) == 304
    assert FIX(200)(1.0) == "1." + "0" * 200
    assert FIX(200)(1 / 3)[:20] == "0.333333333333333314"
    raises(SIZE, P["Real.fmt"], (1, (1, 201)))          # raised when the format is given
    raises(SIZE, P["Real.fmt"], (1, (1, -1)))


def test_real_fmt_other_formats():
    fmt = P["Real.fmt"]
    exact, fix6, sci6, gen12 = fmt(0), fmt((1, NONE)), fmt((3, NONE)), fmt((2, NONE))
    assert fix6(3.14159265) == "3.141593" and sci6(3.14159265) == "3.141593E0"
    assert fmt((3, (1, 2)))(31415.9265) == "3.14E4" and fmt((3, (1, 0)))(25.0) == "2E1"
    assert fmt((3, (1, 3)))(1.0) == "1.000E0" and sci6(-0.0) == "~0.000000E0"
    assert gen12(3.14159265) == "3.14159265" and gen12(0.0) == "0.0" and gen12(-0.0) == "~0.0"
    assert gen12(1e-7) == "1E~7" and gen12(123456789012345.0) == "1.23456789012E14"
    assert fmt((2, (1, 3)))(31415.9265) == "3.14E4" and fmt((2, (1, 3)))(0.000012345) == "0.0000123"
    assert fmt((2, (1, 3)))(1000.0) == "1E3" and fmt((2, (1, 3)))(100.0) == "100.0"
    # dtoa's exact small-integer path keeps the zeros of a tie rounded down to even (Poly/ML 5.9)
    gen3, gen2 = fmt((2, (1, 3))), fmt((2, (1, 2)))
    assert gen3(28050.0) == "2.80E4" and gen3(2805000.0) == "2.80E6" and gen2(205.0) == "2.0E2"
    assert gen3(28040.0) == "2.8E4" and gen3(28150.0) == "2.82E4" and gen3(2.805) == "2.81"
    assert exact(3.14159265) == "0.314159265E1" and exact(1e22) == "0.1E23" and exact(0.1) == "0.1"
    assert exact(100.0) == "0.1E3" and exact(0.00123) == "0.123E~2" and exact(5e-324) == "0.5E~323"
    assert exact(-0.0) == "~0.0" and exact(-math.inf) == "~inf" and exact(-math.nan) == "nan"
    for spec in ((3, (1, -1)), (3, (1, 201)), (2, (1, 0)), (2, (1, 201))):
        raises(SIZE, fmt, spec)
    assert fmt((2, (1, 1)))(1.0) == "1.0" and fmt((3, (1, 0)))(1.0) == "1E0"
    raises(FAIL, fmt, (7, NONE))


# ---- equality

def test_ml_equal_structural():
    eq, ne = P["="], P["<>"]
    assert eq((1, 1)) and not eq((1, 2)) and ne((1, 2))
    assert eq(("ab", "ab")) and not eq(("ab", "abc")) and eq(("", ""))
    assert eq((True, True)) and not eq((True, False))
    assert eq(((), ())) and eq(((1, "a", (2.5, None)), (1, "a", (2.5, None))))
    assert not eq(((1, "a", 3), (1, "a", 4)))
    assert eq((ml_list([1, 2, 3]), ml_list([1, 2, 3]))) and not eq((ml_list([1, 2]), ml_list([1, 2, 3])))
    assert not eq((None, ml_list([1]))) and not eq((ml_list([1]), None)) and eq((None, None))
    assert eq((NONE, NONE)) and not eq((NONE, (1, 0))) and not eq(((1, 0), NONE)) and eq(((1, 5), (1, 5)))
    assert not eq(((1, (1, 2)), (1, (1, 3))))                      # nested options
    r, s = [1], [1]
    assert eq((r, r)) and not eq((r, s)) and ne((r, s))          # refs by identity
    assert eq(((r, 2), (r, 2))) and not eq(((r, 2), (s, 2)))
    assert eq((0.0, -0.0)) and not eq((math.nan, math.nan)) and eq(((0.5, 1), (0.5, 1)))
    assert eq(((5, (3, 4)), (5, (3, 4)))) and not eq((3, (3, 4)))  # constructors (tag, arg)


def test_ml_equal_long_and_deep():
    xs = ml_list(range(BIG))
    ys = ml_list(range(BIG))
    zs = ml_list(list(range(BIG - 1)) + [-1])
    assert ml_equal(xs, ys) and not ml_equal(xs, zs) and ml_equal(xs, xs)
    assert not ml_equal(xs, ml_list(range(BIG - 1)))
    strings = ml_list(str(i) for i in range(BIG))
    assert ml_equal(strings, ml_list(str(i) for i in range(BIG)))
    deep_a = deep_b = None
    for i in range(BIG // 4):                 # nested in head position: ((((..., 1), 2), 3) ...)
        deep_a, deep_b = (deep_a, i), (deep_b, i)
    assert ml_equal(deep_a, deep_b) and not ml_equal(deep_a, (deep_b, 0))
    triple_a = triple_b = ()
    for i in range(BIG // 4):
        triple_a, triple_b = (i, triple_a, "x"), (i, triple_b, "x")
    assert ml_equal(triple_a, triple_b)


# ---- strings and chars

def test_string_functions():
    assert P["^"](("ab", "cd")) == "abcd" and P["^"](("", "")) == ""
    assert P["size"]("") == 0 and P["String.size"]("abc") == 3 and P["size"](chr(200)) == 1
    assert P["str"]("a") == "a" and P["ord"](chr(200)) == 200 and P["Char.ord"]("A") == 65
    assert P["chr"](0) == "\x00" and P["chr"](255) == "\xff" and P["Char.chr"](97) == "a"
    for bad in (-1, 256, MAX_INT, MIN_INT):
        raises(CHR, P["chr"], bad)
        raises(CHR, P["Char.chr"], bad)
    assert py_list(P["explode"]("abc")) == ["a", "b", "c"] and P["explode"]("") is None
    assert P["implode"](ml_list("xyz")) == "xyz" and P["String.implode"](None) == ""
    assert P["concat"](ml_list(["a", "", "bc"])) == "abc" and P["String.concat"](None) == ""
    cw = P["String.concatWith"]
    assert cw(", ")(ml_list(["a", "b", "c"])) == "a, b, c" and cw(",")(None) == "" and cw(",")(ml_list(["x"])) == "x"
    assert P["String.sub"](("abc", 0)) == "a" and P["String.sub"](("abc", 2)) == "c"
    for i in (-1, 3, MAX_INT):
        raises(SUBSCRIPT, P["String.sub"], ("abc", i))
    raises(SUBSCRIPT, P["String.sub"], ("", 0))
    sub = P["String.substring"]
    assert sub(("abc", 1, 2)) == "bc" and sub(("abc", 3, 0)) == "" and sub(("", 0, 0)) == ""
    for i, j in ((2, 2), (-1, 0), (0, -1), (4, 0), (0, 4), (1, MAX_INT)):
        raises(SUBSCRIPT, sub, ("abc", i, j))
    pre = P["String.isPrefix"]
    assert pre("ab")("abc") and pre("")("") and pre("")("x") and not pre("abc")("ab") and not pre("b")("abc")


def test_string_and_char_comparisons_by_code():
    lt = ov("<", "string")
    assert lt(("abc", "abd")) and lt(("ab", "abc")) and lt(("", "a")) and lt(("Z", "a"))
    assert lt(("z", chr(200))) and not lt(("abc", "abc")) and ov(">=", "string")(("b", "abc"))
    assert ov("<", "char")(("a", "b")) and ov(">", "char")((chr(255), chr(128))) and ov("<=", "char")(("a", "a"))


def test_char_classes_are_ascii_only():
    assert all(P["Char.isDigit"](chr(i)) == (48 <= i <= 57) for i in range(256))
    assert all(P["Char.isAlpha"](chr(i)) == (65 <= i <= 90 or 97 <= i <= 122) for i in range(256))
    assert P["Char.toUpper"]("a") == "A" and P["Char.toUpper"]("A") == "A" and P["Char.toUpper"]("{") == "{"
    assert P["Char.toLower"]("Z") == "z" and P["Char.toLower"]("@") == "@" and P["Char.toLower"]("[") == "["
    assert P["Char.toUpper"](chr(233)) == chr(233) and P["Char.toLower"](chr(201)) == chr(201)


def test_long_strings():
    s = "ab" * (BIG // 2)
    cs = P["explode"](s)
    assert P["length"](cs) == BIG and P["implode"](cs) == s
    assert P["concat"](P["rev"](ml_list(["a"] * BIG))) == "a" * BIG


# ---- lists

def test_list_functions():
    xs = ml_list([1, 2, 3])
    assert P["hd"](xs) == 1 and py_list(P["tl"](xs)) == [2, 3] and P["tl"](ml_list([1])) is None
    raises(EMPTY, P["hd"], None)
    raises(EMPTY, P["tl"], None)
    assert P["null"](None) and not P["null"](xs)
    assert P["length"](None) == 0 and P["List.length"](xs) == 3
    assert py_list(P["rev"](xs)) == [3, 2, 1] and P["List.rev"](None) is None
    assert py_list(P["@"]((xs, ml_list([4])))) == [1, 2, 3, 4]
    assert P["@"]((None, None)) is None and P["@"]((xs, None)) is xs and P["@"]((None, xs)) is xs
    assert [P["List.nth"]((xs, i)) for i in range(3)] == [1, 2, 3]
    for i in (-1, 3, 4):
        raises(SUBSCRIPT, P["List.nth"], (xs, i))
    raises(SUBSCRIPT, P["List.nth"], (None, 0))
    assert [py_list(P["List.take"]((xs, i))) for i in range(4)] == [[], [1], [1, 2], [1, 2, 3]]
    assert [py_list(P["List.drop"]((xs, i))) for i in range(4)] == [[1, 2, 3], [2, 3], [3], []]
    for fn in (P["List.take"], P["List.drop"]):
        raises(SUBSCRIPT, fn, (xs, -1))
        raises(SUBSCRIPT, fn, (xs, 4))
        raises(SUBSCRIPT, fn, (None, 1))
        assert fn((None, 0)) is None
    concat = P["List.concat"]
    assert py_list(concat(ml_list([ml_list([1]), None, ml_list([2, 3]), None]))) == [1, 2, 3]
    assert concat(None) is None and concat(ml_list([None, None])) is None


def test_long_lists():
    xs = ml_list(range(BIG))
    assert P["length"](xs) == BIG
    assert py_list(P["rev"](xs)) == list(range(BIG - 1, -1, -1))
    both = P["@"]((xs, xs))
    assert P["length"](both) == 2 * BIG and P["List.nth"]((both, BIG)) == 0
    assert P["List.nth"]((xs, BIG - 1)) == BIG - 1
    raises(SUBSCRIPT, P["List.nth"], (xs, BIG))
    assert P["length"](P["List.take"]((xs, BIG))) == BIG and P["List.drop"]((xs, BIG)) is None
    assert P["hd"](P["List.drop"]((xs, BIG - 1))) == BIG - 1
    assert P["length"](P["List.concat"](ml_list([xs, None, xs]))) == 2 * BIG
    assert P["length"](P["List.concat"](ml_list([ml_list([i]) for i in range(BIG)]))) == BIG
    assert ml_equal(P["rev"](P["rev"](xs)), xs)


# ---- options, refs, exceptions

def test_options():
    for name in ("Option.valOf", "valOf"):
        assert P[name]((1, 5)) == 5
        raises(OPTION, P[name], NONE)
    for name in ("Option.isSome", "isSome"):
        assert P[name]((1, 0)) and not P[name](NONE)
    assert P["Option.getOpt"]((NONE, 3)) == 3 and P["Option.getOpt"]((((1, 4)), 3)) == 4


def test_refs():
    r = [1]
    assert P["!"](r) == 1
    assert P[":="]((r, 7)) == () and r == [7] and P["!"](r) == 7


def test_exn_name_and_message():
    assert P["exnName"](Packet(DIV)) == "Div" and P["exnName"](Packet(FAIL, "x")) == "Fail"
    user = ExnCon("MyExn", True)
    assert P["exnName"](Packet(user, 3)) == "MyExn"
    assert exn_message(Packet(FAIL, "bad")) == "Fail: bad"
    assert exn_message(Packet(OVERFLOW)) == "Overflow" and exn_message(Packet(user, 3)) == "MyExn"
    assert exn_message(Packet(DOMAIN)) == "Domain"


# ---- properties (Python only)

@settings(max_examples=300)
@given(st.integers(MIN_INT, MAX_INT))
def test_int_to_string_round_trips(n):
    assert P["Int.fromString"](P["Int.toString"](n)) == (1, n)
    assert P["Int.fromString"](" " + str(n) + "x") == (1, n)


_tree = st.recursive(st.integers(-3, 3) | st.text("ab", max_size=2) | st.none() | st.booleans(),
                     lambda kids: st.tuples(kids, kids) | st.tuples(kids, kids, kids), max_leaves=12)


@settings(max_examples=300)
@given(_tree, _tree)
def test_ml_equal_agrees_with_python_equality_on_small_values(a, b):
    assert ml_equal(a, b) == (a == b)
    assert ml_equal(a, a)


# ---- differential tests against Poly/ML

SEP = "<<<hpgrem-basis>>>"

PRELUDE = f"""
fun run (f : unit -> string) = print ((f () handle e => "EXN " ^ exnName e) ^ "\\n{SEP}\\n");
fun I n = Int.toString n;
fun B b = Bool.toString b;
fun C c = "#" ^ str c;
fun S (s : string) = s;
fun U () = "()";
fun R r = Real.fmt StringCvt.EXACT r;
fun L f xs = "[" ^ String.concatWith "," (map f xs) ^ "]";
fun O f NONE = "NONE" | O f (SOME x) = "SOME " ^ f x;
val LI = L I; val LC = L C; val LS = L S; val OI = O I;
"""


def _i(n):
    return str(n) if n >= 0 else "~" + str(-n)


def _r(x):
    return P["Real.fmt"](0)(x)


def _l(f):
    return lambda xs: "[" + ",".join(f(x) for x in py_list(xs)) + "]"


RENDER = {
    "I": _i, "B": lambda b: "true" if b else "false", "C": lambda c: "#" + c, "S": lambda s: s,
    "U": lambda u: "()", "R": _r, "LI": _l(_i), "LC": _l(lambda c: "#" + c), "LS": _l(lambda s: s),
    "OI": lambda o: "NONE" if o == NONE else "SOME " + _i(o[1]),
}


def sml_int(n: int) -> str:
    return _i(n)


def sml_real(x: float) -> str:
    if math.isnan(x):
        return "(0.0 / 0.0)"
    if math.isinf(x):
        return "(1.0 / 0.0)" if x > 0 else "(~1.0 / 0.0)"
    return "(" + repr(x).replace("e+", "E").replace("e", "E").replace("-", "~") + ")"


def sml_string(s: str) -> str:
    return '"' + "".join(f"\\{ord(c):03d}" for c in s) + '"'


def sml_char(c: str) -> str:
    return "#" + sml_string(c)


def sml_int_list(xs) -> str:
    return "[" + ", ".join(sml_int(x) for x in xs) + "]"


def run_poly(exprs: list[str], tmp_path) -> list[str]:
    """Evaluate many SML expressions of type string in one Poly/ML process: each one's value,
    or `EXN name` when it raises."""
    path = tmp_path / "basis.sml"
    path.write_text(PRELUDE + "".join(f"val _ = run (fn () => {e});\n" for e in exprs), encoding="latin-1")
    proc = subprocess.run([POLY, "--script", str(path)], capture_output=True, timeout=600, check=False)
    out = proc.stdout.decode("latin-1")
    assert proc.returncode == 0, proc.stderr.decode("latin-1")[-3000:] + out[-3000:]
    results = out.split("\n" + SEP + "\n")
    assert results[-1] == "", results[-1][:3000]
    assert len(results) - 1 == len(exprs), (len(results) - 1, len(exprs))
    return results[:-1]


def ours(render: str, thunk) -> str:
    try:
        return RENDER[render](thunk())
    except Packet as packet:
        return "EXN " + packet.con.name


def compare_with_poly(cases: list[tuple[str, str, object]], tmp_path) -> None:
    """cases: (renderer, SML expression, Python thunk computing the same value)."""
    theirs = run_poly([f"{render} ({sml})" for render, sml, _ in cases], tmp_path)
    mismatches = [(sml, mine, poly) for (render, sml, thunk), poly in zip(cases, theirs)
                  if (mine := ours(render, thunk)) != poly]
    assert not mismatches, f"{len(mismatches)} of {len(cases)} differ (expr, ours, Poly/ML):\n" + \
        "\n".join(map(repr, mismatches[:40]))


EDGE_INTS = [0, 1, -1, 2, -2, 3, -3, 7, -7, 10, 1 << 31, 3037000499, 3037000500, -3037000500,
             MAX_INT, MIN_INT, MAX_INT - 1, MIN_INT + 1, MAX_INT // 2, MIN_INT // 2, (MAX_INT // 2) + 1]
EDGE_REALS = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, 0.49999999999999994, -0.49999999999999994,
              4503599627370497.0, -4503599627370497.0, 1.7, -1.7, 0.125, 0.375, 2.675, 0.05, 1e-7, 5e-324,
              2.2250738585072014e-308, 1e300, -1e300, 1e22, 123456.789, -1234.5678, 0.1, 1 / 3, 9.995,
              4611686018427387904.0, -4611686018427387904.0, 4611686018427387392.0, -4611686018427389000.0,
              9.2e18, math.inf, -math.inf, math.nan, 1.0, 100.0, 999999.5, 0.000012345]
EDGE_STRINGS = ["", "a", "ab", "abc", "abd", "B", "Z", "z", chr(200), chr(0), "\n", "hello world", "a\"b\\c",
                chr(255) + "x"]
FROM_STRINGS = ["42", "  42", " \t\n\v\f\r12abc", "~5", "-5", "+5", "", "  ", "abc", "~", "- 5", "+-5", "--5",
                "~-5", "0x10", "007", "0" * 40 + "42", "12 34", "1.5", "\xa05", "\x1c5", "\x0b7", "4611686018427387903",
                "4611686018427387904", "~4611686018427387904", "~4611686018427387905", "-4611686018427387904z",
                "99999999999999999999999999999x", "+", "5~", "1e5", "\t-0"]


def _cases() -> list[tuple[str, str, object]]:
    cases: list[tuple[str, str, object]] = []
    add = cases.append
    # int arithmetic over all pairs of edge values
    for name, sml in (("+", "op +"), ("-", "op -"), ("*", "op *")):
        fn = ov(name, "int")
        for a in EDGE_INTS:
            for b in EDGE_INTS:
                add(("I", f"{sml} ({sml_int(a)}, {sml_int(b)})", lambda fn=fn, a=a, b=b: fn((a, b))))
    for name, sml in (("div", "op div"), ("mod", "op mod"), ("Int.quot", "Int.quot"), ("Int.rem", "Int.rem"),
                      ("Int.min", "Int.min"), ("Int.max", "Int.max")):
        fn = P[name]
        for a in EDGE_INTS:
            for b in EDGE_INTS + [0]:
                add(("I", f"{sml} ({sml_int(a)}, {sml_int(b)})", lambda fn=fn, a=a, b=b: fn((a, b))))
    for name, sml in (("<", "op <"), (">", "op >"), ("<=", "op <="), (">=", "op >=")):
        fn = ov(name, "int")
        for a in EDGE_INTS[:12]:
            for b in EDGE_INTS[:12]:
                add(("B", f"{sml} ({sml_int(a)}, {sml_int(b)})", lambda fn=fn, a=a, b=b: fn((a, b))))
    for a in EDGE_INTS:
        add(("I", f"~ ({sml_int(a)})", lambda a=a: ov("~", "int")(a)))
        add(("I", f"abs ({sml_int(a)})", lambda a=a: ov("abs", "int")(a)))
        add(("I", f"Int.abs ({sml_int(a)})", lambda a=a: P["Int.abs"](a)))
        add(("S", f"Int.toString ({sml_int(a)})", lambda a=a: P["Int.toString"](a)))
        add(("R", f"real ({sml_int(a)})", lambda a=a: P["real"](a)))
        add(("R", f"Real.fromInt ({sml_int(a)})", lambda a=a: P["Real.fromInt"](a)))
    for s in FROM_STRINGS:
        add(("OI", f"Int.fromString {sml_string(s)}", lambda s=s: P["Int.fromString"](s)))
    # reals
    for x in EDGE_REALS:
        for name in ("floor", "ceil", "round", "trunc"):
            add(("I", f"{name} {sml_real(x)}", lambda name=name, x=x: P[name](x)))
        add(("R", f"Math.sqrt {sml_real(x)}", lambda x=x: P["Math.sqrt"](x)))
        add(("R", f"~ {sml_real(x)}", lambda x=x: ov("~", "real")(x)))
        add(("R", f"abs {sml_real(x)}", lambda x=x: ov("abs", "real")(x)))
        for k in (0, 1, 2, 3, 6, 17, 25):
            add(("S", f"Real.fmt (StringCvt.FIX (SOME {k})) {sml_real(x)}", lambda k=k, x=x: FIX(k)(x)))
        for spec, rep in (("StringCvt.EXACT", 0), ("StringCvt.FIX NONE", (1, NONE)), ("StringCvt.SCI NONE", (3, NONE)),
                          ("StringCvt.GEN NONE", (2, NONE)), ("StringCvt.SCI (SOME 0)", (3, (1, 0))),
                          ("StringCvt.SCI (SOME 3)", (3, (1, 3))), ("StringCvt.GEN (SOME 1)", (2, (1, 1))),
                          ("StringCvt.GEN (SOME 3)", (2, (1, 3))), ("StringCvt.GEN (SOME 17)", (2, (1, 17)))):
            add(("S", f"Real.fmt ({spec}) {sml_real(x)}", lambda rep=rep, x=x: P["Real.fmt"](rep)(x)))
    add(("S", "Real.fmt (StringCvt.FIX (SOME 2)) (Math.sqrt ~1.0)", lambda: FIX(2)(P["Math.sqrt"](-1.0))))
    add(("S", "Real.fmt (StringCvt.FIX (SOME 200)) 0.1", lambda: FIX(200)(0.1)))
    for spec, rep in (("StringCvt.FIX (SOME 201)", (1, (1, 201))), ("StringCvt.FIX (SOME ~1)", (1, (1, -1))),
                      ("StringCvt.SCI (SOME ~1)", (3, (1, -1))), ("StringCvt.GEN (SOME 0)", (2, (1, 0))),
                      ("StringCvt.GEN (SOME 201)", (2, (1, 201)))):
        add(("U", f"let val _ = Real.fmt ({spec}) in () end", lambda rep=rep: (P["Real.fmt"](rep), ())[1]))
    pairs = [(a, b) for a in EDGE_REALS[:24:3] + [math.inf, math.nan] for b in EDGE_REALS[:24:3] + [math.inf, -0.0]]
    for a, b in pairs:
        for name, sml in (("+", "op +"), ("-", "op -"), ("*", "op *")):
            add(("R", f"{sml} ({sml_real(a)}, {sml_real(b)})", lambda name=name, a=a, b=b: ov(name, "real")((a, b))))
        add(("R", f"{sml_real(a)} / {sml_real(b)}", lambda a=a, b=b: P["/"]((a, b))))
        for name, sml in (("<", "op <"), (">", "op >"), ("<=", "op <="), (">=", "op >=")):
            add(("B", f"{sml} ({sml_real(a)}, {sml_real(b)})", lambda name=name, a=a, b=b: ov(name, "real")((a, b))))
    # strings and chars
    for s in EDGE_STRINGS:
        add(("I", f"size {sml_string(s)}", lambda s=s: P["size"](s)))
        add(("I", f"String.size {sml_string(s)}", lambda s=s: P["String.size"](s)))
        add(("LC", f"explode {sml_string(s)}", lambda s=s: P["explode"](s)))
        add(("S", f"implode (rev (String.explode {sml_string(s)}))",
             lambda s=s: P["implode"](P["rev"](P["String.explode"](s)))))
        for i in range(-1, len(s) + 1):
            add(("C", f"String.sub ({sml_string(s)}, {sml_int(i)})", lambda s=s, i=i: P["String.sub"]((s, i))))
            for j in range(-1, len(s) + 2 - max(i, 0)):
                add(("S", f"String.substring ({sml_string(s)}, {sml_int(i)}, {sml_int(j)})",
                     lambda s=s, i=i, j=j: P["String.substring"]((s, i, j))))
        for t in EDGE_STRINGS:
            add(("S", f"{sml_string(s)} ^ {sml_string(t)}", lambda s=s, t=t: P["^"]((s, t))))
            add(("B", f"String.isPrefix {sml_string(s)} {sml_string(t)}",
                 lambda s=s, t=t: P["String.isPrefix"](s)(t)))
            for name, sml in (("<", "op <"), (">", "op >"), ("<=", "op <="), (">=", "op >=")):
                add(("B", f"{sml} ({sml_string(s)}, {sml_string(t)})",
                     lambda name=name, s=s, t=t: ov(name, "string")((s, t))))
            add(("B", f"{sml_string(s)} = {sml_string(t)}", lambda s=s, t=t: P["="]((s, t))))
    for sep in ("", ", ", chr(200)):
        for strs in ([], ["a"], ["a", "", "bc"]):
            lit = "[" + ", ".join(map(sml_string, strs)) + "]"
            add(("S", f"String.concatWith {sml_string(sep)} {lit}",
                 lambda sep=sep, strs=strs: P["String.concatWith"](sep)(ml_list(strs))))
            add(("S", f"concat {lit}", lambda strs=strs: P["concat"](ml_list(strs))))
            add(("S", f"String.concat {lit}", lambda strs=strs: P["String.concat"](ml_list(strs))))
    for n in (-1, 0, 65, 200, 255, 256, MAX_INT, MIN_INT):
        add(("C", f"chr {sml_int(n)}", lambda n=n: P["chr"](n)))
        add(("C", f"Char.chr {sml_int(n)}", lambda n=n: P["Char.chr"](n)))
    for name in ("Char.toUpper", "Char.toLower"):
        add(("S", f"String.implode (List.tabulate (256, fn i => {name} (chr i)))",
             lambda name=name: "".join(P[name](chr(i)) for i in range(256))))
    for name in ("Char.isDigit", "Char.isAlpha"):
        add(("S", f"String.concat (List.tabulate (256, fn i => if {name} (chr i) then \"1\" else \"0\"))",
             lambda name=name: "".join("1" if P[name](chr(i)) else "0" for i in range(256))))
    for a in ("a", "b", chr(200), "\x00"):
        add(("I", f"ord {sml_char(a)}", lambda a=a: P["ord"](a)))
        add(("I", f"Char.ord {sml_char(a)}", lambda a=a: P["Char.ord"](a)))
        add(("S", f"str {sml_char(a)}", lambda a=a: P["str"](a)))
        for b in ("a", "b", chr(200), "\x00"):
            for name, sml in (("<", "op <"), (">", "op >"), ("<=", "op <="), (">=", "op >=")):
                add(("B", f"{sml} ({sml_char(a)}, {sml_char(b)})",
                     lambda name=name, a=a, b=b: ov(name, "char")((a, b))))
    # lists
    for xs in ([], [1], [1, 2, 3]):
        lit = sml_int_list(xs)
        add(("I", f"hd {lit}", lambda xs=xs: P["hd"](ml_list(xs))))
        add(("LI", f"tl {lit}", lambda xs=xs: P["tl"](ml_list(xs))))
        add(("B", f"null {lit}", lambda xs=xs: P["null"](ml_list(xs))))
        add(("I", f"length {lit}", lambda xs=xs: P["length"](ml_list(xs))))
        add(("I", f"List.length {lit}", lambda xs=xs: P["List.length"](ml_list(xs))))
        add(("LI", f"rev {lit}", lambda xs=xs: P["rev"](ml_list(xs))))
        add(("LI", f"List.rev {lit}", lambda xs=xs: P["List.rev"](ml_list(xs))))
        for i in range(-1, len(xs) + 2):
            for name in ("List.nth",):
                add(("I", f"{name} ({lit}, {sml_int(i)})", lambda name=name, xs=xs, i=i: P[name]((ml_list(xs), i))))
            for name in ("List.take", "List.drop"):
                add(("LI", f"{name} ({lit}, {sml_int(i)})",
                     lambda name=name, xs=xs, i=i: P[name]((ml_list(xs), i))))
        for ys in ([], [4, 5]):
            add(("LI", f"{lit} @ {sml_int_list(ys)}", lambda xs=xs, ys=ys: P["@"]((ml_list(xs), ml_list(ys)))))
            add(("B", f"{lit} = {sml_int_list(ys)}", lambda xs=xs, ys=ys: P["="]((ml_list(xs), ml_list(ys)))))
            add(("B", f"{lit} <> {sml_int_list(ys)}", lambda xs=xs, ys=ys: P["<>"]((ml_list(xs), ml_list(ys)))))
    add(("LI", "List.concat [[1], [], [2, 3], []]",
         lambda: P["List.concat"](ml_list([ml_list([1]), None, ml_list([2, 3]), None]))))
    add(("LI", "List.concat []", lambda: P["List.concat"](None)))
    # options, equality, refs, misc
    add(("I", "valOf (SOME 3)", lambda: P["valOf"]((1, 3))))
    add(("I", "valOf NONE", lambda: P["valOf"](NONE)))
    add(("I", "Option.valOf NONE", lambda: P["Option.valOf"](NONE)))
    add(("B", "isSome (SOME 3)", lambda: P["isSome"]((1, 3))))
    add(("B", "Option.isSome NONE", lambda: P["Option.isSome"](NONE)))
    add(("I", "Option.getOpt (NONE, 7)", lambda: P["Option.getOpt"]((NONE, 7))))
    add(("I", "Option.getOpt (SOME 1, 7)", lambda: P["Option.getOpt"](((1, 1), 7))))
    for a, b, pa, pb in (("(1, \"a\", [SOME 2])", "(1, \"a\", [SOME 2])", (1, "a", ml_list([(1, 2)])),
                          (1, "a", ml_list([(1, 2)]))),
                         ("(1, \"a\", [SOME 2])", "(1, \"a\", [NONE])", (1, "a", ml_list([(1, 2)])),
                          (1, "a", ml_list([NONE]))),
                         ("[[1, 2], []]", "[[1, 2], []]", ml_list([ml_list([1, 2]), None]),
                          ml_list([ml_list([1, 2]), None])),
                         ("(true, #\"x\")", "(true, #\"y\")", (True, "x"), (True, "y"))):
        add(("B", f"{a} = {b}", lambda pa=pa, pb=pb: P["="]((pa, pb))))
        add(("B", f"{a} <> {b}", lambda pa=pa, pb=pb: P["<>"]((pa, pb))))
    add(("B", "let val r = ref 1 in r = r end", lambda r=[1]: P["="]((r, r))))
    add(("B", "ref 1 = ref 1", lambda: P["="](([1], [1]))))
    add(("I", "let val r = ref 1 in (r := 2; !r) end", lambda r=[1]: (P[":="]((r, 2)), P["!"](r))[1]))
    add(("U", "let val r = ref 1 in r := 2 end", lambda: P[":="](([1], 2))))
    add(("I", "1 before ()", lambda: P["before"]((1, ()))))
    for b in (True, False):
        add(("S", f"Bool.toString {str(b).lower()}", lambda b=b: P["Bool.toString"](b)))
        add(("B", f"not {str(b).lower()}", lambda b=b: P["not"](b)))
    for exn, con in (("Div", DIV), ("Overflow", OVERFLOW), ("Subscript", SUBSCRIPT), ("Empty", EMPTY),
                     ("Option", OPTION), ("Chr", CHR), ("Size", SIZE), ("Fail \"m\"", FAIL)):
        add(("S", f"exnName ({exn})", lambda con=con: P["exnName"](Packet(con, "m"))))
    return cases


@needs_poly
def test_basis_agrees_with_poly_ml(tmp_path):
    cases = _cases()
    assert len(cases) > 2000
    compare_with_poly(cases, tmp_path)


def _gather(strategy, n: int) -> list:
    """`n` examples of `strategy` drawn by Hypothesis, to check against Poly/ML in one batch."""
    out: list = []

    @settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def gather(x):
        out.append(x)

    gather()
    return out


_halves = st.builds(lambda n, j: n / (1 << j), st.integers(-10 ** 9, 10 ** 9), st.integers(0, 12))
_reals = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e6, max_value=1e6),
    st.floats(min_value=-1e25, max_value=1e25),
    _halves,
    st.builds(lambda n, e: n * 10.0 ** e, st.integers(-10 ** 6, 10 ** 6), st.integers(-8, 8)),
)


@needs_poly
def test_real_fmt_fix_agrees_with_poly_ml(tmp_path):
    items = _gather(st.tuples(_reals, st.integers(0, 12) | st.integers(0, 200)), 1500)
    compare_with_poly([("S", f"Real.fmt (StringCvt.FIX (SOME {k})) {sml_real(x)}", lambda k=k, x=x: FIX(k)(x))
                       for x, k in items], tmp_path)


@needs_poly
def test_real_fmt_sci_gen_exact_agree_with_poly_ml(tmp_path):
    formats = st.sampled_from(["EXACT", "SCI", "GEN"])
    items = _gather(st.tuples(_reals, formats, st.none() | st.integers(1, 20) | st.integers(0, 200)), 1500)
    cases = []
    for x, kind, k in items:
        if kind == "EXACT":
            spec, rep = "StringCvt.EXACT", 0
        else:
            tag = {"GEN": 2, "SCI": 3}[kind]
            spec = f"StringCvt.{kind} " + ("NONE" if k is None else f"(SOME {k})")
            rep = (tag, NONE if k is None else (1, k))
        cases.append(("S", f"Real.fmt ({spec}) {sml_real(x)}", lambda rep=rep, x=x: P["Real.fmt"](rep)(x)))
    compare_with_poly(cases, tmp_path)


@needs_poly
def test_real_to_int_agrees_with_poly_ml(tmp_path):
    near_limit = st.floats(min_value=-4.7e18, max_value=4.7e18)
    big_integral = st.integers(-(1 << 63), 1 << 63).map(float)         # odd ones above 2^52 included
    halves = st.integers(-(1 << 53), 1 << 53).map(lambda n: n + 0.5)
    next_to_half = st.integers(-10 ** 6, 10 ** 6).map(lambda n: n + math.nextafter(0.5, 0.0))
    items = _gather(st.tuples(st.one_of(_reals, near_limit, st.floats(min_value=-10, max_value=10), big_integral,
                                        halves, next_to_half),
                              st.sampled_from(["floor", "ceil", "round", "trunc"])), 1200)
    compare_with_poly([("I", f"{name} {sml_real(x)}", lambda name=name, x=x: P[name](x)) for x, name in items],
                      tmp_path)


@needs_poly
def test_int_to_string_and_from_string_agree_with_poly_ml(tmp_path):
    ints = _gather(st.integers(MIN_INT, MAX_INT) | st.integers(-1000, 1000), 600)
    junk = st.text(alphabet=" \t\n\x0b\x0c\r~-+0123456789ax.\xa0", max_size=12)
    digits = st.builds(lambda sign, ds, tail: sign + ds + tail, st.sampled_from(["", "~", "-", "+", " ~", "  "]),
                       st.text(alphabet="0123456789", min_size=1, max_size=25), st.sampled_from(["", "x", " 1", "~"]))
    texts = _gather(junk | digits, 900)
    cases = [("S", f"Int.toString ({sml_int(n)})", lambda n=n: P["Int.toString"](n)) for n in ints]
    cases += [("OI", f"Int.fromString {sml_string(s)}", lambda s=s: P["Int.fromString"](s)) for s in texts]
    compare_with_poly(cases, tmp_path)
