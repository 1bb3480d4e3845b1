"""Each class of bad input: its exit status (spec/cli.md), its FILE:LINE:COL with the source line
and a caret, and never a Python traceback."""

from __future__ import annotations

import pytest

from conftest import hpgrem

CASES = {
    # name: (program, extra args, exit status, "LINE:COL" or None, words the message must hold)
    "syntax error": ("main <- write(x.\n", [], 2, "1:16", "syntax error"),
    "missing dot": ("main <- write(x)\n", [], 2, None, "end of file"),
    "missing mode": ("p(1).\nmain <- p(X), write(X).\n", [], 2, "1:1", "missing mode declaration for p/1"),
    "mode arity": ("mode p(?, ^).\np(1).\nmain <- p(1).\n", [], 2, "1:1", "mode declaration for p/2"),
    "duplicate mode": ("mode p(?).\nmode p(?).\np(1).\nmain <- p(1).\n", [], 2, "2:1", "duplicate mode"),
    "not contiguous": ("mode p(?).\np(1).\nmode q(?).\nq(1).\np(2).\nmain <- p(1).\n", [], 2, "5:1",
                       "not contiguous"),
    "unknown relation": ("main <- q(X), write(X).\n", [], 2, "1:9", "unknown relation q/1"),
    "guard must bind": ("mode p(?).\np(X) <- var(X), X = 1 : true.\nmain <- p(Y), write(Y).\n", [], 2,
                        "2:17", "can only succeed by binding X"),
    "not supported": ("p(X) :- set(L, Y, q(Y)), X = L.\nq(1).\nmain <- set(L, X, p(X)) & write(L).\n", [],
                      2, "1:9", "set/3 inside an all-solutions relation is not supported"),
    "goal fails": ("mode p(?).\np(1).\nmain <- p(2).\n", [], 1, "3:9", "p(2) failed"),
    "failure after commitment": ("mode p(?, ^).\np(X, a) <- X > 0 : true.\nmain <- p(1, b).\n", [], 1,
                                 "3:9", "after commitment"),
    "body unification fails": ("main <- X = 1, X = 2.\n", [], 1, "1:16", "1=2 failed"),
    "arithmetic error": ("main <- X is foo + 1, write(X).\n", [], 1, "1:9", "not a number"),
    "deadlock": ("mode w(?).\nw(go).\nmain <- w(X), write(waiting).\n", [], 3, "3:9", "w(_G1) waits for _G1"),
    "max steps": ("mode loop(?).\nloop(N) <- N1 is N + 1, loop(N1).\nmain <- loop(0).\n",
                  ["--max-steps", "500"], 4, None, "step limit"),
    "timeout": ("mode loop(?).\nloop(N) <- N1 is N + 1, loop(N1).\nmain <- loop(0).\n",
                ["--timeout", "0.3"], 4, None, "time limit"),
}


@pytest.mark.parametrize("name", CASES)
def test_bad_input(name, tmp_path):
    program, extra, status, where, words = CASES[name]
    path = tmp_path / "prog.par"
    path.write_text(program)
    r = hpgrem("run", str(path), *extra)
    assert r.returncode == status, r.stderr
    assert "Traceback" not in r.stderr
    assert words in r.stderr
    if where is not None:
        line, col = where.split(":")
        assert f"{path}:{where}: " + ("error:" if status != 3 else "") in r.stderr
        lines = r.stderr.splitlines()
        i = next(i for i, l in enumerate(lines) if f":{where}:" in l)
        if status != 3:  # diagnostics show the source line and a caret under the column
            assert lines[i + 1] == program.splitlines()[int(line) - 1]
            assert lines[i + 2] == " " * (int(col) - 1) + "^"


def test_output_before_a_failure_is_flushed_first(tmp_path):
    path = tmp_path / "p.par"
    path.write_text("mode p(?).\np(1).\nmain <- write(before) & nl & p(2).\n")
    r = hpgrem("run", str(path))
    assert r.returncode == 1
    assert r.stdout == "before\n"


@pytest.mark.parametrize("args,words", [
    (["run", "nosuch.par"], "no such file"),
    (["run", "README.md"], "unknown file type"),
    (["run", "--pes", "x", "examples/parlog/nrev.par"], "expected a positive integer"),
    (["run", "examples/parlog/nrev.par", "--bogus"], "unrecognized arguments"),
    (["ir", "examples/parlog/nrev.par", "--after", "nosuch"], "unknown pass"),
])
def test_usage_errors(args, words):
    r = hpgrem(*args)
    assert r.returncode == 2
    assert words in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_goal_points_into_the_goal():
    r = hpgrem("run", "examples/parlog/nrev.par", "--goal", "X = 1, nosuch(X)")
    assert r.returncode == 2
    assert "<goal>:1:8: error: unknown relation nosuch/1" in r.stderr
    assert "X = 1, nosuch(X)\n       ^" in r.stderr


@pytest.mark.parametrize("content,words", [
    ("", "not an .hpg file"),
    ('{"format": "hpgrem", "version": 99}', "version 99 is a newer format"),
    ('{"format": "hpgrem", "version": 1}', "version 1 is an older format"),
    ('{"format": "hpgrem", "version": 2, "dialect": "parlog", "source": "x", "entry": null, '
     '"rules": [], "annotations": {}}', "version 2 is an older format"),
    ('{"format": "hpgrem", "version": 3, "rules": [', "invalid JSON"),
    ('{"format": "hpgrem", "version": 3, "dialect": "parlog", "source": "x", "lines": [], "nodes": [], '
     '"entry": null, "rules": [{"kind": "Nope"}], "annotations": {}}', "at $.rules[0]: unknown node kind"),
    ('{"format": "hpgrem", "version": 3, "dialect": "parlog", "source": "x", "lines": [], "nodes": [], '
     '"entry": null, "rules": [{"kind": "parlog.Atom", "name": "a", "span": ["f", 1, 1]}], "annotations": {}}',
     "a parlog.Atom node cannot stand here"),
])
def test_malformed_hpg(content, words, tmp_path):
    path = tmp_path / "bad.hpg"
    path.write_text(content)
    r = hpgrem("run", str(path))
    assert r.returncode == 2
    assert words in r.stderr
    assert "Traceback" not in r.stderr


def test_truncated_hpg_is_refused(tmp_path):
    good = tmp_path / "good.hpg"
    assert hpgrem("compile", "examples/parlog/nrev.par", "-o", str(good)).returncode == 0
    text = good.read_text()
    bad = tmp_path / "bad.hpg"
    bad.write_text(text[: len(text) // 2])
    r = hpgrem("run", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr
