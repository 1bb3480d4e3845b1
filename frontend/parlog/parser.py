"""Reads PARLOG source into items whose clauses are HPGREM terms with spans.

Clauses are read as terms, the way Prolog reads them (`<-`, `:`, `&`, `,`, `;` are operators of
the grammar); `syntax.py` takes the clause structure apart.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError
from lark.visitors import Transformer_NonRecursive

from hpgrem.diagnostics import CompileError, Diagnostic, check_nesting, excerpt
from frontend.lark_cache import lark_cache
from frontend.parlog.reader import read_program
from hpgrem.ir import NO_SPAN, Span
from hpgrem.ir.parlog import Atom, Float, Int, Struct, Term, Var, make_list


@dataclass(frozen=True, slots=True)
class ModeDecl:
    """`mode name(M1, ..., Mn).` with each Mi `?` or `^`."""

    name: str
    modes: tuple[str, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ClauseItem:
    """One item of clauses joined by `;`, each still a term."""

    clauses: tuple[Term, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Directive:
    """`:- Directive.`: `:- import(File).` (frontend/parlog/__init__.py reads them); the others
    are refused."""

    span: Span
    term: Term | None = None


Item = ModeDecl | ClauseItem | Directive


@lru_cache(maxsize=1)
def _lark() -> Lark:
    grammar = (Path(__file__).parent / "parlog.lark").read_text()
    return Lark(grammar, parser="lalr", start=["start", "goal"], propagate_positions=True,
                maybe_placeholders=False, cache=lark_cache("parlog"))


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
            "\\": "\\", "'": "'", '"': '"', "`": "`", "e": "\x1b", "s": " "}
# the grammar's ESCAPE: `\xHH..\`, `\OOO\` (the closing `\` optional, as in SWI-Prolog) or `\c`
_ESCAPE = r"\\(?:x([0-9a-fA-F]+)\\?|([0-7]+)\\?|(.))"


def unescape(body: str, quote: str) -> str:
    """The text of a quoted atom or string body (without its quotes); ValueError says what is
    wrong with an escape."""
    def one(m: re.Match) -> str:
        if m[0] == quote * 2:
            return quote
        hex_digits, octal, ch = m.groups()
        if ch is None:
            code = int(hex_digits, 16) if hex_digits else int(octal, 8)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise ValueError(f"character code {excerpt(m[0])} is out of range")
            return chr(code)
        if ch not in _ESCAPES:
            raise ValueError(f"unknown escape '\\{ch}'")
        return _ESCAPES[ch]

    return re.sub(re.escape(quote * 2) + "|" + _ESCAPE, one, body, flags=re.DOTALL)


def parse_int(text: str) -> int:
    """ValueError for more decimal digits than Python converts (`sys.get_int_max_str_digits`)."""
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("-")
    if digits[:2] in ("0x", "0o", "0b"):
        return sign * int(digits, 0)
    return sign * int(digits, 10)


class _Build(Transformer_NonRecursive):
    """Lark tree -> items and terms."""

    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def _span(self, x) -> Span:
        """Where a token or a tree (its meta) starts."""
        return Span(self.file, x.line, x.column)

    # items
    @v_args(meta=True)
    def directive(self, meta, children):
        return Directive(self._span(meta), next(c for c in children if not isinstance(c, Token)))

    @v_args(meta=True)
    def mode_decl(self, meta, children):
        name, modes = children[1]
        return ModeDecl(name, modes, self._span(meta))

    def mode_head(self, children):
        return children[0].name, tuple(children[1:])

    def mode_head0(self, children):
        return children[0].name, ()

    def mode_arg(self, children):
        return str(children[-1])

    @v_args(meta=True)
    def clause_item(self, meta, children):
        return ClauseItem(tuple(c for c in children if not isinstance(c, Token)), self._span(meta))

    def start(self, children):
        return children

    def _error(self, tok: Token, message: str) -> CompileError:
        return CompileError([Diagnostic(self._span(tok), message)])

    def _unescape(self, tok: Token, body: str, quote: str) -> str:
        try:
            return unescape(body, quote)
        except ValueError as err:
            raise self._error(tok, f"syntax error: {err}") from None

    # terms
    def int_(self, c):
        tok = c[0]
        try:
            value = parse_int(str(tok))
            str(value)  # `write/1` and the code generator write it in decimal: it must convert
        except ValueError:
            raise self._error(tok, f"integer {excerpt(tok)} has more than {sys.get_int_max_str_digits()} "
                                   "decimal digits, the most a literal may have") from None
        return Int(value, self._span(tok))

    def float_(self, c):
        tok = c[0]
        value = float(str(tok))
        if math.isinf(value):  # SWI-Prolog refuses it too
            raise self._error(tok, f"float {excerpt(tok)} is out of range (at most about 1.8e308)")
        return Float(value, self._span(tok))

    def char_code(self, c):
        tok = c[0]
        body = str(tok)[2:]
        if body.startswith("\\"):
            body = self._unescape(tok, body, "'")
        return Int(ord(body[0]), self._span(tok))

    def variable(self, c):
        return Var(str(c[0]), -1, self._span(c[0]))

    def atom(self, c):
        tok = c[0]
        text = str(tok)
        name = self._unescape(tok, text[1:-1], "'") if tok.type == "QATOM" else text
        return Atom(sys.intern(name), self._span(tok))

    def compound(self, c):
        name, args = c
        if isinstance(name, Token):  # SYMBOL_FUNCTOR
            name = Atom(sys.intern(str(name)), self._span(name))
        return Struct(name.name, tuple(args), name.span)

    @v_args(meta=True)
    def nil(self, meta, c):
        return Atom("[]", self._span(meta))

    @v_args(meta=True)
    def list_(self, meta, c):
        return make_list(c[0], None, self._span(meta))

    @v_args(meta=True)
    def list_tail(self, meta, c):
        return make_list(c[0], c[1], self._span(meta))

    def args(self, c):
        return list(c)

    def string(self, c):
        tok = c[0]
        span = self._span(tok)
        codes = [Int(ord(ch), span) for ch in self._unescape(tok, str(tok)[1:-1], '"')]
        return make_list(codes, None, span)

    def paren(self, c):
        return c[0]

    def goal(self, c):
        return c[0]

    def binop(self, c):
        left, op, right = c
        return Struct(sys.intern(_op_text(op)), (left, right), left.span)

    def prefix_op(self, c):
        op, arg = c
        tok = op.children[0] if not isinstance(op, Token) else op
        return Struct(sys.intern(str(tok)), (arg,), self._span(tok))

    def _infix(self, c, name):
        left, *rest = c
        right = rest[-1]
        return Struct(name, (left, right), left.span)

    def comma_op(self, c):
        return self._infix(c, ",")

    def amp_op(self, c):
        return self._infix(c, "&")

    def colon_op(self, c):
        left, colon, right = c  # spanned at the ':' itself: what a message about it points at
        return Struct(":", (left, right), self._span(colon))

    def neck_op(self, c):
        left, neck, right = c
        return Struct(str(neck), (left, right), left.span)

    def semicolon(self, c):
        return self._infix(c, ";")


def _op_text(op) -> str:
    if isinstance(op, Token):
        return str(op)
    return str(op.children[0])


_TOKEN_NAMES = {
    "END": "'.' (end of clause)", "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "SEMICOLON": "';'",
    "COLON": "':'", "AMPERSAND": "'&'", "LSQB": "'['", "RSQB": "']'", "VBAR": "'|'", "NECK": "'<-'",
    "VARIABLE": "a variable", "NAME": "an atom", "QATOM": "an atom", "INT": "a number",
    "FLOAT": "a number", "STRING": "a string", "MODE_CHAR": "'?'", "CARET": "'^'", "$END": "end of file",
}


def _describe_expected(expected: set[str]) -> str:
    names = sorted({_TOKEN_NAMES.get(e, None) or _pretty(e) for e in expected})
    if len(names) > 6:
        return ""
    return " (expected " + ", ".join(names) + ")"


def _pretty(terminal: str) -> str:
    try:
        pattern = _lark().get_terminal(terminal).pattern
        if pattern.type == "str":
            return f"'{pattern.value}'"
    except KeyError:
        pass
    return terminal.lower()


def _end_span(text: str, file: str) -> Span:
    """Just after the last character that is not layout (lines end at `\\n`, as Lark counts)."""
    end = len(text.rstrip())
    return Span(file, text.count("\n", 0, end) + 1, end - text.rfind("\n", 0, end))


def _syntax_error(err: UnexpectedInput, file: str, text: str) -> Diagnostic:
    line, col = getattr(err, "line", 0), getattr(err, "column", 0)
    if isinstance(err, UnexpectedToken):
        tok = err.token
        if tok.type == "$END":
            if file == "<goal>":  # a goal needs no final '.': something in it is unfinished
                return Diagnostic(_end_span(text, file), "syntax error: the goal ends too early "
                                  "(an unclosed bracket, or an operator without its right operand?)")
            return Diagnostic(_end_span(text, file),
                              "syntax error: unexpected end of file (missing '.' after the last clause?)")
        hint = ""
        if tok.type == "COLON":  # a second ':' in a clause, or one in a term
            hint = (" (a clause has one ':', which ends its guard; module-qualified goals (m:p) are not "
                    "supported: call p directly)")
        return Diagnostic(Span(file, line, col),
                          f"syntax error: unexpected '{tok}'{_describe_expected(err.expected)}{hint}")
    if isinstance(err, UnexpectedCharacters):
        ch = text[err.pos_in_stream] if err.pos_in_stream < len(text) else "?"
        hint = ""
        if ch == "." and ("END" in err.allowed or not err.allowed):
            hint = " (a clause ends with '.' followed by a space or newline)"
        return Diagnostic(Span(file, line, col), f"syntax error: unexpected character '{ch}'{hint}")
    if isinstance(err, UnexpectedEOF):
        return Diagnostic(_end_span(text, file), "syntax error: unexpected end of file")
    return Diagnostic(Span(file, line, col), "syntax error")


# An argument list is part of its term, and a conjunction or clause group is a chain in the
# parse tree however long: none of them is a level of nesting.
_FLAT = frozenset({"args", "comma_op", "amp_op", "semicolon"})


def _parse(text: str, file: str, start: str):
    try:
        tree = _lark().parse(text, start=start)
    except UnexpectedInput as err:
        raise CompileError([_syntax_error(err, file, text)]) from None
    check_nesting(tree, file, _FLAT)
    try:
        return _Build(file).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, CompileError):
            raise err.orig_exc from None
        raise


def parse_program(text: str, file: str) -> list[Item]:
    """Parse a whole PARLOG source text; raises CompileError with a positioned diagnostic.
    The hand-written reader (reader.py) reads it when it can; Lark's parser otherwise."""
    items = read_program(text, file)
    return items if items is not None else _parse(text, file, "start")


def read_terms(text: str, file: str) -> list[Term]:
    """The terms of `text` as the program reader reads them, each ended by '.' (input a running
    program reads: `read_stream/1`, `open_read/2`). `a ; b.` is one term `;(a, b)`, `mode m(?, ^).`
    the term `mode(m(?, ^))`; a term beginning with ':-' is a CompileError at its place, as a
    syntax error is."""
    out: list[Term] = []
    for item in parse_program(text, file):
        if isinstance(item, ClauseItem):
            term = item.clauses[-1]
            for c in reversed(item.clauses[:-1]):  # the reader splits `a ; b.` at ';'
                term = Struct(";", (c, term))
            out.append(term)
        elif isinstance(item, ModeDecl):
            out.append(Struct("mode", (Struct(item.name, tuple(Atom(m) for m in item.modes)),)))
        else:
            raise CompileError([Diagnostic(item.span, "a term of the input cannot begin with ':-'")])
    return out


def parse_goal(text: str, file: str = "<goal>") -> Term:
    """Parse the conjunction given to `--goal` (a final '.' is optional)."""
    return _parse(text, file, "goal")


__all__ = ["ClauseItem", "Directive", "Item", "ModeDecl", "NO_SPAN", "parse_goal", "parse_program", "read_terms"]
