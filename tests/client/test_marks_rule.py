"""Which small messages sent unbatched are marks (`marks.Marks`: tracked, a close's
sign), by the rule of `marks`: tiny frames one in `MARK_MOST`, frames of at least
``MARK_BYTES / MARK_EVERY`` one in `MARK_EVERY`, those between one per `MARK_BYTES`.

A socket of the test records how each frame went (copied, or without a copy: a mark)
and keeps the marks' frames as ZeroMQ would, until it lets them go. Before the rule
counted bytes, every 16th message was a mark whatever its size (the tiny case's
``[0, 1024, 2048]`` was ``[0, 16, 32, ...]``): a tracked send costs ten times a copied
one, which tiny messages paid for nothing (benchmarks/client_send.py). The C client's
rule, the same: clients/c/tests/unit_marks.c."""

from __future__ import annotations

from typing import Any, cast

import pytest
import zmq

from melissa_trainer.client.marks import MARK_BYTES, MARK_EVERY, MARK_MOST, Marks

pytestmark = pytest.mark.timeout(60)


class Recorder:
    """A socket's `send` and `copy_threshold`, as `Marks` uses them."""

    def __init__(self) -> None:
        self.copy_threshold = 65536
        self.marked: list[int] = []  # which messages went without a copy
        self.sent = 0
        self.held: list[Any] = []  # the marks' frames ZeroMQ still holds
        self.refuse = False  # the next send raises zmq.Again (a full queue)

    def send(self, frame: Any, copy: bool = True) -> None:
        if self.refuse:
            self.refuse = False
            raise zmq.Again()
        if not copy:
            assert self.copy_threshold == 0  # (else pyzmq copies it: nothing to track)
            self.marked.append(self.sent)
            self.held.append(frame)
        self.sent += 1


def marked(sizes: list[int]) -> tuple[list[int], Marks, Recorder]:
    sock, marks = Recorder(), Marks()
    for size in sizes:
        marks.send(cast(zmq.Socket, sock), bytes(size))
    assert sock.copy_threshold == 65536  # (restored)
    return sock.marked, marks, sock


def test_the_constants_keep_the_tests_close_inside_its_bound() -> None:
    assert (MARK_EVERY, MARK_BYTES, MARK_MOST) == (16, 256 * 1024, 1024)
    assert MARK_BYTES // MARK_EVERY == 16 * 1024  # (the size marked one in MARK_EVERY)


@pytest.mark.parametrize(
    ("size", "every"),
    [
        (40, MARK_MOST),  # tiny (a header and 4 floats): MARK_MOST bounds them
        (200, MARK_MOST),  # 1024 x 200 B < 256 KiB: still MARK_MOST
        (1024, 256),  # 1 KiB: one per MARK_BYTES
        (4000, 66),  # ceil(262144 / 4000)
        (16 * 1024, MARK_EVERY),  # exactly MARK_BYTES in MARK_EVERY
        (56_000, MARK_EVERY),  # the close tests' steps
        (65_536, MARK_EVERY),
    ],
)
def test_which_messages_of_one_size_are_marks(size: int, every: int) -> None:
    got, _, _ = marked([size] * (3 * every + 1))
    assert got == [0, every, 2 * every, 3 * every]


def test_sizes_mixed_count_bytes_and_messages_from_the_last_mark() -> None:
    # a mark, 15 tiny, then large ones: the 5th large one is a mark (before it, 4 x 64
    # KiB and the tiny ones: MARK_BYTES passed, the count already past MARK_EVERY)
    got, _, _ = marked([40] * 16 + [65_536] * 21)
    assert got == [0, 20, 36], got
    # many bytes but too few messages: MARK_EVERY first
    got, _, _ = marked([1 << 20] + [40] * 20)
    assert got == [0, MARK_EVERY], got


def test_a_refused_send_counts_nothing_and_its_retry_is_the_mark() -> None:
    sock, marks = Recorder(), Marks()
    for _ in range(MARK_MOST):
        marks.send(cast(zmq.Socket, sock), bytes(40))
    sock.refuse = True
    with pytest.raises(zmq.Again):
        marks.send(cast(zmq.Socket, sock), bytes(40))  # (the 2nd mark's turn)
    assert sock.copy_threshold == 65536
    marks.send(cast(zmq.Socket, sock), bytes(40))
    assert sock.marked == [0, MARK_MOST]
    sock.refuse = True  # a copied one refused: not counted either
    with pytest.raises(zmq.Again):
        marks.send(cast(zmq.Socket, sock), bytes(40))
    for _ in range(MARK_MOST):  # (its retry, then more: the next mark 1024 after)
        marks.send(cast(zmq.Socket, sock), bytes(40))
    assert sock.marked == [0, MARK_MOST, 2 * MARK_MOST]


def test_in_flight_counts_the_marks_zeromq_holds() -> None:
    _, marks, sock = marked([40] * (2 * MARK_MOST + 1))
    assert marks.in_flight() == 3
    del sock.held[0]  # ZeroMQ let go of the first mark
    assert marks.in_flight() == 2
    sock.held.clear()
    assert marks.in_flight() == 0
