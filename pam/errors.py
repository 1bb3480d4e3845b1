"""What a running program can end in, besides success; the CLI maps each to an exit status."""

from __future__ import annotations

from hpgrem.ir import Span


class MachineStop(Exception):
    """Base of every way a run ends early."""


class ProgramFailure(MachineStop):
    """A goal failed (exit 1): `goal` is its text, `span` its call site."""

    def __init__(self, message: str, goal: str | None = None, span: Span | None = None,
                 pe: int | None = None):
        super().__init__(message)
        self.message = message
        self.goal = goal
        self.span = span
        self.pe = pe


class Deadlock(MachineStop):
    """Every remaining goal is suspended (exit 3): `goals` are (text, span, waits-on, PE)."""

    def __init__(self, goals: list[tuple], total: int):
        super().__init__(f"deadlock: {total} goals suspended")
        self.goals = goals
        self.total = total


class LimitExceeded(MachineStop):
    """`--max-steps` or `--timeout` was reached (exit 4)."""


class Halt(MachineStop):
    """The program called `halt/0` (exit 0) or `halt/1` (exit `status`)."""

    def __init__(self, status: int = 0):
        super().__init__(f"halt({status})")
        self.status = status


class RankExit(MachineStop):
    """This MPI rank is done; rank 0 reported how the run ended, and `status` is its exit status."""

    def __init__(self, status: int):
        super().__init__(f"rank exits with status {status}")
        self.status = status


class RankAbandoned(MachineStop):
    """This MPI rank gives up on ranks that do not answer (stopped, or hung in C code): it
    leaves at once with `status`, saying `message` on stderr. `cause` is how the run ended as
    far as this rank knows (an exception to report first), or None."""

    def __init__(self, status: int, message: str, cause: BaseException | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.cause = cause


class HaltReceived(MachineStop):
    """Rank 0 halted the run while this rank was inside a step; `notice` is its HALT."""

    def __init__(self, notice):
        super().__init__("halted by rank 0")
        self.notice = notice


class Uncaught(ProgramFailure):
    """An ML exception reached the top level (exit 1); `message` reads as Poly/ML's
    `uncaught exception NAME` (with the message for `Fail`)."""


class Finished(MachineStop):
    """The ML program's main evaluation finished: the run ends there, even if forked tasks whose
    results can no longer matter (a sibling raised first) are still running on other PEs."""
