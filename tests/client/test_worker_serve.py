"""`serve_simulations`, worker mode's loop in the library (what the examples' solvers
use with ``--worker``): its contract, on a stand-in for the launcher's answers (what
each request reports, the one context, what ends the loop). Under a real launcher:
tests/examples/test_worker_serve_simulations.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import zmq

from melissa_trainer.client import worker


class StandInLauncher:
    """A stand-in for the launcher's answers: `next_simulation` gives `work` in turn,
    then None, and records each exit code it is given."""

    def __init__(self, work: list[tuple[int, dict[str, float]]]) -> None:
        self.work = list(work)
        self.codes: list[int] = []

    def next_simulation(
        self, timeout: float | None = 60.0, exit_code: int = 0
    ) -> tuple[int, dict[str, float]] | None:
        self.codes.append(exit_code)
        return self.work.pop(0) if self.work else None


def serve(
    monkeypatch: pytest.MonkeyPatch, work: list[tuple[int, dict[str, float]]], run: Any
) -> StandInLauncher:
    """`serve_simulations(run, check)` against a stand-in launcher giving `work`; `check`
    refuses x < 0."""

    def check(parameters: dict[str, float]) -> Mapping[str, float]:
        if parameters["x"] < 0:
            raise ValueError(f"x={parameters['x']} must be >= 0")
        return {"x": 2 * parameters["x"]}

    launcher = StandInLauncher(work)
    monkeypatch.setattr(worker, "next_simulation", launcher.next_simulation)
    worker.serve_simulations(run, check=check)
    return launcher


def test_the_loop_reports_each_outcome_with_the_next_request_on_one_context(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    given: list[tuple[int, Mapping[str, float], zmq.Context]] = []

    def run(simulation_id: int, parameters: Mapping[str, float], context: zmq.Context) -> Any:
        given.append((simulation_id, parameters, context))
        return {5: 1, 6: 0}.get(simulation_id)  # 5 failed, 6 finished (0), 7 (None)

    work = [(4, {"x": -1.0}), (5, {"x": 1.0}), (6, {"x": 2.0}), (7, {"x": 3.0})]
    launcher = serve(monkeypatch, work, run)
    # the first request reports nothing; then 4 refused (2), 5 failed (1), 6 and 7 finished
    assert launcher.codes == [0, worker.REFUSED_EXIT_CODE, 1, 0, 0]
    assert [(s, dict(p)) for s, p, _ in given] == [
        (5, {"x": 2.0}),
        (6, {"x": 4.0}),
        (7, {"x": 6.0}),
    ]
    contexts = {id(c) for _, _, c in given}
    assert len(contexts) == 1 and given[0][2].closed  # one, for the worker's life, ended
    assert "simulation 4: x=-1.0 must be >= 0" in capsys.readouterr().err


def test_an_exception_from_run_ends_the_loop_and_its_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    contexts: list[zmq.Context] = []

    def run(simulation_id: int, parameters: Mapping[str, float], context: zmq.Context) -> None:
        contexts.append(context)
        raise FloatingPointError("diverged")

    with pytest.raises(FloatingPointError, match="diverged"):
        serve(monkeypatch, [(0, {"x": 1.0}), (1, {"x": 1.0})], run)
    assert len(contexts) == 1 and contexts[0].closed  # not asked for the next


def test_a_run_that_returns_no_exit_code_is_told_what_to_return(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValueError, match=r"run returned 'done' for simulation 0: return None"):
        serve(monkeypatch, [(0, {"x": 1.0})], lambda *_: "done")
    with pytest.raises(ValueError, match="run returned True"):  # (a bool is not one)
        serve(monkeypatch, [(0, {"x": 1.0})], lambda *_: True)


def test_a_delivery_failure_is_reported_and_the_loop_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # (the trainer's side failed: the worker's start-up is kept; before, the loop ended
    # and the worker exited 1, relaunched by the launcher)
    from melissa_trainer.client import DeliveryFailed

    ran: list[int] = []

    def run(simulation_id: int, parameters: Mapping[str, float], context: zmq.Context) -> None:
        ran.append(simulation_id)
        if simulation_id == 0:
            raise DeliveryFailed("simulation 0 rank 0: its BYE was not confirmed")

    launcher = serve(monkeypatch, [(0, {"x": 1.0}), (1, {"x": 1.0})], run)
    assert ran == [0, 1]
    assert launcher.codes == [0, worker.NOT_DELIVERED_EXIT_CODE, 0]
    err = capsys.readouterr().err
    # the simulation named once: the client's error names it (before: "simulation 0:
    # simulation 0 rank 0: ...")
    assert ": simulation 0 rank 0: its BYE was not confirmed (this worker" in err, err
    assert err.count("simulation 0") == 1, err
    assert "reports it failed, exit code 75, and goes on" in err


def test_a_timeout_of_the_solver_s_own_still_ends_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (only the client's give-ups are the trainer's side: any other TimeoutError may
    # leave the solver in a state unknown, as any exception of its own)
    def run(simulation_id: int, parameters: Mapping[str, float], context: zmq.Context) -> None:
        raise TimeoutError("the mesh server did not answer")

    with pytest.raises(TimeoutError, match="mesh server"):
        serve(monkeypatch, [(0, {"x": 1.0}), (1, {"x": 1.0})], run)


def test_a_client_that_finds_no_receivers_is_not_delivered_and_the_loop_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    # A real Client from a rendezvous directory no trainer published (its receivers not
    # up yet, or gone): `ReceiverNotFound`, a DeliveryFailed. Before, a plain
    # TimeoutError, which ended the loop: the worker exited 1 and was relaunched
    from melissa_trainer.client import Client, ClientTuning, ReceiverNotFound

    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path / "rendezvous"))
    made: list[int] = []

    def run(simulation_id: int, parameters: Mapping[str, float], context: zmq.Context) -> None:
        if simulation_id == 0:
            fields = {"u": ((4,), "float32")}
            tuning = ClientTuning(rendezvous_timeout=0.2)
            with Client(fields, simulation_id=0, tuning=tuning, context=context):
                pass
        made.append(simulation_id)

    launcher = serve(monkeypatch, [(0, {"x": 1.0}), (1, {"x": 1.0})], run)
    assert made == [1] and launcher.codes == [0, worker.NOT_DELIVERED_EXIT_CODE, 0]
    err = capsys.readouterr().err
    assert "rendezvous directory" in err and "incomplete after 0.2 s" in err, err
    assert issubclass(ReceiverNotFound, TimeoutError)  # (what it was before, still)


@pytest.mark.timeout(60, method="thread")  # (a hang inside libzmq ignores signals)
@pytest.mark.parametrize("ending", ["raises", "returns"])
def test_a_client_run_left_open_neither_hides_the_error_nor_holds_the_worker(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], ending: str
) -> None:
    # A user's run that opens a real Client without `with` (nor close), sends a step and
    # raises (or returns): the loop's end used to term() the worker's context, which
    # waits for that client's sockets forever. The exception was never raised and the
    # worker never ended (alive, silent, until the launcher killed it as silent, its log
    # without the error); returning, it never exited. Now the loop ends, says why.
    from melissa_trainer.client import Client

    left: list[Client] = []  # (holds it, as a traceback or a flusher thread would)

    def run(simulation_id: int, parameters: Mapping[str, float], context: zmq.Context) -> None:
        # (port 1 refuses every connection: nothing is ever delivered, nor waited for)
        client = Client({"u": ((4,), "float32")}, simulation_id=simulation_id,
                        endpoints="tcp://127.0.0.1:1", context=context)  # fmt: skip
        left.append(client)
        client.send(0, u=np.zeros(4, np.float32))
        if ending == "raises":
            raise RuntimeError("the solver's own bug")

    try:
        if ending == "raises":
            with pytest.raises(RuntimeError, match="the solver's own bug"):
                serve(monkeypatch, [(0, {"x": 1.0}), (1, {"x": 1.0})], run)
            assert len(left) == 1  # (the loop ended there: 1 was not run)
        else:
            launcher = serve(monkeypatch, [(0, {"x": 1.0})], run)
            assert launcher.codes == [0, 0]  # (it was asked for the next, then nothing)
        err = capsys.readouterr().err
        said = [line for line in err.splitlines() if "still open" in line]
        assert len(said) == 1 and "a Client that run did not close" in said[0], err
        assert "`with` block" in said[0], err
    finally:
        for client in left:  # (the test's own cleanup: the client it left, its context)
            client.close(bye=False)
            client._transport.context.term()


def test_a_delivery_failure_once_the_parent_is_gone_ends_the_loop_unreported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The process that started the worker ended (its launcher gone with its trainer,
    # where no parent-death signal reached the worker): before, the worker said "the
    # launcher runs it again" and asked that launcher for more, waiting `timeout` for
    # an answer that never came. Now it says what runs the simulation again and ends.
    import os

    from melissa_trainer.client import DeliveryFailed

    started_under = os.getppid()

    def run(simulation_id: int, parameters: Mapping[str, float], context: zmq.Context) -> None:
        monkeypatch.setattr(os, "getppid", lambda: started_under + 1)  # (its parent ended)
        raise DeliveryFailed("simulation 0 rank 0: the trainer's receiver is unreachable")

    with pytest.raises(worker.LauncherGone) as gone:
        serve(monkeypatch, [(0, {"x": 1.0}), (1, {"x": 1.0})], run)
    said = str(gone.value)
    assert said.startswith("simulation 0 rank 0: the trainer's receiver is unreachable. "), said
    assert f"(pid {started_under}) ended" in said, said
    assert "--resume_from_checkpoint latest" in said and "runs simulation 0 again" in said
    assert "the launcher runs it again" not in said + capsys.readouterr().err


def test_serve_simulations_outside_a_launcher_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (before: a RuntimeError "next_simulation() works in a job started by ...: ...
    # must be set", not saying which was missing nor how a worker is started)
    for name in (worker.ENV_LAUNCHER, worker.ENV_WORKER):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(worker.ENV_LAUNCHER, "tcp://127.0.0.1:5555")  # (one of the two)
    monkeypatch.setattr(worker, "_default", None)
    ran: list[int] = []
    with pytest.raises(worker.NotAWorker) as refused:
        worker.serve_simulations(lambda sid, *_: ran.append(sid))
    said = str(refused.value)
    assert said.startswith("not started by a launcher in worker mode: "), said
    assert f"{worker.ENV_WORKER} is not set" in said and worker.ENV_LAUNCHER not in said
    assert "Launcher(..., worker=True)" in said and ran == []
    assert isinstance(refused.value, RuntimeError)  # (what it was before, still)
