"""A worker's give-up says what a worker's user can do, not to set a simulation id.

A client's error, when it gives up on its trainer, ends with the fix: "run it again
with the same simulation id (MELISSA_TRAINER_SIMULATION_ID=N)". A worker has no such
variable to set: its launcher gives it its simulations one after another, and runs one
not delivered again itself once the worker reports it failed (`serve_simulations`, exit
code 75). Before, a worker's line said the id to set all the same. Now a client whose
simulation is the one its worker was given (`worker_given.given_attempt`) says its launcher
runs it again (`gave_up.rerun_words`), and what a stopped study does: resume it.

The worker's loop is the library's (`serve_simulations`) on a stand-in for the
launcher's answers that records each given simulation as `WorkerClient` does; its
client streams to a real `Receiver` in a process of its own (`keys_receiver_process`),
killed (SIGKILL) while the simulation runs; the client's timeouts are short."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pytest
import zmq
from keys_receiver_process import ReceiverProcess
from waiting import wait_until

from melissa_trainer.client import Client, ClientTuning, gave_up, worker, worker_given

pytestmark = pytest.mark.e2e

STEPS = 6


@pytest.fixture
def trainer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ReceiverProcess]:
    """The receiver's process, its rendezvous in `tmp_path` (read by the worker's client
    from ``MELISSA_TRAINER_RENDEZVOUS``, as the launcher sets it)."""
    proc = ReceiverProcess("--rendezvous", str(tmp_path), "--run_id", "run-w", "--batch", "4")
    try:
        monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))
        for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID",
                     "MELISSA_TRAINER_SIMULATION_ID", "MELISSA_TRAINER_ATTEMPT"):  # fmt: skip
            monkeypatch.delenv(name, raising=False)
        yield proc
    finally:
        proc.stop()


@pytest.mark.timeout(120)
def test_a_worker_s_simulation_not_delivered_says_its_launcher_runs_it_again(
    trainer: ReceiverProcess, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work, codes = [(5, {"x": 1.0})], []

    def next_simulation(
        timeout: float | None = 60.0, exit_code: int = 0
    ) -> tuple[int, dict[str, float]] | None:
        codes.append(exit_code)
        given = work.pop(0) if work else None  # (recorded as `WorkerClient` records it)
        monkeypatch.setattr(worker_given, "_given", None if given is None else (given[0], 0))
        return given

    def run(simulation_id: int, parameters: Mapping[str, float], context: zmq.Context) -> None:
        tuning = ClientTuning(disconnected_timeout=1.0, close_timeout=5.0)
        with Client({"u": ((4,), np.float64)}, simulation_id=simulation_id,
                    parameters=parameters, context=context, tuning=tuning) as client:  # fmt: skip
            for t in range(STEPS):
                client.send(t, u=np.full(4, t, np.float64))
            client.flush()
            trainer.kill()  # (the trainer gone while the simulation runs)
            handshakes = client._transport.handshakes  # (its one reader: this thread)

            def disconnected() -> bool:
                handshakes.read()
                return handshakes.down_since[0] is not None

            wait_until(disconnected, "the client's monitor to see the receiver gone", 30.0)

    monkeypatch.setattr(worker, "next_simulation", next_simulation)
    worker.serve_simulations(run)
    assert codes == [0, worker.NOT_DELIVERED_EXIT_CODE]  # (reported failed, then asked on)
    said = [line for line in capsys.readouterr().err.splitlines() if "simulation 5" in line]
    assert len(said) == 1, said
    assert "(this worker reports it failed, exit code 75, and goes on" in said[0], said
    # the fix: its launcher runs it again; no id to set (a worker has none)
    assert "MELISSA_TRAINER_SIMULATION_ID=5" not in said[0], said
    assert "let the launcher run simulation 5 again" in said[0], said
    assert "--resume_from_checkpoint latest" in said[0], said
    # said once: the worker's own suffix no longer repeats that its launcher runs it again
    assert said[0].count("the launcher run") == 1, said


def test_the_fix_names_the_id_to_set_outside_a_worker_and_the_launcher_in_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker_given, "_given", None)  # (no worker: a simulation run by hand)
    assert "(MELISSA_TRAINER_SIMULATION_ID=5) once its trainer runs" in gave_up.run_again(5)
    assert gave_up.rerun_words(5, "Run it as written") == "Run it as written"
    monkeypatch.setattr(worker_given, "_given", (5, 1))  # (a worker given simulation 5, again)
    for text in (gave_up.run_again(5), gave_up.rerun_words(5, "Run it as written")):
        assert "MELISSA_TRAINER_SIMULATION_ID=5" not in text, text
        assert "the launcher run simulation 5 again" in text, text
    assert gave_up.rerun_words(5, first=True).startswith("Let the launcher run simulation 5")
    # (another simulation id in the worker's process, a client of its own: as by hand)
    assert "(MELISSA_TRAINER_SIMULATION_ID=6)" in gave_up.run_again(6)
