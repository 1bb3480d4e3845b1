"""The command under hostile conditions (issue 16, items 3 and 5): a compiled file never makes the
reporter open a file it names, and a closed stdout or stderr is never an internal error nor
sends one stream's text to the other."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, ROOT, hpgrem
from hpgrem.driver.cli import main

NREV = str(EXAMPLES / "nrev.par")
ML = str(EXAMPLES.parent / "ml" / "fib.sml")
FAILING = "mode p(?).\np(1).\nmain <- p(2).\n"  # fails at line 3, column 9 (the call p(2))


# -- the reporter reads nothing a .hpg names --------------------------------------------------------
@pytest.fixture
def compiled(tmp_path) -> tuple[Path, str]:
    """The FAILING program compiled: its source and the text of its .hpg."""
    source = tmp_path / "fail.par"
    source.write_text(FAILING)
    hpg = tmp_path / "fail.hpg"
    assert hpgrem("compile", str(source), "-o", str(hpg)).returncode == 0
    return source, hpg.read_text()


def _hpg_naming(compiled: tuple[Path, str], named: str) -> Path:
    """The compiled program, its spans (and source) edited to name the file `named`."""
    source, text = compiled
    edited = json.dumps(json.loads(text)).replace(json.dumps(str(source)), json.dumps(named))
    assert json.dumps(named) in edited
    hpg = source.with_name("edited.hpg")
    hpg.write_text(edited)
    return hpg


def test_a_failure_in_a_compiled_file_quotes_no_file_it_names(compiled, tmp_path, capfd):
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET one\nSECRET two\nSECRET three\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opened, it would hang: no writer ever comes
    for named in (str(secret), "/etc/passwd", str(fifo), "/dev/zero"):
        assert main(["run", str(_hpg_naming(compiled, named))]) == 1, named  # in-process: quick
        head, quote = capfd.readouterr().err.split("\n", 1)
        assert head == f"{named}:3:9: error: p(2) failed: no clause matches"
        assert quote in ("", "main <- p(2).\n        ^\n"), quote  # only the .hpg's own copy of the line


def test_a_compiled_file_quotes_the_lines_it_carries(compiled):
    """The .hpg keeps the source lines its spans name (Module.source_lines): the report quotes
    them with the source file gone, and never the file's changed content."""
    source, text = compiled
    hpg = source.with_name("fail.hpg")
    source.write_text("changed\nchanged\nchanged\n")
    r = hpgrem("run", str(hpg))
    assert r.returncode == 1 and "changed" not in r.stderr
    source.unlink()
    r = hpgrem("run", str(hpg))
    assert r.returncode == 1 and r.stderr.splitlines()[1:] == ["main <- p(2).", "        ^"], r.stderr


def test_a_compiled_file_numbers_its_lines_as_the_front_end_does(tmp_path):
    """Lines end at \\n only: a \\f, \\v or U+2028 inside a line does not shift the quote."""
    source = tmp_path / "odd.par"
    source.write_text("mode p(?).\np(1).\n% a\fb\vc\u2028d\r\nmain <- p(2).\n")
    hpg = tmp_path / "odd.hpg"
    assert main(["compile", str(source), "-o", str(hpg)]) == 0
    source.unlink()
    r = hpgrem("run", str(hpg))
    assert r.returncode == 1 and r.stderr.splitlines()[1:] == ["main <- p(2).", "        ^"], r.stderr


def test_a_source_program_is_read_once_and_quoted(tmp_path):
    source = tmp_path / "fail.par"
    source.write_text(FAILING)
    r = hpgrem("run", str(source))
    assert r.returncode == 1 and r.stderr.splitlines()[1:] == ["main <- p(2).", "        ^"], r.stderr


# -- closed standard streams ----------------------------------------------------------------------
def _closed(redirect: str, *args: str) -> subprocess.CompletedProcess:
    """The command with one of its standard streams closed (`>&-` or `2>&-`) by the shell."""
    line = " ".join(f"'{a}'" for a in (sys.executable, "-m", "hpgrem.driver.cli", *args))
    return subprocess.run(["sh", "-c", f"exec {line} {redirect}"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


@pytest.mark.parametrize("args", [["run", NREV], ["run", ML], ["run", NREV, "--stats"], ["ir", NREV],
                                  ["compile", NREV, "-o", "/dev/stdout"], ["check", NREV]])
def test_a_closed_stdout_drops_the_output(args):
    r = _closed(">&-", *args)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    assert ("reductions" in r.stderr) == ("--stats" in args)
    assert "internal error" not in r.stderr


def test_a_closed_stdout_keeps_diagnostics_and_status(tmp_path):
    source = tmp_path / "fail.par"
    source.write_text(FAILING)
    r = _closed(">&-", "run", str(source))
    assert r.returncode == 1 and "p(2) failed" in r.stderr and r.stdout == ""
    source.write_text("main <- foo(.\n")
    r = _closed(">&-", "run", str(source))
    assert r.returncode == 2 and "syntax error" in r.stderr


def test_a_closed_stderr_sends_nothing_to_stdout(tmp_path):
    source = tmp_path / "bad.par"
    source.write_text("main <- foo(.\n")
    r = _closed("2>&-", "run", str(source))
    assert r.returncode == 2 and r.stdout == ""
    source.write_text("mode p(?).\np(1).\nmain <- write(hi), nl, p(2).\n")
    r = _closed("2>&-", "run", str(source), "--stats")
    assert r.returncode == 1 and r.stdout == "hi\n"
    r = _closed("2>&-", "run", NREV)
    assert r.returncode == 0 and re.fullmatch(r"\[30,29,.*,1\]\n", r.stdout)
