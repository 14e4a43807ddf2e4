"""A C solver's close whose messages a stopped trainer never read (its BYE queued to a
dead trainer whose rendezvous file is marked stopped with a stop record of its run) says
it as the Python client's close does (`closing.stop_first`): one sentence, the record's
reason first ("the study ended without needing this simulation, so its queued messages
(the BYE among them) were not delivered to ...", "the trainer stopped on its time step
1, so ...", "the trainer stopped before it read its queued messages ..., which were not
delivered to ... (end: ...)"), then the record's facts and what to do
(clients/c/src/stop_said.c, from the record's fields). Before, the C close said the
receipt's words ("its BYE was not confirmed: ...", "simulation 3: the trainer stopped on
its time step 1: ..."), neither what was not delivered nor where.

The oracle: the Python client's close against the same dead trainer, the same rendezvous
directory and the same record (written by the receiver's own writer, `build_record`),
word for word (but how to exit 0 on a simulation not needed: the Python client names its
exception, the C client its status)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, CClient, c_client, sanitized_c_client  # noqa: F401
from predict_script import zctx  # noqa: F401 (a fixture)
from test_c_close_dead_trainer import close_to_dead
from test_c_close_receipt import RUN, STEPS, publish
from test_c_close_stop_record import ingest
from test_c_follow_resend_gone import dead_endpoint
from test_c_stop_not_needed import ended_ingest

from melissa_trainer.client import Client, SimulationNotNeeded
from melissa_trainer.client.admission import SimulationRefused
from melissa_trainer.client.closing import TrainerStopped
from melissa_trainer.client.tuning import ClientTuning
from melissa_trainer.stream.endpoints import mark_stopped
from melissa_trainer.stream.stop_record import StopReason, build_record

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ETIMEDOUT, MT_ESIMREFUSED = 8, 14
SID = 3  # (the script's simulation)
#: how each client says that a spare solver may exit 0 (the one difference)
PYTHON_EXIT = "(catch SimulationNotNeeded to exit 0)"
C_EXIT = "(this close returns MT_ETIMEDOUT: exit 0 on it if you start spare solvers on purpose)"

NAN = StopReason("nonfinite", "simulation 3 time step 1: NaN in u", simulation_id=SID, time_step=1)
#: kind -> (the record, the C status, the sentence's opening after "simulation 3 rank 0: ",
#: what the Python client raises)
KINDS: dict[str, tuple[dict[str, Any], int, str, type[Exception]]] = {
    "not_needed": (
        build_record(ended_ingest(2, 1), RUN, StopReason("end", "end of stream")),
        MT_ETIMEDOUT,
        "the study ended without needing this simulation, so its queued messages (the BYE "
        "among them) were not delivered to ",
        SimulationNotNeeded,
    ),
    "refused": (
        build_record(ingest({}, {}), RUN, NAN),
        MT_ESIMREFUSED,
        "the trainer stopped on its time step 1, so its queued messages (the BYE among "
        "them) were not delivered to ",
        SimulationRefused,
    ),
    "ended": (
        build_record(ingest({}, {}), RUN, StopReason("end", "max_steps 7 reached")),
        MT_ETIMEDOUT,
        "the trainer stopped before it read its queued messages (the BYE among them), "
        "which were not delivered to ",
        TrainerStopped,
    ),
    "failed": (
        build_record(ingest({}, {}), RUN, StopReason("error", "CUDA out of memory")),
        MT_ETIMEDOUT,
        "the trainer stopped before it read its queued messages (the BYE among them), "
        "which were not delivered to ",
        TrainerStopped,
    ),
}


def python_close(
    rendezvous: Path, dead: str, record: dict[str, Any], error: type[Exception]
) -> str:
    """The Python client's close in the C solver's place (simulation 3, STEPS steps to
    `dead` published in `rendezvous`, the file then marked stopped with `record`): what
    it raises."""
    publish(rendezvous, dead, "tcp://127.0.0.1:1")  # (unstopped again: the C run marked it)
    tuning = ClientTuning(disconnected_timeout=600.0, follow_timeout=600.0, close_timeout=600.0)
    client = Client({"u": ((4,), np.float32)}, simulation_id=SID, tuning=tuning)
    for t in range(STEPS):
        client.send(t, u=np.full(4, t, np.float32))
    mark_stopped(rendezvous, 0, dead, record)
    with pytest.raises(error) as e:
        client.close()
    return str(e.value)


def both_say_the_same(
    exe: Path, ctx: zmq.Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str,
    env: dict[str, str] | None = None,
) -> None:  # fmt: skip
    record, status, opening, error = KINDS[kind]
    rendezvous, dead = tmp_path / kind, dead_endpoint(ctx)
    setup = ("disconnected_timeout 600",)  # (the record alone ends the close)
    code, message, err = close_to_dead(exe, rendezvous, dead, setup, record, env)
    assert code == status, (kind, message, err)
    assert message.startswith(f"simulation {SID} rank 0: {opening}{dead}"), message
    assert message.count("not delivered") == 1, message
    assert "ERROR" not in err and "runtime error" not in err, err
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rendezvous))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    python = python_close(rendezvous, dead, record, error)
    assert python.startswith(f"simulation {SID} rank 0: {opening}{dead}"), python  # (oracle)
    assert message == python.replace(PYTHON_EXIT, C_EXIT), (message, python)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_close_to_a_stopped_trainer_says_the_reason_first_as_the_python_client(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    both_say_the_same(script_exe, zctx, tmp_path, monkeypatch, kind)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_reason_first_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every kind under AddressSanitizer and UBSan (the sentence composed on the heap,
    the client's error grown to hold it): no leak, no error."""
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"
    for kind in sorted(KINDS):
        both_say_the_same(exe, zctx, tmp_path, monkeypatch, kind, dict(SANITIZER_ENV))


BIG = 2**53 + 1  # (the first integer a double does not hold: it reads as 2^53)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("solver", "named", "status"),
    [(BIG, BIG, MT_ESIMREFUSED), (BIG - 1, BIG, MT_ETIMEDOUT), (BIG, BIG - 1, MT_ETIMEDOUT)],
)
def test_an_id_above_2_to_the_53_in_a_stop_record_is_read_exactly(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    solver: int,
    named: int,
    status: int,
) -> None:
    """A trainer stopped on simulation `named`'s NaN at time step 2^53 + 3: the solver of
    that simulation is refused, its neighbour told that the trainer stopped (on another
    simulation). Before, the C reader took both ids through a double: 2^53 + 1 was 2^53,
    so simulation 2^53 + 1 was not told that its NaN stopped the trainer, and simulation
    2^53 was told that it had been."""
    step = 2**53 + 3
    nan = StopReason("nonfinite", f"simulation {named}: NaN", simulation_id=named, time_step=step)
    record = build_record(ingest({}, {}), RUN, nan)
    dead = dead_endpoint(zctx)
    setup = ("disconnected_timeout 600", f"id {solver}")
    code, message, err = close_to_dead(script_exe, tmp_path / "rv", dead, setup, record)
    assert code == status, (message, err)
    if status == MT_ESIMREFUSED:
        opening = f"the trainer stopped on its time step {step}, so its queued messages"
    else:
        opening = "the trainer stopped before it read its queued messages"
    assert message.startswith(f"simulation {solver} rank 0: {opening}"), message
    assert f"MELISSA_TRAINER_SIMULATION_ID={solver})" in message, message
