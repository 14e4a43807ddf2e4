"""The C client's close, told by the stop record that the study ended without needing
this simulation (a solver started beyond ``expected_simulations``: the record's
``expected_end``; clients/c/src/stop_record.c): the same sentence as the Python client's
(`StopRecords.not_needed`, the oracle, given the same record), MT_ETIMEDOUT as before,
never the "resume the trainer and run it again" of a trainer that failed. The record is
written by the receiver's own writer (`build_record`) from an ingest the test states."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import zctx  # noqa: F401 (a fixture)
from test_c_close_receipt import RUN, STEPS, sink  # noqa: F401
from test_c_close_stop_record import stopped_close

from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.stream.stop_record import StopReason, build_record
from melissa_trainer.stream.stop_record_read import parse_record

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ETIMEDOUT = 8
SID = 3  # (the script's simulation)


def ended_ingest(taken: int, refused: int = 0) -> SimpleNamespace:
    """A stream that ended on expected_simulations=2 (simulations 0 and 1 finished) while
    simulation 3, the C solver, had `taken` steps in (none: it never said HELLO)."""
    done = bytearray(np.packbits(np.ones(taken, bool), bitorder="little"))  # (steps 0 ..)
    sims = {SID: SimpleNamespace(completed=taken, finished=False, byes={}, done=done)}
    sims = sims if taken else {}
    return SimpleNamespace(
        rank=0,
        world=1,
        shifted=set(),
        finished_ids=[0, 1],
        sims=sims,
        archive=SimpleNamespace(steps={0: 4, 1: 4}),
        nonfinite=SimpleNamespace(by_simulation={SID: refused} if refused else {}),
        expected=2,
        simulations_finished=2,
        abandoned=set(),
        unfinished=lambda: sorted(sims),
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("taken", "refused"), [(2, 0), (2, 1), (0, 0)])
def test_a_solver_the_study_did_not_need_is_told_so_as_the_python_client(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    taken: int,
    refused: int,
) -> None:
    record = build_record(ended_ingest(taken, refused), RUN, StopReason("end", "end of stream"))
    assert "expected_end" in record and record["complete"]
    code, message, err = stopped_close(script_exe, tmp_path, sink, zctx, record)
    assert code == MT_ETIMEDOUT, message
    assert "not valid" not in err, err
    # the oracle: the Python client's sentence for this record, from the same directory
    python = StopRecords(str(tmp_path), ["tcp://x"], RUN, SID, 0, "w").not_needed(
        0, parse_record(record)
    )
    # (but how to exit 0 on it: the Python client names its exception, the C its status)
    head, tail = python.split(" (catch SimulationNotNeeded to exit 0)")
    assert head in message and tail in message, (python, message)
    assert "(this close returns MT_ETIMEDOUT: exit 0 on it if you start spare" in message
    assert "the study ended without needing this simulation" in message
    assert "--resume_from_checkpoint" not in message, message
    assert taken < STEPS  # (the solver sent more than the trainer took)


@pytest.mark.timeout(120)
def test_a_bad_expected_end_is_ignored_with_a_warning(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    record = build_record(ended_ingest(2), RUN, StopReason("end", "end of stream"))
    record["expected_end"]["unfinished"] = [[SID, 1, 2]]  # (more refused than held)
    code, message, err = stopped_close(script_exe, tmp_path, sink, zctx, record)
    assert code == MT_ETIMEDOUT and "has not answered" in message, message
    assert "is not valid" in err, err
