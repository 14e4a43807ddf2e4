"""The C client's admission question at close (docs/protocol.md, section 17a) against
a follow socket played by the test, whose answers it chooses: "unknown" is asked again
until the answer is decided; a malformed reply is ignored, and a receiver that never
decides leaves the close `MT_OK` after 10 s with a warning on stderr (as the Python
client's `check_admission`); a rendezvous without follow sockets is not asked at all.
The oracle: the queries the fake follow socket received (decoded by the Python codec)."""

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

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ESIMREFUSED = 14
REASON = "field 'u' is float32 (5,) where the study's is float32 (4,)"
#: an answer: (the query's simulation id, its request id, how many came before) -> frame
Answer = Callable[[int, int, int], bytes]


@pytest.fixture
def sink(zctx: zmq.Context) -> Iterator[str]:  # noqa: F811
    """A PULL endpoint standing for the receiver: it takes the stream, BYE included (kept
    open for the test: the close waits for delivery)."""
    pull = zctx.socket(zmq.PULL)
    pull.bind("tcp://127.0.0.1:*")
    yield str(pull.getsockopt_string(zmq.LAST_ENDPOINT))
    pull.close(linger=0)


@contextmanager
def follow_socket(ctx: zmq.Context, answer: Answer) -> Iterator[tuple[str, list[int]]]:
    """A ROUTER answering each ADMISSION_QUERY with `answer`'s frame, in a thread; yields
    its endpoint and the simulation ids of the queries received (the oracle)."""
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind("tcp://127.0.0.1:*")
    endpoint = str(router.getsockopt_string(zmq.LAST_ENDPOINT))
    asked: list[int] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            if not router.poll(20):
                continue
            identity, frame = router.recv_multipart()
            sid, request_id = P.decode_admission_query(frame)
            router.send_multipart([identity, answer(sid, request_id, len(asked))])
            asked.append(sid)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield endpoint, asked
    finally:
        stop.set()
        thread.join()
        router.close()


def close_status(
    exe: Path,
    rendezvous: Path,
    sink: str,  # noqa: F811
    follow: str | None,
) -> tuple[int, str, str]:
    """A solver started by hand whose rendezvous names `sink` (and the follow socket
    `follow`): its close's status, message and stderr."""
    entry = {"version": 1, "rank": 0, "world_size": 1, "endpoint": sink}
    if follow is not None:
        entry["follow_endpoint"] = follow
    rendezvous.mkdir()
    (rendezvous / "rank_0.json").write_text(json.dumps(entry))
    script = Script(exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)})
    try:
        script.send("id 3", "field u 1 1 4", "start", "send 0 u 1 4 0")
        closed = script.send("close")
        lines, err = script.finish()
    finally:
        script.kill()
    code, _, message = lines[closed][-1].partition(" ")
    return int(code), message.strip(), err


@pytest.mark.timeout(60)
def test_unknown_is_asked_again_and_additions_to_the_reply_are_read_past(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Unknown twice, then refused, in a reply with 8 bytes more than section 17a's (an
    addition a later revision may make after the reason): the refusal is read."""

    def answer(sid: int, request_id: int, before: int) -> bytes:
        if before < 2:
            return P.encode_admission(sid, request_id, 0, 1, P.ADMISSION_UNKNOWN)
        return P.encode_admission(sid, request_id, 0, 1, P.ADMISSION_REFUSED, REASON) + bytes(8)

    with follow_socket(zctx, answer) as (follow, asked):
        code, message, _ = close_status(script_exe, tmp_path / "rv", sink, follow)
    assert asked == [3, 3, 3]
    assert code == MT_ESIMREFUSED, message
    assert message == (
        f"simulation 3: the trainer's receiver 0 ({sink}) refused it, and dropped "
        f"everything it sent: {REASON}"
    )


@pytest.mark.timeout(60)
def test_malformed_replies_are_ignored_and_no_answer_leaves_the_close_ok_with_a_warning(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Every reply names another rank (`bad_rank`): none is taken for an answer; after
    the 10 s the close returns MT_OK, and stderr says the admission was not confirmed."""

    def answer(sid: int, request_id: int, before: int) -> bytes:
        return P.encode_admission(sid, request_id, 1, 2, P.ADMISSION_REFUSED, REASON)

    with follow_socket(zctx, answer) as (follow, asked):
        code, message, err = close_status(script_exe, tmp_path / "rv", sink, follow)
    assert (code, message) == (0, ""), message
    assert len(asked) >= 1 and set(asked) == {3}
    assert "simulation 3 rank 0: the trainer did not confirm within 10 s" in err, err
    assert "malformed replies ignored" in err and "bad_rank" in err, err


@pytest.mark.timeout(60)
def test_a_rendezvous_without_follow_sockets_is_not_asked(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """An older trainer's rendezvous (no follow_endpoint): the close is as before."""
    code, message, err = close_status(script_exe, tmp_path / "rv", sink, None)
    assert (code, message, err) == (0, "", "")
