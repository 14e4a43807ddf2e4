"""The close receipt (docs/protocol.md, section 17b; `melissa_trainer.client.confirm`):
an external-mode close returns only once the receiver has *ingested* the BYE, a
simulation of another run is told so at once (with the fix), and samples refused as
non-finite are reported at close (a warning naming the count; `SimulationRefused` when
every one was). The RECEIPT messages are validated on both sides."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import zmq
from helpers import running
from stopped_close import close_failure, stop_during_close

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client
from melissa_trainer.client.admission import SimulationRefused
from melissa_trainer.client.confirm import answers_receipts, report
from melissa_trainer.client.receipts import confirmed
from melissa_trainer.client.tuning import ClientTuning
from melissa_trainer.stream.follow_answers import receipt_of
from melissa_trainer.stream.follow_server import FollowServer
from melissa_trainer.stream.ingested import Draining
from melissa_trainer.wire import receipt as R

pytestmark = pytest.mark.timeout(120)


def wait_until(what: str, ready: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_close_returns_only_once_the_receiver_has_ingested_the_bye(external: Path) -> None:
    # A receiver whose buffer is full stops reading: the BYE leaves the client (its
    # release) and waits in the receiver's queue. The buffer is drained only once the
    # follow socket has answered two queries (the closing client asks again): a close
    # that took the BYE's release (or the HELLO's admission) for delivery returned
    # before that, with the BYE unread.
    buffer = FIFOBuffer(2)
    with running(buffer=buffer, rendezvous_dir=external, run_id="run-a") as receiver:
        follow = receiver._follow
        assert follow is not None

        def drain() -> None:
            wait_until("two queries answered", lambda: follow.answered >= 2)
            while receiver.completed() != [5]:
                with contextlib.suppress(TimeoutError):
                    buffer.get_batch(1, timeout=0.05)  # (what the trainer takes)

        drainer = threading.Thread(target=drain, daemon=True)
        client = Client(simulation_id=5, fields={"u": ((4,), np.float64)})
        for t in range(6):
            client.send(t, u=np.full(4, t, np.float64))
        drainer.start()
        client.close()
        # the oracle: the receiver's own record, read as the close returns
        assert 5 in receiver.completed() or 0 in receiver.ingest.sims[5].byes
        drainer.join(30)


def test_a_simulation_of_another_run_is_told_at_once_with_the_fix(external: Path) -> None:
    # the rendezvous the solver read names run-a; the receiver there serves run-b (it was
    # rewritten after, or another trainer publishes there): its HELLO is dropped
    # (wrong_run), and its close says so at once instead of waiting and warning
    served = external / "served"
    with running(rendezvous_dir=served, run_id="run-b"):
        entry = json.loads((served / "rank_0.json").read_text())
        (external / "rank_0.json").write_text(json.dumps({**entry, "run_id": "run-a"}))
        client = Client(simulation_id=3, fields={"u": ((4,), np.float64)})
        client.send(0, u=np.zeros(4))
        with pytest.raises(SimulationRefused, match=r"serves run run-b \(wrong_run\)") as caught:
            client.close()
    assert "Start it again (it reads the rendezvous afresh)" in str(caught.value)


def test_samples_refused_as_non_finite_are_reported_at_close(
    external: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with running(rendezvous_dir=external, run_id="run-a"):
        some = Client(simulation_id=1, fields={"u": ((4,), np.float64)})
        for t in range(4):
            some.send(t, u=np.full(4, np.nan if t == 2 else t, np.float64))
        with caplog.at_level(logging.WARNING, "melissa_trainer.client.client"):
            some.close()
        said = [r.getMessage() for r in caplog.records if "non-finite" in r.getMessage()]
        assert any("refused 1 of the 4 samples" in m and "fix the solver" in m for m in said)
        every = Client(simulation_id=2, fields={"u": ((4,), np.float64)})
        for t in range(3):
            every.send(t, u=np.full(4, np.inf, np.float64))
        with pytest.raises(SimulationRefused, match="refused all 3 samples"):
            every.close()


def test_receipts_round_trip_and_reject_what_breaks_their_rules() -> None:
    query = R.encode_receipt_query(7, 9, 6, 1, 2, "run-a")
    assert R.decode_receipt_query(query) == R.ReceiptQuery(7, 9, 6, 1, 2, "run-a")
    assert R.decode_receipt_query(R.encode_receipt_query(7, 9, 6, 0, 1, None)).run_id is None
    reply = R.encode_receipt(7, 9, 1, 2, P.ADMISSION_ACCEPTED, R.RECEIPT_BYE, "x", 5, 6, 2)
    got = R.decode_receipt(reply)
    assert (got.bye, got.reason, got.steps, got.bye_steps, got.nonfinite) == (1, "", 5, 6, 2)
    refused = R.decode_receipt(R.encode_receipt(7, 9, 0, 1, P.ADMISSION_REFUSED, 0, "é" * 3000))
    assert refused.reason == "é" * 2048
    head = reply[: P.PREFIX.size]
    fixed = R.RECEIPT_FIXED
    bad = {
        "bad_kind": P.encode_admission(7, 9, 0, 1, P.ADMISSION_ACCEPTED),
        "truncated": reply[:30],
        "bad_size": reply + b"x",
        "bad_rank": head + fixed.pack(9, 2, 2, 1, 0, 0, 0, 0, 0),
        "bad_request": head + fixed.pack(9, 0, 1, 1, 9, 0, 0, 0, 0),
    }
    bad_count = head + fixed.pack(9, 0, 1, 1, R.RECEIPT_FINISHED, 0, 3, 3, 0)  # (BYE count)
    too_many = head + fixed.pack(9, 0, 1, 1, R.RECEIPT_BYE, 0, 3, 3, 4)  # (4 of 3 refused)
    for reason, data in [*bad.items(), ("bad_request", bad_count), ("bad_request", too_many)]:
        with pytest.raises(P.ProtocolError) as caught:
            R.decode_receipt(data)
        assert caught.value.reason == reason
    qhead = query[: P.PREFIX.size]
    qfixed = R.RECEIPT_QUERY_FIXED
    for reason, data in {
        "bad_size": query + b"x",
        "bad_rank": qhead + qfixed.pack(9, 0, 2, 2, 0, 0),
        "bad_request": qhead + qfixed.pack(9, 0, 0, 1, 2, 0) + b"a!",
    }.items():
        with pytest.raises(P.ProtocolError) as caught:
            R.decode_receipt_query(data)
        assert caught.value.reason == reason


def ingest(**sims: object) -> SimpleNamespace:
    return SimpleNamespace(
        sims=sims.get("sims", {}),
        refused=sims.get("refused", []),
        archive=SimpleNamespace(steps=sims.get("archive", {})),
        nonfinite=SimpleNamespace(by_simulation=sims.get("nonfinite", {})),
        draining=Draining(),  # (no put count: the steps marked are the steps held)
    )


def test_receipt_of_reads_the_ledger_the_archive_and_the_run() -> None:
    ledger = SimpleNamespace(completed=4, finished=False, byes={0: 6}, asked=set())
    state = ingest(sims={3: ledger}, archive={4: 10}, nonfinite={3: 1, 4: 2})
    ask = lambda sid, rank=0, run="run-a": R.ReceiptQuery(sid, 1, 6, rank, 2, run)  # noqa: E731
    assert receipt_of(state, "run-a", ask(3)) == (1, R.RECEIPT_BYE, "", 4, 6, 1)
    assert receipt_of(state, "run-a", ask(3, rank=1)) == (1, R.RECEIPT_NO_BYE, "", 4, 0, 1)
    assert receipt_of(state, "run-a", ask(4)) == (1, R.RECEIPT_FINISHED, "", 10, 0, 2)
    assert receipt_of(state, "run-a", ask(9))[:2] == (P.ADMISSION_UNKNOWN, R.RECEIPT_NO_BYE)
    other = receipt_of(state, "run-a", ask(9, run="run-b"))
    assert other[0] == P.ADMISSION_REFUSED and "(wrong_run)" in other[2]
    # a ledger held of it (a resumed trainer's checkpoint): answered from it, any run
    assert receipt_of(state, "run-a", ask(3, run="run-b"))[1] == R.RECEIPT_BYE
    ledger.finished = True
    assert receipt_of(state, "run-a", ask(3, rank=1))[1] == R.RECEIPT_FINISHED


def test_the_follow_socket_holds_a_receipt_until_the_bye_is_in() -> None:
    # a query it cannot confirm is held (and answered as soon as the BYE is in, or as
    # things stand after RECEIPT_HOLD, or at stop): a trainer that ends as soon as the
    # last BYE is in has said so before its socket closes
    said = [(P.ADMISSION_ACCEPTED, R.RECEIPT_NO_BYE, "", 2, 0, 0)]
    server = FollowServer({}, 0, 1, "tcp://127.0.0.1:*", receipt=lambda q: said[0])
    endpoint = server.start()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    try:
        sock.connect(endpoint)
        sock.send(R.encode_receipt_query(7, 5, 3, 0, 1, "run-a"))
        wait_until("the query held", lambda: len(server._held) == 1)
        said[0] = (P.ADMISSION_ACCEPTED, R.RECEIPT_BYE, "", 3, 3, 0)  # (the BYE ingested)
        assert sock.poll(10_000)
        reply = R.decode_receipt(sock.recv())
        assert (reply.request_id, reply.bye, reply.bye_steps) == (5, R.RECEIPT_BYE, 3)
        assert confirmed(reply, 3) and not confirmed(reply, 4)
        sock.send(R.encode_receipt_query(7, 6, 4, 0, 1, "run-a"))  # (another count: held)
        wait_until("the query held", lambda: len(server._held) == 1)
        server.stop()  # (answers what it holds, as things stand)
        assert sock.poll(10_000)
        assert R.decode_receipt(sock.recv()).request_id == 6
    finally:
        sock.close(linger=0)
        ctx.term()
        server.stop()
    assert answers_receipts({"follow_endpoint": "tcp://x:1", "follow_kinds": [9, 11, 13]})
    assert not answers_receipts({"follow_endpoint": "tcp://x:1"})  # (an older trainer)
    assert not answers_receipts({"follow_kinds": [13]})  # (no follow socket)


def test_report_counts_over_receivers_and_warns_of_steps_lost() -> None:
    def reply(rank: int, steps: int, nonfinite: int, bye: int = R.RECEIPT_FINISHED) -> object:
        return R.ReceiptReply(1, 1, rank, 2, 1, bye, "", steps, steps if bye == 1 else 0, nonfinite)

    report([reply(0, 3, 0), reply(1, 3, 0)], [3, 3], 1, "sim")  # (nothing to say)
    with pytest.raises(SimulationRefused, match="all 6 samples"):
        report([reply(0, 3, 3), reply(1, 3, 3)], [3, 3], 1, "sim")
    counts: Counter[str] = Counter()

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            counts["lost" if "lost on the way" in record.getMessage() else "other"] += 1

    handler = Catch()
    logging.getLogger("melissa_trainer.client.client").addHandler(handler)
    try:
        report([reply(0, 2, 0, R.RECEIPT_BYE), reply(1, 3, 0)], [3, 3], 1, "sim")
    finally:
        logging.getLogger("melissa_trainer.client.client").removeHandler(handler)
    assert counts == {"lost": 1}


def test_a_receiver_is_asked_a_receipt_only_if_its_rendezvous_says_it_answers() -> None:
    assert answers_receipts({"follow_endpoint": "tcp://x:1", "follow_kinds": [9, 11, 13]})
    assert not answers_receipts({"follow_endpoint": "tcp://x:1"})  # (an older trainer)
    assert not answers_receipts({"follow_kinds": [13]})  # (no follow socket)


@pytest.mark.usefixtures("short_receipt_rounds")  # (a receiver that never answers)
def test_without_a_window_a_restart_that_lacks_the_bye_fails_the_close(external: Path) -> None:
    # the trainer (run-a) has not read the BYE (its buffer is full) when it stops; the
    # next one (run-b, resumed from no checkpoint) lacks it: a client without a replay
    # window cannot send it again, and its close says so (before: it returned)
    closing, failed = stop_during_close(external, 4, ClientTuning(replay_bytes=0))
    with running(rendezvous_dir=external, run_id="run-b"):
        error = close_failure(closing, failed)
    assert isinstance(error, TimeoutError), error
    assert "now names run run-b" in str(error) and "MELISSA_TRAINER_SIMULATION_ID=4" in str(error)


@pytest.mark.usefixtures("short_receipt_rounds")  # (a receiver that never answers)
def test_a_trainer_gone_before_it_read_the_bye_fails_the_close(external: Path) -> None:
    # the trainer stops (its follow socket closes) with the BYE unread, and none is
    # restarted within follow_timeout: the close fails, saying what to do (before: it
    # returned, and the simulation's last steps were lost)
    tuning = ClientTuning(disconnected_timeout=0.5, follow_timeout=0.5)
    error = close_failure(*stop_during_close(external, 6, tuning))
    assert isinstance(error, TimeoutError), error
    assert "its BYE was not confirmed" in str(error) and "nor been connected" in str(error)
    assert "MELISSA_TRAINER_SIMULATION_ID=6" in str(error)
    # what happened (the trainer stopped and marked its rendezvous), each setting that
    # bounded the wait, and the fix (htrial: "the trainer died?", follow_timeout unnamed)
    assert "its rendezvous is marked stopped" in str(error), error
    assert "ClientTuning.follow_timeout=0.5 s" in str(error), error
    assert "--resume_from_checkpoint latest" in str(error), error
