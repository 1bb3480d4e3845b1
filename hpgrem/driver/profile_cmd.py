"""`hpgrem run --profile` and `--profile-json OUT.json` (docs/profile.md): the run goes under
pam/profile.py's profiler; its rows are printed on stderr (the top ones) and written as JSON
(all of them) after the run, however it ended. Under MPI every rank profiles its own run and
rank 0 reports the rows of all ranks summed."""

from __future__ import annotations

import sys

from hpgrem.driver.outputs import write_output
from hpgrem.errors import EXIT_INTERNAL


class Profiling:
    """The profile of one `hpgrem run`: `run(machine)` instead of `machine.run()`, then `report()`."""

    def __init__(self, args, comm, pes: int):
        self.args = args
        self.comm = comm
        self.pes = pes
        self.rows: list | None = None

    def run(self, machine):
        from pam.errors import MachineStop, RankAbandoned, RankExit
        from pam.profile import Profiler, merge
        profiler = Profiler()
        # Under MPI the ranks gather their rows once the run has ended: every rank that takes
        # part must know the others do. They all do unless the run ended in an internal error
        # (rank 0 raises it, the others leave with status 70) or a rank was given up on.
        joins = False
        try:
            with profiler:
                result = machine.run()
            joins = True
            return result
        except RankExit as e:
            joins = e.status != EXIT_INTERNAL
            raise
        except RankAbandoned:
            raise
        except (MachineStop, MemoryError):
            joins = True
            raise
        finally:
            self.rows = profiler.rows()
            if self.comm is not None:
                if not joins:
                    self.rows = None
                else:
                    parts = self.comm.gather(self.rows, root=0)
                    self.rows = merge(parts) if parts is not None else None

    def report(self) -> None:
        """The table on stderr (--profile), the JSON file (--profile-json); rank 0 only."""
        from pam.profile import table, to_json
        if self.rows is None or (self.comm is not None and self.comm.Get_rank() != 0):
            return
        args = self.args
        mpi = self.comm is not None
        if args.profile:
            sys.stdout.flush()
            where = (f"{self.pes} MPI ranks, their times summed" if mpi else
                     f"{self.pes} simulated PEs" if self.pes > 1 else "1 PE")
            print(table(self.rows, f"{args.file} ({where})"), file=sys.stderr)
        if args.profile_json:
            write_output(args.profile_json, to_json(self.rows, program=args.file, pes=self.pes,
                                                    mode="mpi" if mpi else "sim"))
