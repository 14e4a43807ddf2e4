"""The run id: a simulation of one run never streams into another run's receivers.

A trainer's receivers publish its run id in the rendezvous and refuse a HELLO carrying
another (``wrong_run``, counted and logged); a client whose launcher told it its run
(``MELISSA_TRAINER_RUN_ID``) refuses a rendezvous published by another run, before
sending anything. Real receivers, real sockets; the C client too.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from c_driver import capture, lines_of, run_script, script_exe  # noqa: F401 (fixtures)
from compiled import c_client  # noqa: F401
from helpers import drain, running
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client
from melissa_trainer.stream.endpoints import fetch_rendezvous, write_rendezvous
from melissa_trainer.stream.follow_answers import admission_of
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.ingest_state import WRONG_RUNS_KEPT

FIELDS = {"u": ((3,), "float32")}


def _stream(simulation_id: int, steps: int = 3, **kwargs: Any) -> Client:
    client = Client(FIELDS, {"a": 1.0}, simulation_id=simulation_id, **kwargs)
    with client:
        for t in range(steps):
            client.send(t, u=np.full(3, simulation_id * 100 + t, dtype=np.float32))
    return client


@pytest.mark.timeout(60)
def test_a_client_holding_another_runs_rendezvous_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer")
    monkeypatch.delenv("MELISSA_TRAINER_RUN_ID", raising=False)
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    buf = FIFOBuffer(100)
    ours = tmp_path / "ours"
    with running(buf, expected_simulations=1, rendezvous_dir=str(ours), run_id="runB") as rec:
        assert fetch_rendezvous(ours, 5)[0]["run_id"] == "runB"
        # a stale rendezvous of run A, whose endpoint is now this run's receiver
        stale = tmp_path / "stale"
        write_rendezvous(stale, 0, 1, str(rec.endpoint), {"run_id": "runA"})
        monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(stale))
        foreign = _stream(7)
        assert foreign.run_id == "runA"
        telemetry = rec.telemetry
        wait_until(
            lambda: (
                telemetry()["rejected_wrong_run"] == 1 and telemetry()["rejected_no_hello"] >= 2
            ),
            "the foreign HELLO, data and BYE were not all refused",
            UNTIL_TEST_TIMEOUT,
        )
        # this run's own simulation streams as usual
        monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(ours))
        assert _stream(8).run_id == "runB"
        samples = drain(buf)
        tel = telemetry()
    assert sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples) == [
        (8, 0),
        (8, 1),
        (8, 2),
    ]
    assert tel["rejected_wrong_run"] == 1 and tel["simulations_finished"] == 1
    assert rec.refused() == []  # not this run's launcher's business: no kill of its sim 7
    logged = [r.getMessage() for r in caplog.records if "wrong_run" in r.getMessage()]
    assert logged and "run runA" in logged[0] and "run runB" in logged[0], caplog.text


@pytest.mark.timeout(60)
def test_a_client_refuses_a_rendezvous_published_by_another_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    rv = tmp_path / "rv"
    with running(expected_simulations=1, rendezvous_dir=str(rv), run_id="runB") as rec:
        monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rv))
        monkeypatch.setenv("MELISSA_TRAINER_RUN_ID", "runA")  # what its launcher said
        with pytest.raises(
            RuntimeError, match="published by run runB, but this simulation belongs to run runA"
        ):
            Client(FIELDS, simulation_id=3)
        monkeypatch.setenv("MELISSA_TRAINER_RUN_ID", "bad id!")
        with pytest.raises(ValueError, match="MELISSA_TRAINER_RUN_ID must be 1 to 64"):
            Client(FIELDS, simulation_id=3)
        assert rec.telemetry()["messages"] == 0  # nothing was sent


@pytest.mark.timeout(30)
def test_rendezvous_files_of_two_runs_are_not_complete(tmp_path: Path) -> None:
    rv = tmp_path / "rv"
    write_rendezvous(rv, 0, 2, "tcp://127.0.0.1:9", {"run_id": "runA"})
    write_rendezvous(rv, 1, 2, "tcp://127.0.0.1:10", {"run_id": "runB"})
    with pytest.raises(TimeoutError, match=r"files of different runs: run_id \['runA', 'runB'\]"):
        fetch_rendezvous(rv, 0.1)


@pytest.mark.timeout(30)
def test_a_run_on_fewer_ranks_removes_the_rendezvous_files_of_the_ranks_it_lacks(
    tmp_path: Path,
) -> None:
    # a run on 3 ranks, then the same output directory resumed on 1: its rank_1 and
    # rank_2 files would be waited on for ever (found in the multi-node resize test)
    rv = tmp_path / "rv"
    for rank in range(3):
        write_rendezvous(rv, rank, 3, f"tcp://127.0.0.1:{9 + rank}", {"run_id": "runA"})
    write_rendezvous(rv, 0, 1, "tcp://127.0.0.1:20", {"run_id": "runB"})
    assert sorted(p.name for p in rv.iterdir()) == ["rank_0.json"]
    (entry,) = fetch_rendezvous(rv, 0.1)
    assert (entry["run_id"], entry["world_size"]) == ("runB", 1)
    # on 2 ranks: rank_1 of the old run stays until the new rank 1 rewrites it
    for rank in range(3):
        write_rendezvous(rv, rank, 3, f"tcp://127.0.0.1:{9 + rank}", {"run_id": "runA"})
    write_rendezvous(rv, 0, 2, "tcp://127.0.0.1:20", {"run_id": "runB"})
    with pytest.raises(TimeoutError, match="disagree on world_size"):
        fetch_rendezvous(rv, 0.1)
    write_rendezvous(rv, 1, 2, "tcp://127.0.0.1:21", {"run_id": "runB"})
    assert [e["rank"] for e in fetch_rendezvous(rv, 0.1)] == [0, 1]


def test_hello_run_id_is_optional_and_checked() -> None:
    spec = P.field_specs(FIELDS)
    plain = P.encode_hello(1, 0, 1, spec, {"a": 1.0})
    assert b"run_id" not in plain  # what older clients send, byte for byte
    assert P.decode(plain).run_id is None  # type: ignore[union-attr]
    tagged = P.encode_hello(1, 0, 1, spec, {"a": 1.0}, run_id="0123abcd")
    assert P.decode(tagged).run_id == "0123abcd"  # type: ignore[union-attr]
    assert tagged.endswith(b', "run_id": "0123abcd"}')
    bad = tagged.replace(b'"0123abcd"', b'"01 3abcd"')
    with pytest.raises(P.ProtocolError, match="bad_hello"):
        P.decode(bad)
    with pytest.raises(ValueError, match="run_id must be"):
        P.encode_hello(1, 0, 1, spec, run_id="x" * 65)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_c_client_sends_the_run_id_and_refuses_another_runs_rendezvous(
    script_exe: Path,  # noqa: F811
    capture: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    cap = capture(1)
    rv = tmp_path / "rv"
    write_rendezvous(rv, 0, 1, cap.endpoints[0], {"run_id": "runB"})
    env = {"MELISSA_TRAINER_RUN_ID": "runA"}
    script = f"id 5\nrendezvous {rv} 5\nfield u 1 0\nstart\nabort\n"
    got = lines_of(run_script(script_exe, script, tmp_path, env))
    assert got[3] == (
        6,
        f"the rendezvous directory '{rv}' was published by run runB, but this simulation "
        "belongs to run runA (MELISSA_TRAINER_RUN_ID): another trainer has taken over that "
        "output directory since this simulation was launched. Its data would go to the wrong "
        "trainer: nothing is sent. Give each trainer its own --output_dir",
    )
    # the same run: the HELLO names it, as the Python client's does
    script = f"id 5\nrendezvous {rv} 5\nfield u 1 0\nstart\nclose\n"
    result = run_script(script_exe, script, tmp_path, {"MELISSA_TRAINER_RUN_ID": "runB"})
    assert all(status == 0 for status, _ in result.values()), result
    (c_messages,) = cap.until_bye()
    hello = P.decode(c_messages[0][0])
    assert isinstance(hello, P.Hello) and hello.run_id == "runB"
    assert hello.client == "c"  # which client sent it (the launcher's advice)
    python_hello = P.encode_hello(5, 0, 1, hello.fields, run_id="runB", client="c")
    assert bytes(c_messages[0][0]) == python_hello


def test_hellos_of_other_runs_answer_admission_refused_and_the_record_is_bounded() -> None:
    # An ADMISSION_QUERY names no run: the ingest remembers the ids it refused as another
    # run's (``wrong_run``), at most WRONG_RUNS_KEPT of them (any number may come), and
    # never in `refused` (the launcher would kill this run's simulation of that id).
    field = P.FieldSpec("u", np.dtype("<f4"), (3,))
    ing = Ingest(
        0, 1, put=lambda s: True, end=lambda why: None, expected=None,
        max_field_bytes=1 << 20, max_pending=8, max_pending_bytes=1 << 20,
        max_time_step=1 << 20, recent_size=8, run_id="runB",
    )  # fmt: skip
    for sid in range(WRONG_RUNS_KEPT + 1):
        ing.hello(P.Hello(sid, 0, 1, (field,), run_id="runA"))
    ing.hello(P.Hello(1, 0, 1, (field,), run_id="runA"))  # (again: the newest now)
    assert len(ing.wrong_runs) == WRONG_RUNS_KEPT and ing.refused == []
    assert ing.rejected["wrong_run"] == WRONG_RUNS_KEPT + 2
    assert admission_of(ing, 0) == (P.ADMISSION_UNKNOWN, "")  # (the oldest, forgotten)
    status, why = admission_of(ing, 1)
    assert status == P.ADMISSION_REFUSED
    assert "named run runA, and this receiver serves run runB (wrong_run)" in why
    assert "Start it again" in why
    # a query that names its run (RECEIPT_QUERY) is not answered from this record
    assert admission_of(ing, 1, other_runs=False) == (P.ADMISSION_UNKNOWN, "")
    # this run's simulation of that id, once its HELLO is in: accepted
    ing.hello(P.Hello(1, 0, 1, (field,), run_id="runB"))
    assert admission_of(ing, 1) == (P.ADMISSION_ACCEPTED, "")


@pytest.mark.parametrize("attempt", ["", "0"], ids=["by_hand", "launched"])
def test_another_runs_rendezvous_is_refused_with_the_fix_for_how_the_solver_was_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, attempt: str
) -> None:
    """A solver started by hand with a leftover MELISSA_TRAINER_RUN_ID is told to unset
    it (htrial: it was told that a trainer took over since it was launched); a launched
    one, that another trainer took over the output directory."""
    from melissa_trainer.client.config import resolve_run_id

    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))
    monkeypatch.setenv("MELISSA_TRAINER_RUN_ID", "runA")
    monkeypatch.setenv("MELISSA_TRAINER_ATTEMPT", attempt)
    with pytest.raises(RuntimeError) as raised:
        resolve_run_id(None, "runB")
    message = str(raised.value)
    assert "published by run runB" in message and "belongs to run runA" in message
    assert ("unset MELISSA_TRAINER_RUN_ID" in message) is (attempt == "")
    assert ("since this simulation was launched" in message) is (attempt == "0")
