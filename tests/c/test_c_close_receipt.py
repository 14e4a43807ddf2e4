"""The C client's close receipt (docs/protocol.md, section 17b) against a follow socket
played by the test, whose answers it chooses: "not yet" is asked again until the BYE is
confirmed (`MT_OK`); the non-finite count warns, or fails the close when every sample
was refused; a follow socket that goes away, or a rendezvous rewritten by a new run,
fails the close (`MT_ETIMEDOUT`) saying that the steps may be lost and to run the
simulation again; a launched simulation asks nothing. Before the receipt, each of these
closes returned `MT_OK` (the ADMISSION question, answered "accepted" or not at all).

The oracles: the queries the fake follow socket received, decoded by the Python codec
(`decode_receipt_query`: the BYE's count it must carry is the number of steps the
script sent), and the Python client's own messages (`confirm.report`) for the same
receipts. The Fortran module and the sanitizers: test_c_close_receipt_builds.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import Script, zctx  # noqa: F401 (a fixture)

from melissa_trainer import wire as P
from melissa_trainer.client.admission import SimulationRefused
from melissa_trainer.client.confirm import report
from melissa_trainer.stream.trainer_process import published_process
from melissa_trainer.wire.receipt import (
    RECEIPT_BYE,
    RECEIPT_FINISHED,
    RECEIPT_NO_BYE,
    ReceiptQuery,
    ReceiptReply,
    decode_receipt,
    decode_receipt_query,
    encode_receipt,
)

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ETIMEDOUT, MT_ESIMREFUSED = 8, 14
STEPS = 3  # (the script's sends: the count its BYE carries)
RUN = "run-a"
#: an answer: (the decoded query, how many came before) -> a frame, or None (no answer)
Answer = Callable[[ReceiptQuery, int], bytes | None]


@pytest.fixture
def sink(zctx: zmq.Context) -> Iterator[str]:  # noqa: F811
    """A PULL endpoint standing for the receiver: it takes the stream, BYE included."""
    pull = zctx.socket(zmq.PULL)
    pull.bind("tcp://127.0.0.1:*")
    yield str(pull.getsockopt_string(zmq.LAST_ENDPOINT))
    pull.close(linger=0)


@contextmanager
def follow_socket(
    ctx: zmq.Context, answer: Answer, gone_after: int | None = None
) -> Iterator[tuple[str, list[ReceiptQuery], list[int]]]:
    """A ROUTER answering each RECEIPT_QUERY with `answer`'s frame, in a thread; yields
    its endpoint, the queries received and the kinds of every frame received (the
    oracles). `gone_after`: it closes (its port refuses from then on, as a killed
    trainer's) once it received that many queries."""
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind("tcp://127.0.0.1:*")
    endpoint = str(router.getsockopt_string(zmq.LAST_ENDPOINT))
    asked: list[ReceiptQuery] = []
    kinds: list[int] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            if gone_after is not None and len(asked) >= gone_after:
                router.close(linger=0)
                return
            if not router.poll(20):
                continue
            identity, frame = router.recv_multipart()
            kinds.append(frame[P.KIND_AT])
            if frame[P.KIND_AT] == P.ADMISSION_QUERY:  # (an older trainer's question)
                sid, request_id = P.decode_admission_query(frame)
                router.send_multipart(
                    [identity, P.encode_admission(sid, request_id, 0, 1, P.ADMISSION_ACCEPTED)]
                )
                continue
            query = decode_receipt_query(frame)
            said = answer(query, len(asked))
            asked.append(query)
            if said is not None:
                router.send_multipart([identity, said])

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield endpoint, asked, kinds
    finally:
        stop.set()
        thread.join()
        if not router.closed:
            router.close()


def publish(
    rendezvous: Path,
    sink: str,  # noqa: F811
    follow: str,
    run: str = RUN,
    kinds: tuple[int, ...] = (9, 11, 13),
) -> None:
    """The rendezvous file of a receiver whose follow socket answers `kinds`, written by
    this process (`published_process`: alive here, so a client's start takes it without
    dialling `sink`, which may be dead on purpose: these tests are of the close)."""
    rendezvous.mkdir(exist_ok=True)
    entry = {"version": 1, "rank": 0, "world_size": 1, "endpoint": sink, "run_id": run,
             "follow_endpoint": follow, "follow_kinds": list(kinds),
             **published_process()}  # fmt: skip
    (rendezvous / "rank_0.json.tmp").write_text(json.dumps(entry))
    (rendezvous / "rank_0.json.tmp").rename(rendezvous / "rank_0.json")


def close_status(exe: Path, rendezvous: Path, *setup: str, **env: str) -> tuple[int, str, str]:
    """A solver started by hand (its endpoints from `rendezvous`) that sends STEPS steps:
    its close's status, message and stderr."""
    script = Script(exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous), **env})
    try:
        sends = [f"send {t} u 1 4 {t}" for t in range(STEPS)]
        script.send("id 3", "field u 1 1 4", *setup, "start", *sends)
        closed = script.send("close")
        lines, err = script.finish()
    finally:
        script.kill()
    code, _, message = lines[closed][-1].partition(" ")
    return int(code), message.strip(), err


def receipt(
    query: ReceiptQuery, admission: int, bye: int, reason: str = "", **counts: int
) -> bytes:
    """A RECEIPT answering `query` from receiver 0 of 1."""
    sid, request_id = query.simulation_id, query.request_id
    return encode_receipt(sid, request_id, 0, 1, admission, bye, reason, **counts)


@pytest.mark.timeout(60)
def test_not_yet_is_asked_again_until_the_bye_is_ingested(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Twice "not yet" (a full buffer), then "ingested" with the count the BYE carried:
    MT_OK after the third question, and not before (an earlier attempt's BYE with
    another count confirms nothing)."""

    def answer(query: ReceiptQuery, before: int) -> bytes:
        if before == 0:
            return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_NO_BYE, steps=1)
        if before == 1:  # (an earlier attempt's BYE: another count)
            return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_BYE, steps=2, bye_steps=2)
        return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_BYE, steps=3, bye_steps=query.bye_steps)

    with follow_socket(zctx, answer) as (follow, asked, kinds):
        publish(tmp_path / "rv", sink, follow)
        code, message, err = close_status(script_exe, tmp_path / "rv")
    assert (code, message) == (0, ""), message  # (before the fix: also 0, asked nothing)
    # (not the ADMISSION_QUERY it replaces: one at most, its sends', admission_watch.c)
    assert kinds.count(P.ADMISSION_QUERY) <= 1 and set(kinds) <= {11, P.RECEIPT_QUERY}
    assert len(asked) == 3, asked
    assert {(q.simulation_id, q.bye_steps, q.client_rank, q.client_count, q.run_id)
            for q in asked} == {(3, STEPS, 0, 1, RUN)}  # fmt: skip
    assert len({q.request_id for q in asked}) == 3  # (each question its own id)
    assert err == "", err


def python_report(steps: int, nonfinite: int) -> str:
    """What the Python client says (raises) of a confirmed receipt with these counts."""
    reply = ReceiptReply(3, 1, 0, 1, P.ADMISSION_ACCEPTED, RECEIPT_FINISHED, "", steps, 0,
                         nonfinite)  # fmt: skip
    try:
        report([reply], [steps], 1, "simulation 3 rank 0")
    except SimulationRefused as exc:
        return str(exc)
    return ""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("nonfinite", [1, STEPS])
def test_samples_refused_as_non_finite_warn_and_all_of_them_fail(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    nonfinite: int,
) -> None:
    """The simulation finished at the receiver, `nonfinite` of its 3 samples refused as
    NaN/Inf: some, a warning on stderr and MT_OK; all, MT_ESIMREFUSED with the Python
    client's sentence (nothing of it was trained on)."""

    def answer(query: ReceiptQuery, before: int) -> bytes:
        return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_FINISHED, steps=STEPS,
                       nonfinite=nonfinite)  # fmt: skip

    with follow_socket(zctx, answer) as (follow, asked, _):
        publish(tmp_path / "rv", sink, follow)
        code, message, err = close_status(script_exe, tmp_path / "rv")
    assert len(asked) == 1
    if nonfinite == STEPS:
        assert code == MT_ESIMREFUSED, message  # (before: MT_OK)
        assert message == python_report(STEPS, nonfinite)
    else:
        assert (code, message) == (0, ""), message
        assert python_report(STEPS, nonfinite) == ""
        assert (
            f"simulation 3 rank 0: the trainer refused {nonfinite} of the {STEPS} samples of "
            f"this simulation as non-finite: NaN or Inf in its fields"
        ) in err, err


@pytest.mark.timeout(60)
def test_a_refusal_in_the_receipt_fails_the_close_with_its_reason(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    reason = "field 'u' is float32 (4,) where the study's is float32 (5,): declares other fields"

    def answer(query: ReceiptQuery, before: int) -> bytes:
        return receipt(query, P.ADMISSION_REFUSED, RECEIPT_NO_BYE, reason)

    with follow_socket(zctx, answer) as (follow, _, _):
        publish(tmp_path / "rv", sink, follow)
        code, message, _ = close_status(script_exe, tmp_path / "rv")
    assert code == MT_ESIMREFUSED, message
    assert message == (
        f"simulation 3: the trainer's receiver 0 ({sink}) refused it, and dropped everything "
        f"it sent: {reason}. Run it again declaring the study's fields (the same names, "
        f"dtypes and shapes, e.g. the trainer's grid size)"
    )


def assert_says_run_again(message: str) -> None:
    assert message.startswith("simulation 3 rank 0: its BYE was not confirmed: "), message
    assert "may be lost" in message, message
    assert "run it again" in message and "MELISSA_TRAINER_SIMULATION_ID=3" in message, message


@pytest.mark.timeout(60)
def test_a_follow_socket_that_goes_away_fails_the_close(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """One "not yet", then the follow socket closes (its port refuses, as a killed
    trainer's): gone after the disconnected timeout (1 s here), and no restarted trainer
    within the follow timeout (0.2 s here; the replay window's), MT_ETIMEDOUT."""

    def answer(query: ReceiptQuery, before: int) -> bytes:
        return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_NO_BYE)

    with follow_socket(zctx, answer, gone_after=1) as (follow, asked, _):
        publish(tmp_path / "rv", sink, follow)
        code, message, _ = close_status(
            script_exe, tmp_path / "rv", "disconnected_timeout 1", "follow_timeout 0.2"
        )
    assert len(asked) == 1
    assert code == MT_ETIMEDOUT, message  # (before: MT_OK)
    assert_says_run_again(message)
    assert f"the trainer's receiver 0 ({sink}) has not answered, nor been connected, for 1.0 s" \
        in message, message  # fmt: skip
    assert "once a trainer runs there again (a preempted one: --resume_from_checkpoint " \
        "latest), run it again" in message, message  # fmt: skip


@pytest.mark.timeout(60)
def test_a_rendezvous_rewritten_by_a_new_run_fails_the_close(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The receiver says "not yet"; meanwhile a restarted trainer (run-b) rewrites the
    rendezvous: a C client without a replay window does not follow it, and fails the
    close saying so (with one: test_c_close_follow.py)."""
    rendezvous = tmp_path / "rv"

    def answer(query: ReceiptQuery, before: int) -> bytes:
        if before == 0:  # (the question came: the trainer restarts)
            publish(rendezvous, sink, "tcp://127.0.0.1:1", run="run-b")
        return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_NO_BYE)

    with follow_socket(zctx, answer) as (follow, asked, _):
        publish(rendezvous, sink, follow)
        code, message, _ = close_status(script_exe, rendezvous, MELISSA_TRAINER_REPLAY_BYTES="0")
    assert len(asked) >= 1
    assert code == MT_ETIMEDOUT, message  # (before: MT_OK)
    assert_says_run_again(message)
    assert f"the rendezvous {rendezvous} now names run run-b" in message, message


@pytest.mark.timeout(60)
def test_the_close_timeout_bounds_a_receiver_that_keeps_saying_not_yet(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    def answer(query: ReceiptQuery, before: int) -> bytes:
        return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_NO_BYE)

    with follow_socket(zctx, answer) as (follow, asked, _):
        publish(tmp_path / "rv", sink, follow)
        code, message, _ = close_status(script_exe, tmp_path / "rv", "close_timeout 1")
    assert len(asked) >= 2  # (asked again)
    assert code == MT_ETIMEDOUT, message
    assert message.startswith(
        "simulation 3 rank 0: the trainer did not confirm this simulation's BYE: its "
        "receivers [0] ingested none of its steps for close_timeout=1.0 s (no progress; "
        f"{STEPS} of the {STEPS} steps this rank sent them not confirmed)"
    ), message  # (tests/c/test_c_close_progress.py: a receiver that progresses is waited for)


@pytest.mark.timeout(60)
def test_a_launched_simulation_asks_nothing(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    def answer(query: ReceiptQuery, before: int) -> bytes:
        return receipt(query, P.ADMISSION_REFUSED, RECEIPT_NO_BYE, "refused")

    with follow_socket(zctx, answer) as (follow, asked, kinds):
        publish(tmp_path / "rv", sink, follow)
        code, message, err = close_status(script_exe, tmp_path / "rv", MELISSA_TRAINER_ATTEMPT="0")
    assert (code, message, err) == (0, "", "")
    assert asked == [] and kinds == []


def test_the_fake_answers_are_valid_receipts() -> None:
    """(The fixtures' frames decode with the Python codec: the fake plays by 17b.)"""
    query = ReceiptQuery(3, 5, STEPS, 0, 1, RUN)
    reply = decode_receipt(receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_BYE, steps=3,
                                   bye_steps=3))  # fmt: skip
    assert (reply.request_id, reply.bye, reply.bye_steps) == (5, RECEIPT_BYE, 3)


@pytest.mark.timeout(60)
def test_a_receiver_without_13_in_its_follow_kinds_is_asked_the_admission(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """An older trainer (follow_kinds [9, 11]): ADMISSION_QUERY, as before the receipt."""

    def answer(query: ReceiptQuery, before: int) -> bytes:
        raise AssertionError("a RECEIPT_QUERY to a receiver that does not answer it")

    with follow_socket(zctx, answer) as (follow, asked, kinds):
        publish(tmp_path / "rv", sink, follow, kinds=(9, 11))
        code, message, err = close_status(script_exe, tmp_path / "rv")
    assert (code, message, err) == (0, "", "")
    # (the close's, after the one its sends may have asked: admission_watch.c)
    assert kinds and set(kinds) == {P.ADMISSION_QUERY} and asked == []
