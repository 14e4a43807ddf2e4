"""A running trainer's output directory removed (``rm -rf``) or its lock file replaced:
a second trainer of the same host is still refused, naming the first one's pid (the
host lock of `melissa_trainer.trainer.host_lock`), and a run after the first one's
``kill -9`` is not. Real holder processes (tests/scripts/hold_output_lock.py).

Before the host lock, the second taker locked the new file of the same name and was let
in (a user trial: ``rm -rf outputs`` and a rerun while the first still trained).
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_output_lock import NEVER, ONE_HOLDER_TIMEOUT, Holder

from melissa_trainer.trainer.host_lock import HostLock
from melissa_trainer.trainer.lock_holder import LOCK_FILE, OutputDirLocked
from melissa_trainer.trainer.output_lock import OutputDirLock

pytestmark = pytest.mark.e2e  # (a holder process)


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for h in made:
        h.close()


@pytest.mark.timeout(ONE_HOLDER_TIMEOUT)
@pytest.mark.parametrize("how", ["directory removed", "lock file replaced"])
def test_a_second_taker_is_refused_after_the_lock_file_went(
    tmp_path: Path, holders: list[Holder], how: str
) -> None:
    out = tmp_path / "out"
    holder = Holder(tmp_path, out)
    holders.append(holder)
    if how == "directory removed":
        shutil.rmtree(out)
    else:
        (out / LOCK_FILE).unlink()
        (out / LOCK_FILE).write_text("")
    second = OutputDirLock(out, "second")
    with pytest.raises(OutputDirLocked) as refused:
        second.acquire(stopping_wait=NEVER)  # (a wait would outlast the timeout)
    assert refused.value.host_pid == holder.proc.pid and not second.held
    # a refused taker makes nothing (before, it made the removed directory again, empty)
    assert out.exists() == (how == "lock file replaced")
    message = str(refused.value)
    assert f"pid {holder.proc.pid} on this host holds its path" in message
    assert "removed while that trainer runs" in message and f"kill {holder.proc.pid}" in message
    holder.go()  # its exit frees the path: the next taker gets it at once
    third = OutputDirLock(out, "third")
    third.acquire(stopping_wait=0.0)
    assert '"run_id": "third"' in (out / LOCK_FILE).read_text()
    third.release()


@pytest.mark.timeout(ONE_HOLDER_TIMEOUT)
def test_a_resume_after_kill_9_of_a_holder_whose_directory_was_removed_is_not_refused(
    tmp_path: Path, holders: list[Holder]
) -> None:
    out = tmp_path / "out"
    holder = Holder(tmp_path, out)
    holders.append(holder)
    shutil.rmtree(out)
    os.kill(holder.proc.pid, signal.SIGKILL)
    assert holder.proc.wait(30) == -signal.SIGKILL
    lock = OutputDirLock(out, "requeued")
    lock.acquire(stopping_wait=NEVER)  # the kernel freed the name with the process
    assert lock.held and f'"pid": {os.getpid()}' in (out / LOCK_FILE).read_text()
    lock.release()


@pytest.mark.timeout(60)
def test_a_trainer_of_this_process_is_found_after_its_directory_went(tmp_path: Path) -> None:
    """In one process: the first lock, active (training), is found by its path once its
    file is gone; `lost` says what became of the file; a released lock frees the path."""
    out = tmp_path / "out"
    first = OutputDirLock(out, "first")
    first.acquire(stopping_wait=0.0)
    first.active = True
    assert first.lost() is None
    (out / LOCK_FILE).unlink()
    (out / LOCK_FILE).write_text("")
    assert first.lost() == "replaced"
    shutil.rmtree(out)
    assert first.lost() == "removed"
    with pytest.raises(OutputDirLocked, match=f"pid {os.getpid()}.*run first"):
        OutputDirLock(out, "second").acquire(stopping_wait=NEVER)
    assert not out.exists()  # (a refusal makes nothing)
    first.active = False
    first.release()
    assert first.lost() is None  # (not held)
    again = OutputDirLock(out, "again")
    again.acquire(stopping_wait=0.0)
    again.release()


@pytest.mark.timeout(60)
def test_refused_takers_never_fill_the_holders_backlog(tmp_path: Path) -> None:
    """Each refused taker leaves a connection waiting on the holder's socket; the
    holder's `drain` drops them, so the 500th taker still reads the holder's pid."""
    held = HostLock(str(tmp_path))
    assert held.take() is None and held.held
    for _ in range(500):
        assert HostLock(str(tmp_path)).take() == os.getpid()
        held.drain()
    held.release()
    free = HostLock(str(tmp_path))
    assert free.take() is None
    free.release()


REMOVER = Path(__file__).parents[1] / "scripts" / "remove_output_dir.py"


@pytest.mark.timeout(ONE_HOLDER_TIMEOUT)
@pytest.mark.parametrize("mode", ["remove", "replace", "preempt"])
def test_a_trainer_whose_output_dir_was_removed_stops_saying_so(tmp_path: Path, mode: str) -> None:
    """A real trainer's directory removed at step 3 (made again, with another lock
    file, for "replace"; with a SIGTERM, for "preempt"): a second taker meanwhile is
    refused naming its pid; the trainer then stops with exit status 1 and one paragraph,
    no traceback (TensorBoard's writer thread once died with one), and does not make the
    directory again. A preemption's checkpoint is not written: its status is 1, not 143
    (a job script requeues on 143), and the paragraph says so and what a requeued run
    would resume from (before, it said nothing of the SIGTERM)."""
    out, go = tmp_path / "out", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen(
        [sys.executable, str(REMOVER), str(out), str(go), mode],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        # blocks until the hook removed it, or the run died (the log's lines before)
        lines = iter(proc.stdout.readline, "")
        assert any(line.strip() == "removed" for line in lines), proc.stderr.read()
        with pytest.raises(OutputDirLocked) as refused:
            OutputDirLock(out, "second").acquire(stopping_wait=NEVER)
        assert refused.value.host_pid == proc.pid
        go.touch()
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    happened = "was removed and made again" if mode == "replace" else "is gone: output_dir"
    assert err.count(happened) == 1 and "this run stops now" in err, err
    preempted = "The checkpoint that this stop (SIGTERM) asked for is not written, so "
    preempted += "this run exits with status 1, not 143"
    assert (preempted in err) == (mode == "preempt"), err
    if mode == "preempt":  # (its checkpoints were removed with it)
        assert "--resume_from_checkpoint latest on the command line) would find no " in err
        assert "checkpoint there (the run's were removed with it) and start afresh" in err
    assert "Traceback" not in err and "Exception in thread" not in err, err
    # nothing written there since (a checkpoint, TensorBoard's files would have been),
    # and the refused taker made nothing
    left = sorted(p.name for p in out.iterdir()) if out.exists() else None
    assert left == ([LOCK_FILE] if mode == "replace" else None), left
    lock = OutputDirLock(out / "fresh", "next")  # a first trainer's directory is made
    lock.acquire(stopping_wait=0.0)
    assert (out / "fresh" / LOCK_FILE).is_file()
    lock.release()
    lock = OutputDirLock(out, "next")  # the trainer's exit freed the path
    lock.acquire(stopping_wait=0.0)
    lock.release()


@pytest.mark.timeout(30)
def test_a_host_that_refuses_abstract_sockets_keeps_the_file_lock_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A sandbox refusing the bind (EPERM) must not stop a trainer from starting: the
    host lock is skipped, said once. Failed before: the PermissionError was raised."""

    def refuse(self: socket.socket, address: object) -> None:
        raise PermissionError(errno.EPERM, "abstract sockets not allowed here")

    monkeypatch.setattr(socket.socket, "bind", refuse)
    lock = HostLock(str(tmp_path))
    with caplog.at_level(logging.WARNING, "melissa_trainer"):
        assert lock.take() is None
    assert not lock.held
    assert "no host lock" in caplog.text and "abstract sockets not allowed" in caplog.text
