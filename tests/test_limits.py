"""Limits that hold whatever the program does (issue #11): --timeout in the middle of a slow
step, on one PE, on simulated PEs and under MPI (a stopped or killed rank included); the
memory bound; caps on --pes and --topology; the command line's checks before a run.

Wall-clock bounds are generous ("it ended"): the machine is shared and slow."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, hpgrem

MPIEXEC = shutil.which("mpiexec")
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")

LOOP = "mode loop(?).\nloop(N) <- N1 is N + 1, loop(N1).\nmain <- loop(0).\n"
# every step multiplies numbers of 300,000 bits: a batch of steps takes seconds
SLOW = "mode loop(?).\nloop(N) <- X is 3 ** 200000, N1 is N + 1, loop(N1).\nmain <- loop(0).\n"
# a list that grows for ever and is held from its head
GROW = ("mode nat(?, ^).\nnat(N, [N|T]) <- N1 is N + 1, nat(N1, T).\n"
        "mode hold(?, ?).\nhold(L, [_|T]) <- hold(L, T).\nmain <- nat(0, L), hold(L, L).\n")


def _program(tmp_path: Path, text: str, name: str = "p.par") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _timed(*args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    began = time.monotonic()
    r = hpgrem(*args, timeout=timeout)
    return r, time.monotonic() - began


# -- --timeout ------------------------------------------------------------------------------
@pytest.mark.parametrize("pes", ["1", "4"])
def test_timeout_stops_slow_steps_on_time(pes, tmp_path):
    # before: the deadline was looked at every 4,096 steps, so --timeout 2 fired after 23 s
    r, took = _timed("run", str(_program(tmp_path, SLOW)), "--timeout", "2", "--pes", pes)
    assert r.returncode == 4, r.stderr
    assert "time limit of 2 s reached (--timeout)" in r.stderr and "Traceback" not in r.stderr
    assert took < 10


def test_the_hard_stop_ends_a_single_operation_that_outlasts_the_deadline():
    # one multiplication in C that Python cannot interrupt: the C-library timer ends it
    code = ("from pam.limits import HardStop\n"
            "HardStop.start(0.5, 'hpgrem: error: time limit of 0.5 s reached (--timeout)')\n"
            "x = 3 ** 40000000\nprint('not reached')\n")
    began = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    if r.returncode == 0 and "not reached" in r.stdout:
        pytest.skip("no POSIX timers of the C library here")
    assert r.returncode == 4 and r.stdout == ""
    assert "hpgrem: error: time limit of 0.5 s reached (--timeout)" in r.stderr
    assert time.monotonic() - began < 30


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0", "abc", "1e400", "", "1e12"])
def test_timeout_must_be_a_finite_positive_number(value, tmp_path):
    r = hpgrem("run", str(_program(tmp_path, LOOP)), f"--timeout={value}", timeout=30)
    assert r.returncode == 2
    assert "--timeout" in r.stderr and "Traceback" not in r.stderr


def test_timeout_holds_in_ml_direct_code(tmp_path):
    path = _program(tmp_path, "fun spin n = if n < 0 then 0 else spin (n + 1)\nval x = spin 0\n", "spin.sml")
    r, took = _timed("run", str(path), "--timeout", "2")
    assert r.returncode == 4 and "--timeout" in r.stderr
    assert took < 10


# The limit counts from the command's start (issue 16): reading, compiling and loading count.
# Each must end within the spec's margin (a second past S); before, the command's last resort
# stopped them only at S + 2 s or later.
def test_timeout_holds_while_the_input_is_a_fifo_with_no_writer(tmp_path):
    fifo = tmp_path / "in.par"
    os.mkfifo(fifo)
    r, took = _timed("run", str(fifo), "--timeout", "2")
    assert r.returncode == 4 and r.stderr == "hpgrem: error: time limit of 2 s reached (--timeout)\n"
    assert took < 3.5


def test_timeout_holds_while_a_big_program_compiles(tmp_path):
    relations = 20_000  # compiling alone took several seconds
    text = "".join(f"mode r{i}(?).\nr{i}(X) <- r{i + 1}(X).\n" for i in range(relations))
    path = _program(tmp_path, text + f"mode r{relations}(?).\nr{relations}(X) <- r0(X).\nmain <- r0(1).\n")
    r, took = _timed("run", str(path), "--timeout", "2")
    assert r.returncode == 4 and "time limit of 2 s reached (--timeout)" in r.stderr
    assert took < 3.5


# -- --max-memory ---------------------------------------------------------------------------
RECURSE = "fun f n = 1 + f (n + 1);\nval _ = f 0;\n"  # an ML recursion that never ends


def test_out_of_memory_under_an_address_space_cap_is_a_limit(tmp_path):
    # the deep recursion failed with SystemError (exit 70) when an allocation failed under ulimit -v
    path = _program(tmp_path, RECURSE, "rec.sml")
    r = subprocess.run(["sh", "-c", f"ulimit -v 250000 && exec '{sys.executable}' -m hpgrem.driver.cli run '{path}'"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 4 and r.stderr == "hpgrem: error: out of memory\n", r.stderr


def test_out_of_memory_is_told_from_other_system_errors():
    from pam.limits import out_of_memory
    assert out_of_memory(MemoryError()) and not out_of_memory(ValueError())
    assert not out_of_memory(SystemError("error return without exception set"))  # no cap is near


@pytest.mark.parametrize("pes", ["1", "4"])
def test_max_memory_stops_a_runaway_program(pes, tmp_path):
    r = hpgrem("run", str(_program(tmp_path, GROW)), "--max-memory", "120M", "--pes", pes, timeout=120)
    assert r.returncode == 4, r.stderr
    assert "memory limit of 120 MiB reached (--max-memory)" in r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr


@pytest.mark.parametrize("value, message", [("1x", "a size such as"), ("0", "positive"),
                                            ("1M", "too small"), ("-5G", "a size such as")])
def test_max_memory_values(value, message, tmp_path):
    r = hpgrem("run", str(_program(tmp_path, LOOP)), f"--max-memory={value}", timeout=30)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_a_program_within_its_memory_bound_runs():
    r = hpgrem("run", str(ROOT / "examples" / "parlog" / "queens.par"), "--max-memory", "1G")
    assert r.returncode == 0 and r.stdout == "92\n"


# -- --pes and --topology -------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--pes", "100000"], "at most 1024 simulated PEs"),
    (["--pes", "99999999999999999999999"], "at most 1024 simulated PEs"),
    (["--pes", "0"], "positive integer"),
    (["--pes", "1024", "--topology", "mesh:100000x100000"], "has 10000000000 PEs"),
    (["--topology", "mesh:1" + "0" * 5000 + "x1"], "too many rows or columns"),
])
def test_pes_and_topologies_are_capped(args, message, tmp_path):
    r = hpgrem("run", str(_program(tmp_path, LOOP)), *args, "--max-steps", "10", timeout=30)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


# -- the command line ----------------------------------------------------------------------
def test_unwritable_outputs_are_found_before_the_run(tmp_path):
    target = str(tmp_path / "no" / "such" / "dir" / "s.json")
    r, took = _timed("run", str(_program(tmp_path, LOOP)), "--stats-json", target, "--timeout", "20")
    assert r.returncode == 2 and "cannot write" in r.stderr
    assert took < 15  # refused at once, not after the 20 s run
    r = hpgrem("compile", str(_program(tmp_path, LOOP)), "-o", str(tmp_path))
    assert r.returncode == 2 and "is a directory" in r.stderr


def test_output_files_follow_the_umask(tmp_path):
    source = str(ROOT / "examples" / "parlog" / "nrev.par")
    for mask, mode in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        out, stats = tmp_path / f"p{mask}.hpg", tmp_path / f"s{mask}.json"
        env_umask = f"umask {mask:03o} && "
        for cmd in ([sys.executable, "-m", "hpgrem.driver.cli", "compile", source, "-o", str(out)],
                    [sys.executable, "-m", "hpgrem.driver.cli", "run", source, "--stats-json", str(stats)]):
            r = subprocess.run(["sh", "-c", env_umask + " ".join(f"'{c}'" for c in cmd)],
                               capture_output=True, text=True, cwd=ROOT, timeout=60)
            assert r.returncode == 0, r.stderr
        assert out.stat().st_mode & 0o777 == mode
        assert stats.stat().st_mode & 0o777 == mode


def test_readme_goal_example_works():
    readme = (ROOT / "README.md").read_text()
    assert "--goal 'nrev([1,2,3], R)'" in readme
    r = hpgrem("run", str(ROOT / "examples" / "parlog" / "nrev.par"), "--goal", "nrev([1,2,3], R)")
    assert r.returncode == 0 and r.stdout == "R = [3,2,1]\n"


def test_goal_syntax_error_does_not_ask_for_a_final_dot():
    r = hpgrem("run", str(ROOT / "examples" / "parlog" / "nrev.par"), "--goal", "nrev([1,2,3], R")
    assert r.returncode == 2 and "missing '.'" not in r.stderr and "goal ends too early" in r.stderr


def test_help_lists_benchmarks_passes_levels_and_run_options():
    bench = hpgrem("bench", "--help")
    assert bench.returncode == 0 and "nrev30" in bench.stdout and "speedup16" in bench.stdout
    assert "passes" in bench.stdout  # the suites too
    ir = hpgrem("ir", "--help")
    assert ir.returncode == 0 and "prune-unreachable" in ir.stdout and "granularity" in ir.stdout
    run = hpgrem("run", "--help")
    assert "-O0" in run.stdout and "no optimizing pass" in run.stdout and "every optimizing pass" in run.stdout
    assert "--trace-limit" in run.stdout and "--max-memory" in run.stdout
    top = hpgrem("--help")
    assert top.returncode == 0 and "(not available yet)" not in top.stdout


# -- under MPI ------------------------------------------------------------------------------
def _mpi(ranks: int, path: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([MPIEXEC, "-n", str(ranks), sys.executable, "-m", "hpgrem.driver.cli", "run",
                             str(path), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, start_new_session=True)


def _rank_pid(path: Path, rank: int, within: float = 60) -> int:
    """The pid of rank `rank` of the job running `path` (from /proc: its PMI_RANK)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if str(path).encode() not in (entry / "cmdline").read_bytes():
                    continue
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"PMI_RANK={rank}".encode() in environ and b"mpiexec" not in (entry / "cmdline").read_bytes():
                return int(entry.name)
        time.sleep(0.1)
    raise AssertionError(f"rank {rank} did not start")


def _finish(job: subprocess.Popen, within: float) -> tuple[int, str, str]:
    try:
        out, err = job.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate()
        raise AssertionError(f"the job did not end within {within} s")
    return job.returncode, out, err


@needs_mpi
def test_timeout_under_mpi_stops_slow_steps(tmp_path):
    job = _mpi(2, _program(tmp_path, SLOW), "--timeout", "2")
    status, _, err = _finish(job, 30)
    assert status == 4 and "time limit of 2 s reached" in err and "Traceback" not in err


@needs_mpi
@pytest.mark.parametrize("rank", [2, 0])
def test_a_stopped_rank_ends_the_job_at_timeout_and_is_named(rank, tmp_path):
    path = _program(tmp_path, LOOP)
    job = _mpi(4, path, "--timeout", "8")
    pid = _rank_pid(path, rank)
    time.sleep(3)  # the ranks are running the program
    os.kill(pid, signal.SIGSTOP)
    try:
        status, _, err = _finish(job, 30)
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert "time limit of 8 s reached (--timeout)" in err
    assert f"rank {rank} does not answer (stopped or hung)" in err
    # every rank that can leaves with 4; mpiexec reports 9 when it counts the SIGKILL of its
    # clean-up of the stopped rank (hydra ORs the ranks' wait statuses)
    assert status in (4, 9) and "Traceback" not in err


@needs_mpi
@pytest.mark.parametrize("rank", [2, 0])
def test_a_killed_rank_is_named(rank, tmp_path):
    path = _program(tmp_path, LOOP)
    job = _mpi(4, path)
    pid = _rank_pid(path, rank)
    time.sleep(3)
    os.kill(pid, signal.SIGKILL)
    status, _, err = _finish(job, 10)
    assert status != 0
    assert f"hpgrem: error: rank {rank} (pid {pid})" in err
    assert "killed by signal 9 (SIGKILL)" in err or "died" in err


@needs_mpi
def test_an_abandoned_ml_child_does_not_hold_the_job(tmp_path):
    # the left thunk raises after the right one (an endless loop inside one function) was
    # stolen by rank 1: the run ends with the main evaluation, as on one PE
    path = _program(tmp_path, "fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)\n"
                    "fun spin n = if n < 0 then 0 else spin (n + 1)\n"
                    "val r = (ForkJoin.par (fn () => if fib 26 > 0 then raise Fail \"left\" else 1,"
                    " fn () => spin 0); 0)\n  handle Fail m => (print (\"caught \" ^ m ^ \"\\n\"); 1)\n",
                    "orphan.sml")
    assert hpgrem("run", str(path)).stdout == "caught left\n"
    status, out, err = _finish(_mpi(2, path, "--stats-json", str(tmp_path / "s.json")), 60)
    assert status == 0 and out == "caught left\n", err
    stats = json.loads((tmp_path / "s.json").read_text())
    assert sum(pe["steals"] for pe in stats["per_pe"]) >= 1  # the loop did run on rank 1


@needs_mpi
def test_an_unwritable_stats_file_under_mpi_stops_every_rank_at_once(tmp_path):
    job = _mpi(2, ROOT / "examples" / "parlog" / "queens.par", "--stats-json", str(tmp_path / "no" / "s.json"))
    status, _, err = _finish(job, 60)  # rank 1 used to run on alone, for ever
    assert status == 2 and "cannot write" in err


@needs_mpi
def test_max_memory_under_mpi_bounds_each_rank(tmp_path):
    status, _, err = _finish(_mpi(2, _program(tmp_path, GROW), "--max-memory", "120M"), 120)
    assert status == 4 and "memory limit of 120 MiB reached (--max-memory)" in err
    assert "Traceback" not in err and "internal error" not in err


def test_a_deadline_that_lands_inside_an_import_is_still_the_limit(capsys):
    """The timeout's signal may arrive while a pass module is imported during a slow compile;
    Python wraps it ("Error calling __set_name__ ..."), which was an internal error, exit 70."""
    from hpgrem.driver.cli import _guard
    from pam.errors import LimitExceeded

    def compile_hit_by_the_deadline():
        try:
            raise LimitExceeded("time limit of 0.5 s exceeded (--timeout 0.5)")
        except LimitExceeded as e:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance") from e

    assert _guard(compile_hit_by_the_deadline, None) == 4
    assert "--timeout 0.5" in capsys.readouterr().err
    with pytest.raises(RuntimeError):  # any other RuntimeError is still a bug, reported as one
        _guard(lambda: (_ for _ in ()).throw(RuntimeError("a bug")), None)
