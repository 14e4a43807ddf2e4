"""A solver that overwrites its arrays in place after each send (the usual pattern: one
array per field, written again every time step) never puts a later step's values on the
wire, though fields over `INLINE_MAX_BYTES` leave without a copy (ZeroMQ's I/O thread
reads the caller's array after `send` returned, `held`).

The oracle: every value of the field `name` of simulation `sim` at step `t` is
`value(sim, t, name)`; the receiver checks each field of every DATA it gets, so one
message read after its array was written again fails the test. The window in which that
could happen is made long: three simulations at once, a receiver that reads slowly
(receive high-water mark 1, small kernel buffers on both sides, a pause every few
messages: the trainer's pace, not a wait of the test), a send high-water mark of 2, and
the receiver's socket closed and bound again mid-stream (the clients reconnect; what was
in flight then is lost, which the oracle does not ask about: only what arrives must be
right). Both modes whose caller writes the array again: ``"immediate"`` (at once) and
``"next_send"`` (two arrays, each written again two steps later).

The oracle was checked to fail: with `HeldArrays.after_send` made a no-op (the zero-copy
send returning before ZeroMQ let go of the array), the ``"immediate"`` run saw field w of
most steps with the next step's values (e.g. simulation 0 step 0: 11.0, not 1.0).
Several seconds of real time (the clients' reconnection, the receiver's pace): e2e."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.client import INLINE_MAX_BYTES, Client, ClientTuning

SIMS, STEPS = 3, 40
#: just over the inline bound (two frames, zero-copy) and a larger one
SHAPES = {"u": (INLINE_MAX_BYTES // 8 + 1,), "w": (256, 300)}
RECONNECT_AFTER = 25  # DATA messages read before the receiver's socket is bound again


def value(sim: int, step: int, name: str) -> float:
    return sim * 10_000 + step * 10 + (1 if name == "w" else 0)


class OracleReceiver:
    """A slow PULL that checks every DATA against `value` (the mismatches in `wrong`)
    until it has read a BYE from each simulation; its socket closed and bound again at
    the same endpoint after `RECONNECT_AFTER` messages."""

    def __init__(self, ctx: zmq.Context) -> None:
        self.ctx = ctx
        self.stop = threading.Event()
        self.sock = self._bind("tcp://127.0.0.1:*")
        self.endpoint = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.wrong: list[tuple[int, int, str, float]] = []
        self.checked = 0
        self.byes: set[int] = set()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _bind(self, endpoint: str) -> zmq.Socket:
        sock = self.ctx.socket(zmq.PULL)
        sock.setsockopt(zmq.RCVHWM, 1)
        sock.setsockopt(zmq.RCVBUF, 1 << 16)
        sock.setsockopt(zmq.LINGER, 0)
        for _ in range(1000):  # (the socket closed before releases the port in ZeroMQ's
            try:  # I/O thread, a moment after its close returned)
                sock.bind(endpoint)
                return sock
            except zmq.ZMQError as exc:
                if exc.errno != zmq.EADDRINUSE:
                    raise
                self.stop.wait(0.01)
        raise AssertionError(f"{endpoint} still in use after 10 s")

    def _run(self) -> None:
        reconnected = False
        while not self.stop.is_set() and len(self.byes) < SIMS:
            if not self.sock.poll(100):
                continue
            frames = self.sock.recv_multipart(copy=False)
            payload = frames[1].buffer if len(frames) == 2 else None
            msg = protocol.decode(frames[0].bytes, payload, 1 << 30)
            if isinstance(msg, protocol.Bye):
                self.byes.add(msg.simulation_id)
            elif isinstance(msg, protocol.Data):
                want = value(msg.simulation_id, msg.time_step, msg.name)
                got = np.frombuffer(msg.payload, msg.dtype)
                if not np.all(got == want):
                    self.wrong.append((msg.simulation_id, msg.time_step, msg.name, float(got[0])))
                self.checked += 1
                if self.checked % 4 == 0:
                    self.stop.wait(0.002)  # (the trainer's pace: the clients' queues fill)
                if self.checked == RECONNECT_AFTER and not reconnected:
                    reconnected = True  # (the clients reconnect; what was in flight is lost)
                    self.sock.close(0)
                    self.sock = self._bind(self.endpoint)
        self.done.set()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.sock.close(0)


def solver(sim: int, endpoint: str, mode: str, errors: list[BaseException]) -> None:
    """Simulation `sim`: its arrays allocated once and written in place every step (the
    array of step t - 2 with ``next_send``: double buffering)."""
    try:
        copies = 2 if mode == "next_send" else 1
        arrays = [{n: np.empty(s) for n, s in SHAPES.items()} for _ in range(copies)]
        tuning = ClientTuning(
            sndhwm=2, batch_bytes=0, close_timeout=60, socket_options={zmq.SNDBUF: 1 << 16}
        )
        fields = {n: (s, "f8") for n, s in SHAPES.items()}
        with Client(
            fields, None, sim, endpoint, send_timeout=60, array_reuse=mode, tuning=tuning
        ) as c:
            for step in range(STEPS):
                mine = arrays[step % copies]
                for name, array in mine.items():
                    array.fill(value(sim, step, name))  # (in place: the array just sent)
                c.send(step, **mine)
    except BaseException as exc:  # (reported by the test)
        errors.append(exc)


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["immediate", "next_send"])
def test_arrays_written_again_after_send_never_reach_the_wire(mode: str) -> None:
    ctx = zmq.Context()
    receiver = OracleReceiver(ctx)
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=solver, args=(sim, receiver.endpoint, mode, errors))
        for sim in range(SIMS)
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(100)
        assert not errors, errors
        assert receiver.done.wait(30), f"BYEs of {sorted(receiver.byes)} only"
    finally:
        receiver.close()
        ctx.term()
    assert receiver.checked > SIMS * STEPS, receiver.checked  # (most arrived: a real test)
    assert receiver.wrong == [], receiver.wrong[:10]
