"""The receiver's side of a study's stop (`Receiver.study_stops`, `stream.connections`):
a connection closed without its BYE after the study said it stops its simulations is
counted and summarised in one INFO line at the receiver's stop; one closed before is
warned of, as a simulation that died on its own. In process (raw PUSH sockets for the
simulations); `tests/study/test_stop_kills_without_warnings.py` runs real solvers, and
`tests/study/test_stop_kills_on_every_rank.py` two real ranks."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import reference_protocol as R
import zmq
from helpers import running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.study_stops import announce_study_stops

U = R.Field("u", "<f4", (4,))


def first_step(sid: int) -> list[bytes]:
    values = np.zeros(4, np.float32).tobytes()
    return [
        R.encode_hello(sid, 0, 1, R.hello_body([U], {})),
        R.part_header(R.DATA, sid, 0, 0, 1, U, 0, U.size, True) + values,
    ]


class Log(logging.Handler):
    """The receiver's lines at INFO and above; `warned` set at a lost-connection warning."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[int, str]] = []
        self.warned = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, record.getMessage()))
        if record.levelno >= logging.WARNING and "before its BYE" in record.getMessage():
            self.warned.set()


def wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.mark.timeout(60)
def test_closes_after_study_stops_are_summarised_and_one_before_is_warned() -> None:
    receiver_log = logging.getLogger("melissa_trainer.stream.receiver")
    log, level = Log(), receiver_log.level
    receiver_log.addHandler(log)
    receiver_log.setLevel(logging.INFO)
    ctx = zmq.Context()
    sims = {sid: ctx.socket(zmq.PUSH) for sid in (7, 8, 9)}
    try:
        with running(FIFOBuffer(100), expected_simulations=3) as rec:
            for sid, sock in sims.items():
                sock.connect(rec.endpoint)
                for frame in first_step(sid):
                    sock.send(frame)
            # every HELLO read (its step put): a close before it is nobody's to name
            wait_until(lambda: rec.telemetry()["samples_put"] == 3, "the first steps")
            sims[7].close(linger=0)  # dies on its own while the study runs
            assert log.warned.wait(30), "simulation 7's close was not warned of"
            rec.study_stops()  # the study is about to kill 8 and 9
            sims[8].close(linger=0)
            sims[9].close(linger=0)
            wait_until(lambda: rec.telemetry()["connections_lost"] == 3, "the closes judged")
            assert not rec.ended  # (the receiver runs: before the fix, two more warnings)
    finally:
        for sock in sims.values():
            sock.close(linger=0)
        ctx.term()
        receiver_log.removeHandler(log)
        receiver_log.setLevel(level)
    warned = [m for lv, m in log.lines if lv >= logging.WARNING and "before its BYE" in m]
    assert len(warned) == 1 and warned[0].startswith("simulation 7 client rank 0"), warned
    summary = [(lv, m) for lv, m in log.lines if "killed as the study stopped" in m]
    assert len(summary) == 1, log.lines
    assert summary[0][0] == logging.INFO
    assert summary[0][1].startswith("2 simulations (8, 9) killed as the study stopped")


def step_one(sid: int) -> list[bytes]:
    """`first_step`'s frames for time step 1: rank 1 of 2's share (a HELLO without a run
    id: accepted by a receiver of any run)."""
    values = np.zeros(4, np.float32).tobytes()
    return [
        R.encode_hello(sid, 0, 1, R.hello_body([U], {})),
        R.part_header(R.DATA, sid, 1, 0, 1, U, 0, U.size, True) + values,
    ]


@pytest.mark.timeout(60)
def test_another_rank_hears_rank_0s_word_that_the_study_stops(tmp_path: Path) -> None:
    """Rank 1 of 2, whose own `Study.stop` has not come (rank 0's launcher kills): the
    closes read once rank 0 said the study stops (`announce_study_stops`, a file in the
    rendezvous directory) are summarised; one read before it is warned of, and an earlier
    run's word (another run id) silences nothing."""
    receiver_log = logging.getLogger("melissa_trainer.stream.receiver")
    log, level = Log(), receiver_log.level
    receiver_log.addHandler(log)
    receiver_log.setLevel(logging.INFO)
    ctx = zmq.Context()
    sims = {sid: ctx.socket(zmq.PUSH) for sid in (7, 8, 9)}
    announce_study_stops(tmp_path, "0ld")  # an earlier run's, left in the directory
    try:
        with running(
            FIFOBuffer(100), 1, 2, expected_simulations=3, rendezvous_dir=tmp_path, run_id="a1"
        ) as rec:
            for sid, sock in sims.items():
                sock.connect(rec.endpoint)
                for frame in step_one(sid):
                    sock.send(frame)
            wait_until(lambda: rec.telemetry()["samples_put"] == 3, "the steps")
            sims[7].close(linger=0)  # dies on its own while the study runs
            assert log.warned.wait(30), "simulation 7's close was not warned of"
            announce_study_stops(tmp_path, "a1")  # rank 0, about to kill 8 and 9
            sims[8].close(linger=0)
            sims[9].close(linger=0)
            wait_until(lambda: rec.telemetry()["connections_lost"] == 3, "the closes judged")
            assert not rec.ended
    finally:
        for sock in sims.values():
            sock.close(linger=0)
        ctx.term()
        receiver_log.removeHandler(log)
        receiver_log.setLevel(level)
    warned = [m for lv, m in log.lines if lv >= logging.WARNING and "before its BYE" in m]
    assert len(warned) == 1 and warned[0].startswith("simulation 7 client rank 0"), warned
    summary = [m for _, m in log.lines if "killed as the study stopped" in m]
    assert len(summary) == 1 and summary[0].startswith("2 simulations (8, 9) killed"), summary
