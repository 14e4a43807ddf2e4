"""The host lock's probe (`melissa_trainer.trainer.host_lock`) when its holder does not
drain: a taker reads the holder's pid by connecting to the holder's socket, and each
connection waits there until the holder drains it at an action point. A stopping holder
(writing its last checkpoint, stopping its simulations) reaches none.

Before: a trainer waiting for a stopping holder probed at each poll; after ~64 polls the
holder's backlog was full, the probe went unanswered, and the wait was refused after
~3 s, saying "pid unknown ... was the directory removed?". Real processes: a holder
(tests/scripts/hold_output_lock.py) and a waiter (tests/scripts/wait_output_lock.py).
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_output_lock import NEVER, ONE_HOLDER_TIMEOUT, Holder

from melissa_trainer.trainer.host_lock import _BACKLOG
from melissa_trainer.trainer.lock_holder import OutputDirLocked
from melissa_trainer.trainer.output_lock import OutputDirLock

pytestmark = pytest.mark.e2e  # (holder processes)

WAITER = Path(__file__).parents[1] / "scripts" / "wait_output_lock.py"


def socket_name(output_dir: Path) -> bytes:
    """The host lock's name, made here as its docstring says (not by its code)."""
    digest = hashlib.sha256(str(output_dir.resolve()).encode()).hexdigest()
    return b"\0melissa-trainer-" + digest.encode()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for h in made:
        h.close()


@pytest.fixture
def full_backlog() -> Iterator[list[socket.socket]]:
    """The connections `fill` makes, kept open until the test ends."""
    conns: list[socket.socket] = []
    yield conns
    for conn in conns:
        conn.close()


def fill(conns: list[socket.socket], output_dir: Path) -> None:
    """Connect to the holder's socket until its backlog is full, as many refused takers
    between two of its action points would (a non-blocking connect then says EAGAIN)."""
    for _ in range(100 * _BACKLOG):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.setblocking(False)
        try:
            conn.connect(socket_name(output_dir))
        except OSError as exc:
            conn.close()
            assert exc.errno == errno.EAGAIN, exc  # the backlog is full
            return
        conns.append(conn)
    raise AssertionError(f"{len(conns)} connections and the backlog is not full")


@pytest.mark.timeout(2 * ONE_HOLDER_TIMEOUT)  # (two processes start)
def test_a_waiter_outlasts_the_backlog_of_a_stopping_holder(
    tmp_path: Path, holders: list[Holder]
) -> None:
    """A waiter polls a stopping holder (which drains nothing) many times its backlog,
    is not refused, and takes the lock once the holder exits. Failed before: refused
    after ~64 polls with host_pid 0."""
    out = tmp_path / "out"
    holder = Holder(tmp_path, out, state="stopping")
    holders.append(holder)
    polls = 4 * _BACKLOG
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    waiter = subprocess.Popen(
        [sys.executable, str(WAITER), str(out), str(polls)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert waiter.stdout is not None and waiter.stderr is not None
        # blocks until it polled that often, or ended (refused: its traceback)
        first = waiter.stdout.readline()
        assert first.strip() == f"polled {polls}", waiter.stderr.read()
        assert holder.proc.poll() is None  # (still holding: the waiter waited for it)
        holder.go()
        out_text, err = waiter.communicate(timeout=120)
    finally:
        if waiter.poll() is None:
            waiter.kill()
        waiter.communicate(timeout=30)
    assert waiter.returncode == 0 and out_text.strip() == "taken", err
    assert "waiting up to" in err, err  # it waited, saying so once
    assert err.count("waiting up to") == 1, err


@pytest.mark.timeout(ONE_HOLDER_TIMEOUT)
def test_a_holder_whose_socket_cannot_answer_is_named_by_its_file(
    tmp_path: Path, holders: list[Holder], full_backlog: list[socket.socket]
) -> None:
    """More refused takers than the backlog between two action points: the next one's
    probe goes unanswered, but the lock file names a holder that holds its flock: it is
    refused naming that holder, not as a removed directory. Failed before: host_pid 0,
    "pid unknown ... was the directory removed".
    """
    out = tmp_path / "out"
    holder = Holder(tmp_path, out)
    holders.append(holder)
    fill(full_backlog, out)
    with pytest.raises(OutputDirLocked) as refused:
        OutputDirLock(out, "second").acquire(stopping_wait=NEVER)
    assert refused.value.host_pid is None, refused.value
    assert refused.value.holder is not None and refused.value.holder.pid == holder.proc.pid
    message = str(refused.value)
    assert f"pid {holder.proc.pid}" in message and "run holder, running" in message, message
    assert "removed" not in message, message


@pytest.mark.timeout(ONE_HOLDER_TIMEOUT)
def test_a_removed_directorys_holder_that_cannot_answer_is_found_by_ss(
    tmp_path: Path, holders: list[Holder], full_backlog: list[socket.socket]
) -> None:
    """The directory removed and the holder's backlog full: nothing names its pid; the
    refusal says the path is held and names the command that finds the holder."""
    out = tmp_path / "out"
    holder = Holder(tmp_path, out)
    holders.append(holder)
    name = socket_name(out)[1:].decode()
    shutil.rmtree(out)
    fill(full_backlog, out)
    with pytest.raises(OutputDirLocked) as refused:
        OutputDirLock(out, "second").acquire(stopping_wait=NEVER)
    assert refused.value.host_pid == 0, refused.value
    message = str(refused.value)
    assert "on this host holds its path" in message and "removed while" in message, message
    shown = message.split("'ss -xlp | grep ")[1].split("'")[0]
    assert name.startswith(shown) and len(shown) > len("melissa-trainer-"), message
    if shutil.which("ss") is not None:  # (iproute2: the hint's command finds the holder)
        found = subprocess.run(["ss", "-xlp"], capture_output=True, text=True, check=True).stdout
        line = next(line for line in found.splitlines() if shown in line)
        assert f"pid={holder.proc.pid}," in line, line
