"""ML's traced mode and the compile trace (issue 17, docs/trace.md, docs/ml.md).

A traced run of an ML program reports one `rewrite` event per reduction that `--stats` counts
(one application: a call, a tail call, a loop's round, a thunk, a fork), per PE and in total, at
-O0 and -O2, with the same schedule as the untraced run; every join that waits is a suspend
followed by its resume; the stream of a small program is the same, byte for byte, on every run
(tests/golden/trace/ml_*: the program, its stream and its text rendering by `hpgrem trace`;
`python tests/test_trace_ml.py` records them again).
`hpgrem ir FILE --trace` lists what each pass rewrote.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from conftest import ROOT, compile_source, hpgrem

GOLDEN = ROOT / "tests" / "golden" / "trace"

FIB = ("fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)\n"
       'val _ = print (Int.toString (fib 5) ^ "\\n")\n')



def par(n: int, cutoff: int) -> str:
    """pfib n, forking both halves at every level down to `cutoff`."""
    return ("fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)\n"
            f"fun pfib n = if n < {cutoff} then fib n else\n"
            "  let val (a, b) = ForkJoin.par (fn () => pfib (n - 1), fn () => pfib (n - 2)) in a + b end\n"
            f'val _ = print (Int.toString (pfib {n}) ^ "\\n")\n')


PAR = par(14, 8)  # on 4 PEs: every PE gets work, and joins wait
SMALL_PAR = par(10, 5)  # on 2 PEs: one steal, one join that waits

# generator code (higher order), a loop over a list, a `while`, a handled exception, deep
# direct recursion (past the Python frames direct code may use: the heap driver)
MIXED = ("fun sum (xs, acc) = case xs of [] => acc | x :: r => sum (r, acc + x)\n"
         "fun count n = let val i = ref 0 in (while !i < n do i := !i + 1); !i end\n"
         "fun down 0 = 0 | down n = 1 + down (n - 1)\n"
         "fun safe n = (if n > 2 then raise Fail \"big\" else n) handle Fail _ => 0\n"
         "val xs = List.map (fn x => x * x) [1, 2, 3, 4]\n"
         "val _ = print (Int.toString (sum (xs, 0) + count 5 + down 300 + safe 1 + safe 3) ^ \"\\n\")\n")


# exceptions that leave blocks of direct code before all the calls counted at their start are
# made (-O2, ml-batch-counts): through a handler, out of a loop, out of the program's frames
EVAL = (ROOT / "examples" / "ml" / "eval.sml").read_text()
ABORTS = ("exception Z\n"
          "fun f n = if n = 0 then raise Z else f (n - 1) + f (n - 1) + 1\n"
          "fun g n = (f n + f n) handle Z => 1\n"
          "fun walk (n, acc) = if n = 0 then acc else walk (n - 1, acc + g 2 + (f 0 handle Z => 2))\n"
          "fun h n = (if n > 3 then f 0 else n) + h (n + 1)\n"
          'val _ = print (Int.toString (walk (3, 0) + (h 0 handle Z => 5)) ^ "\\n")\n')


def traced_run(text: str, opt: int, pes: int, file: str = "t.sml"):
    """(untraced stats, traced stats, the traced run's stream as JSON lines, its output)."""
    from pam.machine import Machine
    from pam.trace import Trace

    module = compile_source(text, file, opt=opt)
    plain_out = io.StringIO()
    plain = Machine(module, stream=plain_out, pes=pes).run().stats
    trace = Trace({"program": file, "language": "ml", "pes": pes, "opt": opt})
    out = io.StringIO()
    traced = Machine(module, stream=out, pes=pes, trace=trace).run().stats
    assert out.getvalue() == plain_out.getvalue()
    return plain, traced, list(trace.lines()), out.getvalue()


def events(lines: list[str]) -> list[dict]:
    return [json.loads(line) for line in lines[1:-1]]


@pytest.mark.parametrize("opt", [0, 2])
@pytest.mark.parametrize("name, text, pes", [("fib", FIB, 1), ("mixed", MIXED, 1), ("par", PAR, 4),
                                            ("eval", EVAL, 1), ("aborts", ABORTS, 1)])
def test_rewrites_are_the_reductions_stats_counts(name, text, pes, opt):
    plain, traced, lines, _ = traced_run(text, opt, pes)
    per_pe = [0] * pes
    for e in events(lines):
        if e["ev"] == "rewrite":
            per_pe[e["pe"]] += 1
    assert per_pe == [p.reductions for p in plain.per_pe] == [p.reductions for p in traced.per_pe]
    assert sum(per_pe) == plain.reductions > 0
    assert traced.time == plain.time  # the same schedule: traced code counts as untraced code does
    if name == "par":
        assert sum(1 for n in per_pe if n) > 1  # the forked halves ran on several PEs


def test_the_trace_names_each_application():
    _, _, lines, out = traced_run(FIB, 2, 1, "fib.sml")
    rewrites = [e for e in events(lines) if e["ev"] == "rewrite"]
    assert out == "5\n"
    assert [e["redex"] for e in rewrites[:5]] == ["fib 5", "fib 4", "fib 3", "fib 2", "fib 1"]
    assert [e["depth"] for e in rewrites[:5]] == [1, 2, 3, 4, 5]
    assert all(e["rule"] == "fib" and e["span"] == ["fib.sml", 1, 5] for e in rewrites)
    assert len(rewrites) == 15  # fib 5 makes 15 calls
    assert "inline" not in rewrites[0] and all(e["inline"] for e in rewrites[1:])


def test_forks_spawn_tasks_and_every_wait_is_resumed():
    _, _, lines, out = traced_run(PAR, 0, 4)
    evs = events(lines)
    assert out == "377\n"
    forks = [e for e in evs if e["ev"] == "rewrite" and e["rule"] == "ForkJoin.par"]
    assert len(forks) == 33  # one per call pfib n with n >= 8: 33 from pfib 14
    rewrites = [e for e in evs if e["ev"] == "rewrite"]
    # each fork applies two thunks: the left one in place, the right one as the spawned task
    # or, when nobody started that task, taken back at the join and applied in place
    assert sum(e["redex"] == "fn ()" for e in rewrites) == 2 * len(forks)
    elsewhere = 0
    for f in forks:
        (child,) = f["spawn"]
        assert child["goal"] == "fn ()"
        # either way the spawned task's first reduction is its thunk, one deeper than the fork
        first = next(e for e in rewrites if e["task"] == child["task"])
        assert first["redex"] == "fn ()" and first["depth"] == f["depth"] + 1
        elsewhere += first["pe"] != f["pe"]
    assert elsewhere > 0  # some were stolen
    suspended = [e for e in evs if e["ev"] == "suspend"]
    assert suspended  # on 4 PEs some joins wait for a stolen child
    for s in suspended:  # the program ends: no task is left suspended
        later = evs[evs.index(s) + 1:]
        assert any(e["ev"] == "resume" and e["task"] == s["task"] for e in later)


@pytest.mark.parametrize("opt", [0, 2])
def test_untraced_code_reports_nothing(opt):
    """The traced mode is a compile of its own: the plain code has no report in it."""
    from pam.ml import codegen
    module = compile_source(MIXED, "t.sml", opt=opt)
    plain, traced = codegen.generate(module)[0], codegen.generate(module, trace=True)[0]
    assert "rw(" not in plain and "rw(" in traced


def test_redexes_show_values_shortened():
    from pam.ml.tracing import show
    assert show((1, (2, (3, None)))) == "[1, 2, 3]"
    assert show(tuple(range(8))) == "(0, 1, 2, 3, 4, ...)"
    assert show(-3) == "~3" and show(True) == "true" and show("a\nb") == '"a\\nb"'
    assert show([5], atom=True) == "(ref 5)"
    long = None
    for i in range(100):
        long = (i, long)
    assert show(long) == "[99, 98, 97, 96, 95, ...]"
    _, _, lines, _ = traced_run(MIXED, 2, 1)
    redexes = [e["redex"] for e in events(lines) if e["ev"] == "rewrite"]
    assert "sum ([1, 4, 9, 16], 0)" in redexes or "sum ([4, 9, 16], 1)" in redexes
    assert "while (in count)" in redexes and "down 300" in redexes and "down 1" in redexes


GOLDEN_RUNS = [("ml_fib", FIB, 2, 1), ("ml_par", SMALL_PAR, 2, 2)]


def cli_trace(name: str, opt: int, pes: int, out: Path) -> tuple[str, str]:
    """`hpgrem trace` of tests/golden/trace/NAME.sml: (its stream, its text on stdout)."""
    r = hpgrem("trace", f"tests/golden/trace/{name}.sml", f"-O{opt}", "--pes", str(pes), "--trace", str(out))
    assert r.returncode == 0, r.stderr
    return out.read_text(), r.stdout


@pytest.mark.parametrize("opt", [0, 2])
def test_depth_goes_on_past_the_python_frames_of_direct_code(opt):
    """A recursion deeper than direct code runs on Python's stack (200 frames) goes on on the
    heap driver: each call still one frame deeper than its caller."""
    text = 'fun down 0 = 0 | down n = 1 + down (n - 1)\nval _ = print (Int.toString (down 260) ^ "\\n")\n'
    plain, _, lines, out = traced_run(text, opt, 1)
    depths = [e["depth"] for e in events(lines) if e["ev"] == "rewrite"]
    assert out == "260\n" and len(depths) == 261 == plain.reductions
    assert depths == list(range(1, 262))


@pytest.mark.parametrize("name, text, opt, pes", GOLDEN_RUNS)
def test_golden_streams(name, text, opt, pes, tmp_path):
    """The stream and the text of a small program, byte for byte: as recorded, and the same
    in process as through the command."""
    assert (GOLDEN / f"{name}.sml").read_text() == text
    stream, shown = cli_trace(name, opt, pes, tmp_path / "t.jsonl")
    assert stream == (GOLDEN / f"{name}.jsonl").read_text()
    assert shown == (GOLDEN / f"{name}.txt").read_text()
    here = traced_run(text, opt, pes, f"tests/golden/trace/{name}.sml")[2]
    ran = [e for e in map(json.loads, stream.splitlines()[1:-1]) if e["ev"] != "terminate"]
    assert events(here) == ran  # the command adds how the run ended


def test_command_counts_agree_with_its_stats(tmp_path):
    """`hpgrem trace --stats-json` on 4 PEs: the rewrites of the stream per PE are the reductions."""
    (tmp_path / "p.sml").write_text(PAR)
    r = hpgrem("trace", str(tmp_path / "p.sml"), "--pes", "4", "-O0", "--trace", str(tmp_path / "t.jsonl"),
               "--stats-json", str(tmp_path / "s.json"))
    assert r.returncode == 0, r.stderr
    per_pe = [0] * 4
    for line in (tmp_path / "t.jsonl").read_text().splitlines()[1:-1]:
        e = json.loads(line)
        per_pe[e["pe"]] += e["ev"] == "rewrite"
    assert per_pe == [p["reductions"] for p in json.loads((tmp_path / "s.json").read_text())["per_pe"]]


# ---- the compile trace ----------------------------------------------------------------------

def test_compile_trace_of_nrev_shows_what_o2_does_to_its_relations():
    r = hpgrem("ir", "examples/parlog/nrev.par", "--trace")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    at = lines.index("pass tail-loop")
    assert "  note nrev/2    at examples/parlog/nrev.par:10:1" in lines[at:]
    assert "    after:  tail-loop.loop=True" in lines[at:]
    assert "pass prune-unreachable" in lines and "  removed prelude:merge/3    at <prelude>:17:1" in lines
    # at -O0 no optimizing pass runs
    assert hpgrem("ir", "examples/parlog/nrev.par", "-O0", "--trace").stdout == "no pass changed anything\n"


def test_compile_trace_of_ml_lists_rewrite_rules_as_json(tmp_path):
    src = tmp_path / "t.sml"
    src.write_text("fun f (a, b) = let val c = a in if true then c + b else 0 end\n"
                   'val _ = print (Int.toString (f (1, 2)) ^ "\\n")\n')
    out = tmp_path / "c.jsonl"
    r = hpgrem("ir", str(src), "--trace", str(out))
    assert r.returncode == 0 and r.stdout == "", r.stderr
    head, *entries = [json.loads(line) for line in out.read_text().splitlines()]
    assert head["trace"] == "hpgrem-compile" and head["entries"] == len(entries)
    mine = [e for e in entries if e["span"] and e["span"][0] == str(src)]
    fired = {(e["pass"], e["rule"]) for e in mine if e["kind"] == "rewrite"}
    assert ("simplify", "constant_if") in fired and ("simplify", "propagate_copies") in fired
    const = next(e for e in mine if e["rule"] == "constant_if")
    assert const["before"].startswith("{ if bool#1 then") and "bool" not in const["after"]
    assert any(e["pass"] == "ml-flatten" and e["kind"] == "added" for e in mine)
    passes = [e["pass"] for e in entries]
    assert passes.index("ml-flatten") < passes.index("simplify")  # in the order they ran


def test_compile_trace_is_free_when_off():
    """Without a log nothing is recorded, and the module is the same as with one."""
    from hpgrem.ir.rewrite import RewriteLog, active_log, recording
    from hpgrem.printer import module_text
    assert active_log() is None
    plain = module_text(compile_source(FIB, "t.sml", opt=2))
    log = RewriteLog()
    with recording(log):
        traced = module_text(compile_source(FIB, "t.sml", opt=2))
    assert active_log() is None and plain == traced and log.entries


def record() -> None:
    """Write the golden programs, streams and texts again."""
    import tempfile
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, text, opt, pes in GOLDEN_RUNS:
        (GOLDEN / f"{name}.sml").write_text(text)
        with tempfile.TemporaryDirectory() as tmp:
            stream, shown = cli_trace(name, opt, pes, Path(tmp) / "t.jsonl")
        (GOLDEN / f"{name}.jsonl").write_text(stream)
        (GOLDEN / f"{name}.txt").write_text(shown)


if __name__ == "__main__":
    record()
