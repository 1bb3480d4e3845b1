"""The `hpgrem` command (spec/cli.md): the driver that joins front ends, passes and the machine.

Exit status: 0 success; 1 the program failed; 2 usage, syntax, type or mode error; 3 deadlock;
4 a limit was hit; 70 an internal error (a bug), reported in one line with a report file.
Everything heavy is imported lazily, inside the command that needs it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback

from hpgrem.driver.args import MAX_PES, mpi_comm, pes, positive_int
from hpgrem.driver.outputs import check_output, write_output
from hpgrem.driver.pipeline import DEFAULT_LEVEL
from hpgrem.errors import (EXIT_BROKEN_PIPE, EXIT_DEADLOCK, EXIT_FAILURE, EXIT_INTERNAL, EXIT_LIMIT, EXIT_OK,
                           EXIT_USAGE, UsageError)

# to be of use (a program that only prints takes 20 s on 512 PEs: idle PEs steal and the
# termination token goes round them all)
LEVELS_HELP = {0: "no optimizing pass (the graph as the front end built it)", 1: "prune-unreachable",
               2: "every optimizing pass"}


class _Parser(argparse.ArgumentParser):
    """A parser whose epilog is made only when its help is shown (making it imports)."""

    def __init__(self, *args, epilog_from=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.epilog_from = epilog_from

    def format_help(self) -> str:
        if self.epilog_from is not None:
            self.epilog = self.epilog_from()
        return super().format_help()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hpgrem", description="Compile and run PARLOG and ML "
                                "programs on PAM/TGR, a parallel abstract machine for graph rewriting.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    def add_level(q):
        g = q.add_mutually_exclusive_group()
        for level in (0, 1, 2):
            g.add_argument(f"-O{level}", dest="opt", action="store_const", const=level,
                           help=f"optimization level {level}: {LEVELS_HELP[level]}"
                                + (" (the default)" if level == DEFAULT_LEVEL else ""))
        q.set_defaults(opt=DEFAULT_LEVEL)

    def add_opt(q):
        add_level(q)
        q.add_argument("--passes", type=_names, metavar="P,Q", help="run exactly these optimizing passes, in order")
        q.add_argument("--disable", type=_names, action="extend", default=[], metavar="P",
                       help="do not run this pass (repeatable, or a comma list)")
        q.add_argument("--pass-option", action="append", default=[], metavar="PASS.OPTION=VALUE",
                       help="set an option of a pass when it runs (repeatable; `hpgrem ir --help` lists them)")

    def add_run(q):  # `hpgrem run`'s options, and `hpgrem trace`'s for a program
        q.add_argument("file")
        q.add_argument("--goal", help="run this conjunction instead of main and print its bindings "
                       "(no final '.', e.g. --goal 'nrev([1,2,3], R)')")
        q.add_argument("--pes", type=pes, default=1, metavar="N",
                       help=f"number of simulated processing elements (1 to {MAX_PES}; default 1)")
        q.add_argument("--topology", default=None, help="mesh:RxC, torus:RxC, ring, hypercube, tree, full")
        add_opt(q)
        q.add_argument("--trace", metavar="OUT.jsonl", help="record the run's events (every rewrite, suspension, "
                       "message; docs/trace.md) to OUT.jsonl")
        q.add_argument("--trace-limit", type=positive_int, metavar="N", help="record at most N events "
                       "(the trace says where it was cut; the run goes on)")
        q.add_argument("--stats", action="store_true", help="print per-PE statistics on stderr")
        q.add_argument("--stats-json", metavar="OUT.json", help="write the statistics as JSON")
        q.add_argument("--count", action="store_true", help="also count what the language's runtime counts, for --stats "
                       "(PARLOG: clause tries, guard tests, enqueues, list cells built in place; ML: nothing); "
                       "the counting costs time")
        q.add_argument("--max-steps", type=positive_int, metavar="N", help="stop with status 4 after N reduction steps")
        q.add_argument("--timeout", type=_seconds, metavar="S", help="stop with status 4 after S seconds "
                       "of wall-clock time (under MPI, on every rank)")
        q.add_argument("--max-memory", type=_size, metavar="SIZE", help="stop with status 4 when the "
                       "process needs more memory than SIZE (bytes, or with a unit K, M, G: KiB, MiB, "
                       "GiB; e.g. 512M, 2G); under MPI the bound of each rank")
        q.add_argument("--seed", type=int, default=0, help="seed for simulated scheduling choices")

    r = sub.add_parser("run", help="run a program", epilog="exit status: 0 success, 1 the program "
                       "failed, 2 usage or syntax error, 3 deadlock, 4 a limit was hit, 70 internal error")
    add_run(r)
    r.add_argument("--profile", action="store_true", help="print on stderr, after the run, where it spent "
                   "its time: the program's functions or relations by name and source line, and the "
                   "machine's parts (docs/profile.md)")
    r.add_argument("--profile-json", metavar="OUT.json", help="write every row of the profile as JSON "
                   "(profiles the run, with or without --profile)")
    r.add_argument("--feeds", metavar="FEEDS.npz", help="a tensor step (.hpg): run one training step "
                   "on one PE with the parameters, optimizer states and inputs in FEEDS.npz, by name")

    c = sub.add_parser("compile", help="compile to an HPGREM graph (.hpg)")
    c.add_argument("file")
    c.add_argument("-o", dest="output", required=True, metavar="OUT.hpg")
    c.add_argument("--goal")
    add_opt(c)

    k = sub.add_parser("check", help="parse and check only")
    k.add_argument("file")

    i = sub.add_parser("ir", help="print the HPGREM graph", epilog_from=_passes_help,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("file")
    i.add_argument("--after", metavar="PASS", help="print the graph right after this pass (default: after all passes and analyses)")
    i.add_argument("--trace", nargs="?", const="-", metavar="OUT", help="instead of the graph, list what each "
                   "pass rewrote (rule, node before and after, source span; docs/trace.md): as text, or "
                   "to OUT (JSON lines when it ends in .jsonl); put it after FILE")
    i.add_argument("--goal")
    add_opt(i)

    t = sub.add_parser("trace", help="run a program traced, or read a trace (.jsonl), and render it",
                       description="FILE a program: run it traced (with run's options) and render its "
                       "trace; FILE a .jsonl trace: render it (docs/trace.md)")
    add_run(t)
    from hpgrem.driver.trace_cmd import add_render_options
    add_render_options(t)

    sub.add_parser("train", help="train a GPT model on the tensor-graph back end (see `hpgrem train --help`)",
                   add_help=False)
    sub.add_parser("plot", help="draw the loss curve of `hpgrem train --metrics` (see `hpgrem plot --help`)",
                   add_help=False)
    sub.add_parser("ckpt", help="gather a training checkpoint into GPT-2's .safetensors (see `hpgrem ckpt "
                   "--help`)", add_help=False)

    sub.add_parser("plan", help="plan LLM training layouts at scale (see `hpgrem plan --help`)",
                   add_help=False)

    b = sub.add_parser("bench", help="run the benchmark suite", epilog_from=_benchmarks_help,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all; listed below)")
    b.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    add_level(b)
    b.set_defaults(opt=None)  # none given: the benchmarks run at the default; a suite takes no level
    return p


def _seconds(text: str) -> float:
    """`--timeout`: a finite positive number of seconds."""
    from pam.limits import MAX_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value > MAX_TIMEOUT:  # also nan and inf
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds up to "
                                         f"{MAX_TIMEOUT:.0f} (a year), got {text!r}")
    return value


def _size(text: str) -> int:
    """`--max-memory`: bytes."""
    from pam.limits import parse_size
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).replace("--max-memory ", "")) from None


def _benchmarks_help() -> str:
    from hpgrem.driver.bench.suite import BENCHMARKS, SUITES
    return ("benchmarks (all run by default): " + ", ".join(BENCHMARKS)
            + "; suites (run when named, they take minutes): " + ", ".join(SUITES))


def _names(text: str) -> tuple[str, ...]:
    """A comma list of pass names (empty items ignored: `--passes ""` selects none)."""
    return tuple(n for n in text.split(",") if n)


def _passes_help() -> str:
    """`hpgrem ir --help`'s list of passes, the plug-ins' (HPGREM_PLUGINS) among them."""
    from hpgrem.ir.dialects import load_plugins
    load_plugins()
    from hpgrem.passes import MACHINE_ANALYSES, analyses_table, level, options_help, passes_table
    lines = ["optimizing passes (in the order they run):"]
    for name in passes_table():
        lines.append(f"  {name:<20} " + ", ".join(f"-O{n}" for n in (0, 1, 2) if name in level(n)))
    lines.append("analyses (the machine's always run, last):")
    for name in analyses_table():
        lines.append(f"  {name:<20} " + ("always" if name in MACHINE_ANALYSES else "when a pass needs it"))
    lines.append("pass options (--pass-option PASS.OPTION=VALUE):")
    lines += options_help()
    return "\n".join(lines)


def load_module(args, pending: list | None = None):
    """The verified module of `args.file` (spec/cli.md), its warnings printed on stderr.

    An ML program runs chunk by chunk: when a later chunk has an error, the module holds the
    chunks before it and, if `pending` is a list, the error is appended to it (to report after
    running them) instead of raised."""
    from hpgrem.driver.pipeline import Options, compile_text, read_program
    options = Options(goal=args.goal, opt=args.opt, passes=args.passes, disable=tuple(args.disable),
                      pass_options=tuple(args.pass_option),
                      after=getattr(args, "after", None))
    text = read_program(args.file, options)
    _quote_program(args.file, text, args.goal)
    compiled = compile_text(text, args.file, options)
    if compiled.module is not None and args.file.lower().endswith(".hpg"):
        _QUOTABLE[0].add_module(compiled.module)
    _report_warnings(compiled)
    if compiled.error is not None:
        if pending is None or compiled.module is None:
            raise compiled.error
        pending.append(compiled.error)
    return compiled.module


def _quote_program(file: str, text: str, goal: str | None) -> None:
    """Diagnostics may quote the program the command read (not a `.hpg`'s JSON) and `--goal`."""
    if not file.lower().endswith(".hpg"):
        _QUOTABLE[0].add_text(file, text)
    _QUOTABLE[0].add_text("<goal>", goal)


def _report_warnings(compiled) -> None:
    for w in compiled.warnings:
        print(_QUOTABLE[0].render(w), file=sys.stderr)


# -- commands ----------------------------------------------------------------------------------
def cmd_run(args) -> int:
    from pam.limits import HardStop, hard_grace
    last_resort = None
    if args.timeout is not None and _OWNS_PROCESS[0]:
        # The machine's watchdog keeps --timeout (pam.limits); this ends the process should it
        # hang anywhere else (MPI's start or end waiting for a stopped rank), a little later.
        last_resort = HardStop.start(_STARTED[0] + args.timeout + 2 * hard_grace(args.timeout) + 1
                                     - time.monotonic(), f"hpgrem: error: time limit of "
                                     f"{args.timeout:g} s reached (--timeout)")
    try:
        return _run(args)
    finally:
        if last_resort is not None:
            last_resort.cancel()


def _run(args) -> int:
    from pam.topology import TopologyError, parse_topology
    comm = mpi_comm()
    if comm is not None:
        from pam import sentinel
        sentinel.start(comm)  # says which rank died, should one die
    if comm is not None and args.pes != 1 and args.pes != comm.Get_size():
        raise UsageError(f"--pes {args.pes} disagrees with the {comm.Get_size()} MPI ranks")
    pes = comm.Get_size() if comm is not None else args.pes
    try:
        parse_topology(args.topology, pes)
    except TopologyError as e:
        raise UsageError(str(e)) from None
    if args.stats_json:  # before the run, not after it (on every rank: all leave)
        check_output(args.stats_json, inputs=(args.file,))
    if _profiling(args):
        if args.trace:
            raise UsageError("--profile and --trace do not go together: a traced run spends its time "
                             "tracing (profile the run without --trace)")
        if args.profile_json:
            check_output(args.profile_json, inputs=(args.file,))
    if args.max_memory is not None:
        from pam.limits import limit_memory
        try:
            limit_memory(args.max_memory)
        except ValueError as e:
            raise UsageError(str(e)) from None
    pending: list = []
    with _loading_limits(args):
        module = load_module(args, pending)
    feeds = getattr(args, "feeds", None)
    if module.dialect == "tensor":
        if feeds is None:
            raise UsageError(f"{args.file}: a tensor graph is a training step: run one with --feeds FEEDS.npz, "
                             "or train with `hpgrem train CONFIG.toml`")
        from hpgrem.driver.train_cmd import run_step
        return run_step(args.file, module, feeds, pes, comm)
    if feeds is not None:
        raise UsageError(f"--feeds gives a tensor step its values; {args.file} is not a tensor step")
    if module.entry is None:
        raise UsageError(f"{args.file}: nothing to run: define main (a relation of arity 0) or pass --goal")
    status = _run_machine(args, module, pes, comm)
    if pending and status == EXIT_OK:
        raise pending[0]
    return status


def _run_machine(args, module, pes: int, comm) -> int:
    from pam.errors import MachineStop, RankAbandoned
    from pam.machine import Machine

    from pam.runtimes import runtime_for

    from hpgrem.driver import profile_cmd, trace_cmd
    # --trace, `hpgrem trace`: the machine records its events (docs/trace.md)
    trace = trace_cmd.start_trace(args, module, pes, comm) if trace_cmd.traced(args) else None
    # --count: code compiled to count what the passes change (the counters its runtime declares)
    runtime = runtime_for(module, counting=True, tracing=trace is not None) if args.count else None
    with _loading_limits(args):  # making the machine generates and loads the program's code
        machine = Machine(module, pes=pes, topology=args.topology, seed=args.seed, runtime=runtime,
                          max_steps=args.max_steps, timeout=args.timeout, comm=comm,
                          started=_STARTED[0], hard_stop=_OWNS_PROCESS[0], trace=trace,
                          count_reductions=_reads_reductions(args))
    profiler = profile_cmd.Profiling(args, comm, pes) if _profiling(args) else None
    try:
        if profiler is None:
            result = machine.run()
        else:
            result = profiler.run(machine)
    except RankAbandoned as a:
        _abandon_ranks(a, args.goal)
    except (MachineStop, MemoryError) as stop:
        if trace is not None:
            trace_cmd.finish_trace(args, machine, stop)
        status = _report_stop(stop, args.goal)
        if profiler is not None:
            profiler.report()
        return status
    for line in result.bindings:
        print(line)
    sys.stdout.flush()
    if trace is not None:
        trace_cmd.finish_trace(args, machine, None)
    if args.stats:
        print(result.stats.table(), file=sys.stderr)
    if args.stats_json and (comm is None or comm.Get_rank() == 0):
        write_output(args.stats_json, json.dumps(result.stats.to_json(), indent=2) + "\n")
    if profiler is not None:
        profiler.report()
    return EXIT_OK


def _reads_reductions(args) -> bool:
    """Whether the run reports its reductions (--stats, --stats-json, --count): a run that
    does not runs code that does not count them (Machine's `count_reductions`)."""
    return bool(getattr(args, "stats", False) or getattr(args, "stats_json", None) or getattr(args, "count", False))


def _profiling(args) -> bool:
    """`run --profile` or `--profile-json` (docs/profile.md); `hpgrem trace` has neither."""
    return bool(getattr(args, "profile", False) or getattr(args, "profile_json", None))


def _loading_limits(args):
    """--timeout and --max-memory while the program is read, compiled and loaded: they count
    from the command's start, not from the machine's (a FIFO with no writer, a huge source).
    The machine keeps them itself while it runs."""
    from pam.limits import Deadline, Watchdog
    deadline = None if args.timeout is None else Deadline(args.timeout, _STARTED[0])
    return Watchdog(deadline, hard=_OWNS_PROCESS[0], interrupt=True)


def _report_stop(stop: BaseException, goal: str | None) -> int:
    """Report how a run ended early; returns the exit status."""
    from pam.errors import Deadlock, Halt, LimitExceeded, ProgramFailure, RankExit, Uncaught
    from pam.limits import lift_memory_limit, memory_message
    if isinstance(stop, RankExit):
        return stop.status
    if isinstance(stop, Halt):  # halt/0, or halt/1's status
        return stop.status
    if isinstance(stop, MemoryError):
        lift_memory_limit()  # room to report it
        sys.stdout.flush()
        print(f"hpgrem: error: {memory_message()}", file=sys.stderr)
        return EXIT_LIMIT
    sys.stdout.flush()
    if isinstance(stop, Uncaught):
        print(stop.message, file=sys.stderr)
        return EXIT_FAILURE
    if isinstance(stop, ProgramFailure):
        _report_failure(stop, goal)
        return EXIT_FAILURE
    if isinstance(stop, Deadlock):
        _report_deadlock(stop)
        return EXIT_DEADLOCK
    if isinstance(stop, LimitExceeded):
        print(f"hpgrem: error: {stop}", file=sys.stderr)
        return EXIT_LIMIT
    raise stop


def _abandon_ranks(a, goal: str | None):
    """This rank gives up on ranks that do not answer: report, then leave at once (MPI's
    orderly end would wait for them). Ranks other than 0 have no sys.stderr: they write fd 2."""
    status = a.status
    if a.cause is not None:
        try:
            status = _report_stop(a.cause, goal)
        except Exception:  # an internal error on a rank: the one line, and its status
            status = _internal_error()
    sys.stdout.flush()
    sys.stderr.flush()
    if a.message:
        os.write(2, (a.message + "\n").encode("utf-8", "replace"))
    _sentinel_done(status)
    os._exit(status)


def _sentinel_done(status: int) -> None:
    """Under MPI, tell the sentinel that this rank leaves by itself (it reports ranks that die)."""
    sentinel = sys.modules.get("pam.sentinel")
    if sentinel is not None:
        sentinel.announce(status)





def _report_failure(f, goal: str | None) -> None:
    from hpgrem.diagnostics import Diagnostic
    what = f"{f.goal} failed" if f.goal else "the program failed"
    message = f"{what}: {f.message}" + (f" (on PE {f.pe})" if f.pe else "")
    if f.span is not None and f.span.line > 0:
        print(_QUOTABLE[0].render(Diagnostic(f.span, message)), file=sys.stderr)
    else:
        print(f"hpgrem: error: {message}", file=sys.stderr)


def _report_deadlock(d) -> None:
    print(f"hpgrem: error: deadlock: {d.total} goal(s) suspended, none can proceed", file=sys.stderr)
    for text, span, waits, pe in d.goals:
        where = f"{span}: " if span is not None and span.line > 0 else ""
        on = ", ".join(waits) if waits else "nothing"
        print(f"  {where}{text} waits for {on} (on PE {pe})", file=sys.stderr)
    if d.total > len(d.goals):
        print(f"  ... and {d.total - len(d.goals)} more", file=sys.stderr)


def cmd_compile(args) -> int:
    from hpgrem.serialize import dumps
    check_output(args.output, inputs=(args.file,))  # before compiling
    module = load_module(args)
    write_output(args.output, dumps(module))
    return EXIT_OK


def cmd_check(args) -> int:
    from hpgrem.driver.pipeline import check_text, read_program
    text = read_program(args.file)
    _quote_program(args.file, text, None)
    compiled = check_text(text, args.file)
    _report_warnings(compiled)
    compiled.complete()
    return EXIT_OK


def cmd_ir(args) -> int:
    from hpgrem.printer import module_text
    if args.trace is not None:
        return _compile_trace(args)
    module = load_module(args)
    sys.stdout.write(module_text(module))
    return EXIT_OK


def _compile_trace(args) -> int:
    """`hpgrem ir FILE --trace [OUT]`: the passes' rewrites as text, or JSON lines to OUT.jsonl."""
    from hpgrem.ir.rewrite import RewriteLog, recording
    out = None if args.trace == "-" else args.trace
    if out is not None:
        check_output(out, (args.file,))
    log = RewriteLog()
    with recording(log):
        load_module(args)
    if out is not None and out.lower().endswith(".jsonl"):
        write_output(out, log.jsonl({"program": args.file, "opt": args.opt}))
    elif out is not None:
        write_output(out, log.text())
    else:
        sys.stdout.write(log.text())
    return EXIT_OK


def cmd_bench(args) -> int:
    from hpgrem.driver.bench.suite import main as bench_main
    return bench_main(args.names, as_json=args.json, opt=args.opt)


def cmd_trace(args) -> int:
    from hpgrem.driver.trace_cmd import render_file
    if args.file.lower().endswith(".jsonl"):
        return render_file(args)
    return cmd_run(args)


COMMANDS = {"run": cmd_run, "trace": cmd_trace, "compile": cmd_compile, "check": cmd_check, "ir": cmd_ir, "bench": cmd_bench}


_STARTED = [None]  # when the command (its process) started, time.monotonic(): --timeout counts from there
# Whether main() is the process's command (argv from sys.argv) and may end the whole process at
# --timeout's hard stops; a host calling main(argv), such as the test suite, is never ended by them.
_OWNS_PROCESS = [False]
_QUOTABLE = [None]  # the source lines this command's diagnostics may quote (hpgrem.diagnostics)


def main(argv: list[str] | None = None) -> int:
    _open_closed_streams()  # first: importing opens files, which would take a closed descriptor
    from hpgrem.diagnostics import Quotable
    from pam.limits import process_started
    _STARTED[0] = process_started() if argv is None else time.monotonic()
    _OWNS_PROCESS[0] = argv is None
    _QUOTABLE[0] = Quotable()
    argv = sys.argv[1:] if argv is None else argv
    # The compile-time tools (printer, .hpg writer, verifier) recurse on a program's nesting,
    # which the front ends allow to about a thousand levels; the machine itself never recurses.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 12000))
    if argv[:1] == ["plan"]:
        from backend.planner.cli import main as plan_main
        return _guard(lambda: plan_main(argv[1:]), None)
    if argv[:1] in (["train"], ["plot"]):
        return _tensor_command(argv)
    if argv[:1] == ["ckpt"]:
        from hpgrem.driver.ckpt_cmd import cmd_ckpt
        return _guard(lambda: cmd_ckpt(argv[1:]), None)
    args = _parser().parse_args(argv)
    status = _guard(lambda: COMMANDS[args.command](args), getattr(args, "goal", None))
    _sentinel_done(status)
    return status


def _tensor_command(argv: list[str]) -> int:
    """`hpgrem train` (every MPI rank runs it) and `hpgrem plot` (hpgrem/driver/train_cmd.py)."""
    from hpgrem.driver import train_cmd
    if argv[0] == "plot":
        return _guard(lambda: train_cmd.cmd_plot(argv[1:]), None)
    comm = mpi_comm()
    if comm is not None:
        from pam import sentinel
        sentinel.start(comm)  # says which rank died, should one die
    status = _guard(lambda: train_cmd.cmd_train(argv[1:], comm), None)
    _sentinel_done(status)
    return status


def _cause_of_kind(error: BaseException, kind: type) -> BaseException | None:
    """The exception of `kind` that `error` was raised from or while handling, if any."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, kind):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _guard(run, goal: str | None) -> int:
    """Run a command, turning every user error into its message and exit status."""
    from hpgrem.diagnostics import CompileError
    from pam.errors import LimitExceeded, MachineStop, RankAbandoned
    try:
        return run()
    except CompileError as e:
        for d in e.diagnostics:
            print(_QUOTABLE[0].render(d), file=sys.stderr)
        return EXIT_USAGE
    except LimitExceeded as e:  # --timeout or --max-memory while the program was loaded
        print(f"hpgrem: error: {e}", file=sys.stderr)
        return EXIT_LIMIT
    except RankAbandoned as a:  # a training job's rank gave up on the others (pam.ranks)
        _abandon_ranks(a, goal)
    except MachineStop as stop:  # how a training job's step ended on the machine
        return _report_stop(stop, goal)
    except UsageError as e:
        print(f"hpgrem: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except RuntimeError as e:
        # The deadline's signal may land inside an import (a pass loaded lazily while a slow
        # compile runs), which Python wraps: e.g. "Error calling __set_name__ ..." caused by it.
        limit = _cause_of_kind(e, LimitExceeded)
        if limit is None:
            raise
        print(f"hpgrem: error: {limit}", file=sys.stderr)
        return EXIT_LIMIT
    except KeyboardInterrupt:
        print("hpgrem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader closed stdout: stop quietly, but never claim success
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except (MemoryError, SystemError) as e:  # compiling, or where the machine did not catch it
        from pam.limits import lift_memory_limit, memory_message, out_of_memory
        if not out_of_memory(e):  # a SystemError that is no allocation failing: a bug
            return _internal_error()
        lift_memory_limit()
        print(f"hpgrem: error: {memory_message()}", file=sys.stderr)
        return EXIT_LIMIT
    except Exception:
        return _internal_error()


def _open_closed_streams() -> None:
    """A standard stream the command was started without (`>&-`, `2>&-`) is /dev/null: what
    would go there is dropped, as by Python's own print. Its descriptor is filled too, so that
    no file hpgrem opens gets it (a file opened as descriptor 2 would receive the diagnostics)."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, encoding="utf-8", errors="backslashreplace", closefd=False))


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush finds no closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is no file (a test's buffer): nothing to flush
        pass


def _internal_error() -> int:
    fd, path = tempfile.mkstemp(prefix="hpgrem-crash-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write(f"hpgrem {' '.join(sys.argv[1:])}\n\n")
        traceback.print_exc(file=f)
    kind = sys.exc_info()[0].__name__
    print(f"hpgrem: internal error ({kind}), a bug in hpgrem; the full report is in {path}", file=sys.stderr)
    return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
