"""Fuzzing: mutated programs never crash hpgrem (docs/testing.md, "Fuzzing").

Hypothesis mutates the example programs of both front ends (characters, tokens, lines, deep
nesting, huge literals, odd Unicode, control characters, spans of other programs) and compiled
`.hpg` files (values replaced by values of other types or by other values of the same type,
subtrees swapped or copied into themselves, keys deleted or added, numbers made huge, negative,
fractional or NaN, strings changed, the text truncated). Each mutant goes through the real
command line, in-process (`hpgrem.driver.cli.main`): `check` for a source mutant, then `run` with
small limits for some of them; `run` (and sometimes `ir`) for a `.hpg` mutant. The assertion:
no exit 70 (internal error), no Python traceback on stdout or stderr, an exit status of the
contract (spec/cli.md), and every run ends within its limits (a watchdog stops one that does not).

CI runs a few hundred derandomized cases (reproducible); `pytest --fuzz-long` (or
HPGREM_FUZZ_LONG=1) runs thousands with fresh random seeds and, rather than stopping at the
first failure, collects every distinct failure, saves each mutant, and reports them all.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import stat
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from conftest import ROOT
from hpgrem.driver.cli import main

sys.setrecursionlimit(max(sys.getrecursionlimit(), 12000))  # as hpgrem.driver.cli.main sets it
LONG = os.environ.get("HPGREM_FUZZ_LONG", "") not in ("", "0")


def _count(name: str, ci: int, long: int) -> int:
    """How many mutants a test tries: `ci` normally, `long` in long mode; HPGREM_FUZZ_<NAME>
    overrides either."""
    value = os.environ.get(f"HPGREM_FUZZ_{name.upper()}")
    return int(value) if value else (long if LONG else ci)


SEED = int(os.environ.get("HPGREM_FUZZ_SEED") or random.randrange(1 << 32))
"""The random seed of long mode (HPGREM_FUZZ_SEED=N replays a run); normal mode is derandomized."""
reseed = seed(SEED) if LONG else (lambda f: f)

FUZZ_SETTINGS = dict(deadline=None, derandomize=not LONG, database=None, print_blob=True,
                     suppress_health_check=list(HealthCheck))

PARLOG_PROGRAMS = sorted(p.relative_to(ROOT).as_posix() for p in
                         [*ROOT.glob("examples/parlog/*.par"), *ROOT.glob("benchmarks/parlog/*.par")])
ML_PROGRAMS = sorted(p.relative_to(ROOT).as_posix() for p in
                     [*ROOT.glob("examples/ml/*.sml"), *ROOT.glob("benchmarks/ml/*.sml")])
HPG_PROGRAMS = ["examples/parlog/nrev.par", "examples/parlog/tree.par", "examples/parlog/univ.par",
                "examples/parlog/server.par", "examples/parlog/placement.par",
                "examples/ml/exceptions.sml", "examples/ml/bst.sml", "examples/ml/options.sml",
                "examples/ml/records.sml", "examples/ml/strings.sml", "examples/ml/par_fib.sml",
                "examples/ml/reals.sml", "examples/ml/refs_loops.sml", "examples/ml/eval.sml"]

RUN_LIMITS = ["--max-steps", "20000", "--timeout", "3"]
WATCHDOG_S = 60.0  # far past every limit: a run still going then has ignored its limits
CONTRACT = {0, 1, 2, 3, 4}


# ---------------------------------------------------------------------------------------------
# Running the command line in-process, as the console script does


class Hung(BaseException):
    """Raised by the watchdog in a run that outlived its limits (a BaseException, so that the
    command line's own handlers cannot turn it into an exit status)."""


def _alarm(signum, frame):
    raise Hung()


def run_cli(args: list[str], watchdog: float = WATCHDOG_S) -> tuple[int | str, str, str, str]:
    """`hpgrem ARGS` in this process: (exit status or "hung", stdout, stderr, crash report)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)
    err = io.StringIO()
    report = ""
    # main(args) in-process never arms the command's hard stops (they end the whole process: right
    # for the command, fatal to the test session); the machine's watchdog still stops a run at
    # --timeout. test_in_process_runs_match_the_command runs the real command, hard stop included.
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, watchdog)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(args)
            except SystemExit as e:  # argparse
                status = e.code if isinstance(e.code, int) else 2
    except Hung:
        status = "hung"
        import traceback
        report = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    stdout = out.buffer.getvalue().decode("utf-8", "backslashreplace")
    stderr = err.getvalue()
    m = re.search(r"the full report is in (\S+)", stderr)
    if m and os.path.exists(m.group(1)):
        report = Path(m.group(1)).read_text(errors="replace")
        os.unlink(m.group(1))
    return status, stdout, stderr, report


def problem(args: list[str], status, stdout: str, stderr: str, report: str) -> str | None:
    """What is wrong with this outcome (None when it keeps the contract). A source program
    refused (exit 2) by `check` must be refused by a diagnostic `FILE:LINE:COL: error: ...`."""
    if status == "hung":
        return f"`hpgrem {' '.join(args)}` still running after {WATCHDOG_S} s, past every limit"
    if status == 70:
        return f"`hpgrem {' '.join(args)}` ended in an internal error (exit 70)"
    if status not in CONTRACT:
        return f"`hpgrem {' '.join(args)}` exited {status!r}, not a status of spec/cli.md"
    if "Traceback (most recent call last)" in stdout + stderr:
        return f"`hpgrem {' '.join(args)}` printed a Python traceback"
    if args[0] == "check" and status == 2 and not re.search(rf"^{re.escape(args[1])}:\d+:\d+: error: ", stderr, re.M):
        return f"`hpgrem {' '.join(args)}` refused the program without a FILE:LINE:COL diagnostic"
    if status == 2 and args[1].endswith(".hpg") and not stderr.startswith("hpgrem: error: "):
        return f"`hpgrem {' '.join(args)}` refused the file without saying why"
    return None


def signature(status, stderr: str, report: str) -> str:
    """What tells one failure from another: the exception and the innermost frame."""
    frames = re.findall(r'File "([^"]+)", line \d+, in (\S+)', report)
    last = report.strip().splitlines()[-1] if report.strip() else stderr.strip()[-200:]
    where = ""
    for file, fn in reversed(frames):
        if "/hpgrem/" in file or "/pam/" in file or "/frontend/" in file or "/backend/" in file or "<" in file:
            where = f"{Path(file).name}:{fn}"
            break
    return f"{status} {last.split(':')[0]} at {where}"


def in_generated_ml_code(status, report: str) -> bool:
    """An internal error raised by the Python code generated for an ML graph, not by hpgrem's
    own modules: the innermost frame of the report is `<hpgrem ml>`."""
    frames = re.findall(r'File "([^"]+)", line \d+', report)
    return status == 70 and bool(frames) and frames[-1] == "<hpgrem ml>"


KNOWN_HPG: dict = {}
"""Failures of a known class, tracked by a strict xfail reproducer: counted and reported, not
failed on. Each names its reproducer."""


class Findings:
    """The failures of one fuzzing test. Normally the first one fails the test at once (and
    Hypothesis shrinks it); in long mode each is saved and the test fails at the end with a
    summary of the distinct ones. Failures of a `known` class are counted only."""

    def __init__(self, name: str, directory: Path, known: dict | None = None):
        self.name, self.directory = name, directory
        self.known = known or {}
        self.known_seen: Counter = Counter()
        self.tried = 0
        self.statuses: Counter = Counter()
        self.distinct: dict[str, tuple[str, Path, int]] = {}
        self.started = time.monotonic()

    def save(self, text: str, suffix: str) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"mutant-{self.tried}{suffix}"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        return path

    def outcome(self, args, status, stdout, stderr, report, text: str, suffix: str, mutations) -> None:
        self.statuses[status] += 1
        what = problem(args, status, stdout, stderr, report)
        if what is None:
            return
        for reason, matches in self.known.items():
            if matches(status, report):
                self.known_seen[reason] += 1
                return
        saved = self.save(text, suffix)
        detail = (f"{what}\nmutations: {mutations!r}\nthe mutant is saved in {saved}\n"
                  f"stderr:\n{stderr[-2000:]}\n{report[-4000:]}")
        if not LONG:
            raise AssertionError(detail)
        sig = signature(status, stderr, report)
        if sig not in self.distinct:
            self.distinct[sig] = (detail, saved, 0)
            print(f"\n--- new failure (HPGREM_FUZZ_SEED={SEED}): {sig}\n{detail}", file=sys.__stderr__, flush=True)
        d, s, n = self.distinct[sig]
        self.distinct[sig] = (d, s, n + 1)

    def finish(self) -> None:
        took = time.monotonic() - self.started
        print(f"\nfuzz {self.name}: {self.tried} mutants in {took:.0f} s"
              + (f" (HPGREM_FUZZ_SEED={SEED})" if LONG else "") + ", exit statuses "
              f"{dict(sorted(self.statuses.items(), key=str))}, {len(self.distinct)} distinct failures")
        for reason, n in self.known_seen.items():
            print(f"known ({n} mutants): {reason}")
        for sig, (detail, saved, n) in self.distinct.items():
            print(f"--- {sig} ({n} mutants)\n{detail}")
        assert not self.distinct, f"{len(self.distinct)} distinct failures: " + "; ".join(self.distinct)


@pytest.fixture
def findings(request, tmp_path_factory):
    out = os.environ.get("HPGREM_FUZZ_OUT")
    directory = Path(out) / request.node.name if out else tmp_path_factory.mktemp("fuzz")
    yield Findings(request.node.name, directory, KNOWN_HPG if "hpg" in request.node.name else None)


# ---------------------------------------------------------------------------------------------
# Mutating source text

ODD = ["\x00", "\x07", "\x1b", "\x7f", "\f", "\v", "\r", "\r\n", "\t", "\u0085", "\u00a0", "\u2028", "\u2029",
       "\ufeff", "\u200b", "\u202e", "\u0301", "é", "²", "٣", "ǅ", "\U0001F600", "\U0010FFFF", "\ufffd", "𝟘"]
HUGE = ["9" * 5000, "9" * 4301, "0x" + "f" * 5000, "1" + "0" * 400, "1.0e400", "1e999", "1.0e~400", "~1.0e400",
        "4611686018427387904", "~4611686018427387905", "18446744073709551616", "0.000000000000000000001",
        "1" * 100 + ".5", "0'" * 3]
COMMON = ["(", ")", "[", "]", "{", "}", ",", ";", ".", "|", ":", '"', "'", "\\", " ", "\n", "0", "1", "-1",
          "_", "X", "a", "(*", "*)", "%", "/*", "*/", "\"\\", "\\x41\\", "\\u20AC", "'\\", "#", "@", "`"]
ML_WORDS = ["val", "fun", "fn", "=>", "=", "let", "in", "end", "case", "of", "if", "then", "else", "datatype",
            "type", "exception", "raise", "handle", "and", "andalso", "orelse", "rec", "op", "::", "^", "ref",
            "!", ":=", "#1", "#2", '#"a"', '"s"', "while", "do", "local", "structure", "struct", "sig", "signature",
            "abstype", "withtype", "infix", "infixr", "nonfix", "int", "real", "string", "char", "list", "->",
            "*", "'a", "''a", "ForkJoin.par", "print", "Int.toString", "SOME", "NONE", "nil", "...", "as", "o",
            "div", "mod", "<>", "<=", "{a=1}", "#a", "()", "~", "1.5", "0w1", "Fail", "Div", "open", "eqtype",
            "val rec", "fun f x = f x", "fn _ =>", "Array.array", "Vector.fromList", "Real.fmt", "+", "-"]
PARLOG_WORDS = ["<-", ":-", ":", ";", "&", ",", ".", "mode", "?", "^", "is", "=", "==", "\\=", "\\==", "=..",
                "@", "true", "fail", "write", "nl", "halt", "call", "functor", "arg", "length", "atom_codes",
                "number_codes", "data", "var", "atom", "integer", "[H|T]", "[]", "'[|]'", "0'a", '"abc"',
                "'quoted atom'", "X", "_", "Y1", "f(X)", "main", "+", "-", "*", "/", "//", "mod", "<<", ">>",
                "**", "=<", ">=", "=:=", "=\\=", "<", ">", "set", "subset", "fwd", "bwd", "p(X) <- true.",
                "mode p(?).", "main <- true.", "X = f(X)", "write(X)", "!", "->", "\\+", "1.5", "-0.0"]
NESTINGS = {
    ".sml": [("(", ")"), ("[", "]"), ("if true then ", " else 0"), ("let val x = 1 in ", " end"),
             ("(fn x => ", ")"), ("case 1 of _ => ", ""), ("~", ""), ("(1, ", ")"), ("{a=", "}"),
             ("SOME (", ")"), ("(", " handle _ => 0)"), ("#1 (", ", 2)"), ("(print \"x\"; ", ")"), ("1 + ", "")],
    ".par": [("(", ")"), ("f(", ")"), ("[", "]"), ("[a|", "]"), ("-", ""), ("- ", ""), ("(a, ", ")"),
             ("{", "}"), ("1 + ", ""), ("(true, ", ")"), ("(true & ", ")"), ("g(a, ", ", b)")],
}
DEPTHS = [2, 20, 101, 500, 1199, 1201, 3000, 10000]
TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|\w+|\s+|[^\w\s]')

pos = st.integers(0, 1 << 16)
length = st.integers(0, 64)


def text_mutation(ext: str):
    words = ML_WORDS if ext == ".sml" else PARLOG_WORDS
    snippet = st.one_of(st.sampled_from(COMMON), st.sampled_from(words), st.sampled_from(ODD),
                        st.sampled_from(HUGE), st.text(max_size=8),
                        st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=("Cs",)))
    programs = ML_PROGRAMS if ext == ".sml" else PARLOG_PROGRAMS
    return st.one_of(
        st.tuples(st.just("delete"), pos, length),
        st.tuples(st.just("insert"), pos, snippet),
        st.tuples(st.just("replace"), pos, length, snippet),
        st.tuples(st.just("duplicate"), pos, length, pos, st.sampled_from([1, 2, 100, 3000])),
        st.tuples(st.just("truncate"), pos),
        st.tuples(st.just("nest"), pos, length, st.sampled_from(range(len(NESTINGS[ext]))), st.sampled_from(DEPTHS)),
        st.tuples(st.just("tok_delete"), pos),
        st.tuples(st.just("tok_duplicate"), pos),
        st.tuples(st.just("tok_swap"), pos, pos),
        st.tuples(st.just("tok_copy"), pos, pos),
        st.tuples(st.just("tok_replace"), pos, snippet),
        st.tuples(st.just("line_delete"), pos),
        st.tuples(st.just("line_duplicate"), pos),
        st.tuples(st.just("line_swap"), pos, pos),
        st.tuples(st.just("splice"), st.sampled_from(programs), pos, length, pos),
    )


def mutate_text(text: str, op: tuple, ext: str) -> str:
    kind, *a = op
    n = len(text)
    if kind == "delete":
        i = a[0] % (n + 1)
        return text[:i] + text[i + a[1]:]
    if kind == "insert":
        i = a[0] % (n + 1)
        return text[:i] + a[1] + text[i:]
    if kind == "replace":
        i = a[0] % (n + 1)
        return text[:i] + a[2] + text[i + a[1]:]
    if kind == "duplicate":
        i, j = a[0] % (n + 1), a[2] % (n + 1)
        return text[:j] + text[i:i + a[1]] * a[3] + text[j:]
    if kind == "truncate":
        return text[:a[0] % (n + 1)]
    if kind == "nest":
        i = a[0] % (n + 1)
        j = min(n, i + a[1])
        opening, closing = NESTINGS[ext][a[2]]
        return text[:i] + opening * a[3] + text[i:j] + closing * a[3] + text[j:]
    if kind == "splice":
        other = (ROOT / a[0]).read_text()
        i = a[1] % (len(other) + 1)
        j = a[3] % (n + 1)
        return text[:j] + other[i:i + a[2] * 4] + text[j:]
    if kind.startswith("tok_"):
        toks = TOKEN.findall(text)
        if not toks:
            return text
        i = a[0] % len(toks)
        if kind == "tok_delete":
            del toks[i]
        elif kind == "tok_duplicate":
            toks.insert(i, toks[i])
        elif kind == "tok_swap":
            j = a[1] % len(toks)
            toks[i], toks[j] = toks[j], toks[i]
        elif kind == "tok_copy":
            toks[a[1] % len(toks)] = toks[i]
        elif kind == "tok_replace":
            toks[i] = a[1]
        return "".join(toks)
    if kind.startswith("line_"):
        lines = text.split("\n")
        i = a[0] % len(lines)
        if kind == "line_delete":
            del lines[i]
        elif kind == "line_duplicate":
            lines.insert(i, lines[i])
        else:
            j = a[1] % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    raise ValueError(op)


def apply_text_mutations(text: str, ext: str, mutations) -> str:
    for op in mutations:
        text = mutate_text(text, op, ext)
    return text


GOALS = ["main", "X = f(Y)", "app(X, Y, [1,2])", "X is 2 ** 10, write(X)", "length(L, 3)",
         "X = [1|X]", "atom_codes(A, [104, 105])", "p(X) @ 2", "true & (write(a), nl)", "X = \"abc\""]


def source_case(programs: list[str], ext: str):
    goal = st.tuples(st.sampled_from(GOALS), st.lists(text_mutation(ext), max_size=2)) if ext == ".par" \
        else st.none()
    return st.tuples(st.sampled_from(programs), st.lists(text_mutation(ext), min_size=1, max_size=4),
                     st.integers(0, 7), goal)


def fuzz_source(findings: Findings, tmp: Path, case) -> None:
    program, mutations, run_choice, goal = case
    ext = Path(program).suffix
    text = apply_text_mutations((ROOT / program).read_text(), ext, mutations)
    findings.tried += 1
    path = tmp / f"mutant{ext}"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    args = ["check", str(path)]
    status, stdout, stderr, report = run_cli(args)
    findings.outcome(args, status, stdout, stderr, report, text, ext, (program, mutations))
    more = []
    if run_choice in (0, 1):
        more = ["run", str(path), *RUN_LIMITS] + (["--pes", "3"] if status == 0 and ext == ".par" else [])
    elif run_choice == 2 and goal is not None:  # a mutated --goal
        more = ["run", str(path), "--goal", apply_text_mutations(goal[0], ext, goal[1]), *RUN_LIMITS]
    elif run_choice == 3:
        more = ["ir", str(path)]
    if more:
        status, stdout, stderr, report = run_cli(more)
        findings.outcome(more, status, stdout, stderr, report, text, ext, (program, mutations, goal, more[2:]))


@pytest.mark.parametrize("ext", [".par", ".sml"])
def test_mutated_programs_never_crash_the_front_end(ext, findings, tmp_path):
    programs = PARLOG_PROGRAMS if ext == ".par" else ML_PROGRAMS

    @reseed
    @settings(max_examples=_count("source", 200, 10_000), **FUZZ_SETTINGS)
    @given(source_case(programs, ext))
    def fuzz(case):
        fuzz_source(findings, tmp_path, case)

    fuzz()
    findings.finish()


# ---------------------------------------------------------------------------------------------
# Mutating .hpg files

HUGE_INT = "\x00huge-int\x00"  # written as a 5,000-digit number (json cannot write one)
VALUES = [0, 1, -1, 2, 7, 1 << 62, (1 << 62) - 1, -(1 << 62) - 1, 1 << 64, -(1 << 70), HUGE_INT,
          0.0, -0.0, 1.5, 1e308, float("nan"), float("inf"), float("-inf"),
          "", "x", "main/0", "main", "[|]", "[]", "?", "^", "&", ",", "write/1", "int.+", "print", "list", "bool",
          "tags", "args", "mixed", "con", "exn", "int", "string", "char", "arg", "cons", "exnarg", "deref",
          "Div", "Match", "é\u2028\x00", "x" * 10_000, "__import__('os')", None, True, False, [], [[]], {},
          {"kind": "ml.Lit", "value": None, "span": ["f", 1, 1]}, {"kind": "parlog.Atom", "name": "a", "span": ["f", 1, 1]},
          {"kind": "Nope"}, {"kind": None}, {"ref": 0}, {"ref": 99}, {"ref": -1}]


def _paths(x, path=()):
    yield path
    if isinstance(x, list):
        for i, item in enumerate(x):
            yield from _paths(item, path + (i,))
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _paths(v, path + (k,))


def _get(doc, path):
    for step in path:
        doc = doc[step]
    return doc


def _set(doc, path, value):
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _copy(x):
    return json.loads(json.dumps(x))


def _kindof(x):
    return x.get("kind") if isinstance(x, dict) else type(x).__name__


hpg_mutation = st.one_of(
    st.tuples(st.just("value"), pos, st.sampled_from(range(len(VALUES)))),
    st.tuples(st.just("same_type"), pos, pos),  # another value of the same JSON type, or node of the same kind
    st.tuples(st.just("copy"), pos, pos),  # any value from elsewhere (an ancestor: the subtree in itself)
    st.tuples(st.just("swap"), pos, pos),
    st.tuples(st.just("delete"), pos),
    st.tuples(st.just("duplicate"), pos),
    st.tuples(st.just("add_key"), pos, st.sampled_from(["kind", "span", "name", "extra", "args", "value"])),
    st.tuples(st.just("number"), pos, st.sampled_from(["+1", "-1", "neg", "huge", "float", "nan", "zero", "inf"])),
    st.tuples(st.just("string"), pos, st.sampled_from(["append", "empty", "reverse", "arity", "upper", "strip"])),
    st.tuples(st.just("truncate"), pos),
    st.tuples(st.just("text_insert"), pos, st.sampled_from(["{", "}", "[", "]", ",", '"', "1", "-", "null", "NaN",
                                                             "\\u0000", "\\ud800", "e999", "\x00"])),
)


def mutate_doc(doc, op):
    """The document with one structural mutation (text-level ones are applied to the text)."""
    kind, *a = op
    paths = list(_paths(doc))[1:]
    if not paths:
        return doc
    p = paths[a[0] % len(paths)]
    here = _get(doc, p)
    if kind == "value":
        return _set(doc, p, _copy(VALUES[a[1]]) if VALUES[a[1]] is not HUGE_INT else HUGE_INT)
    if kind == "same_type":
        same = [q for q in paths if q != p and _kindof(_get(doc, q)) == _kindof(here)
                and type(_get(doc, q)) is type(here)]
        return _set(doc, p, _copy(_get(doc, same[a[1] % len(same)]))) if same else doc
    if kind == "copy":
        return _set(doc, p, _copy(_get(doc, paths[a[1] % len(paths)])))
    if kind == "swap":
        q = paths[a[1] % len(paths)]
        if p[:len(q)] == q or q[:len(p)] == p:
            return doc
        x, y = _copy(here), _copy(_get(doc, q))
        _set(doc, p, y)
        return _set(doc, q, x)
    parent = _get(doc, p[:-1])
    if kind == "delete":
        del parent[p[-1]]
        return doc
    if kind == "duplicate":
        if isinstance(parent, list):
            parent.insert(p[-1], _copy(here))
        return doc
    if kind == "add_key":
        if isinstance(here, dict):
            here[a[1]] = _copy(here.get(a[1], 1))
            if a[1] in ("extra",):
                here[a[1]] = 0
        return doc
    if kind == "number":
        if type(here) in (int, float):
            new = {"+1": here + 1, "-1": here - 1, "neg": -here, "huge": HUGE_INT, "float": float(here),
                   "nan": float("nan"), "zero": 0, "inf": float("inf")}[a[1]]
            return _set(doc, p, new)
        return doc
    if kind == "string":
        if type(here) is str:
            new = {"append": here + "x", "empty": "", "reverse": here[::-1], "arity": here + "/1",
                   "upper": here.upper(), "strip": here.rstrip("0123456789/")}[a[1]]
            return _set(doc, p, new)
        return doc
    return doc


def hpg_text(doc, mutations) -> str:
    text = json.dumps(doc).replace(json.dumps(HUGE_INT), "9" * 5000)
    for op in mutations:
        if op[0] == "truncate":
            text = text[:op[1] % (len(text) + 1)]
        elif op[0] == "text_insert":
            i = op[1] % (len(text) + 1)
            text = text[:i] + op[2] + text[i:]
    return text


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """The .hpg documents of HPG_PROGRAMS, compiled once."""
    d = tmp_path_factory.mktemp("hpg")
    docs = {}
    for program in HPG_PROGRAMS:
        out = d / (Path(program).stem + ".hpg")
        status, _, stderr, _ = run_cli(["compile", str(ROOT / program), "-o", str(out)])
        assert status == 0, stderr
        docs[program] = json.loads(out.read_text())
    return docs


def test_mutated_hpg_files_are_refused_or_run(compiled, findings, tmp_path):
    @reseed
    @settings(max_examples=_count("hpg", 300, 2_000), **FUZZ_SETTINGS)
    @given(st.sampled_from(HPG_PROGRAMS), st.lists(hpg_mutation, min_size=1, max_size=4), st.integers(0, 7))
    def fuzz(program, mutations, choice):
        doc = _copy(compiled[program])
        for op in mutations:
            if op[0] not in ("truncate", "text_insert"):
                doc = mutate_doc(doc, op)
        text = hpg_text(doc, mutations)
        findings.tried += 1
        path = tmp_path / "mutant.hpg"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        level = [] if choice == 3 else ["-O1"]  # -O2's passes on one mutant in eight: they cost time
        args = ["run", str(path), *level, *RUN_LIMITS] + (["--pes", "3"] if choice == 1 else [])
        if choice == 2:
            args = ["ir", str(path)]
        status, stdout, stderr, report = run_cli(args)
        findings.outcome(args, status, stdout, stderr, report, text, ".hpg", (program, mutations))

    fuzz()
    findings.finish()


# ---------------------------------------------------------------------------------------------
# Output paths, closed streams, .hpg spans naming files (issue 16)

OUTPUT_KINDS = ["new", "regular", "read-only", "symlink", "dangling", "hard link", "fifo", "dir",
                "no dir", "input", "symlink to input", "hard link to input", "/dev/null", "/dev/full",
                "/dev/stdout", "/dev/stderr", "/dev/fd/1"]


def _output_path(tmp: Path, kind: str, source: Path) -> Path | str:
    """A path of `kind` for an output, made in `tmp` (a fresh folder) where it is a file."""
    if kind.startswith("/dev/"):
        return kind
    out = tmp / "out"
    if kind in ("regular", "read-only", "symlink", "hard link"):
        target = tmp / "target"
        target.write_text("old")
        if kind == "read-only":
            target.chmod(0o444)
        if kind == "symlink":
            out.symlink_to(target)
        elif kind == "hard link":
            os.link(target, out)
        else:
            out = target
    elif kind == "dangling":
        out.symlink_to(tmp / "made")
    elif kind == "fifo":
        os.mkfifo(out)
    elif kind == "dir":
        out.mkdir()
    elif kind == "no dir":
        out = tmp / "no" / "out"
    elif kind == "input":
        out = source
    elif kind == "symlink to input":
        out.symlink_to(source)
    elif kind == "hard link to input":
        os.link(source, out)
    return out


def _drain(fifo: Path) -> threading.Thread:
    """A reader that empties `fifo` once a writer comes (and then stops)."""
    def read():
        with contextlib.suppress(OSError), open(fifo, "rb") as f:
            f.read()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def test_outputs_through_any_path_keep_the_contract(tmp_path, findings):
    """`-o` and `--stats-json` at paths of every kind: the contract, and nothing destroyed (the
    devices stay devices, the input stays whole, a link stays a link); a success wrote the
    output through the path, a refusal is one line."""
    @reseed
    @settings(max_examples=_count("outputs", 25, 400), **FUZZ_SETTINGS)
    @given(st.sampled_from(OUTPUT_KINDS), st.sampled_from(["compile", "run"]),
           st.sampled_from(["examples/parlog/nrev.par", "examples/ml/records.sml"]))
    def fuzz(kind, command, program):
        findings.tried += 1
        tmp = Path(tempfile.mkdtemp(dir=tmp_path))
        source = tmp / Path(program).name
        source.write_text((ROOT / program).read_text())
        out = _output_path(tmp, kind, source)
        flag = ["-o"] if command == "compile" else ["--stats-json"]
        args = [command, str(source), *flag, str(out)]
        reader = _drain(out) if kind == "fifo" else None
        status, stdout, stderr, report = run_cli(args)
        if reader is not None:  # a reader still waiting for a writer (none came): let it go
            with contextlib.suppress(OSError):
                os.close(os.open(out, os.O_WRONLY | os.O_NONBLOCK))
            reader.join(WATCHDOG_S)
        findings.outcome(args, status, stdout, stderr, report, kind, ".txt", (kind, command, program))
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and stat.S_ISCHR(os.stat("/dev/full").st_mode)
        assert source.read_text() == (ROOT / program).read_text(), args
        if kind in ("symlink", "dangling", "symlink to input"):
            assert Path(out).is_symlink(), args
        if status == 0:
            written = Path(out).read_text() if kind in ("new", "regular", "symlink", "dangling", "hard link") else None
            assert written is None or json.loads(written), args
            assert kind not in ("/dev/full", "dir", "no dir", "input", "symlink to input", "hard link to input"), args
        else:
            assert status == 2 and stderr.startswith("hpgrem: error: ") and stderr.count("\n") == 1, (args, stderr)

    fuzz()
    findings.finish()


CLOSED_COMMANDS = [["run", "examples/parlog/nrev.par"], ["run", "examples/parlog/nrev.par", "--stats"],
                   ["run", "examples/ml/records.sml"], ["run", "examples/ml/exceptions.sml", "--pes", "4"],
                   ["ir", "examples/parlog/tree.par"], ["check", "examples/ml/bst.sml"],
                   ["run", "FAIL.par"], ["run", "BAD.par"], ["compile", "examples/parlog/nrev.par", "-o", "/dev/stdout"]]


def test_closed_streams_keep_the_contract(tmp_path, findings):
    """A command with stdout, stderr or both closed by the shell: the contract, the exit status
    of the same command with both open, and the open stream carrying exactly what it carries
    then (nothing of the closed one). A subprocess each: the streams are the process's."""
    (tmp_path / "FAIL.par").write_text("mode p(?).\np(1).\nmain <- write(a), nl, p(2).\n")
    (tmp_path / "BAD.par").write_text("main <- foo(.\n")

    def path(arg: str) -> str:  # an example, one of the two programs made here, or an option
        if arg.startswith("examples/"):
            return str(ROOT / arg)
        return str(tmp_path / arg) if arg in ("FAIL.par", "BAD.par") else arg

    def command_line(args: list[str], redirect: str) -> subprocess.CompletedProcess:
        line = " ".join(f"'{a}'" for a in (sys.executable, "-m", "hpgrem.driver.cli", *args))
        return subprocess.run(["sh", "-c", f"exec {line} {redirect}"], capture_output=True, text=True,
                               cwd=ROOT, timeout=WATCHDOG_S)

    def same(text: str) -> str:  # --stats' times and rates differ from run to run
        return re.sub(r"[\d.,]+", "N", re.sub(r" +", " ", text))

    @reseed
    @settings(max_examples=_count("streams", 4, 100), **FUZZ_SETTINGS)
    @given(st.sampled_from(CLOSED_COMMANDS), st.sampled_from([">&-", "2>&-", ">&- 2>&-"]))
    def fuzz(command, redirect):
        findings.tried += 1
        args = [path(a) for a in command]
        both = command_line(args, "")
        r = command_line(args, redirect)
        findings.outcome(args, r.returncode, r.stdout, r.stderr, "", redirect, ".txt", (command, redirect))
        assert r.returncode == both.returncode, (args, redirect, r.stderr)
        assert r.stdout == ("" if ">&-" in redirect.split() else both.stdout), (args, redirect)
        assert same(r.stderr) == ("" if "2>&-" in redirect.split() else same(both.stderr)), (args, redirect)

    fuzz()
    findings.finish()


NAMED_FILES = ["/etc/passwd", "/etc/shadow", "/dev/zero", "/dev/urandom", "/proc/self/environ", "/",
               "SECRET", "FIFO", "", "x" * 5000, "../" * 50 + "etc/passwd", "<goal>", "<none>"]
REPORTING = {"fails.par": "mode p(?).\np(1).\nmain <- p(2).\n",
             "waits.par": "mode p(?).\np(a).\nmain <- p(X).\n",
             "raises.sml": "exception E of int;\nval _ = raise E 1;\n"}


def test_hpg_spans_naming_files_are_never_opened(tmp_path, findings, monkeypatch):
    """A `.hpg` whose spans (and source) name any path, with any line: the report quotes nothing
    of that path and hpgrem opens none of them (every open is recorded)."""
    secret, fifo = tmp_path / "secret", tmp_path / "fifo"
    secret.write_text("SECRET\n" * 5)
    os.mkfifo(fifo)
    docs = {}
    for name, text in REPORTING.items():
        source = tmp_path / name
        source.write_text(text)
        assert run_cli(["compile", str(source), "-o", str(tmp_path / "c.hpg")])[0] == 0
        docs[name] = ((tmp_path / "c.hpg").read_text(), str(source))
    opened: list[str] = []
    real_open, real_os_open = open, os.open

    def spy_open(file, *a, **k):
        opened.append(os.fsdecode(file) if isinstance(file, (str, bytes, os.PathLike)) else "")
        return real_open(file, *a, **k)

    def spy_os_open(file, *a, **k):
        opened.append(os.fsdecode(file))
        return real_os_open(file, *a, **k)

    @reseed
    @settings(max_examples=_count("spans", 30, 500), **FUZZ_SETTINGS)
    @given(st.sampled_from(sorted(REPORTING)), st.sampled_from(NAMED_FILES),
           st.sampled_from([None, 0, -1, 1, 3, 10**9, "1"]))
    def fuzz(program, named, line):
        findings.tried += 1
        named = {"SECRET": str(secret), "FIFO": str(fifo)}.get(named, named)
        text, source = docs[program]
        edited = text.replace(json.dumps(source), json.dumps(named))
        if line is not None:
            edited = re.sub(r'(\[' + re.escape(json.dumps(named)) + r', *)-?\d+', rf'\g<1>{json.dumps(line)}', edited)
        hpg = tmp_path / "edited.hpg"
        hpg.write_text(edited)
        opened.clear()
        with monkeypatch.context() as m:
            m.setattr("builtins.open", spy_open)
            m.setattr("io.open", spy_open)
            m.setattr(os, "open", spy_os_open)
            status, stdout, stderr, report = run_cli(["run", str(hpg), *RUN_LIMITS])
        findings.outcome(["run", str(hpg)], status, stdout, stderr, report, edited, ".hpg", (program, named, line))
        assert not named or named not in opened, (named, opened)
        assert "SECRET" not in stderr and "root:" not in stderr, stderr

    fuzz()
    findings.finish()


# ---------------------------------------------------------------------------------------------
# In-process runs behave as the command does


@pytest.mark.parametrize("ext", [".par", ".sml", ".hpg"])
def test_in_process_runs_match_the_command(ext, compiled, tmp_path):
    """The fuzzers run hpgrem in-process: for a sample of mutants, the command in a subprocess
    gives the same exit status, stdout and stderr."""
    if ext == ".hpg":
        program = "examples/ml/records.sml"
        cases = [[("same_type", k * 37, k * 11)] for k in range(3)] + [[("truncate", 500)]]
    else:
        program = "examples/parlog/tree.par" if ext == ".par" else "examples/ml/records.sml"
        cases = [[("tok_swap", k * 13, k * 7)] for k in range(2)] + [[("delete", 40 * k, 5)] for k in range(2)]
    statuses = set()
    for k, mutations in enumerate(cases):
        path = tmp_path / f"m{k}{ext}"
        if ext == ".hpg":
            doc = _copy(compiled[program])
            for op in mutations:
                if op[0] != "truncate":
                    doc = mutate_doc(doc, op)
            path.write_text(hpg_text(doc, mutations))
        else:
            path.write_text(apply_text_mutations((ROOT / program).read_text(), ext, mutations))
        # --max-steps stops a mutant that loops; the time limit only guards against a hang (a
        # subprocess on a loaded machine may take seconds to start, which --timeout counts)
        args = ["run", str(path), "--max-steps", "20000", "--timeout", "20"]
        status, stdout, stderr, _ = run_cli(args)
        r = subprocess.run([sys.executable, "-m", "hpgrem.driver.cli", *args], capture_output=True, cwd=ROOT,
                           timeout=WATCHDOG_S)
        assert (status, stdout, stderr) == (r.returncode, r.stdout.decode("utf-8", "backslashreplace"),
                                            r.stderr.decode()), mutations
        statuses.add(status)
    assert len(statuses) > 1 or ext == ".hpg"  # the sample holds refused and accepted mutants


# ---------------------------------------------------------------------------------------------
# Reproducers of what the fuzzers found


def _compiled(tmp_path, text: str, name: str = "a.sml", level: str = "-O1") -> tuple[Path, str]:
    """The program compiled to a .hpg file (at -O1: the tests edit the shapes the front end built,
    which -O2's passes rewrite)."""
    source = tmp_path / name
    source.write_text(text)
    hpg = tmp_path / (source.stem + ".hpg")
    assert run_cli(["compile", level, str(source), "-o", str(hpg)])[0] == 0
    return hpg, hpg.read_text()


def _refused(hpg: Path, text: str, *words: str) -> None:
    hpg.write_text(text)
    status, _, stderr, report = run_cli(["run", str(hpg)])
    assert status == 2, stderr + report
    assert stderr.startswith(f"hpgrem: error: {hpg}: ") and "Traceback" not in stderr, stderr
    for w in words:
        assert w in stderr, stderr


@pytest.mark.parametrize("old, new, words", [
    ('"value":2', '"value":"two"', ["ill-typed", "at $.rules[0].body.exprs[0].value.args[1]: int.+: type mismatch"]),
    ('"value":2', '"value":2.5', ["ill-typed", "int.+: type mismatch: int and real"]),
    ('"op":"int.+"', '"op":"string.<"', ["ill-typed", "type mismatch"]),
    ('"op":"int.+"', '"op":"int.~"', ["primitive 'int.~' takes 1 arguments, not 2"]),
    ('"op":"int.+"', '"op":"os.system"', ["unknown primitive 'os.system'"]),
    ('"value":2', '"value":' + "9" * 5000, ["an integer of 5000 digits"]),
    ('"value":2', '"value":4611686018427387904', ["out of range for int"]),
])
def test_an_ml_graph_that_contradicts_the_representation_is_refused(tmp_path, old, new, words):
    hpg, text = _compiled(tmp_path, "val x = 1 + 2;\nval _ = print (Int.toString x);\n")
    assert old in text
    _refused(hpg, text.replace(old, new, 1), *words)


def _first(doc, pred):
    """The first JSON object of `doc`, in document order, that `pred` accepts."""
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if pred(x):
                return x
            stack.extend(reversed(list(x.values())))
        elif isinstance(x, list):
            stack.extend(reversed(x))
    raise LookupError("no such object")


def _unswitch(doc):
    """The first switch replaced by its second case's body: its `.arg` parts no longer tested."""
    fn = _first(doc, lambda x: x.get("kind") == "ml.Function" and x["body"].get("kind") == "ml.Switch")
    fn["body"] = fn["body"]["cases"][1][1]


@pytest.mark.parametrize("edit, words", [
    (lambda d: _first(d, lambda x: x.get("kind") == "ml.Part" and x["step"] == 1).update(step=7),
     ["type mismatch: a tuple with a field 7 and (int * int)"]),
    (_unswitch, ["type mismatch: a datatype of one constructor and t"]),
    (lambda d: _first(d, lambda x: x.get("rep") == "mixed").update(rep="args"),
     ["type mismatch: an argument of type 'a and no argument"]),
    (lambda d: _first(d, lambda x: x.get("kind") == "ml.Construct" and x["tag"] == 1).update(arg=None),
     ["type mismatch: an argument of type 'a and no argument"]),
    # a field of a one-character string (a string literal or a char: the fuzzer made it of `#1 x`)
    (lambda d: _first(d, lambda x: x.get("kind") == "ml.Part" and x["step"] == 1).update(
        value={"kind": "ml.Lit", "value": " ", "span": ["a.sml", 1, 1]}), ["no field 1 in a value of type string"]),
])
def test_an_ml_graph_that_misreads_its_values_is_refused(tmp_path, edit, words):
    hpg, text = _compiled(tmp_path, "datatype t = A | B of int * int;\n"
                                    "fun f A = 0 | f (B (x, y)) = x + y;\n"
                                    "val _ = print (Int.toString (f (B (1, 2)) + f A));\n")
    doc = json.loads(text)
    edit(doc)
    _refused(hpg, json.dumps(doc), *words)


GUARDED = "mode p(?, ^).\np(X, Y) <- X > 0 : Y = pos.\np(X, Y) <- X =< 0 : Y = neg.\nmain <- p(1, Y), write(Y), nl.\n"


def _guard(doc):
    return _first(doc, lambda x: x.get("kind") == "parlog.Call" and x["target"] == ">/2")


@pytest.mark.parametrize("edit, words", [
    (lambda d: _guard(d)["args"].pop(), ["1 arguments in a call of >/2"]),
    (lambda d: _guard(d).update(target="write/1", args=_guard(d)["args"][:1]), ["write/1 cannot stand in a guard"]),
    (lambda d: _first(d, lambda x: x.get("kind") == "parlog.Clause").update(nvars=10 ** 30), ["variables (0 to"]),
    (lambda d: _first(d, lambda x: x.get("kind") == "parlog.Atom").update(name="\ud800"), ["lone surrogate"]),
    (lambda d: _first(d, lambda x: x.get("kind") == "parlog.Atom").update(kind="parlog.Struct", args=[]),
     ["a compound term has arguments"]),
    (lambda d: _first(d, lambda x: x.get("kind") == "parlog.Relation").update(key="q/2"), ["is not the key of p/2"]),
])
def test_a_parlog_graph_that_contradicts_the_machine_is_refused(tmp_path, edit, words):
    hpg, text = _compiled(tmp_path, GUARDED, "p.par")
    doc = json.loads(text)
    edit(doc)
    _refused(hpg, json.dumps(doc), *words)


def test_every_example_passes_the_loaders_type_check():
    """No false refusal: every ML example and benchmark, compiled (at -O1 and, for a few, at
    -O0 and -O2) and read back from its .hpg text, has types."""
    from hpgrem.driver.pipeline import Options, compile_file
    from hpgrem.serialize import dumps, loads
    from hpgrem.ir.ml.types import type_problem
    for program in ML_PROGRAMS:
        for opt in (0, 1, 2) if program in HPG_PROGRAMS[5:9] else (1,):
            module = loads(dumps(compile_file(str(ROOT / program), Options(opt=opt)).module))
            assert type_problem(module) is None, (program, opt)


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 1 << 30))
def test_generated_ml_programs_pass_the_loaders_type_check(seed):
    from ml_gen import generate

    from hpgrem.driver.pipeline import Options, compile_text
    from hpgrem.serialize import dumps, loads
    from hpgrem.ir.ml.types import type_problem
    text = generate(seed)
    for opt in (0, 2):
        module = loads(dumps(compile_text(text, "g.sml", Options(opt=opt)).complete()))
        assert type_problem(module) is None, (seed, opt)


def test_the_primitive_table_holds_the_basis_types():
    """hpgrem/ir/ml/dialect.py's one table of ML primitives gives the basis's types
    (frontend/ml/basis.py), and the arities the verifier checks are derived from it."""
    from frontend.ml.basis import VALUES
    from frontend.ml.lower import CURRIED
    from hpgrem.ir.ml.dialect import ARITIES, PRIMITIVES
    assert ARITIES.keys() == PRIMITIVES.keys()
    basis = {v.name: v.type.replace("''a", "'a").replace("StringCvt.realfmt", "realfmt") for v in VALUES}
    basis |= {"ref": "'a -> 'a ref", "=.simple": basis["="], "<>.simple": basis["<>"]}
    for op, ours in PRIMITIVES.items():
        arity = ARITIES[op]
        assert ours.count(",") == arity - 1, op
        ty, _, name = op.partition(".")
        theirs = basis[op] if op in basis else basis[name].replace("'a", ty)
        if arity == 2:
            theirs = theirs.replace(" -> ", ", ", 1) if op in CURRIED else theirs.replace(" * ", ", ", 1)
        assert ours == theirs, op


def test_the_machine_implements_exactly_the_primitive_table():
    """The machine (pam/ml/basis.py, pam/ml/codegen.py) implements exactly the primitives of
    the table, each with the table's number of arguments."""
    from frontend.ml.lower import CURRIED
    from hpgrem.ir.ml.dialect import ARITIES
    from pam.ml.basis import OVERLOADED, PRIMITIVES
    from pam.ml.codegen import BINARY, UNARY
    machine = {op: 2 for op in BINARY} | {op: 1 for op in UNARY}
    for op in PRIMITIVES:
        machine.setdefault(op, 2 if op in CURRIED else 1)
    for name, ty in OVERLOADED:
        machine.setdefault(f"{ty}.{name}", 1)
    assert ARITIES == machine


def test_a_case_of_thousands_of_constants_compiles_in_linear_work(monkeypatch):
    """A `case` of 20,000 constant arms took minutes in `check`: the match compiler looked for
    each row's test once per key (quadratic). It now looks once per row."""
    import frontend.ml.match as match
    from frontend.ml import compile_program
    calls = 0
    find = match._find

    def counting(row, path):
        nonlocal calls
        calls += 1
        return find(row, path)

    monkeypatch.setattr(match, "_find", counting)
    n = 2000
    text = "fun f x = case x of " + " | ".join(f"{i} => {i}" for i in range(n)) + " | _ => 0;\n"
    assert compile_program(text, "a.sml").error is None
    assert calls < 5 * n


def test_a_diagnostic_quotes_a_long_name_and_a_long_line_in_part(tmp_path):
    """`val y = ~~~~...1` (20,000 tildes: one symbolic name) quoted the whole name, and an
    error at the end of a line of thousands of characters printed the whole line."""
    path = tmp_path / "a.sml"
    path.write_text("val y = " + "~" * 20000 + "1;\n")
    status, _, stderr, _ = run_cli(["check", str(path)])
    head, line, caret = stderr.splitlines()[:3]
    assert status == 2 and "unbound" in head and "(20000 characters)" in head and len(head) < 300
    assert line.startswith("val y = ~~~") and line.endswith("...") and caret == " " * 8 + "^"
    path.write_text("val x = " + "1 + " * 1000 + '"a";\n')
    status, _, stderr, _ = run_cli(["check", str(path)])
    head, line, caret = stderr.splitlines()[:3]
    assert status == 2 and f"{path}:1:4009: error: type mismatch" in head
    assert line.startswith("...1 + 1") and line.endswith('"a";') and len(line) < 200
    assert line[caret.index("^"):].startswith('"a"')


@pytest.mark.parametrize("literal, printed", [("0xe", "14"), ("~0x1E", "~30"), ("0xfe", "254")])
def test_a_hex_ml_literal_with_the_digit_e_is_an_int(tmp_path, literal, printed):
    """The ML lexer took a hex literal holding an `e` for a real (`e` of an exponent), which
    then failed to convert (exit 70)."""
    path = tmp_path / "a.sml"
    path.write_text(f"val x = {literal};\nval _ = print (Int.toString x);\n")
    status, stdout, stderr, _ = run_cli(["run", str(path)])
    assert (status, stdout) == (0, printed), stderr


def test_an_ml_entry_with_free_variables_is_refused(tmp_path):
    """The machine calls the entry function with no argument: one with parameters (free
    variables) ended in a TypeError (exit 70)."""
    hpg, text = _compiled(tmp_path, 'val _ = print "x";\n')
    doc = json.loads(text)
    _first(doc, lambda x: x.get("kind") == "ml.Function" and x["key"] == "ml:main")["params"] = ["v"]
    _refused(hpg, json.dumps(doc), "entry ml:main has free variables")


def test_a_curried_function_of_thousands_of_arguments_checks_in_linear_work(monkeypatch):
    """`fun f x0 x1 ... x2999 = 1` took minutes in `check`: each of its nested function types
    was resolved on its own (quadratic). Types shared between parts are now resolved once."""
    import frontend.ml.declarations as declarations
    import frontend.ml.types as types
    from frontend.ml import compile_program
    calls = 0
    resolve = types.resolve

    def counting(t, memo=None):
        nonlocal calls
        calls += 1
        return resolve(t, memo)

    monkeypatch.setattr(types, "resolve", counting)
    monkeypatch.setattr(declarations, "resolve", counting)
    n = 400
    text = "fun f " + " ".join(f"x{i}" for i in range(n)) + " = 1;\n"
    assert compile_program(text, "a.sml").error is None
    assert calls < 30 * n


def test_a_long_list_compiles_to_an_hpg_file_and_runs(tmp_path):
    """A PARLOG list of thousands of elements is thousands of levels of JSON: writing its .hpg
    file ended in a RecursionError (exit 70), and reading one back was refused as nested too
    deeply."""
    hpg, _ = _compiled(tmp_path, "main <- X = [" + ",".join(["a"] * 10000) + "], length(X, N), write(N), nl.\n",
                       "l.par")
    status, stdout, stderr, _ = run_cli(["run", str(hpg)])
    assert (status, stdout) == (0, "10000\n"), stderr
    hpg, _ = _compiled(tmp_path, "val l = [" + ",".join(["1"] * 3000) + "];\nval _ = print (Int.toString (length l));\n")
    status, stdout, stderr, _ = run_cli(["run", str(hpg)])
    assert (status, stdout) == (0, "3000"), stderr


def test_thousands_of_errors_are_shown_as_twenty_and_a_count(tmp_path):
    """A mutant naming one variable 3,000 times in a pattern printed 3,000 diagnostics."""
    from hpgrem.diagnostics import MAX_ERRORS
    path = tmp_path / "a.sml"
    path.write_text("fun f " + "x " * 3000 + "= 1;\n")
    status, _, stderr, _ = run_cli(["check", str(path)])
    heads = [line for line in stderr.splitlines() if line.startswith(f"{path}:")]
    assert status == 2 and len(heads) == MAX_ERRORS + 1
    assert all(": error: variable x occurs twice" in h for h in heads[:-1])
    assert heads[-1].endswith(f": note: {2999 - MAX_ERRORS} more errors not shown")


# ---------------------------------------------------------------------------------------------
# Big programs (issue 16, item 6): thousands of small PARLOG relations or ML functions
# (hpgrem/driver/bench/frontend_scale.py), whole or with one line broken at a random place: the program
# checks and runs right, or is refused at the broken line. (Their time is `hpgrem bench scale`.)

BROKEN = {".par": "p(X <- true.", ".sml": "val _ = 1 + \"one\""}


def big_case():
    return st.tuples(st.sampled_from([".par", ".sml"]), st.integers(1, 5000 if LONG else 800),
                     st.integers(1, 40), st.one_of(st.none(), st.floats(0, 1)))


def fuzz_big(findings: Findings, tmp: Path, case) -> None:
    from hpgrem.driver.bench.frontend_scale import ml_program, relations_program

    ext, n, chain, broken_at = case
    text, expected = (relations_program if ext == ".par" else ml_program)(n, chain)
    lines = text.splitlines(keepends=True)
    at = None if broken_at is None else int(broken_at * (len(lines) - 1))  # never after the last line
    if at is not None:
        lines.insert(at, BROKEN[ext] + "\n")
    text = "".join(lines)
    path = tmp / f"big{ext}"
    path.write_text(text)
    findings.tried += 1
    for command in ("check", "run"):
        args = [command, str(path)]
        status, stdout, stderr, report = run_cli(args)
        findings.outcome(args, status, stdout, stderr, report, text, ext, case)
        if at is None:
            assert (status, stdout) == (0, expected if command == "run" else ""), (case, stderr[-2000:])
        else:
            assert status == 2 and stderr.startswith(f"{path}:{at + 1}:"), (case, stderr[-2000:])


def test_big_programs_check_and_run(findings, tmp_path):
    @reseed
    @settings(max_examples=_count("big", 4, 60), **FUZZ_SETTINGS)
    @given(big_case())
    def fuzz(case):
        fuzz_big(findings, tmp_path, case)

    fuzz()
    findings.finish()
