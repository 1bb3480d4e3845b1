"""Rewrite traces of PARLOG runs (issue 17, docs/trace.md): the stream and its text rendering.

A traced run is the same run as an untraced one (output, reductions per PE, virtual time); its
stream has one `rewrite` per reduction `--stats` counts, per PE and in total, at -O0 and -O2;
every suspend is resumed or listed at the end, every send received or listed in flight; the
streams and texts of small programs are the same, byte for byte, on every run
(tests/golden/trace/*: `python tests/test_trace.py` records them again); a `.jsonl` given to
`hpgrem trace` is checked as untrusted input.
"""

from __future__ import annotations

import inspect
import io
import json
import shutil
import subprocess
import sys

import pytest

from conftest import EXAMPLES, ROOT, compile_source, hpgrem
from hpgrem.driver.cli import main

GOLDEN = ROOT / "tests" / "golden" / "trace"
STREAM = "tests/golden/trace/stream.par"
FIB = "tests/golden/trace/fib.par"
DEADLOCK = "tests/golden/trace/deadlock.par"
MPIEXEC = shutil.which("mpiexec")

# name -> the arguments of `hpgrem trace`; each writes NAME.jsonl (the stream) and NAME.txt
# (stdout: the program's output, then the text rendering)
CASES = {
    "stream_1pe": [STREAM],
    "stream_O0": [STREAM, "-O0"],
    "fib_4pe": [FIB, "--pes", "4", "--pe", "1"],
    "deadlock_2pe": [DEADLOCK, "--pes", "2"],
}


@pytest.fixture(autouse=True)
def at_root(monkeypatch):
    """Programs are named relative to the checkout, as in the golden streams."""
    monkeypatch.chdir(ROOT)


def trace_command(capsys, *args: str) -> tuple[int, str, str]:
    """`hpgrem trace ARGS` in-process: (status, stdout, stderr)."""
    capsys.readouterr()
    status = main(["trace", *args])
    out, err = capsys.readouterr()
    return status, out, err


def read_stream(path) -> tuple[dict, list[dict], dict]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return lines[0], lines[1:-1], lines[-1]


def traced_run(text: str, file: str, opt: int, pes: int, **options):
    """(untraced stats, traced stats, the events), after checking that both runs printed the same."""
    from pam.machine import Machine
    from pam.trace import Trace

    module = compile_source(text, file, opt=opt, **options)
    plain_out, out = io.StringIO(), io.StringIO()
    plain = Machine(module, stream=plain_out, pes=pes).run().stats
    trace = Trace({"program": file, "language": "parlog", "pes": pes, "opt": opt})
    traced = Machine(module, stream=out, pes=pes, trace=trace).run().stats
    assert out.getvalue() == plain_out.getvalue()
    return plain, traced, trace.events


def rewrites_per_pe(events: list[dict], pes: int) -> list[int]:
    counts = [0] * pes
    for e in events:
        if e["ev"] == "rewrite":
            counts[e["pe"]] += 1
    return counts


def check_invariants(events: list[dict]) -> None:
    """Every suspend is followed by its resume or listed at the end; every send has its
    receive or is listed in flight; seq numbers run from 0 on each PE, and its clock never
    goes back."""
    (end,) = [e for e in events if e["ev"] == "terminate"]
    waiting: dict[int, int] = {}
    for e in events:
        if e["ev"] == "suspend":
            waiting[e["task"]] = waiting.get(e["task"], 0) + 1
        elif e["ev"] == "resume":
            assert waiting.get(e["task"], 0) > 0, f"resume of task {e['task']}, which was not suspended"
            waiting[e["task"]] -= 1
    assert {task for task, n in waiting.items() if n} == set(end["suspended"])
    sent = {e["msg"] for e in events if e["ev"] == "send"}
    received = [e["msg"] for e in events if e["ev"] == "receive"]
    assert len(received) == len(set(received)) and set(received) <= sent
    assert sent - set(received) == set(end.get("in_flight", ()))
    seqs: dict[int, int] = {}
    clocks: dict[int, float] = {}
    for e in events:
        assert e["seq"] == seqs.get(e["pe"], 0)
        seqs[e["pe"]] = e["seq"] + 1
        assert e["t"] >= clocks.get(e["pe"], 0.0), f"PE {e['pe']}'s clock went back at {e}"
        clocks[e["pe"]] = e["t"]


# -- golden streams and texts ---------------------------------------------------------------------
@pytest.mark.parametrize("name", list(CASES))
def test_golden_trace(name, capsys, tmp_path):
    """The stream and the text of a small program, byte for byte as recorded."""
    stream = tmp_path / f"{name}.jsonl"
    status, out, _ = trace_command(capsys, *CASES[name], "--trace", str(stream))
    assert status == (3 if name.startswith("deadlock") else 0)
    assert stream.read_text(encoding="utf-8") == (GOLDEN / f"{name}.jsonl").read_text(encoding="utf-8")
    assert out == (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")


def test_same_options_same_bytes_and_the_file_renders_as_the_run(capsys, tmp_path):
    first, again = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _, out, _ = trace_command(capsys, FIB, "--pes", "4", "--trace", str(first))
    trace_command(capsys, FIB, "--pes", "4", "--trace", str(again))
    assert first.read_bytes() == again.read_bytes()
    status, rendered, _ = trace_command(capsys, str(first))
    assert status == 0 and out == "55\n" + rendered  # the program's output, then the same text


# -- counts and invariants ------------------------------------------------------------------------
PROGRAMS = {"nrev": (EXAMPLES / "nrev.par").read_text(encoding="utf-8"),
            "stream": (ROOT / STREAM).read_text(encoding="utf-8"),
            "fib": (ROOT / FIB).read_text(encoding="utf-8"),
            # deep guards (one failing in a loop at -O2), call/3 (a failure kept inside, a stop),
            # negation in a guard, a lazy subset/3: what they reduce is counted as it is traced
            **{name: (EXAMPLES / f"{name}.par").read_text(encoding="utf-8")
               for name in ("deep_guards", "metacall", "negation", "subset")}}


@pytest.mark.parametrize("opt", [0, 2])
@pytest.mark.parametrize("pes", [1, 4])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_rewrites_are_the_reductions_stats_counts(name, pes, opt):
    plain, traced, events = traced_run(PROGRAMS[name], f"{name}.par", opt, pes)
    per_pe = rewrites_per_pe(events, pes)
    assert per_pe == [p.reductions for p in plain.per_pe] == [p.reductions for p in traced.per_pe]
    assert sum(per_pe) == plain.reductions > 0
    assert traced.time == plain.time  # the same schedule, to the instruction


def test_reductions_inside_a_step_are_rewrites_of_their_own():
    """At -O2 a loop's rounds and goals run in their caller's step are reductions `--stats`
    counts; each is a rewrite, `inline`, one goal deeper than the one before."""
    plain, _, events = traced_run(PROGRAMS["nrev"], "nrev.par", 2, 1)
    assert plain.per_pe[0].looped > 0
    rewrites = [e for e in events if e["ev"] == "rewrite"]
    ranges = [e for e in rewrites if e["rule"] == "range/3"]
    assert [e["redex"] for e in ranges[:3]] == ["range(1,30,_1)", "range(2,30,_3)", "range(3,30,_4)"]
    assert "inline" not in ranges[0] and all(e["inline"] for e in ranges[1:30])
    assert [e["depth"] for e in ranges[:3]] == [1, 2, 3]
    assert ranges[0]["bind"] == {"_1": "[1|_3]"} and ranges[0]["clause"] == 2
    assert ranges[0]["spawn"] == [{"task": ranges[1]["task"], "goal": "range(2,30,_3)", "vars": ["_3"]}]
    assert ranges[0]["span"] == ["nrev.par", 7, 1]


def test_suspensions_messages_and_a_deadlock_keep_the_invariants(capsys, tmp_path):
    for args in ([FIB, "--pes", "4"], [STREAM, "--pes", "4", "-O0"], [DEADLOCK, "--pes", "4"]):
        path = tmp_path / "t.jsonl"
        status, _, err = trace_command(capsys, *args, "--trace", str(path))
        _, events, end = read_stream(path)
        check_invariants(events)
        assert end == {"ev": "end", "events": len(events), "cut": False, "limit": None}
        if args[0] == DEADLOCK:
            assert status == 3 and "deadlock" in err
            assert events[-1]["status"] == "deadlock" and len(events[-1]["suspended"]) == 2
        else:
            assert status == 0 and events[-1]["status"] == "success"
    kinds = {e["ev"] for e in read_stream(tmp_path / "t.jsonl")[1]}
    assert {"suspend", "send", "receive", "idle", "terminate"} <= kinds


def test_stolen_work_keeps_its_task_id(capsys, tmp_path):
    path = tmp_path / "t.jsonl"
    trace_command(capsys, FIB, "--pes", "4", "--trace", str(path))
    _, events, _ = read_stream(path)
    check_invariants(events)
    steals = [e for e in events if e["ev"] == "steal"]
    assert steals and all(e["pe"] == e["from"] for e in steals)
    for s in steals:
        spawn = next(e for e in events if e["ev"] == "send" and e.get("task") == s["task"])
        assert spawn["kind"] == "SPAWN" and spawn["to"] == s["to"]
        ran = next(e for e in events if e["ev"] == "rewrite" and e["task"] == s["task"])
        assert ran["pe"] == s["to"]


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
def test_a_trace_under_mpi(tmp_path):
    """Each rank records on its wall clock and rank 0 gathers the events: the invariants and
    the counts hold (the bytes differ from run to run)."""
    path, stats = tmp_path / "m.jsonl", tmp_path / "s.json"
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "hpgrem.driver.cli", "run", FIB,
                        "--trace", str(path), "--stats-json", str(stats)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0 and r.stdout == "55\n", r.stderr
    header, events, _ = read_stream(path)
    assert header["mode"] == "mpi" and header["clock"] == "wall_us" and header["pes"] == 2
    check_invariants(events)
    per_pe = [p["reductions"] for p in json.loads(stats.read_text())["per_pe"]]
    assert rewrites_per_pe(events, 2) == per_pe


# -- the command ----------------------------------------------------------------------------------
def test_trace_limit_cuts_the_stream_and_says_where(capsys, tmp_path):
    path = tmp_path / "t.jsonl"
    status, out, _ = trace_command(capsys, str(EXAMPLES / "nrev.par"), "--trace-limit", "7", "--trace", str(path))
    assert status == 0 and out.startswith("[30,29,")  # the run went on to its end
    _, events, end = read_stream(path)
    assert len(events) == 7 and end == {"ev": "end", "events": 7, "cut": True, "limit": 7}
    assert out.rstrip().endswith("-- trace cut after step 7: --trace-limit 7 reached; the run went on unrecorded --")
    assert main(["run", str(EXAMPLES / "nrev.par"), "--trace", str(path), "--trace-limit", "3"]) == 0
    assert read_stream(path)[2]["cut"] is True
    capsys.readouterr()
    assert main(["run", str(EXAMPLES / "nrev.par"), "--trace-limit", "3"]) == 2
    assert "--trace-limit limits a trace" in capsys.readouterr().err


def test_selection_by_rule_steps_and_pe(capsys, tmp_path):
    path = tmp_path / "t.jsonl"
    main(["run", str(EXAMPLES / "nrev.par"), "--trace", str(path)])
    _, events, _ = read_stream(path)
    status, out, _ = trace_command(capsys, str(path), "--select", "append/3")
    entries = [line for line in out.splitlines()[1:] if line[:6].strip().isdigit()]
    assert status == 0 and len(entries) == sum(e.get("rule") == "prelude:append/3" for e in events) > 0
    assert all("=> prelude:append/3 clause" in line for line in entries)
    assert "|    6  append([X|Xs], Ys, [X|Zs]) <- append(Xs, Ys, Zs)." in out  # the prelude's source line
    _, out, _ = trace_command(capsys, str(path), "--steps", "3:5", "--select", "range/3,nrev/2")
    assert [line.split()[0] for line in out.splitlines()[1:] if line[:6].strip().isdigit()] == ["3", "4", "5"]
    _, out, _ = trace_command(capsys, str(path), "--pe", "1")
    assert "(no event matches the selection)" in out
    with pytest.raises(SystemExit) as usage:  # argparse's own exit, status 2
        main(["trace", str(path), "--steps", "5:2"])
    assert usage.value.code == 2 and "expected a step range A:B" in capsys.readouterr().err


def test_dot_and_html_renderings_are_written(capsys, tmp_path):
    html, dot = tmp_path / "t.html", tmp_path / "dot"
    status, _, err = trace_command(capsys, STREAM, "--html", str(html), "--dot", str(dot), "--steps", "2:3")
    assert status == 0 and html.stat().st_size > 0 and "<html" in html.read_text(encoding="utf-8").lower()
    assert sorted(p.suffix for p in dot.iterdir() if p.suffix == ".dot") == [".dot", ".dot"]
    assert f"wrote {html}" in err


def test_renderings_a_user_gets_wrong_are_usage_errors_and_a_cut_shows_in_the_viewer(capsys, tmp_path):
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    status, _, err = trace_command(capsys, STREAM, "--dot", str(a_file))
    assert status == 2 and f"--dot {a_file}: cannot write snapshots there" in err
    html = tmp_path / "cut.html"
    status, _, _ = trace_command(capsys, str(EXAMPLES / "nrev.par"), "--trace-limit", "9", "--html", str(html))
    assert status == 0 and '"cut": true' in html.read_text(encoding="utf-8").replace('"cut":true', '"cut": true')


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("not json\n", ":1: not a JSON line"),
    ('{"trace": "hpgrem", "version": 2, "program": "p", "pes": 1}\n', ":1: trace version 2"),
    ('{"trace": "hpgrem", "version": 1, "program": "p", "pes": 0}\n', '"pes" must be 1 to'),
    ('{"trace": "hpgrem", "version": 1, "program": "p", "pes": 1}\n{"ev": "idle", "pe": 0, "seq": 0, "t": 1}\n',
     "no end line"),
    ('{"trace": "hpgrem", "version": 1, "program": "p", "pes": 1}\n{"ev": "boom", "pe": 0, "seq": 0, "t": 1}\n',
     ":2: unknown event kind 'boom'"),
    ('{"trace": "hpgrem", "version": 1, "program": "p", "pes": 1}\n{"ev": "idle", "pe": 3, "seq": 0, "t": 1}\n',
     ":2: PE 3 outside the header's 1 PE(s)"),
    ('{"trace": "hpgrem", "version": 1, "program": "p", "pes": 1}\n'
     '{"ev": "rewrite", "pe": 0, "seq": 0, "t": 1, "task": 0, "rule": "r/0", "redex": 5, "depth": 0}\n',
     ':2: "redex" of a rewrite event has the wrong type'),
    ('{"trace": "hpgrem", "version": 1, "program": "p", "pes": 1}\n{"ev": "idle", "pe": 0, "seq": 1, "t": 1}\n',
     ":2: seq 1 on PE 0, expected 0"),
    ('{"trace": "hpgrem", "version": 1, "program": "p", "pes": 1}\n{"ev": "idle", "pe": 0, "seq": 0, "t": NaN}\n',
     ":2: not a JSON line"),
    ('{"trace": "hpgrem", "version": 1, "program": "p", "pes": 1}\n{"ev": "end", "events": 4, "cut": false}\n',
     "counts 4 events, the file has 0"),
    ("[" * 100000 + "\n", "nested too deeply"),
])
def test_a_bad_trace_file_is_a_usage_error(text, message, capsys, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    status, out, err = trace_command(capsys, str(path))
    assert status == 2 and message in err and err.startswith(f"hpgrem: error: {path}") and out == ""


def test_a_mangled_trace_is_rendered_or_refused_never_a_crash(capsys, tmp_path):
    """Any field of a valid stream, at any depth, given a value of another type: the file is
    rendered (the field was optional or of a type it may have) or refused, status 2."""
    import random

    lines = [json.loads(line) for line in (GOLDEN / "deadlock_2pe.jsonl").read_text().splitlines()]
    values = [None, 0, -1, 1.5, "x", [], {}, [1, "a"], {"a": 1}, True, 10**30, [None]]
    rng = random.Random(17)
    path = tmp_path / "m.jsonl"
    outcomes = set()
    for _ in range(200):
        mangled = json.loads(json.dumps(lines))
        containers, todo = [], [mangled[rng.randrange(len(mangled))]]
        while todo:
            c = todo.pop()
            if isinstance(c, (dict, list)) and c:
                containers.append(c)
                todo.extend(c.values() if isinstance(c, dict) else c)
        c = rng.choice(containers)
        c[rng.choice(list(c)) if isinstance(c, dict) else rng.randrange(len(c))] = rng.choice(values)
        path.write_text("\n".join(json.dumps(x) for x in mangled) + "\n")
        status, _, err = trace_command(capsys, str(path))
        assert status in (0, 2) and "internal error" not in err
        outcomes.add(status)
    assert outcomes == {0, 2}


def test_a_bad_trace_file_as_a_user_meets_it(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"trace": "hpgrem", "version": 1, "program": "p", "pes": 1}\n\xff\xfe\n')
    r = hpgrem("trace", str(path))
    assert r.returncode == 2 and "not UTF-8 text" in r.stderr and "Traceback" not in r.stderr


def test_untraced_runs_pay_nothing_per_reduction():
    """The PE's loop names no tracer, and untraced generated code calls none: tracing off adds
    nothing to a reduction (a traced run has a loop and code of its own)."""
    from pam.parlog.rules import RuleCompiler
    from pam.pe import PE

    assert "tracer" not in inspect.getsource(PE.run)
    module = compile_source(PROGRAMS["nrev"], "nrev.par", opt=2)
    plain, traced = RuleCompiler(module).source, RuleCompiler(module, tracing=True).source
    assert "TR(" not in plain and "TK(" not in plain and "TR(" in traced and "TL(" in traced


def record() -> None:
    """Write the golden files again (run from the checkout: `python tests/test_trace.py`)."""
    import contextlib
    import os

    os.chdir(ROOT)
    for name, args in CASES.items():
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            main(["trace", *args, "--trace", str(GOLDEN / f"{name}.jsonl")])
        (GOLDEN / f"{name}.txt").write_text(out.getvalue(), encoding="utf-8")


if __name__ == "__main__":
    record()
