"""The command line of spec/cli.md: subcommands, streams and the JSON shapes."""

from __future__ import annotations

import json
import shutil

from conftest import EXAMPLES, hpgrem

NREV = str(EXAMPLES / "nrev.par")


def test_check_prints_nothing_and_succeeds():
    r = hpgrem("check", NREV)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""


def test_ir_prints_the_graph_and_passes_change_it():
    o0 = hpgrem("ir", NREV, "-O0")
    o1 = hpgrem("ir", NREV, "--after", "prune-unreachable")
    assert o0.returncode == o1.returncode == 0
    assert "relation prelude:merge/3" in o0.stdout  # -O0 keeps the whole prelude
    assert "relation prelude:merge/3" not in o1.stdout
    assert "relation nrev/2 (?, ^)" in o1.stdout


def test_goal_bindings_go_to_stdout_after_program_output():
    r = hpgrem("run", NREV, "--goal", "write(hi), nl, reverse([1,2], R)")
    assert r.returncode == 0
    assert r.stdout == "hi\nR = [2,1]\n"


def test_stats_go_to_stderr_and_json_has_the_promised_keys(tmp_path):
    out = tmp_path / "s.json"
    r = hpgrem("run", NREV, "--stats", "--stats-json", str(out))
    assert r.returncode == 0
    assert "reductions" in r.stderr and "reductions" not in r.stdout
    stats = json.loads(out.read_text())
    assert {"pes", "topology", "mode", "time", "work", "reductions", "speedup", "per_pe"} <= set(stats)
    assert stats["pes"] == 1 and stats["reductions"] > 496
    assert set(stats["per_pe"][0]) >= {"pe", "reductions", "suspensions", "resumptions", "sent",
                                       "received", "bytes_sent", "hops", "steals", "idle_share", "busy_time"}


def test_bench_json_rows():
    r = hpgrem("bench", "queens8", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows and all(set(row) == {"name", "metric", "value", "unit", "peer", "peer_value", "level"} for row in rows)
    assert rows[0]["name"] == "queens8" and rows[0]["value"] > 0
    assert {row["level"] for row in rows} == {2}  # -O2 unless told


def test_bench_suites_take_no_level():
    r = hpgrem("bench", "passes", "-O0")
    assert r.returncode == 2 and "-O0 does not apply to passes" in r.stderr


def test_the_default_level_is_O2(tmp_path):
    """`run`, `compile` and `ir` without a level run -O2's passes (spec/cli.md); -O0 is one flag
    away. A run shows it: -O2's tail-loop makes nrev's steps loop inside themselves."""
    looped = {}
    for level in ("", "-O0", "-O1", "-O2"):
        out = tmp_path / f"stats{level}.json"
        r = hpgrem("run", NREV, *([level] if level else []), "--stats-json", str(out))
        assert r.returncode == 0, r.stderr
        looped[level] = json.loads(out.read_text())["per_pe"][0]["looped"]
    assert looped[""] == looped["-O2"] > 0 == looped["-O1"] == looped["-O0"]
    fib = str(EXAMPLES.parent / "ml" / "fib.sml")
    graphs = {level: hpgrem("ir", fib, *([level] if level else [])).stdout for level in ("", "-O1", "-O2")}
    assert graphs[""] == graphs["-O2"] != graphs["-O1"]
    for level in ("", "-O2"):
        assert hpgrem("compile", fib, *([level] if level else []), "-o", str(tmp_path / f"fib{level}.hpg")).returncode == 0
    assert (tmp_path / "fib.hpg").read_bytes() == (tmp_path / "fib-O2.hpg").read_bytes()


def test_bench_unknown_name():
    r = hpgrem("bench", "nosuch")
    assert r.returncode == 2 and "unknown benchmark" in r.stderr


def test_plan_is_dispatched():
    r = hpgrem("plan", "--model", "gpt2", "--gpus", "1", "--gpu", "a100-80gb", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["params"] > 100_000_000


def test_missing_ml_file_and_bad_topology_are_usage_errors():
    r = hpgrem("run", "prog.sml")
    assert r.returncode == 2 and "no such file" in r.stderr
    r = hpgrem("run", NREV, "--pes", "4", "--topology", "mesh:3x3")
    assert r.returncode == 2 and "9 PEs" in r.stderr and "Traceback" not in r.stderr


def test_bench_ml_rows_compare_with_cpython_and_poly():
    r = hpgrem("bench", "tak", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    peers = {row["peer"] for row in rows if row["metric"] == "time"}
    assert "CPython" in peers
    assert ("Poly/ML" in peers) == (shutil.which("poly") is not None)
    assert all(row["value"] > 0 for row in rows)


def test_a_reader_that_goes_away_is_not_success(tmp_path):
    """`hpgrem run p.par | head -1`: the run stops quietly with 141 (128 + SIGPIPE), never 0."""
    import subprocess
    import sys
    prog = tmp_path / "count.par"
    prog.write_text("mode count(?).\n"
                    "count(N) <- N > 0 : write(N), nl, N1 is N - 1, count(N1).\n"
                    "count(0).\nmain <- count(200000).\n")
    p = subprocess.Popen([sys.executable, "-m", "hpgrem.driver.cli", "run", str(prog)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"200000\n"
    p.stdout.close()
    _, err = p.communicate(timeout=120)
    assert p.returncode == 141 and b"Traceback" not in err and err == b""
