"""Says which MPI rank died, and how, when mpiexec ends a job because of it.

When a rank is killed (`kill -9`, the kernel's out-of-memory killer) or crashes, mpiexec kills
every other rank at once: no rank lives to say what happened. So rank 0 starts this small
process (`python -m pam.sentinel DIR RANK:PID ...`, in a session of its own so that mpiexec's
clean-up leaves it be) to watch the ranks on its host, each through a FIFO of its own in DIR:
the rank holds its write end open for as long as it lives, and writes its exit status there
when it leaves by itself (`announce`). The end of a FIFO without a status is a rank that died.
The kernel closes a dying process's files before mpiexec can notice and kill the others, and
epoll lists descriptors in the order they became ready, so the first rank seen dying is the
one that died first. The sentinel reports it on stderr (which it shares with rank 0), with
the signal or status the kernel still shows, then leaves; it leaves quietly when rank 0 has
said how the run ended, or when every rank it watches has ended.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile

_mine: list = []  # this rank's FIFO, open for writing while it lives


def start(comm) -> None:
    """Called by every rank after MPI starts: rank 0 starts the sentinel for the ranks on its
    host, and each of them opens its FIFO. Nothing is watched where this fails."""
    import socket
    here = (socket.gethostname(), os.getpid())
    everyone = comm.gather(here, root=0)
    folder = None
    if comm.Get_rank() == 0:
        readers = []
        try:
            folder = tempfile.mkdtemp(prefix="hpgrem-ranks-")
            watched = []
            for rank, (host, pid) in enumerate(everyone):
                if host == here[0]:
                    path = os.path.join(folder, str(rank))
                    os.mkfifo(path, 0o600)
                    # open for reading now: ranks open theirs for writing before the sentinel runs
                    readers.append(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
                    watched.append(f"{rank}:{pid}:{readers[-1]}")
            subprocess.Popen([sys.executable, "-m", "pam.sentinel", folder, *watched],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=readers,
                             start_new_session=True)
        except (OSError, ValueError):
            if folder is not None:
                _remove(folder)
            folder = None  # no sentinel: the run goes on, only this report is lost
        finally:
            for fd in readers:
                os.close(fd)
    folder = comm.bcast(folder, root=0)
    if folder is not None:
        try:
            _mine.append(os.open(os.path.join(folder, str(comm.Get_rank())), os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def announce(status: int) -> None:
    """This rank leaves by itself with `status` (never blocks)."""
    while _mine:
        fd = _mine.pop()
        try:
            os.write(fd, f"{status}\n".encode())
        except OSError:
            pass
        os.close(fd)


def _how(pid: int) -> str:
    """How process `pid` ended: from its entry in /proc while it is a zombie (waited for
    briefly: its files close before it is one), if its parent has not reaped it by then."""
    try:
        pidfd = os.pidfd_open(pid)
        select.select([pidfd], [], [], 0.05)
        os.close(pidfd)
    except (OSError, AttributeError):
        pass
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rpartition(")")[2].split()
        if fields[0] == "Z":
            status = int(fields[49])  # exit_code, field 52, as waitpid reports it
            if status & 0x7F:
                number = status & 0x7F
                try:
                    name = signal.Signals(number).name
                except ValueError:
                    name = "?"
                return f"was killed by signal {number} ({name})"
            return f"exited with status {(status >> 8) & 0xFF} without a word"
    except (OSError, IndexError, ValueError):
        pass
    return "died (killed, or it crashed)"


def main(argv: list[str]) -> int:
    folder, *watched = argv
    ranks: dict[int, tuple[int, int]] = {}  # FIFO read end -> (rank, pid)
    for item in watched:
        rank, pid, fd = map(int, item.split(":"))
        ranks[fd] = (rank, pid)
    poll = select.epoll()
    for fd in ranks:
        poll.register(fd, select.EPOLLIN)
    said: dict[int, bytes] = {}
    reported = False
    try:
        while ranks:
            for fd, _ in poll.poll():  # in the order they became ready
                if fd not in ranks:
                    continue
                data = os.read(fd, 64)
                rank, pid = ranks[fd]
                if data:
                    said[rank] = said.get(rank, b"") + data
                    continue
                del ranks[fd]  # its end: the rank's process is gone
                poll.unregister(fd)
                os.close(fd)
                if rank not in said and not said and not reported:
                    # Only the first death is news: mpiexec kills the other ranks, and once a
                    # rank has left by itself (and said why), later deaths follow from that.
                    reported = True
                    _say(f"rank {rank} (pid {pid}) {_how(pid)}; mpiexec ends the job with it")
                if rank == 0:
                    return 0
    finally:
        _remove(folder)
    return 0


def _remove(folder: str) -> None:
    """The FIFOs and their folder."""
    try:
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    except OSError:
        pass


def _say(text: str) -> None:
    try:
        os.write(2, f"hpgrem: error: {text}\n".encode())
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
