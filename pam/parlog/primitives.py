"""The primitives of spec/parlog.md, implemented once for every PE.

Each primitive is a function of its arguments and the call's source span that returns None
(done), a list of unbound variables (suspend on them), or raises ProgramFailure. Rules call the
pure ones inline at commit; `task_proc` wraps any of them as a task's step.
"""

from __future__ import annotations

import codecs
import math
import os
import re
import select

from pam.parlog.arith import MAX_INT_BITS, ArithError, compare, evaluate
from pam.costs import DEFAULT
from hpgrem.ir.parlog.primitives import INLINE  # run at commit rather than as tasks (the table every layer agrees on)
from pam.errors import Halt, ProgramFailure
from pam.parlog.goal import Goal
from pam.step import declare
from pam.task import Seq
from pam.terms import (NIL, Cons, GroundCheck, Struct, Var, args_of, deref, from_list, functor_of,
                       make_struct, mkatom, to_list)
from pam.unify import match_eq
from pam.parlog.write import write_term


# The largest arity functor/3 builds (a structure of a million variables is about 60 MB).
MAX_ARITY = 1_000_000


def _fail(name: str, args: tuple, site, why: str = "failed") -> ProgramFailure:
    goal = write_term(Struct(name, args)) if args else name
    return ProgramFailure(why, goal, site)


def _arith(value, name, args, site):
    """Evaluate, turning arithmetic errors into a failure that names the goal."""
    try:
        return evaluate(value)
    except ArithError as e:
        raise _fail(name, args, site, f"arithmetic error: {e}") from None


def arith_test(op: str, x, y, site):
    """An arithmetic comparison: True, False, or the variables it waits for."""
    a = _arith(x, op, (x, y), site)
    if type(a) is Var:
        return [a]
    b = _arith(y, op, (x, y), site)
    if type(b) is Var:
        return [b]
    return compare(op, a, b)


def build(pe, lookup) -> dict:
    """The primitives of `pe` by key: {"inline": the inline ones (a clause calls them in its own
    step), "procs": every primitive's step}; `lookup(name, arity)` finds a relation's step for
    `call/1`."""
    prims = {**_tests(pe), **_terms(pe), **_output(pe), **_places(pe)}
    procs = {key: task_proc(fn, key) for key, fn in prims.items()}
    procs.update(_waiting_steps(pe))
    procs.update(_input(pe))
    procs["call/1"] = _call(pe, lookup, procs)
    if pe.number != 0:
        # Output happens on PE 0, the root transputer that talks to the host, in program
        # order: an output goal elsewhere is sent there to run. So is read_stream/1: PE 0
        # alone reads stdin (rank 0 under MPI). A file is read where open_read/2 runs.
        for key in ("write/1", "nl/0", "halt/0", "halt/1", "read_stream/1"):
            procs[key] = to_root(pe, procs[key])
    return {"inline": {k: v for k, v in prims.items() if k in INLINE}, "procs": procs}


def _tests(pe) -> dict:
    """Unification, arithmetic and comparisons, and the type tests, by key."""
    unify = pe.unify

    def eq(x, y, site):
        if not unify(x, y):
            raise _fail("=", (x, y), site)

    def is_(x, e, site):
        v = _arith(e, "is", (x, e), site)
        if type(v) is Var:
            return [v]
        x = deref(x)
        if type(x) is Var:
            pe.bind(x, v)
        elif type(x) is not type(v) or x != v:
            raise _fail("is", (x, e), site)

    def comparison(op):
        def test(x, y, site):
            r = arith_test(op, x, y, site)
            if r is False:
                raise _fail(op, (x, y), site)
            if r is not True:
                return r
        return test

    def identical(x, y, site):
        r = match_eq(x, y)
        if r is False:
            raise _fail("==", (x, y), site)
        if r is not True:
            return r

    def not_identical(x, y, site):
        r = match_eq(x, y)
        if r is True:
            raise _fail("\\==", (x, y), site)
        if r is not False:
            return r

    def type_test(name, ok):
        def test(x, site):
            x = deref(x)
            if type(x) is Var:
                return [x]
            if not ok(x):
                raise _fail(name, (x,), site)
        return test

    def data(x, site):
        x = deref(x)
        if type(x) is Var:
            return [x]

    def var(x, site):
        if type(deref(x)) is not Var:
            raise _fail("var", (x,), site)

    def true(site):
        return None

    prims = {
        "=/2": eq, "is/2": is_, "==/2": identical, "\\==/2": not_identical,
        "data/1": data, "var/1": var, "true/0": true,
        "atom/1": type_test("atom", lambda x: type(x) is str),
        "integer/1": type_test("integer", lambda x: type(x) is int),
        "float/1": type_test("float", lambda x: type(x) is float),
        "number/1": type_test("number", lambda x: type(x) in (int, float)),
        "atomic/1": type_test("atomic", lambda x: type(x) in (str, int, float)),
        "compound/1": type_test("compound", lambda x: type(x) in (Struct, Cons)),
    }
    for op in ("<", ">", "=<", ">=", "=:=", "=\\="):
        prims[f"{op}/2"] = comparison(op)
    return prims


def _terms(pe) -> dict:
    """The primitives that take terms apart and make them (functor/3, arg/3, =../2, atom_codes/2,
    number_codes/2, length/2), by key."""
    unify = pe.unify

    def functor(t, n, a, site):
        t = deref(t)
        if type(t) is not Var:
            name, arity = functor_of(t)
            if not (unify(n, name) and unify(a, arity)):
                raise _fail("functor", (t, n, a), site)
            return None
        n, a = deref(n), deref(a)
        waits = [v for v in (n, a) if type(v) is Var]
        if waits:
            return waits
        if type(a) is not int or a < 0 or (a > 0 and type(n) is not str):
            raise _fail("functor", (t, n, a), site, "functor/3: bad name or arity")
        if a > MAX_ARITY:  # SWI runs out of stack; the structure would take gigabytes here
            raise _fail("functor", (t, n, a), site, f"functor/3: arity over {MAX_ARITY}")
        term = n if a == 0 else make_struct(n, tuple(Var() for _ in range(a)))
        pe.bind(t, term)

    def arg(n, t, a, site):
        n, t = deref(n), deref(t)
        waits = [v for v in (n, t) if type(v) is Var]
        if waits:
            return waits
        args = args_of(t)
        if type(n) is not int or not 1 <= n <= len(args) or not unify(a, args[n - 1]):
            raise _fail("arg", (n, t, a), site)

    def univ(t, lst, site):
        t = deref(t)
        if type(t) is not Var:
            name, _ = functor_of(t)
            if not unify(lst, from_list([name, *args_of(t)])):
                raise _fail("=..", (t, lst), site)
            return None
        items, tail = to_list(lst)
        if type(tail) is Var:
            return [tail]
        if tail is not NIL:  # improper, or cyclic
            raise _fail("=..", (t, lst), site, "=..: not a list")
        if not items:
            raise _fail("=..", (t, lst), site, "=..: empty list")
        head = deref(items[0])
        if type(head) is Var:
            return [head]
        if len(items) > 1 and type(head) is not str:
            raise _fail("=..", (t, lst), site, "=..: the functor must be an atom")
        pe.bind(t, make_struct(head, tuple(items[1:])) if len(items) > 1 else head)

    def codes_of(lst, name, args, site):
        """The text of a ground code list, a list of variables to wait on, or a failure."""
        items, tail = to_list(lst)
        if type(tail) is Var:
            return None, [tail]
        if tail is not NIL:  # improper, or cyclic
            raise _fail(name, args, site, f"{name}/2: not a list")
        codes = []
        for c in items:
            c = deref(c)
            if type(c) is Var:
                return None, [c]
            # A code is a Unicode scalar value: surrogates are not characters (SWI's char_code/2
            # refuses them too), so text stays printable in UTF-8.
            if type(c) is not int or not 0 <= c <= 0x10FFFF or 0xD800 <= c <= 0xDFFF:
                raise _fail(name, args, site, f"{name}/2: not a character code: {write_term(c)}")
            codes.append(chr(c))
        return "".join(codes), None

    def atom_codes(a, lst, site):
        a = deref(a)
        if type(a) is not Var:
            text = a if type(a) is str else write_term(a)
            if not unify(lst, from_list([ord(c) for c in text])):
                raise _fail("atom_codes", (a, lst), site)
            return None
        text, waits = codes_of(lst, "atom_codes", (a, lst), site)
        if waits:
            return waits + [a]
        pe.bind(a, mkatom(text))

    def number_codes(num, lst, site):
        num = deref(num)
        if type(num) is not Var:
            if not unify(lst, from_list([ord(c) for c in write_term(num)])):
                raise _fail("number_codes", (num, lst), site)
            return None
        text, waits = codes_of(lst, "number_codes", (num, lst), site)
        if waits:
            return waits + [num]
        value = parse_number(text)
        if value is None:
            raise _fail("number_codes", (num, lst), site, f"number_codes/2: '{text}' is not a number")
        pe.bind(num, value)

    def length(lst, n, site):
        items, tail = to_list(lst)
        if type(tail) is Var:
            return [tail]
        if type(tail) is Cons:
            raise _fail("length", (lst, n), site, "length/2: not a list (a cyclic term)")
        if tail != NIL or not unify(n, len(items)):
            raise _fail("length", (lst, n), site)

    def is_list(lst, site):
        items, tail = to_list(lst)
        if type(tail) is Var:
            return [tail]
        if tail is not NIL:  # improper, or cyclic
            raise _fail("list", (lst,), site)

    return {"functor/3": functor, "arg/3": arg, "=../2": univ, "atom_codes/2": atom_codes,
            "number_codes/2": number_codes, "length/2": length, "list/1": is_list}


def _output(pe) -> dict:
    """nl/0, halt/0 and halt/1 (write/1 waits for its term: `_waiting_steps`)."""
    emit = pe.output

    def nl(site):
        emit("\n")

    def halt(site):
        raise Halt()

    def halt_status(status, site):
        s = deref(status)
        if type(s) is Var:
            return [s]
        if type(s) is not int or not 0 <= s <= 255:
            raise _fail("halt", (s,), site, "halt/1: the exit status must be an integer from 0 to 255")
        raise Halt(s)

    return {"nl/0": nl, "halt/0": halt, "halt/1": halt_status}


def _places(pe) -> dict:
    """current_pe/1 and pes/1: the PE that runs the goal, and how many PEs there are."""
    unify = pe.unify

    def current_pe(p, site):
        if not unify(p, pe.number):
            raise _fail("current_pe", (p,), site)

    def pes(n, site):
        net = pe.net
        if not unify(n, 1 if net is None else net.topology.pes):
            raise _fail("pes", (n,), site)

    return {"current_pe/1": current_pe, "pes/1": pes}


def _waiting_steps(pe) -> dict:
    """The primitives whose step waits as a task and resumes where it stopped (length/2 over
    a list still being made, write/1 until its term is ground), by key."""
    unify = pe.unify
    emit = pe.output

    def length_step(t):
        """length/2 as a waiting task: it remembers how far it has counted."""
        lst, n, *counted = t.args
        count = counted[0] if counted else 0
        x = deref(lst)
        mark, power, steps = None, 1, 0  # Brent's cycle detection: a cyclic list is no list
        while type(x) is Cons:
            count += 1
            x = deref(x.tail)
            if x is mark:
                raise _fail("length", t.args[:2], t.site, "length/2: not a list (a cyclic term)")
            steps += 1
            if steps == power:
                mark, power, steps = x, power * 2, 0
        if type(x) is Var:
            t.args = (x, n, count)
            return [x]
        if x != NIL or not unify(n, count):
            raise _fail("length", t.args[:2], t.site)

    def list_step(t):
        """list/1 as a waiting task: it remembers how far down the list it has looked."""
        lst, *rest = t.args
        x = deref(rest[0] if rest else lst)
        mark, power, steps = None, 1, 0  # Brent's cycle detection: a cyclic list is no list
        while type(x) is Cons:
            x = deref(x.tail)
            if x is mark:
                raise _fail("list", (lst,), t.site)
            steps += 1
            if steps == power:
                mark, power, steps = x, power * 2, 0
        if type(x) is Var:
            t.args = (lst, x)
            return [x]
        if x != NIL:
            raise _fail("list", (lst,), t.site)

    def write_step(t):
        """write/1 as a waiting task: it resumes its ground check where it stopped."""
        term, *rest = t.args
        check = rest[0] if rest else GroundCheck(term)
        v = check.first_unbound()
        if v is not None:
            t.args = (term, check)
            return [v]
        emit(write_term(term))

    return {key: primitive_step(key)(step) for key, step in
            (("length/2", length_step), ("write/1", write_step), ("list/1", list_step))}


# -- input: read_stream/1 and open_read/2 ---------------------------------------------------

# The most bytes one input (stdin, a file) may have: input is untrusted, and every term read is
# kept as long as the stream's first cell is (stdin is one stream, whoever reads it).
MAX_INPUT_BYTES = 8 << 20
READ_CHUNK = 1 << 16
# Where a piece of stdin may end: a '.' ending a term (the reader's END: '.' then layout) at the
# end of its line, a comment after it allowed. A piece cut there that the reader reads whole is
# read as the whole input would be (a cut inside a quote or a comment leaves it unfinished).
_CUT = re.compile(r"\.[ \t\f\v]*(?:%[^\n]*)?\n")
# Below this many characters a piece that does not read yet is tried again at each new chunk
# (a term typed over several lines); above, when it has doubled (linear time in all).
_RETRY_BELOW = 1 << 16


class InputError(Exception):
    """Input that is not terms: the message names the input (`<stdin>:LINE:COL: ...`)."""


def read_terms(text: str, name: str, first_line: int = 1) -> list:
    """The terms of `text` in PARLOG's (Prolog's) syntax, each ended by '.', as run-time terms
    (each with its own variables), read by the program reader (frontend.parlog.parser); a
    syntax error is an InputError naming `name` and the line (counted from `first_line`)."""
    from hpgrem.diagnostics import CompileError
    try:
        terms = _front_end().read_terms(text, name)
    except CompileError as e:
        d = next((d for d in e.diagnostics if d.severity == "error"), e.diagnostics[0])
        raise InputError(f"{name}:{d.span.line + first_line - 1}:{d.span.col}: {d.message}") from None
    except RecursionError:
        raise InputError(f"{name}: a term is nested too deeply") from None
    return [_runtime_term(t) for t in terms]


def _front_end():
    """PARLOG's front end, found through the dialect table (the machine imports no front end):
    its reader reads the input, so a program reads its terms as the compiler reads its own."""
    import importlib
    from hpgrem.ir.dialects import record
    return importlib.import_module(record("parlog").front_end)


def _runtime_term(term):
    """A term the reader built (hpgrem.ir.parlog) as a run-time term, iteratively (a long list
    is a deep term); variables of one name are one variable, `_` a new one each time."""
    from hpgrem.ir.parlog import Atom, Float, Int, Struct as IStruct, Var as IVar
    names: dict[str, Var] = {}
    out: list = []
    stack: list = [(term, False)]
    while stack:
        t, built = stack.pop()
        if built:
            n = len(t.args)
            args = tuple(out[-n:])
            del out[-n:]
            out.append(make_struct(t.name, args))
            continue
        kind = type(t)
        if kind is IStruct:
            stack.append((t, True))
            stack.extend((a, False) for a in reversed(t.args))
        elif kind is Atom:
            out.append(mkatom(t.name))
        elif kind is Int or kind is Float:
            out.append(t.value)
        elif kind is IVar:
            if t.name == "_":
                out.append(Var())
            else:
                v = names.get(t.name)
                if v is None:
                    v = names[t.name] = Var()
                out.append(v)
        else:
            raise AssertionError(f"unexpected term {t!r}")
    return out[0]


def read_file_terms(path: str) -> list:
    """The terms of the file at `path` (at most MAX_INPUT_BYTES of UTF-8), or InputError."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    except (OSError, ValueError) as e:  # ValueError: a NUL in the name
        raise InputError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(f"{path}: more than {MAX_INPUT_BYTES} bytes of input")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start})") from None
    return read_terms(text.replace("\r\n", "\n").replace("\r", "\n"), path)


class StdinTerms:
    """The terms of stdin, read a piece at a time as they are needed (`next_terms`)."""

    NAME = "<stdin>"

    def __init__(self, fd: int = 0, flush=None):
        self.fd = fd
        self.flush = flush  # program output, written before a read that would wait
        self.text = ""  # read, not yet made terms
        self.line = 1  # the line of text[0]
        self.size = 0
        self.eof = False
        self.tried = -1  # len(text) when it last did not read
        self.cr = False  # a '\r' held back (it may be the first half of "\r\n")
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.error = None  # an InputError found while looking ahead, said at the next read
        # the stream: its first term (a cell or []) once read, and its last tail (a variable,
        # None once it is [])
        self.head = None
        self.tail = None

    def next_terms(self) -> list:
        """The next terms (at least one), or [] at the end of the input; InputError."""
        if self.error is not None:
            raise self.error
        while True:
            if self.eof:
                text, self.text = self.text, ""
                return read_terms(text, self.NAME, self.line) if text.strip() else []
            n = len(self.text)
            if n < _RETRY_BELOW or n >= 2 * self.tried:
                terms = self._piece()
                if terms:
                    return terms
            self._read()

    def at_end(self) -> bool:
        """Whether the input is known to have ended with nothing more to read (a look that
        does not wait: what has come meanwhile is kept for later)."""
        if self.text.strip():
            return False
        if not self.eof:
            try:
                ready = select.select([self.fd], [], [], 0)[0]
            except (OSError, ValueError):
                return False
            if ready:
                try:
                    self._read()
                except InputError as e:  # said when the stream is next read
                    self.error = e
                    return False
        return self.eof and not self.text.strip()

    def _piece(self) -> list:
        """The terms of the text up to its last possible end, when the reader reads it whole."""
        cut = None
        for cut in _CUT.finditer(self.text):
            pass
        if cut is None:
            return []
        end = cut.end()
        try:
            terms = read_terms(self.text[:end], self.NAME, self.line)
        except InputError:  # unfinished (or wrong: said at the end of the input)
            self.tried = len(self.text)
            return []
        self.line += self.text.count("\n", 0, end)
        self.text = self.text[end:]
        self.tried = -1
        return terms

    def _read(self) -> None:
        """One more chunk of stdin (waiting for it, output flushed first), or the end."""
        fd = self.fd
        try:
            # a wait in select (not read) lets a signal's handler run: --timeout, Ctrl-C
            if not select.select([fd], [], [], 0)[0]:
                if self.flush is not None:
                    self.flush()
                while not select.select([fd], [], [], 0.5)[0]:
                    pass
            data = os.read(fd, READ_CHUNK)
        except (OSError, ValueError) as e:
            raise InputError(f"{self.NAME}: cannot read: {getattr(e, 'strerror', None) or e}") from None
        self.size += len(data)
        if self.size > MAX_INPUT_BYTES:
            raise InputError(f"{self.NAME}: more than {MAX_INPUT_BYTES} bytes of input")
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as e:
            raise InputError(f"{self.NAME}: not UTF-8 text (byte {self.size - len(data) + e.start})") from None
        if self.cr:
            text, self.cr = "\r" + text, False
        if data and text.endswith("\r"):
            text, self.cr = text[:-1], True
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        self.text += text
        if not data:
            self.eof = True


def _input(pe) -> dict:
    """read_stream/1 (on PE 0: `build` sends it there) and open_read/2, by key.

    stdin is one stream for the run, made lazily: `read_stream(S)` reads until the first term
    (or the end) and binds S to `[T1, ..., Tk | Tail]`, the terms read so far; further terms
    are read when some task waits on the stream's last tail (or reads it from another PE), or
    the consumer binds it: a hook of the PE (pam.driver) sees the demand and runs the feeder
    task, which binds the tail to the next terms, and to [] at the end of the input. A stream
    nobody waits on keeps no PE busy: the run may end before stdin does."""
    state: dict = {}  # "stdin": the StdinTerms; "feeder": the feeder task while it waits

    def output_flush():
        owner = getattr(pe.output, "__self__", None)
        flush = getattr(owner, "flush", None)
        if flush is not None:
            flush()

    def failure(message: str, goal: str, site) -> ProgramFailure:
        return ProgramFailure(message, goal, site)

    def stdin() -> StdinTerms:
        s = state.get("stdin")
        if s is None:
            s = state["stdin"] = StdinTerms(0, output_flush)
            pe.hooks.append(demand)
        return s

    def demand() -> bool:
        feeder = state.get("feeder")
        if feeder is not None:
            x = deref(state["stdin"].tail)
            if type(x) is not Var or x.susp:
                del state["feeder"]
                pe.push(feeder)
        return False  # never pending: a stream waiting for demand keeps no PE busy

    def extend(s: StdinTerms, terms: list) -> object:
        """The terms as a list ending in a new tail (which becomes the stream's tail), or []."""
        if not terms:
            s.tail = None
            return NIL
        ended = s.at_end()  # so a stream that has all its terms ends in [] at once
        s.tail = None if ended else Var()
        return from_list(terms, NIL if ended else s.tail)

    @declare("read_stream", 1, DEFAULT.primitive_step, key="read_stream/1")
    def read_stream(t):
        s = stdin()
        if s.head is None:
            try:
                terms = s.next_terms()
            except InputError as e:
                raise failure(str(e), "read_stream(_)", t.site) from None
            s.head = extend(s, terms)
            if s.tail is not None:
                state["feeder"] = Goal(feed, (), None, t.site)
        if not pe.unify(t.args[0], s.head):
            raise _fail("read_stream", t.args, t.site)

    @declare("read_stream", 0, DEFAULT.primitive_step, key="read_stream/1:feed")
    def feed(t):
        s = state["stdin"]
        tail = s.tail
        try:
            terms = s.next_terms()
        except InputError as e:
            raise failure(str(e), "read_stream(_)", t.site) from None
        if not pe.unify(tail, extend(s, terms)):
            raise failure("the stream's consumer bound it to a list the input does not match",
                          "read_stream(_)", t.site)
        if s.tail is not None:
            state["feeder"] = t

    @declare("open_read", 2, DEFAULT.primitive_step, key="open_read/2")
    def open_read(t):
        name, out = t.args
        f = deref(name)
        if type(f) is Var:
            return [f]
        if type(f) is Cons:  # a string: a list of codes
            items, tail = to_list(f)
            codes = [deref(c) for c in items]
            waits = [c for c in codes if type(c) is Var]
            if type(tail) is Var:
                waits.append(tail)
            if waits:
                return waits
            if tail is not NIL or not all(type(c) is int and 0 < c <= 0x10FFFF and not 0xD800 <= c <= 0xDFFF
                                          for c in codes):
                raise _fail("open_read", (f, out), t.site, "open_read/2: the file name is not an atom or a string")
            path = "".join(map(chr, codes))
        elif type(f) is str and f != NIL:
            path = f
        else:
            raise _fail("open_read", (f, out), t.site, "open_read/2: the file name is not an atom or a string")
        goal = f"open_read({write_term(f)}, _)"
        try:
            terms = read_file_terms(path)
        except InputError as e:
            raise failure(str(e), goal, t.site) from None
        if not pe.unify(out, from_list(terms)):
            raise _fail("open_read", (f, out), t.site)

    return {"read_stream/1": read_stream, "open_read/2": open_read}


def _call(pe, lookup, procs: dict):
    """The step of `call/1`: the task becomes its goal (`lookup` finds a relation's step,
    `procs` the primitives')."""
    @primitive_step("call/1")
    def call(t):
        """`call(G)`: the task becomes the goal G (a conjunction becomes its plan)."""
        g = deref(t.args[0])
        if type(g) is Var:
            return [g]
        plan = goal_plan(g, t.site)
        if type(plan) is Goal:
            plan.group = t.group
            return plan
        pe.spawn(plan, t)
        return None

    def goal_plan(g, site):
        g = deref(g)
        if type(g) is Struct and len(g.args) == 2 and g.name in (",", "&"):
            left, right = goal_plan(g.args[0], site), goal_plan(g.args[1], site)
            return [left, right] if g.name == "," else Seq([left, right])
        if type(g) is Var:
            return Goal(procs["call/1"], (g,), None, site)
        if type(g) not in (str, Struct):
            raise ProgramFailure("call/1: not a callable goal", write_term(g), site)
        name, arity = (g, 0) if type(g) is str else (g.name, len(g.args))
        proc = lookup(name, arity) or procs.get(f"{name}/{arity}")
        if proc is None:
            raise ProgramFailure(f"call/1: unknown relation {name}/{arity}", write_term(g), site)
        return Goal(proc, args_of(g), None, site)

    return call


def to_root(pe, step):
    """`step` on a PE other than 0: the goal is sent to PE 0 and runs there."""
    @declare(step.goal_name, step.goal_arity, step.cost, key=step.key)
    def send(t):
        pe.net.export_task(t, 0)  # the task is done here
    return send


def primitive_step(key: str):
    """Declares the step of the primitive `key` (`name/arity`)."""
    name, arity = key.rsplit("/", 1)
    return declare(name, int(arity), DEFAULT.primitive_step, key=key)


def task_proc(fn, key: str):
    """A primitive as a task's step."""
    @primitive_step(key)
    def step(t):
        return fn(*t.args, t.site)
    return step


def parse_number(text: str):
    """Number syntax of `number_codes/2` (leading layout allowed, as in SWI), or None. ASCII
    digits only; a float must be finite (`1.0e400` is not a number, as in SWI); an integer may
    have any number of digits up to arith.MAX_INT_BITS bits."""
    s = text.strip()
    if not s.isascii():
        return None  # Python would take other scripts' digits
    try:
        if s.startswith("0'") and len(s) == 3:
            return ord(s[2])
        if any(c in s for c in ".eE") and not s.lower().startswith(("0x", "-0x")):
            value = float(s)
            return value if math.isfinite(value) else None
        sign = -1 if s[:1] == "-" else 1
        body = s[1:] if s[:1] in ("-", "+") else s
        if body[:2] in ("0x", "0o", "0b"):
            return sign * int(body, 0)
        if not _DIGITS.match(body):
            return None
        body = body.replace("_", "")
        if len(body) * 3.33 > MAX_INT_BITS + 4:
            return None
        return sign * int_of_digits(body)
    except ValueError:
        return None


_DIGITS = re.compile(r"[0-9]+(?:_[0-9]+)*\Z")


def int_of_digits(digits: str) -> int:
    """The integer of a string of decimal digits, however long: Python's `int` refuses more than
    4,300 digits (and is quadratic), so a long one is split in halves (multiplication is fast)."""
    if len(digits) <= 3000:
        return int(digits)
    half = len(digits) // 2
    return int_of_digits(digits[:half]) * 10 ** (len(digits) - half) + int_of_digits(digits[half:])


__all__ = ["INLINE", "arith_test", "build", "parse_number", "task_proc"]
