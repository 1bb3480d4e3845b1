"""Command-line values every command shares: the parser that raises UsageError, `--pes`,
positive integers, and the MPI world a command runs in."""

from __future__ import annotations

import argparse
import os
import sys

from hpgrem.errors import UsageError

MAX_PES = 1024  # simulated PEs (spec/cli.md): the simulation of a larger array takes too long


class ArgumentParser(argparse.ArgumentParser):
    """Usage errors raise UsageError (one line, status 2) instead of leaving the process."""

    def error(self, message: str):
        raise UsageError(f"{self.prog.removeprefix('hpgrem ')}: {message}")


def pes(text: str) -> int:
    """`--pes`: 1 to MAX_PES."""
    value = positive_int(text)
    if value > MAX_PES:
        raise argparse.ArgumentTypeError(f"at most {MAX_PES} simulated PEs, got {clip(text)}")
    return value


def positive_int(text: str) -> int:
    """A positive integer; one over 10**18 counts as 10**18 + 1 (every limit is below it)."""
    digits = text.strip()
    if not digits.isascii() or not digits.isdigit() or int(digits[:19]) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {clip(text)!r}")
    return int(digits) if len(digits) <= 18 else 10**18 + 1


def clip(text: str) -> str:
    return text if len(text) <= 40 else text[:40] + "..."


def mpi_comm():
    """MPI.COMM_WORLD when launched by mpiexec with more than one rank, else None. Ranks other
    than 0 stay silent: rank 0 reports for all of them."""
    if not any(k in os.environ for k in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")):
        return None
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if comm.Get_size() == 1:
        return None
    if comm.Get_rank() != 0:
        sys.stdout = open(os.devnull, "w")
        sys.stderr = open(os.devnull, "w")
    return comm
