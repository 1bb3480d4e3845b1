"""Input as streams and the machine's place (spec/parlog.md, "Primitives"): `read_stream/1` (the
terms of stdin, read lazily by PE 0), `open_read/2` (the terms of a file), `current_pe/1`,
`pes/1`, `list/1`, and `halt/1` (the exit status). Run as a user would (stdin, exit status), on
one PE, on 16 simulated PEs and under `mpiexec -n 2`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from conftest import ROOT

MPIEXEC = shutil.which("mpiexec")
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")

SUM = "main <- read_stream(S), sum(S, N), write(N) & nl.\n"

SHOW = """
mode show(?).
show([]).
show([X|Xs]) <- write(got(X)) & nl & show(Xs).
main <- read_stream(S), show(S).
"""


def run(tmp_path, source: str, stdin: str | bytes = "", *options: str, mpi: int | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """`hpgrem run prog.par OPTIONS` (under `mpiexec -n MPI`), with `stdin`, in `tmp_path`."""
    prog = tmp_path / "prog.par"
    prog.write_text(source)
    command = [sys.executable, "-m", "hpgrem.driver.cli", "run", str(prog), *options]
    if mpi is not None:
        command = [MPIEXEC, "-n", str(mpi), *command]
    data = stdin.encode() if isinstance(stdin, str) else stdin
    r = subprocess.run(command, input=data, capture_output=True, cwd=tmp_path, timeout=timeout)
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())


def no_traceback(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


# -- read_stream/1 ----------------------------------------------------------------------------

@pytest.mark.parametrize("options", [(), ("--pes", "16")], ids=["1pe", "16pes"])
def test_sum_of_stdin(tmp_path, options):
    r = run(tmp_path, SUM, "1. 2. 3.\n", *options)
    assert (r.returncode, r.stdout) == (0, "6\n"), r.stderr


@needs_mpi
def test_sum_of_stdin_under_mpi(tmp_path):
    r = run(tmp_path, SUM, "1. 2. 3.\n", mpi=2)
    assert (r.returncode, r.stdout) == (0, "6\n"), r.stderr


def test_empty_stdin_is_the_empty_stream(tmp_path):
    r = run(tmp_path, SUM, "")
    assert (r.returncode, r.stdout) == (0, "0\n"), r.stderr
    r = run(tmp_path, SUM, "  % only a comment\n")
    assert (r.returncode, r.stdout) == (0, "0\n"), r.stderr


def test_terms_in_prolog_syntax(tmp_path):
    text = "foo(x, \"ab\").\n[a|b]. 1.5. -3.\n'A b'. a ; b.\nmode m(?, ^). x <- y : z.\n"
    r = run(tmp_path, SHOW, text)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["got(foo(x,[97,98]))", "got([a|b])", "got(1.5)", "got(-3)", "got(A b)",
                                     "got((a;b))", "got(mode(m(?,^)))", "got(<-(x,y:z))"]


def test_variables_of_a_term_are_shared_and_fresh_per_term(tmp_path):
    prog = """
main <- read_stream([f(A, B, A), g(C)]), A = 1, B = 2, C = 3, write(A-B-C), nl.
"""
    r = run(tmp_path, prog, "f(X, Y, X). g(X).\n")
    assert (r.returncode, r.stdout) == (0, "1-2-3\n"), r.stderr


def test_consumption_starts_before_the_end_of_input(tmp_path):
    """A slow writer: the first term is shown before the last is written."""
    prog = tmp_path / "prog.par"
    prog.write_text(SHOW)
    p = subprocess.Popen([sys.executable, "-m", "hpgrem.driver.cli", "run", str(prog)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        p.stdin.write(b"first.\n")
        p.stdin.flush()
        line = p.stdout.readline()  # output is flushed before a read that waits
        assert line == b"got(first)\n"
        rest, err = p.communicate(b"second(\n1).\n", timeout=60)  # a term over two lines
    finally:
        p.kill()
    assert (p.returncode, rest) == (0, b"got(second(1))\n"), err


def test_a_stream_nobody_reads_keeps_no_pe_busy(tmp_path):
    """The run ends once the goals are done, though stdin has not ended."""
    prog = tmp_path / "prog.par"
    prog.write_text("main <- read_stream(S), write(started), nl.\n")
    p = subprocess.Popen([sys.executable, "-m", "hpgrem.driver.cli", "run", str(prog)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        p.stdin.write(b"1.\n")
        p.stdin.flush()
        p.wait(timeout=60)  # stdin stays open
        out = p.stdout.read()
    finally:
        p.kill()
    assert (p.returncode, out) == (0, b"started\n")


def test_a_stream_read_whole_ends_at_once(tmp_path):
    """Input that has all come ends the stream in [] with its terms: the whole stream is seen
    by a goal that waits for nothing more (`--goal`) or for the ground term (`write/1`)."""
    r = run(tmp_path, SUM, "1. 2. 3.\n", "--goal", "read_stream(S)")
    assert (r.returncode, r.stdout) == (0, "S = [1,2,3]\n"), r.stderr
    r = run(tmp_path, "main <- read_stream(S), write(S), nl.\n", "a. b.\n")
    assert (r.returncode, r.stdout) == (0, "[a,b]\n"), r.stderr


def test_read_stream_twice_is_the_same_stream(tmp_path):
    prog = "main <- read_stream(S), read_stream(S2), length(S, N), length(S2, M), write(N-M), nl.\n"
    for options in [(), ("--pes", "4")]:
        r = run(tmp_path, prog, "a. b.\nc.\n", *options)
        assert (r.returncode, r.stdout) == (0, "3-3\n"), r.stderr


def test_a_long_stream_on_many_pes(tmp_path):
    text = "".join(f"{i}.\n" for i in range(1, 20001))
    for options in [(), ("--pes", "16")]:
        r = run(tmp_path, SUM, text, *options)
        assert (r.returncode, r.stdout) == (0, f"{20000 * 20001 // 2}\n"), r.stderr


def test_consumers_on_other_pes(tmp_path):
    prog = """
mode show(?).
show([]).
show([X|Xs]) <- current_pe(P), write(X-P) & nl & show(Xs).
main <- read_stream(S) @ 2, sum(S, N) @ 3, show(S) @ 1 & write(N), nl.
"""
    r = run(tmp_path, prog, "1.\n2.\n3.\n", "--pes", "4")
    assert (r.returncode, r.stdout) == (0, "1-1\n2-1\n3-1\n6\n"), r.stderr


@needs_mpi
def test_consumers_on_other_ranks(tmp_path):
    prog = "main <- read_stream(S) @ 1, sum(S, N) @ 1, write(N), nl.\n"
    r = run(tmp_path, prog, "".join(f"{i}.\n" for i in range(1, 1001)), mpi=2)
    assert (r.returncode, r.stdout) == (0, "500500\n"), r.stderr


@pytest.mark.parametrize("text,where,what", [
    ("1.\n2.\nfoo(.\n", "<stdin>:3:5:", "syntax error"),
    ("1. 2", "<stdin>:1:5:", "unexpected end of file"),
    (":- foo. 1.\n", "<stdin>:1:1:", "cannot begin with ':-'"),
    ("[" * 5000 + "]" * 5000 + ".\n", "<stdin>:1:", "nested too deeply"),
])
def test_syntax_errors_name_the_input(tmp_path, text, where, what):
    r = run(tmp_path, SUM, text)
    no_traceback(r)
    assert r.returncode == 1, r.stderr
    assert "read_stream(_) failed: " + where in r.stderr and what in r.stderr, r.stderr


def test_input_that_is_not_utf8_or_too_large(tmp_path):
    r = run(tmp_path, SUM, b"1.\n\xff.\n")
    no_traceback(r)
    assert r.returncode == 1 and "<stdin>: not UTF-8 text (byte 3)" in r.stderr, r.stderr
    from pam.parlog.primitives import MAX_INPUT_BYTES
    r = run(tmp_path, SUM, b" " * (MAX_INPUT_BYTES + 10))
    no_traceback(r)
    assert r.returncode == 1 and f"<stdin>: more than {MAX_INPUT_BYTES} bytes of input" in r.stderr, r.stderr


def test_a_consumer_that_binds_the_stream(tmp_path):
    prog = "main <- read_stream([A, B|_]), write(A+B), nl.\n"
    r = run(tmp_path, prog, "1. 2. 3.\n")
    assert (r.returncode, r.stdout) == (0, "1+2\n"), r.stderr
    prog = "main <- read_stream(S), S = [_, _, _, _].\n"
    r = run(tmp_path, prog, "1. 2. 3.\n")
    no_traceback(r)
    assert r.returncode == 1 and "read_stream(" in r.stderr, r.stderr
    prog = "main <- read_stream(S), S = [_, _|T], T = [_, _].\n"  # bound after the first terms
    (tmp_path / "prog.par").write_text(prog)
    p = subprocess.Popen([sys.executable, "-m", "hpgrem.driver.cli", "run", str(tmp_path / "prog.par")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        p.stdin.write(b"1.\n")
        p.stdin.flush()
        time.sleep(1.5)
        out, err = p.communicate(b"2.\n", timeout=60)
    finally:
        p.kill()
    no_traceback(subprocess.CompletedProcess(p.args, p.returncode, out.decode(), err.decode()))
    assert p.returncode == 1 and b"does not match" in err, err


def test_a_read_that_waits_obeys_the_timeout(tmp_path):
    prog = tmp_path / "prog.par"
    prog.write_text(SUM)
    p = subprocess.Popen([sys.executable, "-m", "hpgrem.driver.cli", "run", "--timeout", "1", str(prog)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        p.wait(timeout=60)  # stdin stays open: the read waits
        err = p.stderr.read()
    finally:
        p.kill()
    assert p.returncode == 4 and b"--timeout" in err, err


# -- open_read/2 --------------------------------------------------------------------------------

def test_open_read(tmp_path):
    (tmp_path / "data.txt").write_text("10. 20.\n% a comment.\n30.\n")
    prog = "main <- open_read('data.txt', S), sum(S, N), write(N), nl, open_read(\"data.txt\", S2), write(S2), nl.\n"
    for options in [(), ("--pes", "4")]:
        r = run(tmp_path, prog, "", *options)
        assert (r.returncode, r.stdout) == (0, "60\n[10,20,30]\n"), r.stderr


@needs_mpi
def test_open_read_under_mpi(tmp_path):
    (tmp_path / "data.txt").write_text("10. 20.\n30.\n")
    r = run(tmp_path, "main <- open_read(\"data.txt\", S) @ 1, sum(S, N), write(N), nl.\n", mpi=2)
    assert (r.returncode, r.stdout) == (0, "60\n"), r.stderr


def test_open_read_in_a_guard_on_another_pe(tmp_path):
    (tmp_path / "data.txt").write_text("10. 20.\n")
    prog = "mode p(^).\np(X) <- open_read('data.txt', [Y|_]) : X = Y.\nmain <- p(X) @ 2, write(X), nl.\n"
    r = run(tmp_path, prog, "", "--pes", "4")
    assert (r.returncode, r.stdout) == (0, "10\n"), r.stderr


@pytest.mark.parametrize("name,message", [
    ("missing", "missing: no such file"),
    ("'.'", ".: is a directory"),
    ("foo(x)", "the file name is not an atom or a string"),
    ("'bad.txt'", "bad.txt:1:6: syntax error"),
])
def test_open_read_failures(tmp_path, name, message):
    (tmp_path / "bad.txt").write_text("a. b(.\n")
    r = run(tmp_path, f"main <- open_read({name}, S), write(S), nl.\n")
    no_traceback(r)
    assert r.returncode == 1 and message in r.stderr, r.stderr


# -- current_pe/1, pes/1 ------------------------------------------------------------------------

SPREAD = """
mode spread(?, ^).
spread(I, []) <- I < 0 : true.
spread(I, [P|Ps]) <- I >= 0 : current_pe(P) @ I, I1 is I - 1, spread(I1, Ps).
main <- pes(N), write(N), nl, current_pe(Me), write(me(Me)), nl, M is N - 1, spread(M, Ps), write(Ps), nl.
"""


def test_pes_and_current_pe(tmp_path):
    r = run(tmp_path, "main <- pes(N), write(N), nl.\n", "", "--pes", "16")
    assert (r.returncode, r.stdout) == (0, "16\n"), r.stderr
    r = run(tmp_path, SPREAD, "", "--pes", "16")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "16\nme(0)\n[" + ",".join(str(i) for i in range(15, -1, -1)) + "]\n"
    r = run(tmp_path, SPREAD)
    assert (r.returncode, r.stdout) == (0, "1\nme(0)\n[0]\n"), r.stderr


@needs_mpi
def test_pes_and_current_pe_under_mpi(tmp_path):
    r = run(tmp_path, SPREAD, mpi=2)
    assert (r.returncode, r.stdout) == (0, "2\nme(0)\n[1,0]\n"), r.stderr


# -- list/1 ---------------------------------------------------------------------------------------

LIST = """
mode kind(?, ^).
kind(X, R) <- list(X) : R = list.
kind(X, R) <- atomic(X), X \\== [] : R = atomic.
main <- kind([1,2], A), write(A), nl & kind(foo, B), write(B), nl & kind([], C), write(C), nl &
        list([a, b]), write(body_ok), nl & kind(L, D), write(D), nl, L = [x|T], T = [].
"""


@pytest.mark.parametrize("options", [(), ("--pes", "4")], ids=["1pe", "4pes"])
def test_list_in_guards_and_bodies(tmp_path, options):
    r = run(tmp_path, LIST, "", *options)
    assert (r.returncode, r.stdout) == (0, "list\natomic\nlist\nbody_ok\nlist\n"), r.stderr


@pytest.mark.parametrize("goal,status", [("list([a|b])", 1), ("X = [a|X], list(X)", 1), ("list(foo)", 1),
                                         ("list([a|_])", 3)])
def test_list_fails_or_suspends(tmp_path, goal, status):
    r = run(tmp_path, f"main <- {goal}.\n")
    no_traceback(r)
    assert r.returncode == status, r.stderr


def test_list_waits_for_a_list_still_being_made(tmp_path):
    prog = """
mode mk(?, ^).
mk(0, L) <- L = [].
mk(N, L) <- N > 0 : N1 is N - 1, L = [N|L1], mk(N1, L1).
main <- list(L), write(done), nl, mk(2000, L).
"""
    r = run(tmp_path, prog)
    assert (r.returncode, r.stdout) == (0, "done\n"), r.stderr


# -- halt/1 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("options", [(), ("--pes", "8")], ids=["1pe", "8pes"])
def test_halt_with_a_status(tmp_path, options):
    r = run(tmp_path, "main <- write(bye), nl & halt(3).\n", "", *options)
    assert (r.returncode, r.stdout) == (3, "bye\n"), r.stderr
    r = run(tmp_path, "mode p(^).\np(7).\nmain <- p(X), halt(X) @ 1.\n", "", *options)
    assert r.returncode == 7, r.stderr
    r = run(tmp_path, "main <- halt(0).\n", "", *options)
    assert r.returncode == 0, r.stderr
    r = run(tmp_path, "main <- halt.\n", "", *options)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("status", ["256", "-1", "foo", "1.0"])
def test_halt_with_a_bad_status(tmp_path, status):
    r = run(tmp_path, f"main <- halt({status}).\n")
    no_traceback(r)
    assert r.returncode == 1 and "halt/1: the exit status must be an integer from 0 to 255" in r.stderr, r.stderr


@needs_mpi
def test_halt_status_on_every_rank(tmp_path):
    prog = tmp_path / "prog.par"
    prog.write_text("mode p(^).\np(7).\nmain <- write(bye), nl & p(X), halt(X) @ 2.\n")
    command = f"{sys.executable} -m hpgrem.driver.cli run {prog}; echo rank $PMI_RANK status $? >&2"
    r = subprocess.run([MPIEXEC, "-n", "3", "sh", "-c", command], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.stdout == "bye\n", r.stderr
    assert sorted(l for l in r.stderr.splitlines() if l.startswith("rank ")) == \
        [f"rank {n} status 7" for n in range(3)], r.stderr
    r = run(tmp_path, "main <- write(bye), nl & halt(5).\n", mpi=2)
    assert (r.returncode, r.stdout) == (5, "bye\n"), r.stderr


def test_primitives_cannot_be_redefined(tmp_path):
    r = run(tmp_path, "mode pes(^).\npes(1).\nmain <- true.\n")
    assert r.returncode == 2 and "pes/1 is a primitive" in r.stderr, r.stderr


def test_root_is_the_project():
    assert (ROOT / "pam" / "parlog" / "primitives.py").exists()
