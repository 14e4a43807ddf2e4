"""One trainer per output directory (`melissa_trainer.trainer.output_lock`), with real processes.

A holder process (tests/scripts/hold_output_lock.py) takes the lock as a trainer's rank
0 does; the tests check that another taker is refused at once with the holder named,
waits for a holder that says it is stopping, and takes the lock at once after the
holder was SIGKILLed (the kernel releases it). The trainer-level checks construct real
`OnlineTrainer`s (and a 2-rank `accelerate launch`, whose ranks must all fail when rank
0 is refused, not hang).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy
from test_crash_resume import Run

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.trainer.lock_holder import LOCK_FILE, OutputDirLocked
from melissa_trainer.trainer.output_lock import OutputDirLock

pytestmark = pytest.mark.e2e  # every test here starts a process

HOLDER = Path(__file__).parents[1] / "scripts" / "hold_output_lock.py"
#: the pytest timeout of a test that starts one holder: a holder's start imports the
#: trainer package (~3.4 CPU-s: 78 s wall at load average 20 on 2 cores, past the old
#: 60 s timeout, which four of these tests hit in one run); a bound on a hang only
ONE_HOLDER_TIMEOUT = 300
#: a `stopping_wait` far beyond any test's timeout: a taker that waits where it must
#: not fails the test by its timeout marker, not by a figure of the machine's speed
NEVER = 100.0 * ONE_HOLDER_TIMEOUT


class Holder:
    """A process holding `output_dir`'s lock until `go()` (or a kill)."""

    def __init__(self, tmp: Path, output_dir: Path, state: str = "running") -> None:
        self.go_file = tmp / f"go-{output_dir.name}-{state}"
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
        self.proc = subprocess.Popen(
            [sys.executable, str(HOLDER), str(output_dir), state, str(self.go_file)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until it holds the lock, or dies
        assert line.strip() == "held", self.proc.stderr.read() if self.proc.stderr else ""

    def go(self) -> None:
        self.go_file.touch()
        assert self.proc.wait(30) == 0

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def holders(tmp_path: Path) -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for h in made:
        h.close()


@pytest.mark.timeout(ONE_HOLDER_TIMEOUT)
def test_a_second_taker_is_refused_at_once_naming_the_holder(
    tmp_path: Path, holders: list[Holder]
) -> None:
    out = tmp_path / "out"
    holder = Holder(tmp_path, out)
    holders.append(holder)
    # (a wait for the running holder would outlast this test's timeout: refused at once
    # is the only way to pass, whatever the machine's load; no clock read)
    with pytest.raises(OutputDirLocked) as refused:
        OutputDirLock(out, "second").acquire(stopping_wait=NEVER)
    message = str(refused.value)
    assert f"pid {holder.proc.pid}" in message
    assert f"host {socket.gethostname()}" in message and "since 20" in message
    assert "run holder" in message and "--output_dir" in message
    assert refused.value.holder is not None and refused.value.holder.pid == holder.proc.pid
    holder.go()  # its exit releases the lock: the next taker gets it
    lock = OutputDirLock(out, "third")
    lock.acquire(stopping_wait=0.0)
    assert '"run_id": "third"' in (out / LOCK_FILE).read_text()
    lock.release()


FOREIGN = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, b"locked by a backup tool, not JSON")
print("held", flush=True)
time.sleep(120)
"""


@pytest.mark.timeout(ONE_HOLDER_TIMEOUT)
def test_a_held_lock_whose_record_is_unreadable_is_refused(
    tmp_path: Path, holders: list[Holder]
) -> None:
    """The flock is the truth: a holder whose record was truncated, and a foreign
    program holding the flock with a record that is not JSON, both refuse a taker (who
    once took an unreadable record for a free lock), naming the pid from /proc/locks."""
    out = tmp_path / "out"
    holder = Holder(tmp_path, out)
    holders.append(holder)
    os.truncate(out / LOCK_FILE, 0)  # a user's `> trainer.lock` while the trainer runs
    lock = OutputDirLock(out, "second")
    with pytest.raises(OutputDirLocked) as refused:
        lock.acquire(stopping_wait=60.0)  # unknown state: refused at once, not waited for
    assert not lock.held and refused.value.holder is None
    assert f"held by pid {holder.proc.pid}" in str(refused.value)
    assert f"kill {holder.proc.pid}" in str(refused.value)
    holder.go()

    foreign = subprocess.Popen(
        [sys.executable, "-c", FOREIGN, str(out / LOCK_FILE)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert foreign.stdout is not None and foreign.stdout.readline().strip() == "held"
        with pytest.raises(OutputDirLocked, match=f"held by pid {foreign.pid} on this host"):
            OutputDirLock(out, "third").acquire()
        assert (out / LOCK_FILE).read_bytes().startswith(b"locked by a backup tool")
    finally:
        foreign.kill()
        foreign.wait(30)
        assert foreign.stdout is not None
        foreign.stdout.close()
    lock = OutputDirLock(out, "fourth")  # its death released the flock
    lock.acquire(stopping_wait=0.0)
    assert lock.held
    lock.release()


@pytest.mark.timeout(ONE_HOLDER_TIMEOUT)
def test_a_sigkilled_holder_does_not_block_the_next_run(
    tmp_path: Path, holders: list[Holder]
) -> None:
    out = tmp_path / "out"
    holder = Holder(tmp_path, out)
    holders.append(holder)
    os.kill(holder.proc.pid, signal.SIGKILL)
    assert holder.proc.wait(30) == -signal.SIGKILL
    assert f'"pid": {holder.proc.pid}' in (out / LOCK_FILE).read_text()  # a stale record
    lock = OutputDirLock(out, "requeued")
    lock.acquire(stopping_wait=NEVER)  # (a wait for the dead holder: past the timeout)
    assert f'"pid": {os.getpid()}' in (out / LOCK_FILE).read_text()
    lock.release()


@pytest.mark.timeout(2 * ONE_HOLDER_TIMEOUT)  # (two holders)
@pytest.mark.parametrize("state", ["stopping", "ended"])
def test_a_stopping_holder_is_waited_for(tmp_path: Path, holders: list[Holder], state: str) -> None:
    """A holder that says it is stopping, or that it has ended (`release` writes it
    just before its unlock), is waited for rather than refused."""
    out = tmp_path / "out"
    holder = Holder(tmp_path, out, state=state)
    holders.append(holder)
    lock = OutputDirLock(out, "next")
    errors: list[BaseException] = []

    def take() -> None:
        try:
            lock.acquire(stopping_wait=60.0)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    taker = threading.Thread(target=take)
    taker.start()
    try:
        # the holder is alive and holds the lock: the taker cannot have it
        assert holder.proc.poll() is None and not lock.held and taker.is_alive()
        holder.go()
        taker.join(30)
        assert not taker.is_alive() and not errors, errors
        assert lock.held
    finally:
        holder.go_file.touch()
        taker.join(60)
        lock.release()
    # a stopping holder that outlasts the bound: refused, saying it waited
    holder2 = Holder(tmp_path, tmp_path / "out2", state="stopping")
    holders.append(holder2)
    with pytest.raises(OutputDirLocked, match=r"stopping\) \(waited 0 s"):
        OutputDirLock(tmp_path / "out2", "late").acquire(stopping_wait=0.2)


def _trainer(out: Path) -> OnlineTrainer:
    """A trainer of `out` that starts afresh each time (the earlier one's checkpoints
    moved aside: what is tested here is the lock)."""
    model = small_model()
    args = TrainingArguments(
        output_dir=str(out), batch_size=4, disable_progress_bar=True, overwrite_output_dir=True
    )
    return OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.01),
        train_source=list(linear_samples(16)),
        process_sample=xy,
    )


@pytest.mark.timeout(120)
def test_trainers_lock_their_output_dir_until_train_ends(
    tmp_path: Path, holders: list[Holder]
) -> None:
    out = tmp_path / "out"
    first = _trainer(out)
    assert '"state": "running"' in (out / LOCK_FILE).read_text()
    refused: list[str] = []

    class Intruder(Hook):  # in one process as well: refused while `first` trains
        def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
            if not refused:
                with pytest.raises(OutputDirLocked, match=f"pid {os.getpid()}") as info:
                    _trainer(out)
                refused.append(str(info.value))

    first.hooks.add(Intruder())
    first.train()
    assert len(refused) == 1
    # released when train() returned, saying so: not "stopping", which reads as a holder
    # about to exit (a user trial read the finished run's file so)
    assert '"state": "ended"' in (out / LOCK_FILE).read_text()
    _trainer(out).train()
    # a trainer built and not trained (a notebook cell run again) is superseded
    dropped = _trainer(out)
    again = _trainer(out)
    with pytest.raises(RuntimeError, match="a newer OnlineTrainer of this process took"):
        dropped.train()
    again.train()
    # another process's trainer: refused before its source is configured
    holders.append(Holder(tmp_path, tmp_path / "held"))
    with pytest.raises(OutputDirLocked, match="run holder"):
        _trainer(tmp_path / "held")


@pytest.mark.timeout(240)
def test_every_rank_fails_when_rank_0_is_refused(tmp_path: Path, holders: list[Holder]) -> None:
    """accelerate launch with 2 processes on a held output_dir: both ranks exit, none
    waits for the other (the run's launcher exits non-zero); the holder is named once,
    by rank 0 (`refusals_end_the_program`: the other rank's copy is quiet)."""
    holder = Holder(tmp_path, tmp_path / "out")
    holders.append(holder)
    run = Run(tmp_path, "two-ranks", ranks=2, paced=False)
    code = run.wait(200)
    output = (tmp_path / "two-ranks.stderr").read_text()
    assert code != 0, output
    said = [line for line in output.splitlines() if "error: output_dir" in line]
    assert len(said) == 1 and f"pid {holder.proc.pid}" in said[0], output  # rank 0's line
    assert not (tmp_path / "out" / "rendezvous").exists()  # nothing launched, nothing written
