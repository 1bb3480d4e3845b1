"""The files the command line writes (`-o`, `--stats-json`), written through what their path
names (spec/cli.md, "Output files"):

- a regular file, or a name not there yet: atomically (a temporary file beside it, synced, then
  renamed over it), so a failed write leaves the old content whole; an existing file keeps its
  mode (and, where hpgrem may, its owner), a new one gets 0666 less the umask;
- a symbolic link: followed; the file it leads to is written as above, the link stays;
- a regular file of several names (hard links): written in place, so that every name sees the
  new content (a rename would give this name a file of its own and leave the others behind);
- a standard stream (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`): written
  on that descriptor, after what hpgrem wrote there before (reopening it would truncate a file
  the shell redirected it to);
- anything else (a device such as /dev/null, a FIFO): opened and written, never replaced.

An output that is one of the command's inputs (the same file, also through links) is refused
before anything is read. Every failure is an OutputError of one line, exit status 2.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hpgrem.errors import UsageError

_STREAM = re.compile(r"/dev/(?:(stdout)|(stderr)|fd/(\d+))|/proc/self/fd/(\d+)")


class OutputError(UsageError):
    """An output file cannot be written (exit status 2)."""


@dataclass(frozen=True, slots=True)
class _Target:
    """Where and how an output path is written."""

    how: str  # "atomic", "in place", "open" or "descriptor"
    path: Path  # the file written (symbolic links followed)
    fd: int = -1  # for "descriptor"


def check_output(path: str, inputs: tuple[str, ...] = ()) -> None:
    """Raise OutputError now if `path` cannot be written later (a run may take long) or is
    one of `inputs`."""
    target = _target(path)
    _refuse_inputs(path, inputs)
    if target.how == "descriptor":
        return
    if target.how in ("atomic", "in place", "open") and target.path.exists():
        if not os.access(target.path, os.W_OK):
            raise OutputError(f"{path}: cannot write: permission denied")
        return
    folder = target.path.parent
    if not folder.is_dir():
        raise OutputError(f"{path}: cannot write: no such directory {str(folder)!r}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: cannot write: permission denied")


def write_output(path: str, text: str | bytes) -> None:
    """Write `text` (UTF-8, or bytes as they are) to `path` through what it names; OutputError
    if that fails."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    try:
        target = _target(path)
        if target.how == "descriptor":
            _write_descriptor(target.fd, data)
        elif target.how == "atomic":
            _write_atomically(target.path, data)
        else:
            flags = os.O_WRONLY | os.O_NOCTTY | (os.O_TRUNC if target.how == "in place" else 0)
            with open(os.open(target.path, flags), "wb") as f:
                f.write(data)
                f.flush()
                if target.how == "in place":
                    os.fsync(f.fileno())
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror or e}") from None


def _target(path: str) -> _Target:
    m = _STREAM.fullmatch(os.path.normpath(path))
    if m:
        fd = 1 if m[1] else 2 if m[2] else int(m[3] or m[4])
        return _Target("descriptor", Path(path), fd)
    resolved = Path(os.path.realpath(path))  # a dangling link: the file it names is made
    try:
        st = resolved.stat()
    except FileNotFoundError:
        return _Target("atomic", resolved)
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path}: cannot write: it is a directory")
    if not stat.S_ISREG(st.st_mode):
        return _Target("open", resolved)
    if st.st_nlink > 1 or not os.access(resolved.parent, os.W_OK | os.X_OK):
        return _Target("in place", resolved)  # no temporary file can be made beside it
    return _Target("atomic", resolved)


def _refuse_inputs(path: str, inputs: tuple[str, ...]) -> None:
    try:
        out = os.stat(path)
    except OSError:  # not there yet (or unreadable): no input it could be
        return
    for name in inputs:
        try:
            same = os.path.samestat(out, os.stat(name))
        except OSError:
            continue
        if same:
            raise OutputError(f"{path}: input file is the same as output file")


def _write_descriptor(fd: int, data: bytes) -> None:
    for stream in (sys.stdout, sys.stderr):  # what hpgrem wrote there comes first
        if stream is not None:
            stream.flush()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_atomically(target: Path, data: bytes) -> None:
    mode, owner = _mode_and_owner(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".hpgrem-", suffix=".tmp")  # any name is short enough
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            if owner is not None:
                try:
                    os.fchown(f.fileno(), *owner)
                except PermissionError:  # only root may give a file away: it becomes ours
                    pass
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:  # the rename itself lasts once the folder is synced
        folder = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError:
        pass


def _mode_and_owner(target: Path) -> tuple[int, tuple[int, int] | None]:
    """An existing file's mode and owner; for a new one, what a plain open() would give."""
    try:
        st = target.stat()
        return st.st_mode & 0o7777, (st.st_uid, st.st_gid)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask, None
