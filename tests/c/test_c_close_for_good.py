"""A C solver's close whose messages a stopped trainer never read decides from the stop
records as the Python close does (client/stopped.py `StopRecords.for_good`): while a
receiver is disconnected, any receiver's record of the client's run whose reason is
final (end, error, nonfinite) says that the trainer is not coming back, whether the
record is complete or not and whatever it lists, since what was not delivered is in
none of them (clients/c/src/close_wait.c, stop_record.c `mt_stop_record_for_good`).

Before, the C close took a record as "ended" only if it was complete and lacked this
rank's BYE, and read only the disconnected receiver's: a record cut to its bound (4096
finished simulations), one listing this simulation as finished (a simulation run again),
or a record on another receiver than the one down decided nothing, and the close waited
the disconnected timeout (then, with a replay window, the follow timeout) for a trainer
that had said it was not coming back. And the record's reason reached the sentence cut
at 1023 bytes, where the Python close says it whole (a record holds 4096 characters). A
record whose code, message and run id hold a ``\u0000``: C read them up to it, the
Python close refused the record and waited.

The oracle: the Python client's close against the same dead trainer and the same
records, word for word."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, CClient, c_client, sanitized_c_client  # noqa: F401
from predict_script import Script, zctx  # noqa: F401 (a fixture)
from test_c_close_dead_trainer import close_to_dead
from test_c_close_receipt import RUN, STEPS
from test_c_close_stop_first import python_close
from test_c_close_stop_record import ingest
from test_c_follow_resend_gone import dead_endpoint
from test_c_stop_not_needed import ended_ingest

from melissa_trainer.client import Client
from melissa_trainer.client.closing import TrainerStopped
from melissa_trainer.client.tuning import ClientTuning
from melissa_trainer.stream.endpoints import mark_stopped
from melissa_trainer.stream.stop_record import RECORD_LIMIT, StopReason, build_record
from melissa_trainer.stream.trainer_process import published_process

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ETIMEDOUT = 8
SID = 3  # (the script's simulation)
#: a disconnected timeout the record must beat (before: the close's end, "unreachable")
SETUP = ("disconnected_timeout 3", "replay_bytes 0")
ENDED = (
    "simulation 3 rank 0: the trainer stopped before it read its queued messages (the BYE "
    "among them), which were not delivered to "
)
FAILED = StopReason("error", "CUDA out of memory")
#: case -> the record (the receiver's own writer, `build_record`)
CASES: dict[str, dict[str, Any]] = {
    # 4097 simulations finished: the list cut to its bound, the record incomplete
    "incomplete": build_record(
        ingest({sid: 1 for sid in range(100, 101 + RECORD_LIMIT)}, {}), RUN, FAILED
    ),
    # this simulation finished there before (run again with its id): not this close's BYE
    "listed": build_record(ingest({SID: STEPS}, {}), RUN, StopReason("end", "max_steps 7")),
    # the study ended on expected_simulations, its unfinished list cut: "ended", as Python
    "not_needed_incomplete": {
        **build_record(ended_ingest(2, 1), RUN, StopReason("end", "end of stream")),
        "complete": False,
    },
    # a reason of 4096 characters (8 KiB in UTF-8): said whole
    "long_reason": build_record(ingest({}, {}), RUN, StopReason("error", "ü" * 4095 + "!")),
    # a code, a message and a run id holding a \u0000: read up to it by both (C strings
    # end there; the Python close refused the record, "bad reason", and waited)
    "nul_strings": {
        **build_record(ingest({}, {}), RUN, StopReason("error\x00x", "CUDA out of memory\x00, x")),
        "run_id": f"{RUN}\x00x",
    },
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_final_record_ends_the_close_as_the_python_clients(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    record = CASES[case]
    if case == "incomplete":
        assert record["complete"] is False  # (the oracle's premise)
    rendezvous, dead = tmp_path / case, dead_endpoint(zctx)
    code, message, err = close_to_dead(script_exe, rendezvous, dead, SETUP, record)
    assert code == MT_ETIMEDOUT, (message, err)
    assert message.startswith(f"{ENDED}{dead} ("), message
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rendezvous))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    python = python_close(rendezvous, dead, record, TrainerStopped)
    assert python.startswith(f"{ENDED}{dead} ("), python  # (the oracle)
    assert message == python
    if case == "long_reason":
        assert f"(error: {'ü' * 4095}!; its stop record in {rendezvous})" in message
    if case == "nul_strings":
        assert f"(error: CUDA out of memory; its stop record in {rendezvous})" in message


def publish_two(rendezvous: Path, endpoints: list[str]) -> None:
    """The rendezvous files of a trainer with two receivers (no follow sockets), written
    by this process (alive: taken at the start without dialling a dead endpoint)."""
    rendezvous.mkdir(exist_ok=True)
    for rank, endpoint in enumerate(endpoints):
        entry = {"version": 1, "rank": rank, "world_size": 2, "endpoint": endpoint,
                 "run_id": RUN, **published_process()}  # fmt: skip
        (rendezvous / f"rank_{rank}.json.tmp").write_text(json.dumps(entry))
        (rendezvous / f"rank_{rank}.json.tmp").rename(rendezvous / f"rank_{rank}.json")


@pytest.mark.timeout(120)
def test_the_record_of_another_receiver_than_the_one_down_ends_the_close(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Receiver 0 dead without a record (killed), receiver 1 still connected, its file
    marked stopped with its record (the trainer failed): the close ends on that record,
    not on the disconnected timeout, and says, as the Python close does, that the
    messages were not delivered to receiver 0 (the one down), receiver 1's record saying
    why. (Before, both clients said "not delivered to" receiver 1, which took its own.)"""
    live = zctx.socket(zmq.PULL)
    live.setsockopt(zmq.LINGER, 0)
    live.bind("tcp://127.0.0.1:*")
    rendezvous = tmp_path / "rv"
    endpoints = [dead_endpoint(zctx), str(live.getsockopt_string(zmq.LAST_ENDPOINT))]
    record = build_record(ingest({}, {}), RUN, FAILED)
    try:
        publish_two(rendezvous, endpoints)
        script = Script(script_exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)})
        try:
            sends = [f"send {t} u 1 4 {t}" for t in range(STEPS)]
            sent = script.send("id 3", "field u 1 1 4", "close_timeout 600", *SETUP, "start",
                               *sends)  # fmt: skip
            assert script.wait(sent)[-1].split(" ", 1)[0] == "0", script.seen
            mark_stopped(rendezvous, 1, endpoints[1], record)
            closed = script.send("close")
            lines, err = script.finish(120)
        finally:
            script.kill()
        code, _, message = lines[closed][-1].partition(" ")
        assert int(code) == MT_ETIMEDOUT, (message, err)
        said = (
            f"{ENDED}{endpoints[0]} (disconnected; its receiver at {endpoints[1]} recorded "
            "why: error: CUDA out of memory"
        )
        assert message.startswith(said), message

        publish_two(rendezvous, endpoints)  # (unstopped again for the Python client)
        monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rendezvous))
        for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID"):
            monkeypatch.delenv(name, raising=False)
        tuning = ClientTuning(disconnected_timeout=600.0, close_timeout=600.0, replay_bytes=0)
        client = Client({"u": ((4,), np.float32)}, simulation_id=SID, tuning=tuning)
        for t in range(STEPS):
            client.send(t, u=np.full(4, t, np.float32))
        mark_stopped(rendezvous, 1, endpoints[1], record)
        with pytest.raises(TrainerStopped) as e:
            client.close()
        assert str(e.value).startswith(said), e.value  # (the oracle)
        assert message.strip() == str(e.value)
    finally:
        live.close(0)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_final_records_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Every case under AddressSanitizer and UBSan (a record of 4097 rows, a reason of
    8 KiB copied whole): no leak, no error."""
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"
    for case, record in sorted(CASES.items()):
        dead = dead_endpoint(zctx)
        got = close_to_dead(exe, tmp_path / case, dead, SETUP, record, dict(SANITIZER_ENV))
        code, message, err = got
        assert code == MT_ETIMEDOUT, (case, message, err)
        assert message.startswith(f"{ENDED}{dead} ("), message
        assert "ERROR" not in err and "runtime error" not in err, err
