"""Output files (issue 16, items 1 and 2; spec/cli.md, "Output files"): `-o` and `--stats-json`
write through what their path names (a device, a FIFO, a symbolic link, a hard link, a standard
stream), report a write error in one line with exit 2, and refuse to overwrite an input. Run as
root (the suite's user here) and, where permissions matter, as an unprivileged user.

Destructive cases run only in folders the tests make; /dev/null and /dev/full are written to
and checked to still be devices afterwards."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from conftest import EXAMPLES, ROOT, hpgrem
from hpgrem.driver.cli import main
from hpgrem.driver.outputs import OutputError, write_output

NREV = EXAMPLES / "nrev.par"
IS_ROOT = os.geteuid() == 0
NOBODY = 65534


def run(*args: str) -> int:
    """The command in-process (fast); its streams go to pytest's capture."""
    return main(list(args))


@pytest.fixture
def program(tmp_path) -> Path:
    path = tmp_path / "q.par"
    path.write_text(NREV.read_text())
    return path


@pytest.fixture(scope="module")
def expected_hpg(tmp_path_factory) -> bytes:
    out = tmp_path_factory.mktemp("hpg") / "nrev.hpg"
    assert main(["compile", str(NREV), "-o", str(out)]) == 0
    return out.read_bytes()


def _device(path: str) -> bool:
    return stat.S_ISCHR(os.stat(path).st_mode)


# -- what a path names is written through, never replaced -------------------------------------
def test_the_null_device_is_written_not_replaced(program, capfd):
    assert run("compile", str(program), "-o", "/dev/null") == 0
    assert run("run", str(program), "--stats-json", "/dev/null") == 0
    assert _device("/dev/null") and capfd.readouterr().err == ""


@pytest.mark.parametrize("command", [["compile", "-o", "/dev/full"], ["run", "--stats-json", "/dev/full"]])
def test_a_full_device_is_one_clear_error(command, program, capfd):
    args = [command[0], str(program), *command[1:]]
    assert run(*args) == 2
    err = capfd.readouterr().err
    assert err == "hpgrem: error: /dev/full: cannot write: No space left on device\n"
    assert _device("/dev/full")


def test_a_fifo_is_written_into(program, tmp_path, expected_hpg):
    fifo = tmp_path / "out.hpg"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    r = hpgrem("compile", str(NREV), "-o", str(fifo), timeout=60)
    reader.join(timeout=60)
    assert r.returncode == 0, r.stderr
    assert got == [expected_hpg] and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_symlink_is_followed_and_stays(program, tmp_path, expected_hpg):
    target, link = tmp_path / "target.hpg", tmp_path / "link.hpg"
    target.write_text("old")
    link.symlink_to(target.name)
    assert run("compile", str(NREV), "-o", str(link)) == 0
    assert link.is_symlink() and target.read_bytes() == expected_hpg
    dangling = tmp_path / "dangling.hpg"
    dangling.symlink_to("made.hpg")
    assert run("compile", str(NREV), "-o", str(dangling)) == 0
    assert dangling.is_symlink() and (tmp_path / "made.hpg").read_bytes() == expected_hpg


def test_every_name_of_a_hard_link_sees_the_new_content(tmp_path, expected_hpg):
    first, second = tmp_path / "a.hpg", tmp_path / "b.hpg"
    first.write_text("old")
    os.link(first, second)
    assert run("compile", str(NREV), "-o", str(second)) == 0
    assert first.read_bytes() == second.read_bytes() == expected_hpg
    assert os.stat(first).st_nlink == 2 and os.path.samefile(first, second)


def test_standard_streams_are_written_on_their_descriptor(tmp_path):
    # stdout redirected to a file: the program's output first, then the statistics, both kept
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        r = subprocess.run([sys.executable, "-m", "hpgrem.driver.cli", "run", str(NREV),
                            "--stats-json", "/dev/stdout"], stdout=f, stderr=subprocess.PIPE,
                           text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    first, rest = out.read_text().split("\n", 1)
    assert first.startswith("[30,29,") and json.loads(rest)["pes"] == 1
    r = hpgrem("compile", str(NREV), "-o", "/dev/stderr")
    assert r.returncode == 0 and json.loads(r.stderr)["format"] == "hpgrem" and r.stdout == ""


def test_a_pipe_whose_reader_left_is_a_write_error():
    p = subprocess.Popen([sys.executable, "-m", "hpgrem.driver.cli", "compile", str(NREV), "-o", "/dev/stdout"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    p.stdout.close()  # long before the compiled graph is written
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and err == b"hpgrem: error: /dev/stdout: cannot write: Broken pipe\n"


def test_a_replaced_file_keeps_its_mode_and_owner(tmp_path, expected_hpg):
    out = tmp_path / "out.hpg"
    out.write_text("old")
    out.chmod(0o640)
    if IS_ROOT:
        os.chown(out, NOBODY, NOBODY)
    assert run("compile", str(NREV), "-o", str(out)) == 0
    st = out.stat()
    assert out.read_bytes() == expected_hpg and st.st_mode & 0o777 == 0o640
    assert st.st_uid == (NOBODY if IS_ROOT else os.getuid())


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    out = tmp_path / "out.json"
    out.write_text("old")

    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OutputError, match="cannot write: No space left on device"):
        write_output(str(out), "new")
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["out.json"]


def test_a_name_as_long_as_the_system_allows_is_written(tmp_path):
    out = tmp_path / ("x" * 250)  # the temporary file beside it needs a name of its own that fits
    write_output(str(out), "text")
    assert out.read_text() == "text" and os.listdir(tmp_path) == [out.name]


# -- an output that is an input --------------------------------------------------------------------
def test_an_output_that_is_the_input_is_refused(program, tmp_path, capfd):
    text = program.read_text()
    link, hard = tmp_path / "link.hpg", tmp_path / "hard.json"
    link.symlink_to(program)
    os.link(program, hard)
    for args in (["compile", str(program), "-o", str(program)],
                 ["run", str(program), "--stats-json", str(program)],
                 ["compile", str(program), "-o", str(link)],
                 ["run", str(program), "--stats-json", str(hard)],
                 ["run", str(link.with_name("q.par")), "--stats-json", f"{tmp_path}/./q.par"]):
        assert run(*args) == 2, args
        err = capfd.readouterr()
        assert err.err.endswith(": input file is the same as output file\n") and err.out == ""
    assert program.read_text() == text and link.is_symlink()


def test_the_input_through_a_standard_stream_is_refused(program):
    text = program.read_text()
    with open(program, "a") as f:
        r = subprocess.run([sys.executable, "-m", "hpgrem.driver.cli", "compile", str(program), "-o", "/dev/stdout"],
                           stdout=f, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "input file is the same as output file" in r.stderr
    assert program.read_text() == text


# -- as an unprivileged user --------------------------------------------------------------------
# The interpreter may live where an unprivileged user cannot read it (root's home), so the
# child starts as root, runs the command once to import everything it needs, then drops to
# `nobody` for good and runs the commands under test, printing their exit statuses.
DROP = """
import json, os, sys
from hpgrem.driver.cli import main
warm, cases = json.loads(sys.argv[1])
main(warm)
os.setgroups([]); os.setgid({uid}); os.setuid({uid})
print(json.dumps([main(c) for c in cases]))
"""


@pytest.fixture
def shared_dir():
    """A folder `nobody` can enter but not write (the tests' own tmp_path is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="hpgrem-outputs-"))
    folder.chmod(0o755)
    yield folder
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()


@pytest.mark.skipif(not IS_ROOT, reason="dropping privileges needs root")
def test_outputs_as_an_unprivileged_user(shared_dir):
    prog = shared_dir / "q.par"
    prog.write_text(NREV.read_text())
    own = shared_dir / "own.hpg"  # nobody's file in a folder nobody cannot write: written in place
    own.write_text("old")
    os.chown(own, NOBODY, NOBODY)
    theirs = shared_dir / "theirs.hpg"  # root's file, read-only to nobody
    theirs.write_text("old")
    theirs.chmod(0o644)
    cases = [["compile", str(prog), "-o", "/dev/null"],
             ["compile", str(prog), "-o", str(own)],
             ["compile", str(prog), "-o", str(theirs)],
             ["compile", str(prog), "-o", str(shared_dir / "new.hpg")],
             ["compile", str(prog), "-o", "/dev/full"],
             ["run", str(prog), "--stats-json", str(prog)]]
    warm = ["compile", str(prog), "-o", str(shared_dir / "warm.hpg")]
    r = subprocess.run([sys.executable, "-c", DROP.format(uid=NOBODY), json.dumps([warm, cases])],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert json.loads(r.stdout) == [0, 0, 2, 2, 2, 2], r.stderr
    lines = r.stderr.splitlines()
    assert lines == [f"hpgrem: error: {theirs}: cannot write: permission denied",
                     f"hpgrem: error: {shared_dir / 'new.hpg'}: cannot write: permission denied",
                     "hpgrem: error: /dev/full: cannot write: No space left on device",
                     f"hpgrem: error: {prog}: input file is the same as output file"]
    assert own.read_text().startswith('{"format":"hpgrem"') and own.stat().st_uid == NOBODY
    assert theirs.read_text() == "old" and not (shared_dir / "new.hpg").exists()
    assert _device("/dev/null") and _device("/dev/full")
