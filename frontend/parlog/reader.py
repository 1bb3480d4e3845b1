"""The fast path of `parser.py`: a hand-written reader for the grammar of `parlog.lark` that
builds the same items and terms, spans included, several times faster than Lark's LALR parser
and tree transformer (a program of 20,000 relations read in seconds, not tens of seconds).

It reads only programs it is sure of: anything unexpected (a syntax error, a directive, a term
nested deeper than `DEPTH`, a literal out of range) makes it give up (`NotMine`), and the Lark
parser, which stays the reference, reads the program again and reports what it finds. The tokens
are those of the grammar, tried in Lark's order (priority, then the longer pattern) among the
ones its LALR state accepts: after a term, an operator; elsewhere, a term.
tests/test_sturdy_frontends.py checks that both read every program of the project and many generated
and mutated ones alike.
"""

from __future__ import annotations

import math
import re
import sys
from bisect import bisect_right
from functools import lru_cache

from hpgrem.ir import Span
from hpgrem.ir.parlog import Atom, Float, Int, Struct, Term, Var, make_list

DEPTH = 300
"""The deepest nesting read here (well under hpgrem.diagnostics.MAX_NESTING: Lark reads and
refuses the deeper ones)."""

_OP700 = ("=..", "\\==", "=:=", "=\\=", "==", "=<", ">=", "\\=", "=", "<", ">", "is")
_OP500 = ("+", "-", "/\\", "\\/")
_OP400 = ("mod", "rem", "//", "<<", ">>", "*", "/")
# a term's end: the operators and closers of every level, longest first as Lark tries them
_AFTER_TERM = sorted({*_OP700, *_OP500, *_OP400, "**", "^", "@", ",", "&", ":", ";", "|", ")", "]", "("},
                     key=lambda s: (-len(s), s))


class NotMine(Exception):
    """The reader gives the program to the Lark parser."""


@lru_cache(maxsize=1)
def _scanners() -> tuple[re.Pattern, re.Pattern]:
    """(the term scanner, the operator scanner): one alternation each, in Lark's order, with the
    terminals' own patterns (taken from the grammar, so that both read the same tokens)."""
    from frontend.parlog.parser import _lark

    pattern = {t.name: t.pattern.to_regexp() for t in _lark().terminals}
    layout = [("WS", pattern["WS"]), ("COMMENT", pattern["COMMENT"]), ("BLOCK_COMMENT", pattern["BLOCK_COMMENT"])]
    term = [(n, pattern[n]) for n in ("CHAR_CODE", "SYMBOL_FUNCTOR", "SYMBOL_ATOM", "FLOAT", "NEG_FLOAT", "INT",
                                      "NEG_INT", "VARIABLE", "NAME", "QATOM", "STRING")]
    term += layout + [("PUNCT", r"[(\[\]\-\\~]")]
    op = [("NECK", pattern["NECK"])] + layout + [("END", pattern["END"])]
    op += [("PUNCT", "|".join(re.escape(s) for s in _AFTER_TERM))]
    return tuple(re.compile("|".join(f"(?P<{n}>{p})" for n, p in alts)) for alts in (term, op))


_LAYOUT = frozenset({"WS", "COMMENT", "BLOCK_COMMENT"})


class Reader:
    """Reads one program text; `items()` is the list `parser.parse_program` returns."""

    def __init__(self, text: str, file: str):
        self.text, self.file = text, file
        self.term_scan, self.op_scan = _scanners()
        self.pos = 0
        self.lines = [0] + [m.end() for m in re.finditer("\n", text)]
        self.depth = 0
        # the token last read ahead: where it was read from, with which scanner
        self.ahead_from, self.ahead_scanner, self.ahead = -1, self.op_scan, ("EOF", "", 0)

    # ---- tokens
    def span(self, pos: int) -> Span:
        line = bisect_right(self.lines, pos)
        return Span(self.file, line, pos - self.lines[line - 1] + 1)

    def _scan(self, scanner: re.Pattern) -> tuple[str, str, int]:
        """The next token (kind, text, where), layout skipped; PUNCT tokens are their text."""
        if self.ahead_from == self.pos and self.ahead_scanner is scanner:
            return self.ahead
        token = self._next(scanner)
        self.ahead_from, self.ahead_scanner, self.ahead = self.pos, scanner, token
        return token

    def _next(self, scanner: re.Pattern) -> tuple[str, str, int]:
        text, pos = self.text, self.pos
        while True:
            m = scanner.match(text, pos)
            if m is None:
                if pos >= len(text):
                    return "EOF", "", pos
                raise NotMine
            kind = m.lastgroup
            if kind not in _LAYOUT:
                return (m[0] if kind == "PUNCT" else kind), m[0], pos
            pos = m.end()

    def term_token(self) -> tuple[str, str, int]:
        kind, value, at = self._scan(self.term_scan)
        self.pos = at + len(value)
        return kind, value, at

    def peek_op(self) -> str:
        """The operator or closer that follows a term (not consumed)."""
        kind, _, _ = self._scan(self.op_scan)
        return kind

    def take_op(self) -> tuple[str, int]:
        kind, value, at = self._scan(self.op_scan)
        self.pos = at + len(value)
        return value, at

    def expect(self, kind: str) -> None:
        if self.peek_op() != kind:
            raise NotMine
        self.take_op()

    def nest(self) -> None:
        """One more level of nesting, as the Lark tree counts them (a level's caller restores
        the depth it had when the level is read)."""
        self.depth += 1
        if self.depth > DEPTH:
            raise NotMine

    # ---- items
    def items(self) -> list:
        from frontend.parlog.parser import ClauseItem, Directive, ModeDecl

        out: list = []
        while True:
            try:
                kind, value, at = self.term_token()
            except NotMine:  # no term starts here: a directive `:- ...`, or what Lark reports
                kind, value, at = self._scan(self.op_scan)
                if (kind, value) != ("NECK", ":-"):
                    raise
                self.pos, self.depth = at + 2, 0
                term = self.neck()
                self.expect("END")
                out.append(Directive(self.span(at), term))
                continue
            if kind == "EOF":
                return out
            self.pos = at
            if kind == "NAME" and value == "mode":
                self.pos = at + 4
                name, modes = self.mode_head()
                self.expect("END")
                out.append(ModeDecl(name, modes, self.span(at)))
                continue
            self.depth = 0
            clauses = [self.neck()]
            while self.peek_op() == ";":
                self.take_op()
                clauses.append(self.neck())
            self.expect("END")
            out.append(ClauseItem(tuple(clauses), self.span(at)))

    def mode_head(self) -> tuple[str, tuple[str, ...]]:
        kind, value, _ = self.term_token()
        if kind == "NAME":
            name = value
        elif kind == "QATOM":
            try:
                name = _unescape(value[1:-1], "'")
            except ValueError:
                raise NotMine from None
        else:
            raise NotMine
        if self.peek_op() != "(":
            return sys.intern(name), ()
        self.take_op()
        m = _MODE_ARGS.match(self.text, self.pos)
        if m is None:
            raise NotMine
        self.pos = m.end()
        return sys.intern(name), tuple(_MODE_CHAR.findall(m[0]))

    # ---- terms, loosest first (the levels of parlog.lark)
    def clauses(self) -> Term:
        parts = [self.neck()]
        while self.peek_op() == ";":
            self.take_op()
            parts.append(self.neck())
        return _fold_right(";", parts)

    def neck(self) -> Term:
        depth = self.depth
        left = self.colon()
        if self.peek_op() == "NECK":
            neck, _ = self.take_op()
            self.nest()
            left = Struct(neck, (left, self.colon()), left.span)
        self.depth = depth
        return left

    def colon(self) -> Term:
        depth = self.depth
        left = self.chain("&", self.comma)
        if self.peek_op() == ":":
            _, at = self.take_op()
            self.nest()
            left = Struct(":", (left, self.chain("&", self.comma)), self.span(at))  # at the ':', as Lark
        self.depth = depth
        return left

    def comma(self) -> Term:
        return self.chain(",", self.e900)

    def chain(self, op: str, part) -> Term:
        """`a op b op c` as op(a, op(b, c)): a chain is no level of nesting."""
        parts = [part()]
        while self.peek_op() == op:
            self.take_op()
            parts.append(part())
        return _fold_right(op, parts)

    def e900(self) -> Term:
        depth = self.depth
        kind, value, at = self.term_token()
        if kind == "~":
            self.nest()
            term = Struct("~", (self.e900(),), self.span(at))
        else:
            self.pos = at
            left = self.e700()
            if self.peek_op() == "@":
                self.take_op()
                self.nest()
                left = Struct("@", (left, self.e700()), left.span)
            term = left
        self.depth = depth
        return term

    def e700(self) -> Term:
        left = self.left_assoc(_OP500, self.e400)
        op = self.peek_op()
        if op in _OP700:
            self.take_op()
            self.nest()
            left = Struct(sys.intern(op), (left, self.left_assoc(_OP500, self.e400)), left.span)
        return left

    def e400(self) -> Term:
        return self.left_assoc(_OP400, self.e200)

    def left_assoc(self, ops: tuple[str, ...], part) -> Term:
        left = part()
        while (op := self.peek_op()) in ops:
            self.take_op()
            self.nest()
            left = Struct(sys.intern(op), (left, part()), left.span)
        return left

    def e200(self) -> Term:
        """Priority 200: `**` (xfx; its right operand may be a prefix term), `^` (xfy) and the
        prefix `-` and `\\` (fy): `- 2^2` is -(2^2), `2^3^2` is 2^(3^2), as in SWI-Prolog."""
        kind, value, at = self.term_token()
        if kind in ("-", "\\"):
            depth = self.depth
            self.nest()
            term = Struct(value, (self.e200(),), self.span(at))
            self.depth = depth
            return term
        left = self.primary(kind, value, at)
        op = self.peek_op()
        if op == "**":
            self.take_op()
            self.nest()
            left = Struct("**", (left, self.prefix()), left.span)
        elif op == "^":
            self.take_op()
            self.nest()
            left = Struct("^", (left, self.e200()), left.span)
        return left

    def prefix(self) -> Term:
        kind, value, at = self.term_token()
        if kind in ("-", "\\"):
            depth = self.depth
            self.nest()
            term = Struct(value, (self.prefix(),), self.span(at))
            self.depth = depth
            return term
        return self.primary(kind, value, at)

    def primary(self, kind: str, value: str, at: int) -> Term:
        span = self.span(at)
        try:
            if kind in ("INT", "NEG_INT"):
                from frontend.parlog.parser import parse_int
                number = parse_int(value)
                str(number)  # as the parser: a literal must convert to decimal
                return Int(number, span)
            if kind in ("FLOAT", "NEG_FLOAT"):
                real = float(value)
                if math.isinf(real):
                    raise NotMine
                return Float(real, span)
            if kind == "VARIABLE":
                return Var(value, -1, span)
            if kind in ("NAME", "QATOM", "SYMBOL_ATOM"):
                name = _unescape(value[1:-1], "'") if kind == "QATOM" else value
                if self.peek_op() == "(":
                    return self.compound(sys.intern(name), span)
                return Atom(sys.intern(name), span)
            if kind == "SYMBOL_FUNCTOR":
                return self.compound(sys.intern(value), span)
            if kind == "CHAR_CODE":
                body = value[2:]
                if body.startswith("\\"):
                    body = _unescape(body, "'")
                return Int(ord(body[0]), span)
            if kind == "STRING":
                return make_list([Int(ord(ch), span) for ch in _unescape(value[1:-1], '"')], None, span)
        except ValueError:
            raise NotMine from None
        if kind == "(":
            depth = self.depth
            self.nest()
            inner = self.clauses()
            self.expect(")")
            self.depth = depth
            return inner
        if kind == "[":
            return self.list_(span)
        raise NotMine

    def compound(self, name: str, span: Span) -> Term:
        self.take_op()  # the "("
        depth = self.depth
        self.nest()
        args = self.args()
        self.expect(")")
        self.depth = depth
        return Struct(name, tuple(args), span)

    def args(self) -> list[Term]:
        items = [self.e900()]
        while self.peek_op() == ",":
            self.take_op()
            items.append(self.e900())
        return items

    def list_(self, span: Span) -> Term:
        kind, _, at = self.term_token()
        if kind == "]":
            return Atom("[]", span)
        self.pos = at
        depth = self.depth
        self.nest()
        items = self.args()
        tail = None
        if self.peek_op() == "|":
            self.take_op()
            tail = self.e900()
        self.expect("]")
        self.depth = depth
        return make_list(items, tail, span)


# `?, ^)`: the arguments of a mode declaration when they are plain (no names, no comments)
_MODE_ARGS = re.compile(r"[ \t\f\r\n]*[?^](?:[ \t\f\r\n]*,[ \t\f\r\n]*[?^])*[ \t\f\r\n]*\)")
_MODE_CHAR = re.compile(r"[?^]")


def _unescape(body: str, quote: str) -> str:
    from frontend.parlog.parser import unescape
    return unescape(body, quote)


def _fold_right(op: str, parts: list[Term]) -> Term:
    term = parts[-1]
    for left in reversed(parts[:-1]):
        term = Struct(op, (left, term), left.span)
    return term


def read_program(text: str, file: str) -> list | None:
    """The program's items, or None when the Lark parser must read it (see the module docstring)."""
    try:
        return Reader(text, file).items()
    except (NotMine, RecursionError):
        return None
