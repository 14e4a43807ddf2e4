"""Two trainers started at the same moment on a fresh output directory: the one that
takes the path's host lock first (`trainer.host_lock`) writes its record in the lock
file a moment later; the other, refused the host lock in between, finds no record
naming the holder.

Failed before: that loser was refused at once as if the directory had been removed
under a running trainer ("... trainer.lock is gone or another file: was the directory
removed while that trainer runs?"). Now it reads the file (no further probe) until the
holder's record shows, and is refused naming it like any running holder (its pid, the
fix: another --output_dir, or wait); a holder that lets the path go meanwhile (its file
lock refused) leaves it to the waiter. The newcomer is a real process stopped between
its two locks: it takes the host lock, then its file lock only once the taker's probe
reached its socket (so the taker has found no record), as `OutputDirLock._try` does.
The oracle: the pid the process was given, and the words as written here."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from melissa_trainer.trainer import output_lock
from melissa_trainer.trainer.lock_holder import OutputDirLocked
from melissa_trainer.trainer.output_lock import OutputDirLock

pytestmark = [
    pytest.mark.e2e,  # (a process of its own)
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the host lock is Linux's"),
]

ROOT = Path(__file__).resolve().parents[2]
#: the newcomer: the host lock of argv[1] taken, "host" printed; once a taker's probe
#: reaches the socket, its file lock taken (argv[2] "take": its record written, "held"
#: printed) or the path let go ("drop": "dropped"); then until its stdin closes
NEWCOMER = textwrap.dedent(
    """
    import select, sys
    from melissa_trainer.trainer.output_dir_errors import make_output_dir
    from melissa_trainer.trainer.output_lock import OutputDirLock

    lock = OutputDirLock(sys.argv[1], "newcomer")
    assert lock._take_host() is None
    print("host", flush=True)
    select.select([lock._host._sock], [], [], 100)  # (a taker probed: it found no record)
    if sys.argv[2] == "take":
        make_output_dir(sys.argv[1])
        assert lock._try_file() == (True, None)
        print("held", flush=True)
    else:
        lock._drop_host()
        print("dropped", flush=True)
    sys.stdin.read()
    """
)


@pytest.fixture
def newcomer(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", NEWCOMER, str(tmp_path / "out"), request.param]
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "host\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.mark.parametrize("newcomer", ["take"], indirect=True)
def test_a_taker_racing_a_new_holder_is_refused_naming_it(
    tmp_path: Path, newcomer: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # (the record's wait long enough for a loaded machine: it ends as the record shows)
    monkeypatch.setattr(output_lock, "RECORD_WAIT", 100.0, raising=False)
    taker = OutputDirLock(tmp_path / "out", "taker")
    with pytest.raises(OutputDirLocked) as refused:
        taker.acquire(stopping_wait=0.0)
    assert newcomer.stdout is not None and newcomer.stdout.readline() == "held\n"
    said = str(refused.value)
    assert "removed" not in said, said  # (before: "was the directory removed ...")
    who = f"is in use by another trainer (host {os.uname().nodename}, pid {newcomer.pid}, since "
    assert who in said and ", run newcomer, running)" in said, said
    assert "Give this run another --output_dir, or wait for that trainer to end" in said, said
    assert refused.value.holder is not None and refused.value.holder.pid == newcomer.pid
    assert not taker.held


@pytest.mark.parametrize("newcomer", ["drop"], indirect=True)
def test_a_taker_takes_the_path_its_new_holder_let_go(
    tmp_path: Path, newcomer: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(output_lock, "RECORD_WAIT", 100.0, raising=False)
    taker = OutputDirLock(tmp_path / "out", "taker")
    try:
        taker.acquire(stopping_wait=0.0)  # (before: refused, "removed")
        assert newcomer.stdout is not None and newcomer.stdout.readline() == "dropped\n"
        assert taker.held
        assert '"run_id": "taker"' in (tmp_path / "out" / "trainer.lock").read_text()
    finally:
        taker.release()
