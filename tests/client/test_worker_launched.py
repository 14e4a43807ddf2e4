"""A `Client` of the simulation a worker was given counts as launched
(`config.launched`): the launcher runs it again if it fails, so, as a launched
process's, it keeps no replay window and asks no ADMISSION_QUERY while it runs, though
workers get no ``MELISSA_TRAINER_ATTEMPT``. Unlike a launched process's, its close asks
for its BYE's receipt (RECEIPT_QUERY): the worker lives on and reports the simulation
finished, which must not come before the BYE was ingested
(tests/client/test_worker_receipt.py). A `Client` of another simulation id in that worker, or in a
process that is no worker, still does both (external mode).

A real `WorkerClient` asks a stand-in launcher (a REP socket answering as the launcher
does); a real receiver with its follow socket counts the queries it answers. Before,
the worker's client kept a `DEFAULT_REPLAY_BYTES` window and its close asked for the
receipt of its BYE (answered >= 1). A worker's `Client` made without an id is told
where a worker's id comes from, not only to set MELISSA_TRAINER_SIMULATION_ID."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq
from helpers import running
from waiting import wait_until

from melissa_trainer.client import Client, worker_given
from melissa_trainer.client import worker as worker_module
from melissa_trainer.client.worker import PROTOCOL_VERSION, WorkerClient

pytestmark = pytest.mark.timeout(120)

STUDY = {"u": ((4,), np.float64)}
GIVEN = 7


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkerClient]:
    """A worker given simulation `GIVEN` (attempt 0) by a stand-in launcher."""
    monkeypatch.setattr(worker_given, "_given", None)  # (restored after the test)
    context = zmq.Context()
    rep = context.socket(zmq.REP)
    rep.setsockopt(zmq.LINGER, 0)
    rep.bind("tcp://127.0.0.1:*")
    client = WorkerClient(rep.getsockopt_string(zmq.LAST_ENDPOINT), "worker-0", timeout=30.0)

    def answer() -> None:
        if rep.poll(30_000):
            rep.recv()
            reply = {"simulation_id": GIVEN, "parameters": {}, "attempt": 0}
            rep.send(json.dumps({"version": PROTOCOL_VERSION, **reply}).encode())

    server = threading.Thread(target=answer)
    server.start()
    try:
        assert client.next_simulation() == (GIVEN, {})
    finally:
        server.join()
    try:
        yield client
    finally:
        client.close()
        rep.close(linger=0)
        context.term()


def external_env(monkeypatch: pytest.MonkeyPatch, rendezvous: Path) -> None:
    """A worker's environment as far as its `Client` reads it: endpoints from
    `rendezvous`, no attempt variable (the launcher sets none for workers)."""
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rendezvous))
    for name in (
        "MELISSA_TRAINER_ENDPOINTS",
        "MELISSA_TRAINER_RUN_ID",
        "MELISSA_TRAINER_ATTEMPT",
        "MELISSA_TRAINER_REPLAY_BYTES",
    ):
        monkeypatch.delenv(name, raising=False)


def stream(simulation_id: int, receiver: Any) -> tuple[Client, bool, int]:
    """Send 5 steps of `simulation_id` and close; (the client, whether it kept a replay
    window, the queries the receiver's follow socket answered once the simulation
    completed there and the client's admission watch, if any, had its answer)."""
    client = Client(simulation_id=simulation_id, fields=STUDY)
    try:
        kept_window = client._following is not None
        for t in range(5):
            client.send(t, u=np.zeros(4))
    finally:
        client.close()
    wait_until(lambda: simulation_id in receiver.completed(), "the simulation's BYE")
    assert client._watch.ended.wait(30), "the admission watch did not end"
    assert receiver._follow is not None
    return client, kept_window, receiver._follow.answered


def test_the_client_of_the_simulation_a_worker_was_given_keeps_no_window_asks_only_a_receipt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worker: WorkerClient
) -> None:
    external_env(monkeypatch, tmp_path)
    with running(rendezvous_dir=tmp_path, fields=STUDY, run_id="run-a") as receiver:
        client, kept_window, answered = stream(GIVEN, receiver)
    assert not kept_window  # (before: DEFAULT_REPLAY_BYTES)
    assert client._watch._thread is None  # no admission watch started
    # no ADMISSION_QUERY; the RECEIPT_QUERY of its close (test_worker_receipt.py: why)
    assert answered >= 1
    assert client.steps_sent == 5


def test_a_client_of_another_simulation_in_that_worker_is_external(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worker: WorkerClient
) -> None:
    external_env(monkeypatch, tmp_path)
    with running(rendezvous_dir=tmp_path, fields=STUDY, run_id="run-a") as receiver:
        client, kept_window, answered = stream(GIVEN + 1, receiver)
    assert kept_window and answered >= 1  # (its close asked for its BYE's receipt)


def test_a_client_in_a_process_that_is_no_worker_is_external(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_given, "_given", None)
    external_env(monkeypatch, tmp_path)
    with running(rendezvous_dir=tmp_path, fields=STUDY, run_id="run-a") as receiver:
        client, kept_window, answered = stream(GIVEN, receiver)
    assert kept_window and answered >= 1  # (its close asked for its BYE's receipt)


def test_a_worker_s_client_without_an_id_is_told_where_a_worker_s_id_comes_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker's environment has no MELISSA_TRAINER_SIMULATION_ID (the launcher gives an
    # id per request): a Client made there without simulation_id= was told only to set
    # that variable, a fix that does not apply to a worker. Outside a worker: as before.
    monkeypatch.delenv("MELISSA_TRAINER_SIMULATION_ID", raising=False)
    monkeypatch.delenv(worker_module.ENV_WORKER, raising=False)
    with pytest.raises(ValueError, match="no simulation id") as plain:
        Client(STUDY, endpoints="tcp://127.0.0.1:1")
    assert "worker" not in str(plain.value), plain.value
    monkeypatch.setenv(worker_module.ENV_WORKER, "worker-0")
    with pytest.raises(ValueError, match="no simulation id") as told:
        Client(STUDY, endpoints="tcp://127.0.0.1:1")
    said = str(told.value)
    assert "MELISSA_TRAINER_WORKER is set: in a worker, pass the id its launcher gave" in said
    assert "Client(..., simulation_id=simulation_id)" in said, said
