"""A rank waiting for rank 0's refusal mark (`trainer.refusal_mark.await_mark`) whose
launcher's store goes meanwhile (``--num_machines 2``: rank 0 ended without its mark, a
crash, and node 0's launcher with it) learns it as `refusal_mark.GONE` and says nothing
of it: the rank holding the quiet copy of rank 0's refusal stays quiet, one with its own
refusal says that one line.

Before, the store's client found the connection closed at its next look and torch's C++
logged a warning with a stack of about twenty lines on stderr ("recvValue failed ...
Connection was likely closed"), beside the rank's exit that promised no output
(`refusals.refusals_end_the_program`). Now a plain connection kept beside the store's
client says the store went (its end read), before the client is asked again.

The store: a real ``TCPStore`` in a process of its own (`agent_store.store_process`),
ended right after the rank connected to it, before its first look for the mark. The
plain connection is watched with ``poll``: in a process with more than 1024 descriptors
open, ``select`` raised and the live store read as gone (the last test)."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Iterator

import pytest
from agent_store import as_rank, store_process

from melissa_trainer import ConfigError, refusals_end_the_program
from melissa_trainer.common.refusal import elsewhere
from melissa_trainer.trainer import refusal_mark, refusals

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

#: what torch's C++ says of a store connection closed under its client
CXX_WORDS = ("recvValue failed", "Exception raised from", "frame #")


@pytest.fixture
def goes_once_connected(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A launcher's store that this process (rank 1 of 2) reaches, and that ends as soon
    as the process has connected to it: before any look for a mark."""
    with store_process() as (port, end):
        as_rank(monkeypatch, port)
        connect: Callable[[], object] = refusal_mark.launch_store

        def connected_then_gone() -> object:
            link = connect()
            end()  # (its process exited: every socket of it closed)
            return link

        monkeypatch.setattr(refusal_mark, "launch_store", connected_then_gone)
        yield


def said(err: str) -> list[str]:
    return [line for line in err.splitlines() if any(w in line for w in CXX_WORDS)]


@pytest.mark.usefixtures("goes_once_connected")
def test_a_store_gone_while_a_rank_waits_is_gone_without_a_word(
    capfd: pytest.CaptureFixture[str],
) -> None:
    assert refusal_mark.await_mark(60.0) == refusal_mark.GONE
    err = capfd.readouterr().err
    assert said(err) == [], err  # (before: torch's warning and its C++ stack)


@pytest.mark.usefixtures("goes_once_connected")
def test_the_quiet_rank_stays_quiet_when_the_store_goes(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(refusals, "QUIET_RANK_GRACE", 60.0)  # (the store's end ends it)
    quiet = elsewhere(ConfigError(["my_steps=-1 must be positive"]), 1)
    with pytest.raises(SystemExit) as ended, refusals_end_the_program():
        raise quiet
    assert ended.value.code == refusals.REFUSED_STATUS
    err = capfd.readouterr().err
    assert err == "", err


@pytest.mark.usefixtures("goes_once_connected")
def test_a_rank_s_own_refusal_is_its_one_line_when_the_store_goes(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(refusals, "QUIET_RANK_GRACE", 60.0)
    with pytest.raises(SystemExit), refusals_end_the_program():
        raise ConfigError(["my_steps=-2 must be positive"])
    lines = capfd.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].endswith(": error: my_steps=-2 must be positive"), lines


@pytest.fixture
def many_files() -> Iterator[None]:
    """This process with more than FD_SETSIZE (1024) descriptors open, so that the next
    socket's is past `select`'s range; closed after."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        pytest.skip(f"RLIMIT_NOFILE {soft}: too few descriptors to pass 1024")
    held: list[int] = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        yield
    finally:
        for fd in held:
            os.close(fd)


@pytest.mark.usefixtures("many_files")
def test_a_mark_is_read_in_a_process_with_many_files_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store's end is watched by poll, not select: a descriptor past 1024 (a trainer
    with many files and sockets open) made select raise, read as the store gone."""
    with store_process() as (port, _):
        as_rank(monkeypatch, port, rank=0)
        monkeypatch.setattr(refusal_mark, "READ_WAIT", 0.0)  # (no other rank reads it)
        refusal_mark.leave("train.py: error: my_steps=-1 must be positive")
        as_rank(monkeypatch, port, rank=1)
        assert refusal_mark.await_mark(0) == "train.py: error: my_steps=-1 must be positive"
