"""A send is validated before anything leaves (a bad one sends nothing), batched sends as
the first one, and the short paths of large and batched sends send what the general one
does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import zmq
from client_runs import GOOD, Receiver

from melissa_trainer import wire as p
from melissa_trainer.client import Client, ClientTuning

pytestmark = pytest.mark.usefixtures("_clean_environment")


@pytest.mark.timeout(30)
def test_send_validation_sends_nothing(receiver: Receiver) -> None:
    fields = {"u": ((2, 3), "float32"), "big": ((100, 200), "float64")}
    u, big = np.zeros((2, 3), np.float32), np.zeros((100, 200))
    c = Client(
        fields, simulation_id=1, endpoints=receiver.endpoint, tuning=ClientTuning(close_timeout=10)
    )
    bad: list[tuple[tuple[Any, ...], dict[str, Any], type, str]] = [
        ((0,), {"u": u}, ValueError, r"missing \['big'\]"),
        ((0,), {"u": u, "big": big, "w": u}, ValueError, r"unknown \['w'\]"),
        ((0, {"u": u}), {"u": u, "big": big}, ValueError, "both in the mapping"),
        ((0,), {"u": u, "big": big.astype(np.float32)}, TypeError, "'big'.*float32.*float64"),
        ((0,), {"u": u.astype(np.float64), "big": big}, TypeError, "'u'.*float64.*float32"),
        ((0,), {"u": u.reshape(6), "big": big}, ValueError, r"'u'.*\(6,\).*\(2, 3\)"),
        ((0,), {"u": u, "big": big[:50]}, ValueError, "'big': shape"),
        ((-1,), {"u": u, "big": big}, ValueError, "out of range"),
        ((2**64,), {"u": u, "big": big}, ValueError, "out of range"),
        ((1.0,), {"u": u, "big": big}, ValueError, "must be an integer"),
        ((True,), {"u": u, "big": big}, ValueError, "must be an integer"),
    ]
    for args, kwargs, error, match in bad:
        with pytest.raises(error, match=match):
            c.send(*args, **kwargs)
    assert c.steps_sent == 0
    c.send(2, u=u + 1, big=big + 2)
    c.close()
    c.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        c.send(3, u=u, big=big)
    hello, first, second, bye = receiver.until_bye()
    assert isinstance(hello, p.Hello) and bye == p.Bye(1, 0, 1, 1)
    assert isinstance(first, p.Data) and (first.time_step, first.name) == (2, "u")
    assert isinstance(second, p.Data) and (second.time_step, second.name) == (2, "big")
    assert "closed" in repr(c)


@pytest.mark.timeout(30)
def test_batched_sends_validate_like_the_first(receiver: Receiver) -> None:
    """Sends in quick succession take `send`'s fast path: a bad one among them raises
    what it would raise alone, queues nothing, and the stream goes on."""
    fields = {"u": ((2, 3), "float32"), "w": ((4,), "int64")}
    u, w = np.zeros((2, 3), np.float32), np.zeros(4, np.int64)
    c = Client(
        fields, simulation_id=1, endpoints=receiver.endpoint, tuning=ClientTuning(batch_delay=60)
    )
    bad: list[tuple[tuple[Any, ...], dict[str, Any], type, str]] = [
        ((5,), {"u": u}, ValueError, r"missing \['w'\]"),
        ((5,), {"u": u, "w": w, "x": w}, ValueError, r"unknown \['x'\]"),
        ((5,), {"u": u, "v": w}, ValueError, r"missing \['w'\]; unknown \['v'\]"),
        ((5,), {"u": u.astype(np.float64), "w": w}, TypeError, "'u'.*float64.*float32"),
        ((5,), {"u": u, "w": w.astype(np.int32)}, TypeError, "'w'.*int32.*int64"),
        ((5,), {"u": u.reshape(6), "w": w}, ValueError, r"'u'.*\(6,\).*\(2, 3\)"),
        ((5,), {"u": u, "w": w[:3]}, ValueError, r"'w': shape \(3,\)"),
        ((-1,), {"u": u, "w": w}, ValueError, "out of range"),
        ((2**64,), {"u": u, "w": w}, ValueError, "out of range"),
    ]
    sent = []
    for t, (args, kwargs, error, match) in enumerate(bad):
        c.send(t * 2, u=u + t, w=w + t)  # the sends before and after are quick: batched
        sent.append(t * 2)
        with pytest.raises(error, match=match):
            c.send(*args, **kwargs)
    c.send(100, {"u": u[::-1, ::-1].copy()}, w=w[::-1])  # a view and a mapping: general way
    c.send(101, u=np.asfortranarray(u), w=w)
    sent += [100, 101]
    assert c.steps_sent == len(sent)
    c.close()
    messages = receiver.until_bye()
    data = [m for m in messages if isinstance(m, p.Data)]
    assert receiver.batches > 0 and messages[-1] == p.Bye(1, 0, 1, len(sent))
    assert sorted({m.time_step for m in data}) == sent
    assert len(data) == 2 * len(sent)  # each field of each good step, once
    for m in data:
        if m.time_step < 100:
            assert int(m.payload.reshape(-1)[0]) == m.time_step // 2, m


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reuse", ["immediate", "next_send", "never"])
def test_large_sends_take_a_short_path_that_sends_what_the_general_one_does(
    zctx: zmq.Context, reuse: str
) -> None:
    """A client whose fields all leave without a copy takes `send`'s short path: it sends
    the very frames the general path sends, a bad send among good ones raises what it
    would raise alone and queues nothing, and `array_reuse` is honoured ("never" makes
    the array read-only; every mode releases what it sent by `close`)."""
    fields = {"u": ((128, 129), "float32"), "w": ((70000,), "int8")}  # both > 64 KiB
    sent: list[list[list[bytes]]] = []
    for short in (True, False):
        receiver = Receiver(zctx)
        c = Client(fields, None, 3, receiver.endpoint, array_reuse=reuse)
        assert c._fast is not None
        if not short:
            c._fast = None  # the general path, for comparison
        arrays = []
        for t in (0, 1, 5, 6):
            u, w = np.full((128, 129), t, np.float32), np.full(70000, t, np.int8)
            c.send(t, u=u, w=w)
            arrays.append(u)
            with pytest.raises(TypeError, match="'u'.*float64.*float32"):
                c.send(t + 10, u=u.astype(np.float64), w=w)
            with pytest.raises(ValueError, match=r"missing \['w'\]"):
                c.send(t + 10, u=u)
        c.send(7, {"u": u.T.copy().T, "w": w})  # a mapping: the general path
        assert all(a.flags.writeable == (reuse != "never") for a in arrays)
        assert c.steps_sent == 5
        c.close()
        messages = receiver.until_bye()
        data = [m for m in messages if isinstance(m, p.Data)]
        assert [(m.time_step, m.name) for m in data] == [
            (t, name) for t in (0, 1, 5, 6, 7) for name in ("u", "w")
        ]
        assert all(np.all(m.payload == min(m.time_step, 6)) for m in data)
        assert receiver.frames[1:-1] == [2] * 10  # header + payload, one message each
        assert c._transport.held.nbytes == 0 and len(c._transport.held) == 0
        sent.append(receiver.raw)
    assert sent[0] == sent[1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fields", [GOOD, {"u": ((2, 3), "float32"), "w": ((4,), "int64")}])
def test_batched_sends_take_a_short_path_that_sends_what_the_general_one_does(
    zctx: zmq.Context, fields: dict[str, Any]
) -> None:
    """Quick small sends through the short path and through the general path put the
    same frames on the wire (the batches are only sent at `close`: batch_delay=60)."""
    sent: list[list[list[bytes]]] = []
    for short in (True, False):
        receiver = Receiver(zctx)
        c = Client(fields, None, 3, receiver.endpoint, tuning=ClientTuning(batch_delay=60))
        fast, taken = c._fast, []
        assert fast is not None
        c._fast = (lambda t, g, f=fast, k=taken: k.append(f(t, g)) or k[-1]) if short else None
        for t in (0, 1, 5, 2, 2, 9):
            c.send(t, **{n: np.full(shape, t, dtype) for n, (shape, dtype) in fields.items()})
        c.close()
        messages = receiver.until_bye()
        assert receiver.batches > 0 and messages[-1] == p.Bye(3, 0, 1, 5)
        assert taken == ([False] + [True] * 5 if short else [])  # the first is not quick
        sent.append(receiver.raw)
    assert sent[0] == sent[1]


@pytest.mark.timeout(30)
def test_batched_sends_of_one_field_validate_like_the_first(receiver: Receiver) -> None:
    """A single-field client's quick sends take their own short path: a bad one raises
    what it would raise alone and queues nothing; steps in any order count once."""
    u = np.zeros((2, 3), np.float32)
    c = Client(
        {"u": ((2, 3), "float32")}, None, 1, receiver.endpoint, tuning=ClientTuning(batch_delay=60)
    )
    bad: list[tuple[tuple[Any, ...], dict[str, Any], type, str]] = [
        ((5,), {"x": u}, ValueError, r"missing \['u'\]; unknown \['x'\]"),
        ((5,), {"u": u.astype(np.float64)}, TypeError, "'u'.*float64.*float32"),
        ((5,), {"u": u.reshape(6)}, ValueError, r"'u'.*\(6,\).*\(2, 3\)"),
        ((5,), {"u": [[0.0] * 3] * 2}, TypeError, "'u'.*float64.*float32"),  # a list
        ((-1,), {"u": u}, ValueError, "out of range"),
        ((2**64,), {"u": u}, ValueError, "out of range"),
        ((5.0,), {"u": u}, ValueError, "must be an integer"),
    ]
    sent = []
    for t, (args, kwargs, error, match) in enumerate(bad):
        c.send(t * 2, u=u + t)  # quick sends: the single-field path
        sent.append(t * 2)
        with pytest.raises(error, match=match):
            c.send(*args, **kwargs)
    c.send(20, u=u + 10)  # not the next step of the run 0, 2, 4, ...: counted all the same
    c.send(np.int64(21), u=u + 10)  # another integer type, a mapping, a view: general way
    c.send(22, {"u": u + 11})
    ramp = np.arange(6, dtype=np.float32).reshape(2, 3) + 22
    c.send(23, u=np.asfortranarray(ramp))  # sent in C order
    c.send(20, u=u + 10)  # a step sent again counts once
    sent += [20, 21, 22, 23]
    assert c.steps_sent == len(sent)
    c.close()
    messages = receiver.until_bye()
    data = [m for m in messages if isinstance(m, p.Data)]
    assert receiver.batches > 0 and messages[-1] == p.Bye(1, 0, 1, len(sent))
    assert sorted(m.time_step for m in data) == sorted([*sent, 20])
    for m in data:
        if m.time_step != 23:
            assert int(m.payload.reshape(-1)[0]) == m.time_step // 2, m
    (last,) = [m for m in data if m.time_step == 23]
    assert last.payload.tobytes() == ramp.tobytes()
