"""Every example program prints exactly what its `% expect:` lines say, in-process and through
the command line, and from its compiled `.hpg` graph."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES, expected_output, hpgrem, run_program

PROGRAMS = sorted(EXAMPLES.glob("*.par"))


def test_there_are_enough_examples():
    assert len(PROGRAMS) >= 15


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_example_output(path):
    expected = expected_output(path)
    assert expected, f"{path.name} carries no % expect: lines"
    out, _ = run_program(path.read_text(), file=str(path))
    assert out == expected


@pytest.mark.parametrize("name,answer", [("primes", "1229"), ("hanoi", "4095"), ("queens", "92"),
                                         ("queens10", "724")])
def test_known_answers(name, answer):
    out, _ = run_program((EXAMPLES / f"{name}.par").read_text())
    assert answer in out.split()


def test_cli_runs_an_example_and_its_compiled_graph(tmp_path):
    path = EXAMPLES / "nrev.par"
    direct = hpgrem("run", str(path))
    assert direct.returncode == 0, direct.stderr
    assert direct.stdout == expected_output(path)
    graph = tmp_path / "nrev.hpg"
    assert hpgrem("compile", str(path), "-o", str(graph)).returncode == 0
    from_graph = hpgrem("run", str(graph))
    assert from_graph.returncode == 0, from_graph.stderr
    assert from_graph.stdout == direct.stdout
