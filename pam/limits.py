"""Limits that hold whatever the program does: the run's deadline (`--timeout`) and its memory
bound (`--max-memory`).

Time. A PE checks the clock between batches of steps, which is cheap but late when one step is
slow (a long write, a huge unification, ML recursion inside one step). So while a run with a
deadline is under way a watchdog (an interval timer: SIGALRM) interrupts the machine at the
deadline, wherever it is, and raises `LimitExceeded` there; the run then ends as for any limit
(exit 4). The batch checks remain for machines run outside the main thread, where a signal
cannot be used. Direct code that loops without returning to the PE may poll
`Deadline.expired()` (a clock read and a comparison).

A single operation in C (a multiplication of numbers with millions of digits) cannot be
interrupted from Python, so a second, hard stop runs in a C thread of its own (a POSIX timer,
Linux): `grace` seconds after the deadline, if the run has not stopped, it writes the limit's
message and ends the process with exit status 4.

Memory. `--max-memory` bounds the process's data (VmData: its private writable memory, what
the heap grows in). While the machine runs, the watchdog looks at it every MEMORY_LOOK seconds
of CPU time (SIGPROF) and stops the run with LimitExceeded when it is over the bound. Python
copes badly with allocations failing everywhere at once (it may spin unwinding), so the
kernel's limit (RLIMIT_DATA) is set with headroom above the bound: it only catches a single
huge allocation between two looks, which fails cleanly (MemoryError, also exit 4). The
interpreter, the compiled program and MPI are counted too, so a bound below what the process
already holds is refused.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import re
import resource
import signal
import threading
import time

from pam.errors import LimitExceeded

MAX_TIMEOUT = 365 * 24 * 3600.0  # a year: more is surely a mistake (and overflows timers)
MEMORY_LOOK = 0.01  # CPU seconds between looks at the memory in use under --max-memory


def process_started() -> float:
    """When this process started, on the time.monotonic() clock (Linux: from /proc, so that
    the interpreter's start counts against --timeout too); elsewhere, now."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat", encoding="ascii", errors="replace") as f:
            ticks = int(f.read().rpartition(")")[2].split()[19])  # starttime, field 22
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - age if 0 <= age < 60 else now  # a process started long ago: a library's host


def hard_grace(seconds: float) -> float:
    """How long after the deadline the hard stop waits for the run to stop by itself: within
    the promise of the limit (10% of it, or a second, whichever is more), leaving room."""
    return max(0.5, 0.05 * seconds)


class Deadline:
    """The wall-clock instant at which the run stops (time.monotonic())."""

    __slots__ = ("seconds", "at")

    def __init__(self, seconds: float, start: float | None = None):
        self.seconds = seconds
        self.at = (time.monotonic() if start is None else start) + seconds

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def message(self) -> str:
        return f"time limit of {self.seconds:g} s reached (--timeout)"

    def check(self) -> None:
        if time.monotonic() > self.at:
            raise LimitExceeded(self.message())


class Watchdog:
    """While entered, stops the run at `deadline` (LimitExceeded raised wherever the main
    thread is) and, with `hard`, should that not end it, ends the process `hard_grace` later
    with exit 4 (the command line's choice: a library's host process is not ended). It also
    watches the memory under --max-memory. Entered outside the main thread it does nothing.
    With `interrupt`, a system call that blocks (opening a FIFO that has no writer) is broken
    off at the deadline; without it, calls resume after the signal (MPI's must)."""

    def __init__(self, deadline: Deadline | None, hard: bool = False, interrupt: bool = False):
        self.deadline = deadline
        self.hard_stop = hard
        self.interrupt = interrupt
        self.armed = False
        self.previous = None
        self.hard = None
        self.memory = None  # the previous SIGPROF handler while memory is watched

    def __enter__(self) -> Watchdog:
        d = self.deadline
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
            return self
        if _memory_limit is not None:
            self.memory = signal.signal(signal.SIGPROF, self._look_at_memory)
            signal.siginterrupt(signal.SIGPROF, False)
            signal.setitimer(signal.ITIMER_PROF, MEMORY_LOOK, MEMORY_LOOK)
        if d is None:
            return self
        self.previous = signal.signal(signal.SIGALRM, self._alarm)
        signal.siginterrupt(signal.SIGALRM, self.interrupt)
        self.armed = True
        signal.setitimer(signal.ITIMER_REAL, max(d.remaining(), 1e-3))
        if self.hard_stop:
            self.hard = HardStop.start(d.remaining() + hard_grace(d.seconds), "hpgrem: error: " + d.message())
        return self

    def _alarm(self, signum, frame) -> None:
        if self.armed:
            self.armed = False
            raise LimitExceeded(self.deadline.message())

    def _look_at_memory(self, signum, frame) -> None:
        if self.memory is not None and _data_pages() * _PAGE > _memory_limit:
            self._stop_memory()
            raise LimitExceeded(memory_message())

    def _stop_memory(self) -> None:
        if self.memory is not None:
            previous, self.memory = self.memory, None
            try:
                signal.setitimer(signal.ITIMER_PROF, 0)
            finally:
                signal.signal(signal.SIGPROF, previous)

    def disarm(self) -> None:
        """The run has stopped: no interruption from now on (reports may take their time)."""
        self._stop_memory()
        if self.hard is not None:
            self.hard.cancel()
            self.hard = None
        if self.previous is not None:
            self.armed = False
            try:
                signal.setitimer(signal.ITIMER_REAL, 0)
            finally:
                signal.signal(signal.SIGALRM, self.previous)
                self.previous = None

    def __exit__(self, *exc) -> None:
        self.disarm()


# -- the hard stop: a POSIX timer whose expiry runs in a thread of the C library ----------------
class _Sigevent(ctypes.Structure):
    # struct sigevent (Linux): sigev_value, sigev_signo, sigev_notify, then for SIGEV_THREAD
    # the function and its attributes, padded to 64 bytes
    _fields_ = [("sigev_value", ctypes.c_void_p), ("sigev_signo", ctypes.c_int),
                ("sigev_notify", ctypes.c_int), ("sigev_notify_function", ctypes.c_void_p),
                ("sigev_notify_attributes", ctypes.c_void_p), ("_pad", ctypes.c_byte * 32)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("interval_sec", ctypes.c_long), ("interval_nsec", ctypes.c_long),
                ("value_sec", ctypes.c_long), ("value_nsec", ctypes.c_long)]


_NAME = ctypes.create_string_buffer(b"hpgrem")  # the program's name, as warnx prints it
_KEEP: list = []  # the messages of hard stops started (a few bytes each, one or two a run)
_SIGEV_THREAD = 2
_CLOCK_MONOTONIC = 1
_libc = None


def _load_libc():
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            lib.timer_create, lib.timer_settime, lib.timer_delete, lib.warnx, lib._exit  # all there?
            _libc = lib
        except (OSError, AttributeError):
            _libc = False
    return _libc


class HardStop:
    """Two timers of the C library, each of which calls one C function in a thread of its own,
    needing nothing from Python: `warnx(message)` (the message on stderr, after the program's
    name, set to "hpgrem"), and 50 ms later `_exit(4)`. Where that is not available (not
    glibc), `start` returns None and the watchdog's signal is all there is."""

    def __init__(self, lib, timers: list):
        self.lib = lib
        self.timers = timers

    @classmethod
    def start(cls, after: float, message: str) -> HardStop | None:
        lib = _load_libc()
        if not lib or not math.isfinite(after) or after > MAX_TIMEOUT:
            return None
        # warnx prints "<program name>: <format>": the format is the message after "hpgrem: "
        text = re.sub(r"^hpgrem: ", "", message).replace("%", "%%").encode("utf-8", "replace")
        fmt = ctypes.create_string_buffer(text)
        try:
            ctypes.c_char_p.in_dll(lib, "program_invocation_short_name").value  # glibc only
            ctypes.c_void_p.in_dll(lib, "program_invocation_short_name").value = ctypes.addressof(_NAME)
        except ValueError:
            return None
        _KEEP.append(fmt)  # a timer may fire after this object is gone: its text must not be
        timers = []
        stop = cls(lib, timers)
        for function, value, delay in ((lib.warnx, ctypes.addressof(fmt), after),
                                       (lib._exit, 4, after + 0.05)):
            event = _Sigevent()
            event.sigev_notify = _SIGEV_THREAD
            event.sigev_value = value
            event.sigev_notify_function = ctypes.cast(function, ctypes.c_void_p).value
            timer = ctypes.c_void_p()
            if lib.timer_create(_CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(timer)) != 0:
                stop.cancel()
                return None
            timers.append(timer)
            spec = _Itimerspec(0, 0, int(delay), int((delay % 1) * 1e9))
            if lib.timer_settime(timer, 0, ctypes.byref(spec), None) != 0:
                stop.cancel()
                return None
        return stop

    def cancel(self) -> None:
        for timer in self.timers:
            self.lib.timer_delete(timer)
        self.timers.clear()


# -- memory -------------------------------------------------------------------------------------
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes from `--max-memory`'s SIZE: a number with an optional unit K, M, G or T (KiB, MiB,
    GiB, TiB; a trailing "B" or "iB" is allowed). Raises ValueError with a one-line message."""
    m = re.fullmatch(r"\s*([0-9]{1,15}(?:\.[0-9]{1,6})?)\s*([KMGT]?)(?:I?B)?\s*", text.upper())
    if not m:
        raise ValueError(f"--max-memory expects a size such as 512M or 2G, got {text!r}")
    size = int(float(m[1]) * _UNITS[m[2]])
    if size <= 0:
        raise ValueError("--max-memory must be positive")
    return size


_PAGE = resource.getpagesize()


def _data_pages() -> int:
    """Pages of data and stack (/proc/self/statm: one short read, no parsing of names)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[5])
    except (OSError, ValueError, IndexError):
        return 0


def data_in_use() -> int | None:
    """The bytes of private writable memory this process holds now (VmData), or None."""
    return _status_bytes("VmData:") or None


def show_size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}" if n % scale == 0 else f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


_memory_limit: int | None = None  # the bound set by limit_memory, for the message


def limit_memory(size: int) -> None:
    """Bound this process's data to `size` bytes. Raises ValueError (a one-line message) when
    the bound is below what it already holds (with room to start the run)."""
    used = data_in_use()
    room = 16 << 20
    if used is not None and size < used + room:
        raise ValueError(f"--max-memory {show_size(size)} is too small: hpgrem holds "
                         f"{show_size(used)} before the program starts")
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    kernel = size + max(64 << 20, size // 4)  # headroom: see the module's docstring
    if hard != resource.RLIM_INFINITY:
        kernel = min(kernel, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (kernel, hard))
    global _memory_limit
    _memory_limit = size


def lift_memory_limit() -> None:
    """Give the report of a memory limit room to be written."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
    except (ValueError, OSError):
        pass


def out_of_memory(error: BaseException) -> bool:
    """Whether `error` means the process ran out of memory: a MemoryError, or the SystemError
    ("error return without exception set") a deep recursion gives when an allocation fails
    under a cap on the address space (`ulimit -v`), told by the process having reached the cap."""
    if isinstance(error, MemoryError):
        return True
    if not isinstance(error, SystemError):
        return False
    for limit, field in ((resource.RLIMIT_AS, "VmPeak:"), (resource.RLIMIT_DATA, "VmData:")):
        soft = resource.getrlimit(limit)[0]
        if soft != resource.RLIM_INFINITY and _status_bytes(field) >= 0.9 * soft:
            return True
    return False


def _status_bytes(field: str) -> int:
    """A size of /proc/self/status (`VmPeak:`, `VmData:`) in bytes; 0 where not known."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def memory_message() -> str:
    """What a MemoryError means: the bound of --max-memory, or the machine's memory."""
    if _memory_limit is None:
        return "out of memory"
    return f"memory limit of {show_size(_memory_limit)} reached (--max-memory)"


__all__ = ["Deadline", "HardStop", "Watchdog", "data_in_use", "hard_grace", "limit_memory",
           "lift_memory_limit", "memory_message", "out_of_memory", "parse_size"]
