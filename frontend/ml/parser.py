"""Reads ML source into the surface syntax of `syntax.py`, with a span on every node.

The grammar is `ml.lark` (Lark LALR, strict: no conflict is resolved by default); the tokens
come from `lexer.py`. A program is parsed one top-level chunk at a time (see `split_chunks`), so
that a syntax error in a later chunk does not stop the earlier ones from running.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, v_args
from lark.exceptions import UnexpectedInput, UnexpectedToken, VisitError
from lark.lexer import Lexer
from lark.visitors import Transformer_NonRecursive

from hpgrem.diagnostics import CompileError, Diagnostic, check_nesting, excerpt
from frontend.lark_cache import lark_cache
from frontend.ml import syntax as s
from frontend.ml.lexer import SourceChunk, split_chunks, tokenize
from hpgrem.ir import Span
from hpgrem.ir.ml import INT_MAX, INT_MIN


class _TokenFeed(Lexer):
    """Hands Lark the tokens `lexer.py` already made (the parse input is a token list)."""

    def __init__(self, lexer_conf):
        pass

    def lex(self, tokens):
        yield from tokens


@lru_cache(maxsize=1)
def _lark() -> Lark:
    grammar = (Path(__file__).parent / "ml.lark").read_text()
    return Lark(grammar, parser="lalr", lexer=_TokenFeed, strict=True, start=["chunk", "ty_only"],
                propagate_positions=True, maybe_placeholders=False, cache=lark_cache("ml"))


class _SyntaxError(Exception):
    """A construct the grammar accepts but SML does not (raised inside the transformer)."""

    def __init__(self, span: Span, message: str):
        super().__init__(message)
        self.diagnostic = Diagnostic(span, message)


@dataclass(frozen=True, slots=True)
class _RecOpened:
    """A value binding written after `rec` (`val rec f = ...`, `and rec g = ...`)."""

    bind: s.ValBind


def _is(x, kind: str) -> bool:
    return isinstance(x, Token) and x.type == kind


class _Build(Transformer_NonRecursive):
    """Lark tree -> syntax nodes."""

    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def _span(self, x) -> Span:
        if isinstance(x, Token):
            return Span(self.file, x.line, x.column)
        if hasattr(x, "span"):
            return x.span
        return Span(self.file, x.line, x.column)

    # ---- chunks and declarations
    @v_args(meta=True)
    def chunk_decs(self, meta, c):
        span = self._span(meta) if not meta.empty else Span(self.file, 1, 1)
        return s.Chunk(tuple(c), span)

    def chunk_exp(self, c):
        exp = c[0]
        bind = s.ValBind(s.PVar("it", exp.span), exp, exp.span)
        return s.Chunk((s.DVal((), (bind,), 1, exp.span),), exp.span)

    def ty_only(self, c):
        return c[0]

    def decs(self, c):
        return tuple(d for d in c if not _is(d, "SEMI"))

    def tyvarseq(self, c):
        return tuple(s.TyVar(str(t), self._span(t)) for t in c)

    @staticmethod
    def _tyvars_and_rest(c):
        if c and isinstance(c[0], tuple):
            return c[0], c[1:]
        return (), c

    @v_args(meta=True)
    def val_dec(self, meta, c):
        tyvars, binds = self._tyvars_and_rest(c)
        rec_from = next((i for i, b in enumerate(binds) if isinstance(b, _RecOpened)), len(binds))
        return s.DVal(tyvars, tuple(b.bind if isinstance(b, _RecOpened) else b for b in binds), rec_from,
                      self._span(meta))

    @v_args(meta=True)
    def valbind(self, meta, c):
        if _is(c[0], "REC"):  # the binding starts after its `rec`s
            return _RecOpened(s.ValBind(c[-2], c[-1], c[-2].span))
        return s.ValBind(c[0], c[1], self._span(meta))

    @v_args(meta=True)
    def fun_dec(self, meta, c):
        tyvars, binds = self._tyvars_and_rest(c)
        return s.DFun(tyvars, tuple(binds), self._span(meta))

    @v_args(meta=True)
    def funbind(self, meta, c):
        clauses = tuple(c)
        name = clauses[0].name
        for clause in clauses[1:]:
            if clause.name != name:
                raise _SyntaxError(clause.span, f"clauses of one function must all define {name}, "
                                                f"not {clause.name}")
        return s.FunBind(name, clauses, clauses[0].span)

    @v_args(meta=True)
    def funclause(self, meta, c):
        (name, args), rest = c[0], c[1:]
        result = rest[0] if len(rest) == 2 else None
        return s.FunClause(name, args, result, rest[-1], self._span(meta))

    funclause_nm = funclause

    def funhead(self, c):
        c = [x for x in c if not _is(x, "OP")]
        return str(c[0]), tuple(c[1:])

    @v_args(meta=True)
    def type_dec(self, meta, c):
        return s.DType(tuple(c), self._span(meta))

    @v_args(meta=True)
    def typbind(self, meta, c):
        params, (name, ty) = self._tyvars_and_rest(c)
        return s.TypeBind(params, str(name), ty, self._span(meta))

    @v_args(meta=True)
    def datatype_dec(self, meta, c):
        return s.DDatatype(tuple(c), self._span(meta))

    @v_args(meta=True)
    def datbind(self, meta, c):
        params, rest = self._tyvars_and_rest(c)
        return s.DataBind(params, str(rest[0]), tuple(rest[1:]), self._span(meta))

    def _constructor_bind(self, c, cls):
        c = [x for x in c if not _is(x, "OP")]
        return cls(str(c[0]), c[1] if len(c) > 1 else None, self._span(c[0]))

    def conbind(self, c):
        return self._constructor_bind(c, s.ConBind)

    @v_args(meta=True)
    def exception_dec(self, meta, c):
        return s.DException(tuple(c), self._span(meta))

    def exbind(self, c):
        return self._constructor_bind(c, s.ExnBind)

    @v_args(meta=True)
    def local_dec(self, meta, c):
        return s.DLocal(c[0], c[1], self._span(meta))

    # ---- expressions
    @v_args(meta=True)
    def handle(self, meta, c):
        return s.EHandle(c[0], c[1], self._span(c[0]))

    @v_args(meta=True)
    def orelse(self, meta, c):
        return s.EOrelse(c[0], c[1], c[0].span)

    @v_args(meta=True)
    def andalso(self, meta, c):
        return s.EAndalso(c[0], c[1], c[0].span)

    @v_args(meta=True)
    def fn(self, meta, c):
        return s.EFn(c[0], self._span(meta))

    @v_args(meta=True)
    def case(self, meta, c):
        return s.ECase(c[0], c[1], self._span(meta))

    @v_args(meta=True)
    def if_(self, meta, c):
        return s.EIf(c[0], c[1], c[2], self._span(meta))

    @v_args(meta=True)
    def while_(self, meta, c):
        return s.EWhile(c[0], c[1], self._span(meta))

    @v_args(meta=True)
    def raise_(self, meta, c):
        return s.ERaise(c[0], self._span(meta))

    def annot(self, c):
        return s.EAnnot(c[0], c[1], c[0].span)

    def infix(self, c):
        left, op, right = c
        return s.EInfix(str(op), left, right, left.span, self._span(op))

    def app(self, c):
        return s.EApp(c[0], c[1], c[0].span)

    def _int(self, tok: Token) -> int:
        """The value of an INT token (decimal or `0x`, `-` for `~`), within 63 bits as in Poly/ML."""
        text = str(tok)
        digits = text.lstrip("-").removeprefix("0x").lstrip("0")
        # 20 digits or more are out of range whatever they are: not converting them also keeps
        # a huge literal clear of Python's limit on int/str conversion.
        value = int(text, 16 if "x" in text else 10) if len(digits) < 20 else None
        if value is None or not INT_MIN <= value <= INT_MAX:
            raise _SyntaxError(self._span(tok), f"integer constant {excerpt(text.replace('-', '~'))} is out "
                                                "of range for int (63 bits, as in Poly/ML)")
        return value

    def const_int(self, c):
        return s.EConst(self._int(c[0]), "int", self._span(c[0]))

    def const_real(self, c):
        return s.EConst(float(c[0]), "real", self._span(c[0]))

    def const_string(self, c):
        return s.EConst(str(c[0]), "string", self._span(c[0]))

    def const_char(self, c):
        return s.EConst(str(c[0]), "char", self._span(c[0]))

    @v_args(meta=True)
    def var(self, meta, c):
        return s.EVar(str(c[-1]), self._span(meta))

    @v_args(meta=True)
    def selector(self, meta, c):
        return s.ESelector(c[0], self._span(meta))

    @v_args(meta=True)
    def unit(self, meta, c):
        return s.ETuple((), self._span(meta))

    @v_args(meta=True)
    def tuple(self, meta, c):
        return s.ETuple(tuple(c), self._span(meta))

    @v_args(meta=True)
    def seq(self, meta, c):
        return s.ESeq(tuple(c), self._span(meta))

    @v_args(meta=True)
    def list(self, meta, c):
        return s.EList(tuple(c), self._span(meta))

    @v_args(meta=True)
    def record(self, meta, c):
        self._check_labels(c)
        return s.ERecord(tuple(c), self._span(meta))

    def exprow(self, c):
        return (c[0], c[1])

    @v_args(meta=True)
    def let(self, meta, c):
        decs, body = c[0], c[1:]
        exp = body[0] if len(body) == 1 else s.ESeq(tuple(body), body[0].span)
        return s.ELet(decs, exp, self._span(meta))

    @v_args(meta=True)
    def match(self, meta, c):
        return s.Match(tuple(c), self._span(meta))

    @v_args(meta=True)
    def mrule(self, meta, c):
        return s.Rule(c[0], c[1], self._span(meta))

    mrule_nm = mrule

    # ---- patterns
    @v_args(meta=True)
    def pat_as(self, meta, c):
        left, pat = c
        ty = None
        if isinstance(left, s.PAnnot):
            left, ty = left.pat, left.ty
        if not isinstance(left, s.PVar) or "." in left.name:
            raise _SyntaxError(left.span, "only a variable can be bound by 'as' (write 'x as pattern')")
        if ty is not None:
            pat = s.PAnnot(pat, ty, pat.span)
        return s.PLayer(left.name, pat, left.span)

    def pat_annot(self, c):
        return s.PAnnot(c[0], c[1], c[0].span)

    def pat_infix(self, c):
        left, _, right = c
        return s.PCon("::", s.PTuple((left, right), left.span), left.span)

    def pat_con(self, c):
        name, arg = c
        return s.PCon(name[0], arg, name[1])

    @v_args(meta=True)
    def pat_wild(self, meta, c):
        return s.PWild(self._span(meta))

    def pat_var(self, c):
        name, span = c[0]
        return s.PVar(name, span)

    def pat_int(self, c):
        return s.PConst(self._int(c[0]), "int", self._span(c[0]))

    def pat_real(self, c):
        return s.PConst(float(c[0]), "real", self._span(c[0]))

    def pat_string(self, c):
        return s.PConst(str(c[0]), "string", self._span(c[0]))

    def pat_char(self, c):
        return s.PConst(str(c[0]), "char", self._span(c[0]))

    @v_args(meta=True)
    def pat_unit(self, meta, c):
        return s.PTuple((), self._span(meta))

    @v_args(meta=True)
    def pat_tuple(self, meta, c):
        return s.PTuple(tuple(c), self._span(meta))

    @v_args(meta=True)
    def pat_list(self, meta, c):
        return s.PList(tuple(c), self._span(meta))

    @v_args(meta=True)
    def pat_record(self, meta, c):
        self._check_labels(c)
        return s.PRecord(tuple(c), self._span(meta))

    def patrow(self, c):
        return (c[0], c[1])

    def patrow_pun(self, c):
        """`{x}`, `{x : ty}`, `{x as p}`, `{x : ty as p}`: the label also names a variable."""
        name, span = str(c[0]), self._span(c[0])
        ty = next((x for x in c[1:] if isinstance(x, s.Ty)), None)
        inner = next((x for x in c[1:] if not isinstance(x, s.Ty)), None)
        if inner is not None:
            return name, s.PLayer(name, inner if ty is None else s.PAnnot(inner, ty, inner.span), span)
        var = s.PVar(name, span)
        return name, var if ty is None else s.PAnnot(var, ty, span)

    def _check_labels(self, fields) -> None:
        seen = set()
        for label, item in fields:
            if label in seen:
                raise _SyntaxError(item.span, f"label {label} appears twice in this record")
            seen.add(label)

    def longvid(self, c):
        tok = c[-1]
        if isinstance(tok, tuple):
            return tok
        return str(tok), self._span(c[0])

    def vid(self, c):
        return c[0]

    def opname(self, c):
        return c[0]

    def label(self, c):
        tok = c[0]
        if tok.type == "INT" and not (tok.isdigit() and tok[0] != "0"):
            raise _SyntaxError(self._span(tok), f"a numeric label must be a positive integer, "
                                                f"not {tok.replace('-', '~')}")
        return str(tok)

    # ---- types
    @v_args(meta=True)
    def ty_arrow(self, meta, c):
        return s.TyArrow(c[0], c[1], c[0].span)

    def ty_tuple(self, c):
        return s.TyTuple(tuple(c), c[0].span)

    def ty_con1(self, c):
        arg, (name, _) = c
        return s.TyCon(name, (arg,), arg.span)

    @v_args(meta=True)
    def ty_conn(self, meta, c):
        *args, (name, _) = c
        return s.TyCon(name, tuple(args), self._span(meta))

    def ty_var(self, c):
        return s.TyVar(str(c[0]), self._span(c[0]))

    def ty_con0(self, c):
        name, span = c[0]
        return s.TyCon(name, (), span)

    @v_args(meta=True)
    def ty_record(self, meta, c):
        self._check_labels(c)
        return s.TyRecord(tuple(c), self._span(meta))

    def tyrow(self, c):
        return (c[0], c[1])

    def tycon(self, c):
        return str(c[0]), self._span(c[0])


_TOKEN_NAMES = {"ID": "an identifier", "LONGID": "an identifier", "SYMID": "an identifier",
                "TYVAR": "a type variable", "INT": "a number", "REAL": "a number",
                "STRING": "a string", "CHAR": "a character", "$END": "end of input"}


def _token_name(terminal: str) -> str:
    if terminal in _TOKEN_NAMES:
        return _TOKEN_NAMES[terminal]
    try:
        pattern = _lark().get_terminal(terminal).pattern
        return f"'{pattern.value}'"
    except KeyError:
        return terminal.lower()


def _expected(expected: set[str]) -> str:
    names = sorted({_token_name(e) for e in expected})
    return "" if len(names) > 6 else " (expected " + ", ".join(names) + ")"


def _syntax_error(err: UnexpectedInput, chunk: SourceChunk, file: str) -> Diagnostic:
    if isinstance(err, UnexpectedToken):
        tok = err.token
        if tok.type == "UNSUPPORTED":
            return Diagnostic(Span(file, tok.line, tok.column), str(tok))
        if tok.type == "$END":
            last = chunk.tokens[-1] if chunk.tokens else None
            span = Span(file, last.end_line, last.end_column) if last else chunk.span
            return Diagnostic(span, f"syntax error: unexpected end of input{_expected(err.expected)}")
        text = str(tok)
        return Diagnostic(Span(file, tok.line, tok.column),
                          f"syntax error: unexpected '{text}'{_expected(err.expected)}")
    return Diagnostic(Span(file, getattr(err, "line", 0), getattr(err, "column", 0)), "syntax error")


def parse_chunk(chunk: SourceChunk, file: str) -> s.Chunk:
    """The declarations of one chunk; raises CompileError (the first syntax error, or the
    lexical error the chunk carries, whichever comes first)."""
    try:
        tree = _lark().parse(list(chunk.tokens), start="chunk")
    except UnexpectedInput as err:
        at_end = isinstance(err, UnexpectedToken) and err.token.type == "$END"
        if chunk.error is not None and at_end:
            raise CompileError([chunk.error]) from None
        raise CompileError([_syntax_error(err, chunk, file)]) from None
    if chunk.error is not None:
        raise CompileError([chunk.error])
    check_nesting(tree, file)
    try:
        return _Build(file).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, _SyntaxError):
            raise CompileError([err.orig_exc.diagnostic]) from None
        raise


def parse_program(text: str, file: str) -> list[s.Chunk]:
    """Every chunk of the program, parsed; raises CompileError at the first error."""
    return [parse_chunk(chunk, file) for chunk in split_chunks(text, file)]


def parse_type(text: str, file: str = "<type>") -> s.Ty:
    """A type expression alone (the basis table writes its types this way)."""
    tokens = list(tokenize(text, file))
    try:
        return _Build(file).transform(_lark().parse(tokens, start="ty_only"))
    except UnexpectedInput as err:
        raise CompileError([_syntax_error(err, SourceChunk(tuple(tokens), Span(file, 1, 1)), file)]) from None


__all__ = ["parse_chunk", "parse_program", "parse_type", "split_chunks"]
