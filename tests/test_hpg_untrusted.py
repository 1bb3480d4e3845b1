"""A `.hpg` file is untrusted input: no string in it may ever run as code.

Every string field of compiled programs (both dialects) is replaced, one at a time, by a Python
payload; the run must never execute it: either the loader or verifier refuses the file (exit 2),
or the program runs with that string as data. Never an internal error (exit 70). A field that is
free text (the source's name, the file of a span) changes nothing the program does: the run
prints and ends as the unmodified one.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json

import pytest

from hpgrem.driver.cli import main
from tests.conftest import ROOT

PAYLOAD = "__import__('builtins').__setattr__('hpgrem_pwned', 1) or X_Div"
PROGRAMS = ["examples/ml/exceptions.sml", "examples/parlog/nrev.par"]  # compiled at -O2, run at -O1 (quicker)


def _string_paths(x, path=()):
    if isinstance(x, str):
        yield path
    elif isinstance(x, list):
        for i, item in enumerate(x):
            yield from _string_paths(item, path + (i,))
    elif isinstance(x, dict):
        for k, v in x.items():
            if k not in ("kind", "format"):
                yield from _string_paths(v, path + (k,))


def _set(doc, path, value):
    for step in path[:-1]:
        doc = doc[step]
    doc[path[-1]] = value


def _run(args: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        return main(args), out.getvalue()


def _free_text(path) -> bool:
    """The source's name, or the file name of a span (its first item)."""
    return path == ("source",) or (len(path) >= 2 and path[-2] == "span" and path[-1] == 0)


FREE_TEXT_SAMPLE = 10
"""One in this many of the span file names and source lines is tried (there are hundreds, all
read the same way); every other string is."""


def _sampled(paths: list) -> list:
    def common(path) -> bool:
        return path[0] == "lines" or _free_text(path) and path != ("source",)
    chosen = {id(p) for p in [p for p in paths if common(p)][::FREE_TEXT_SAMPLE]}
    return [p for p in paths if not common(p) or id(p) in chosen]


@pytest.mark.parametrize("program", PROGRAMS)
def test_no_string_of_an_hpg_file_runs_as_code(program, tmp_path):
    hpg = tmp_path / "p.hpg"
    assert _run(["compile", str(ROOT / program), "-o", str(hpg)])[0] == 0
    unmodified = _run(["run", str(hpg), "--timeout", "5", "-O1"])
    doc = json.loads(hpg.read_text())
    paths = _sampled(list(_string_paths(doc)))
    assert len(paths) > 50
    statuses = set()
    for path in paths:
        mutated = json.loads(json.dumps(doc))
        _set(mutated, path, PAYLOAD)
        bad = tmp_path / "bad.hpg"
        bad.write_text(json.dumps(mutated))
        status, out = _run(["run", str(bad), "--timeout", "5", "-O1"])
        assert not hasattr(builtins, "hpgrem_pwned"), f"the payload at {path} ran"
        assert status != 70, f"internal error with the payload at {path}"
        if _free_text(path):
            assert (status, out) == unmodified, f"the free text at {path} changed the run"
        statuses.add(status)
    assert 2 in statuses  # structural strings (keys, targets, names of rules) are refused
