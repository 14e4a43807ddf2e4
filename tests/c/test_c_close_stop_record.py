"""The C client's close reads the stop record of a receiver that stopped
(docs/protocol.md, section 2 "The stop record" and section 17b "A trainer that
stopped"; clients/c/src/stop_record.c): a follow socket played by the test receives the
first RECEIPT_QUERY, answers nothing, and the test then marks the rendezvous file
stopped with a record (written by the receiver's own writer, `build_record`) and closes
the follow socket, as a trainer that stopped right then. Before the record, each close
failed `MT_ETIMEDOUT` after the disconnected timeout ("the trainer stopped ... or
died"), whatever the trainer had.

The oracles: the record's contents, written by the test; the Python client's sentences
for the same record (`StopRecords`)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import zctx  # noqa: F401 (a fixture)
from test_c_close_receipt import RUN, STEPS, close_status, follow_socket, publish, sink  # noqa: F401

from melissa_trainer.stream.endpoints import mark_stopped
from melissa_trainer.stream.stop_record import StopReason, build_record
from melissa_trainer.wire.receipt import ReceiptQuery

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ETIMEDOUT, MT_ESIMREFUSED = 8, 14


def ingest(finished: dict[int, int], byes: dict[int, dict[int, int]]) -> SimpleNamespace:
    """An ingest whose `finished` simulations (id -> steps) finished, and whose others
    hold the BYEs `byes` (id -> {client rank: count}), one step each."""
    sims = {
        sid: SimpleNamespace(completed=1, finished=False, byes=b, done=bytearray(b"\x01"))
        for sid, b in byes.items()
    }  # (each one step held: step 0)
    return SimpleNamespace(
        rank=0,
        world=1,
        shifted=set(),
        finished_ids=list(finished),
        sims=sims,
        archive=SimpleNamespace(steps=finished),
        nonfinite=SimpleNamespace(by_simulation={}),
        expected=None,  # (no expected_simulations: no ``expected_end``)
        unfinished=lambda: sorted(byes),  # (`IngestState.unfinished`)
    )


def stopped_close(
    exe: Path, rendezvous: Path, pull: str, ctx: zmq.Context, record: dict, run: str = RUN
) -> tuple[int, str, str]:
    """The C solver's close, its trainer marking the file stopped with `record` once the
    first question arrived (unanswered), then closing its follow socket."""

    def answer(query: ReceiptQuery, before: int) -> None:
        if before == 0:
            entry = json.loads((rendezvous / "rank_0.json").read_text())
            mark_stopped(rendezvous, 0, entry["endpoint"], record)
        return None

    with follow_socket(ctx, answer, gone_after=1) as (follow, asked, _):
        publish(rendezvous, pull, follow, run=run)
        # (a short follow_timeout: with its replay window the client would wait that long
        # for a resumed trainer, 120 s by default, where a record decides nothing)
        said = close_status(exe, rendezvous, "disconnected_timeout 5", "follow_timeout 0.2")
    assert len(asked) >= 1
    return said


@pytest.mark.timeout(90)
def test_a_record_that_holds_the_bye_confirms_the_close(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    for name, state in {
        "finished": ingest({3: STEPS}, {}),
        "bye": ingest({}, {3: {0: STEPS}}),
    }.items():
        record = build_record(state, RUN, StopReason("end", "end of stream"))
        code, message, err = stopped_close(script_exe, tmp_path / name, sink, zctx, record)
        assert (code, message) == (0, ""), (name, message)
        assert "not valid" not in err, err


@pytest.mark.timeout(90)
def test_a_record_of_another_run_or_an_earlier_count_or_garbage_confirms_nothing(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    # the record answers a stopped trainer's close: another run's, a BYE of another count
    # (an earlier attempt's) or one that does not parse must not confirm it
    reason = StopReason("stopped", "stopped by its owner")
    other = build_record(ingest({3: STEPS}, {}), "run-b", reason)
    earlier = build_record(ingest({}, {3: {0: STEPS - 1}}), RUN, reason)
    garbage = {**build_record(ingest({3: STEPS}, {}), RUN, reason), "finished": [[3, "3", 0]]}
    for name, record in {"other": other, "earlier": earlier, "garbage": garbage}.items():
        code, message, err = stopped_close(script_exe, tmp_path / name, sink, zctx, record)
        assert code == MT_ETIMEDOUT and "has not answered" in message, (name, message)
        assert ("stop record" in err and "is not valid" in err) == (name == "garbage"), err


@pytest.mark.timeout(90)
def test_a_trainer_that_ended_or_stopped_on_its_nan_says_why(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    ended = build_record(ingest({}, {}), RUN, StopReason("end", "max_steps 7 reached"))
    code, message, _ = stopped_close(script_exe, tmp_path / "ended", sink, zctx, ended)
    assert code == MT_ETIMEDOUT, message
    assert "stopped before it read it (end: max_steps 7 reached" in message, message
    nan = StopReason("nonfinite", "simulation 3 time step 1: NaN", simulation_id=3, time_step=1)
    refused = build_record(ingest({}, {}), RUN, nan)
    code, message, _ = stopped_close(script_exe, tmp_path / "nan", sink, zctx, refused)
    assert code == MT_ESIMREFUSED, message
    assert "stopped on its time step 1" in message and "--nonfinite refuse" in message
