"""The same simulation id run twice at once: two solver processes (real C clients,
`mt_script`) with the same MELISSA_TRAINER_SIMULATION_ID, both connected and streaming to
a real receiver. The receiver keeps one copy of each step (the second's are duplicates,
counted) and warns once, naming the simulation and both connections: its peers'
addresses and descriptors (stream/twin_hellos.py). A restart is not a twin: a solver
killed (-9) mid-stream and run again with the same id streams without a warning.

Before, the twin was warned of, but the warning named neither connection ("a second
connection said HELLO ... while the first was open and streaming: ..."): the test of the
twins failed on the missing "(the first from 127.0.0.1, descriptor N; the second ...)".
No clock: both copies' steps are read before either closes (the second's HELLO while the
first's connection is open: a suspect), then the first copy's BYE judges them twins at
once (no grace waited)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from c_close_runs import c_close_receiver, unbatched_script
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver

pytestmark = pytest.mark.e2e  # every test here starts processes

SID, STEPS = 7, 50
TWIN = re.compile(
    rf"simulation {SID}: a second connection said HELLO as client rank 0 of 1 while the "
    r"first was open and streaming \(the first from 127\.0\.0\.1, descriptor (\d+); the "
    r"second from 127\.0\.0\.1, descriptor (\d+)\): two processes stream as the same "
    r"simulation rank"
)


@pytest.fixture
def said() -> Iterator[list[logging.LogRecord]]:
    """The receiver's records at WARNING and above."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    log = logging.getLogger("melissa_trainer.stream.receiver")
    log.addHandler(handler)
    yield records
    log.removeHandler(handler)


def ingested(receiver: Receiver) -> float:
    """The steps `receiver` handled: put, or dropped as duplicates."""
    counts = receiver.telemetry()
    return counts["samples_put"] + counts["duplicates"]


def twin_warnings(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if "a second connection said HELLO" in r.getMessage()]


@pytest.mark.timeout(120)
def test_two_solvers_with_one_id_at_once_are_warned_of_naming_both_connections(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    said: list[logging.LogRecord],
) -> None:
    with c_close_receiver(tmp_path, FIFOBuffer(10_000)) as receiver:
        first = unbatched_script(script_exe, tmp_path, SID, STEPS, 30)
        second = unbatched_script(script_exe, tmp_path, SID, STEPS, 30)
        try:  # (both started, both streaming, before either closes)
            for script in (first, second):
                assert script.wait(script.line)[-1].strip() == "0", script.seen
            # (every step of both read: the second's HELLO came while the first was open;
            # a send returns once queued, its connection may not be made yet)
            wait_until(lambda: ingested(receiver) == 2 * STEPS, "both copies' steps")
            for script in (first, second):
                done = script.send("close")
                assert script.wait(done)[-1].strip() == "0", script.seen[done]
        finally:
            first.kill()
            second.kill()
        counts = receiver.telemetry()
    assert (counts["samples_put"], counts["duplicates"]) == (STEPS, STEPS)
    [warning] = twin_warnings(said)
    found = TWIN.match(warning)
    assert found is not None, warning
    assert found[1] != found[2], warning  # (two connections, not one said twice)


@pytest.mark.timeout(120)
def test_a_solver_killed_and_run_again_with_its_id_is_no_twin(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    said: list[logging.LogRecord],
) -> None:
    with c_close_receiver(tmp_path, FIFOBuffer(10_000)) as receiver:
        first = unbatched_script(script_exe, tmp_path, SID, STEPS, 30)
        try:
            assert first.wait(first.line)[-1].strip() == "0", first.seen
            first.kill()  # (SIGKILL: no BYE, its connection closed by the kernel)
            again = unbatched_script(script_exe, tmp_path, SID, STEPS, 30)
            done = again.send("close")
            assert again.wait(done)[-1].strip() == "0", again.seen[done]
        finally:
            first.kill()
            again.kill()
        counts = receiver.telemetry()
    assert counts["samples_put"] == STEPS, counts
    assert twin_warnings(said) == [], said
