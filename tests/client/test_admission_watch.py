"""A solver the trainer refused learns it at a send, not only at its close
(`melissa_trainer.client.admission_watch`; docs/protocol.md, section 17a): its first
send once the refusal is known raises `SimulationRefused` naming the field and the fix,
and sends nothing more; a solver the trainer took never raises; where nothing can be
asked (endpoints given directly, a rendezvous without follow socket) nothing changes;
a refusal of an earlier attempt that declared otherwise is not trusted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import zmq
from helpers import running
from waiting import wait_until

from melissa_trainer.client import Client
from melissa_trainer.client.admission import SimulationRefused
from melissa_trainer.client.admission_watch import AdmissionWatch, describes
from melissa_trainer.stream.schema import (
    parameters_difference,
    parameters_order_difference,
    schema_difference,
)
from melissa_trainer.wire import field_specs

pytestmark = pytest.mark.timeout(120)

STUDY = {"u": ((4,), np.float64)}


def external(monkeypatch: pytest.MonkeyPatch, rendezvous: Path) -> None:
    """A solver started by hand: its endpoints from `rendezvous`."""
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rendezvous))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)


def watch_ended(client: Client) -> None:
    """Wait until the client's watch has its answer (none to wait for before the watch)."""
    watch = getattr(client, "_watch", None)
    if watch is not None:
        assert watch.ended.wait(60), "the watch did not end"


def test_a_refused_simulation_is_told_at_its_next_send_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    external(monkeypatch, tmp_path)
    with running(rendezvous_dir=tmp_path, fields=STUDY, run_id="run-a") as receiver:
        client = Client(simulation_id=1, fields={"vort": ((4,), np.float64)})
        try:
            wait_until(receiver.refused, "the HELLO's refusal", interval=0.005)
            watch_ended(client)
            with pytest.raises(SimulationRefused) as caught:
                client.send(0, vort=np.zeros(4))
            with pytest.raises(
                SimulationRefused, match="refused it, and dropped everything it sent"
            ):  # (every later send: nothing more sent)
                client.send(1, vort=np.zeros(4))
            assert client.steps_sent == 0
        finally:
            client.close(bye=False)
    message = str(caught.value)
    assert "simulation 1: the trainer's receiver 0" in message
    assert "field 'vort' is not one of the study's" in message
    assert "Run it again declaring the study's fields" in message


def test_a_simulation_refused_for_its_parameters_order_is_told_at_its_next_send(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No names given to the receiver: the first simulation's order is the study's, and
    one listing them otherwise is refused (`stream.schema.parameters_order_difference`).
    Before (hporder's refusal, not trusted by `describes`), the solver was told only at
    its close, after computing its whole run."""
    external(monkeypatch, tmp_path)
    with running(rendezvous_dir=tmp_path, fields=STUDY, run_id="run-a") as receiver:
        with Client(simulation_id=1, fields=STUDY, parameters={"a": 1.0, "b": 2.0}) as first:
            first.send(0, u=np.zeros(4))
            watch_ended(first)
            assert first._watch.admitted is True
        other = Client(simulation_id=2, fields=STUDY, parameters={"b": 2.0, "a": 1.0})
        try:
            wait_until(receiver.refused, "the HELLO's refusal", interval=0.005)
            watch_ended(other)
            with pytest.raises(SimulationRefused) as caught:
                other.send(0, u=np.zeros(4))
        finally:
            other.close(bye=False)
    assert "HELLO lists its parameters in the order ['b', 'a']" in str(caught.value)


def test_a_simulation_taken_never_raises_and_its_watch_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    external(monkeypatch, tmp_path)
    with running(rendezvous_dir=tmp_path, fields=STUDY, run_id="run-a") as receiver:
        with Client(simulation_id=2, fields=STUDY) as client:
            client.send(0, u=np.zeros(4))
            watch_ended(client)
            for t in range(1, 20):
                client.send(t, u=np.zeros(4))
        assert client._watch.admitted is True
        assert client._watch.rejected == {}
        assert receiver.refused() == []


def test_a_refusal_of_an_earlier_attempt_that_declared_otherwise_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The receiver answers from its record: a right attempt whose question overtakes
    # its HELLO reads the wrong attempt's refusal; the watch asks again (accepted).
    external(monkeypatch, tmp_path)
    with running(rendezvous_dir=tmp_path, fields=STUDY, run_id="run-a") as receiver:
        wrong = Client(simulation_id=5, fields={"vort": ((4,), np.float64)})
        wait_until(receiver.refused, "the HELLO's refusal", interval=0.005)
        wrong.close(bye=False)
        with Client(simulation_id=5, fields=STUDY) as right:
            watch_ended(right)
            for t in range(5):
                right.send(t, u=np.zeros(4))
        assert right._watch.admitted is True


@pytest.mark.parametrize("how", ["endpoints", "no_follow_socket", "launched"])
def test_where_nothing_can_be_asked_nothing_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    served, read = tmp_path / "served", tmp_path / "read"
    read.mkdir()
    with running(rendezvous_dir=served, fields=STUDY, run_id="run-a") as receiver:
        entry = json.loads((served / "rank_0.json").read_text())
        if how == "endpoints":  # (given directly: no rendezvous, no follow socket known)
            monkeypatch.setenv("MELISSA_TRAINER_ENDPOINTS", entry["endpoint"])
        elif how == "launched":  # (the study records its refusal: its close asks nothing)
            external(monkeypatch, served)
            monkeypatch.setenv("MELISSA_TRAINER_ATTEMPT", "0")
        else:  # (an older trainer's rendezvous file)
            external(monkeypatch, read)
            older = {k: v for k, v in entry.items() if not k.startswith("follow_")}
            (read / "rank_0.json").write_text(json.dumps(older))
        client = Client(simulation_id=3, fields={"vort": ((4,), np.float64)})
        wait_until(receiver.refused, "the HELLO's refusal", interval=0.005)
        watch_ended(client)
        assert client._watch.admitted is None
        for t in range(5):
            client.send(t, vort=np.zeros(4))
        client.close()  # (as before: nothing to ask, nothing raised)
        assert client.steps_sent == 5


def test_a_silent_follow_socket_changes_nothing_and_the_watch_stops_at_once(
    tmp_path: Path,
) -> None:
    with running(rendezvous_dir=tmp_path, fields=STUDY, run_id="run-a"):
        entry = json.loads((tmp_path / "rank_0.json").read_text())
    context = zmq.Context()
    silent = context.socket(zmq.ROUTER)
    try:
        port = silent.bind_to_random_port("tcp://127.0.0.1")
        entry["follow_endpoint"] = f"tcp://127.0.0.1:{port}"
        (tmp_path / "rank_0.json").write_text(json.dumps(entry))
        told: list[str] = []
        specs = field_specs({"vort": ((4,), np.float64)})
        # (its ask's timeout far beyond this test's: a stop that waited for the ask to
        # time out, not within its STOP_SLICE, is still joining when the timeout marker
        # ends the test; no clock is read)
        watch = AdmissionWatch(
            str(tmp_path), [entry["endpoint"]], 7, 0, specs, [], told.append, timeout=3600.0
        )
        watch.start()
        assert silent.poll(30_000), "the watch did not ask"
        watch.stop()  # (joins the thread)
        assert watch.ended.is_set() and watch.admitted is None and told == []
    finally:
        silent.close(linger=0)
        context.term()


def test_describes_trusts_only_reasons_that_hold_for_the_declaration() -> None:
    study = field_specs({"u": ((4,), np.float64), "v": ((4,), np.float32)})
    vort = field_specs({"vort": ((4,), np.float64), "v": ((4,), np.float32)})
    small = field_specs({"u": ((3,), np.float64), "v": ((4,), np.float32)})
    swapped = list(reversed(study))
    for declared in (vort, small, swapped):
        reason = schema_difference(study, declared)
        assert describes(reason, declared, [])
        others = [d for d in (vort, small, swapped, study) if d is not declared]
        assert not any(describes(reason, d, []) for d in others), reason
    params = parameters_difference(["a", "b"], ["a"])
    assert describes(params, study, ["a"]) and not describes(params, study, ["a", "b"])
    none = parameters_difference(["a"], [])
    assert describes(none, study, []) and not describes(none, study, ["a"])
    order = parameters_order_difference(["a", "b"], ["b", "a"])  # (as the HELLO lists them)
    assert describes(order, study, ["b", "a"]) and not describes(order, study, ["a", "b"])
    cut = schema_difference(study, vort)[:-5]  # (cut on the wire)
    assert not describes(cut, vort, [])
    wrong_run = "its HELLO named run x, and this receiver serves run y (wrong_run): ..."
    assert not describes(wrong_run, vort, [])
