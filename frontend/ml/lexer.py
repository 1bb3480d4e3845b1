"""The lexical structure of the ML subset, and the split of a file into top-level chunks.

Hand-written rather than Lark regex terminals because SML comments nest, `~5` is one literal
while `~ 5` is an application, and symbolic identifiers are read by maximal munch (`:=!` is one
name, as in SML). Reserved words and operators of the fixed fixity table become the terminals
named in `ml.lark`; module-language keywords, `infix`, `...` and the like become `UNSUPPORTED`
tokens so that the parser reports them, in position order, as "not supported".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from lark import Token

from hpgrem.diagnostics import CompileError, Diagnostic
from hpgrem.ir import Span

RESERVED = {
    "and": "AND", "andalso": "ANDALSO", "as": "AS", "case": "CASE", "datatype": "DATATYPE",
    "do": "DO", "else": "ELSE", "end": "END", "exception": "EXCEPTION", "fn": "FN", "fun": "FUN",
    "handle": "HANDLE", "if": "IF", "in": "IN", "let": "LET", "local": "LOCAL", "of": "OF",
    "op": "OP", "orelse": "ORELSE", "raise": "RAISE", "rec": "REC", "then": "THEN",
    "type": "TYPE", "val": "VAL", "while": "WHILE", "with": "WITH",
    # infix identifiers of the fixed table that are words
    "div": "DIV", "mod": "MOD", "o": "O", "before": "BEFORE",
}

SYMBOLS = {
    "=": "EQUALS", "=>": "DARROW", "->": "ARROW", "|": "BAR", ":": "COLON", "#": "HASH",
    "+": "PLUS", "-": "MINUS", "*": "STAR", "/": "SLASH", "^": "CARET", "::": "CONS", "@": "AT",
    "<>": "NE", "<": "LT", ">": "GT", "<=": "LE", ">=": "GE", ":=": "ASSIGN",
}

PUNCTUATION = {"(": "LPAR", ")": "RPAR", "[": "LSQB", "]": "RSQB", "{": "LBRACE", "}": "RBRACE",
               ",": "COMMA", ";": "SEMI", "_": "UNDERSCORE"}

_MODULES = "structures, signatures and functors are not supported (only the Core language is)"
_FIXITY = ("fixity declarations are not supported: the fixity table is fixed "
           "(infix 7 * / div mod, 6 + - ^, infixr 5 :: @, 4 = <> < > <= >=, 3 := o, 0 before)")
UNSUPPORTED_WORDS = {
    "structure": _MODULES, "signature": _MODULES, "functor": _MODULES, "sig": _MODULES,
    "struct": _MODULES, "eqtype": _MODULES, "include": _MODULES, "sharing": _MODULES,
    "where": _MODULES, "open": "'open' is not supported (there are no structures to open)",
    "abstype": "'abstype' is not supported", "withtype": "'withtype' is not supported",
    "infix": _FIXITY, "infixr": _FIXITY, "nonfix": _FIXITY,
    "...": "flexible records ('...') are not supported",
    ":>": _MODULES,
}

_SYMBOLIC = set("!%&$#+-/:<=>?@\\~`^|*")
_ALNUM = re.compile(r"[A-Za-z][A-Za-z0-9_']*(?:\.[A-Za-z][A-Za-z0-9_']*)*")
_NUMBER = re.compile(r"~?(?:0x[0-9A-Fa-f]+|[0-9]+(?:\.[0-9]+)?(?:[eE]~?[0-9]+)?)")
_TYVAR = re.compile(r"'+[A-Za-z0-9_']*")
_CODE_ESCAPE = re.compile(r"([0-9]{3})|u([0-9A-Fa-f]{4})")
_ESCAPES = {"a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
            "\\": "\\", '"': '"'}
# SML source is ASCII: these are its formatting characters, and a string holds printable
# ASCII (other characters are written as escapes), as in Poly/ML.
_SPACE = frozenset(" \t\n\r\f\v")
_DIGITS = frozenset("0123456789")
_OPENERS = {"LET", "LOCAL", "LPAR", "LSQB", "LBRACE"}
_CLOSERS = {"END", "RPAR", "RSQB", "RBRACE"}


class _Scanner:
    """Reads tokens from the text, tracking line and column (both 1-based)."""

    def __init__(self, text: str, file: str):
        self.text, self.file = text, file
        self.pos, self.line, self.col = 0, 1, 1

    def error(self, message: str, line: int | None = None, col: int | None = None) -> CompileError:
        span = Span(self.file, line or self.line, col or self.col)
        return CompileError([Diagnostic(span, message)])

    def error_at(self, i: int, message: str) -> CompileError:
        """An error at text position `i`, at or after the current one (a string gap may have
        crossed lines since)."""
        newline = self.text.rfind("\n", self.pos, i)
        if newline < 0:
            return self.error(message, self.line, self.col + i - self.pos)
        return self.error(message, self.line + self.text.count("\n", self.pos, i), i - newline)

    def advance(self, n: int) -> None:
        for ch in self.text[self.pos:self.pos + n]:
            if ch == "\n":
                self.line, self.col = self.line + 1, 1
            else:
                self.col += 1
        self.pos += n

    def token(self, kind: str, value: str, length: int) -> Token:
        start, line, col = self.pos, self.line, self.col
        self.advance(length)
        return Token(kind, value, start, line, col, self.line, self.col, self.pos)

    def skip_space_and_comments(self) -> None:
        text = self.text
        while self.pos < len(text):
            if text[self.pos] in _SPACE:
                self.advance(1)
            elif text.startswith("(*", self.pos):
                line, col, depth = self.line, self.col, 0
                while True:
                    if self.pos >= len(text):
                        raise self.error("unterminated comment", line, col)
                    if text.startswith("(*", self.pos):
                        depth += 1
                        self.advance(2)
                    elif text.startswith("*)", self.pos):
                        depth -= 1
                        self.advance(2)
                        if depth == 0:
                            break
                    else:
                        self.advance(1)
            else:
                return

    def string_body(self, start: int) -> tuple[str, int]:
        """Decode the string starting at the quote at `start`: (value, length including quotes)."""
        text, i, out = self.text, start + 1, []
        while True:
            if i >= len(text) or text[i] == "\n":
                raise self.error("unterminated string")
            ch = text[i]
            if ch == '"':
                return "".join(out), i + 1 - start
            if ch != "\\":
                if not " " <= ch <= "~":
                    raise self.error_at(i, f"unprintable character '{ch}' in a string (a string holds "
                                           "printable ASCII: write other characters as escapes, "
                                           "\\t or \\ddd for each byte)")
                out.append(ch)
                i += 1
                continue
            esc = text[i + 1:i + 2]
            if esc in _ESCAPES:
                out.append(_ESCAPES[esc])
                i += 2
            elif esc == "^" and i + 2 < len(text) and 64 <= ord(text[i + 2]) <= 95:
                out.append(chr(ord(text[i + 2]) - 64))
                i += 3
            elif m := _CODE_ESCAPE.match(text, i + 1):
                code = int(m[1]) if m[1] else int(m[2], 16)
                if code > 255:  # a char is one byte, as in Poly/ML
                    raise self.error_at(i, f"character code \\{m[0]} is out of range (at most \\255)")
                out.append(chr(code))
                i = m.end()
            elif esc in _SPACE:
                j = i + 1
                while j < len(text) and text[j] in _SPACE:
                    j += 1
                if text[j:j + 1] != "\\":
                    raise self.error_at(j, "unterminated string gap (\\ ... \\)")
                i = j + 1
            else:
                raise self.error_at(i, f"illegal escape sequence '\\{esc}' in string")

    def next(self) -> Token | None:
        self.skip_space_and_comments()
        text, pos = self.text, self.pos
        if pos >= len(text):
            return None
        ch = text[pos]
        if ch == "#" and text.startswith('#"', pos):
            value, length = self.string_body(pos + 1)
            if len(value) != 1:
                raise self.error("a character constant must contain exactly one character")
            return self.token("CHAR", value, length + 1)
        if ch == "#" and text.startswith("#[", pos):
            return self.token("UNSUPPORTED", "vectors are not supported", 1)
        if ch == '"':
            value, length = self.string_body(pos)
            return self.token("STRING", value, length)
        if text.startswith("...", pos):
            return self.token("UNSUPPORTED", UNSUPPORTED_WORDS["..."], 3)
        if ch in _DIGITS or (ch == "~" and text[pos + 1:pos + 2] in _DIGITS):
            return self.number()
        if ch == "'":
            m = _TYVAR.match(text, pos)
            return self.token("TYVAR", m.group(), m.end() - pos)
        if ch.isascii() and ch.isalpha():
            return self.word()
        if ch in _SYMBOLIC:
            end = pos
            while end < len(text) and text[end] in _SYMBOLIC:
                end += 1
            sym = text[pos:end]
            if sym in UNSUPPORTED_WORDS:
                return self.token("UNSUPPORTED", UNSUPPORTED_WORDS[sym], end - pos)
            return self.token(SYMBOLS.get(sym, "SYMID"), sym, end - pos)
        if ch in PUNCTUATION:
            return self.token(PUNCTUATION[ch], ch, 1)
        if not ch.isascii():
            raise self.error(f"illegal character '{ch}' (ML source is ASCII, except in comments)")
        raise self.error(f"illegal character '{ch}'")

    def number(self) -> Token:
        m = _NUMBER.match(self.text, self.pos)
        lexeme = m.group()
        if re.match(r"~?0w", self.text[self.pos:self.pos + 3]):
            end = re.compile(r"~?0wx?[0-9A-Fa-f]*").match(self.text, self.pos).end()
            return self.token("UNSUPPORTED", "words (0w...) are not supported", end - self.pos)
        following = self.text[m.end():m.end() + 1]
        if following.isalpha() or following == "_":
            raise self.error(f"malformed number '{lexeme}{following}'")
        value = lexeme.replace("~", "-")
        hex_ = lexeme.lstrip("~").startswith("0x")
        is_real = not hex_ and ("." in lexeme or "e" in lexeme.lower())  # 0xe is an int
        return self.token("REAL" if is_real else "INT", value, len(lexeme))

    def word(self) -> Token:
        m = _ALNUM.match(self.text, self.pos)
        word = m.group()
        if word in RESERVED:
            return self.token(RESERVED[word], word, len(word))
        if word in UNSUPPORTED_WORDS:
            return self.token("UNSUPPORTED", UNSUPPORTED_WORDS[word], len(word))
        if "." in word:
            # `Int.toString` is one token; a qualified symbolic name (`Int.+`) is not supported.
            return self.token("LONGID", word, len(word))
        return self.token("ID", word, len(word))


def tokenize(text: str, file: str) -> Iterator[Token]:
    """The tokens of `text`; raises CompileError at the first lexical error."""
    scanner = _Scanner(text, file)
    while (tok := scanner.next()) is not None:
        yield tok


@dataclass(frozen=True, slots=True)
class SourceChunk:
    """The tokens of one part of the program up to a top-level `;` (the `;` not included).

    `error` is the lexical error met inside this chunk, if any: the chunks before it are whole
    and can be checked and run first, as Poly/ML does."""

    tokens: tuple[Token, ...]
    span: Span
    error: Diagnostic | None = None


def split_chunks(text: str, file: str) -> list[SourceChunk]:
    """Cut the program at every `;` outside parentheses, brackets, braces and `let`/`local`
    ... `end`. Empty chunks (`;;`) are dropped."""
    chunks: list[SourceChunk] = []
    current: list[Token] = []
    depth = 0

    def close(error: Diagnostic | None = None) -> None:
        if current or error:
            first = current[0] if current else None
            span = Span(file, first.line, first.column) if first else error.span
            chunks.append(SourceChunk(tuple(current), span, error))
        current.clear()

    try:
        for tok in tokenize(text, file):
            if tok.type == "SEMI" and depth == 0:
                close()
                continue
            if tok.type in _OPENERS:
                depth += 1
            elif tok.type in _CLOSERS:
                depth = max(0, depth - 1)
            current.append(tok)
    except CompileError as err:
        close(err.diagnostics[0])
        return chunks
    close()
    return chunks
