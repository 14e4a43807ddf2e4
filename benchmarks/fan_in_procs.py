"""The processes of `benchmarks/fan_in.py`: the receiver's and the simulations', forked
once and driven over pipes (JSON commands, one answer each), and the figures the
receiver process reads about itself (CPU time per thread, RSS)."""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import multiprocessing as mp
import os
import resource
import threading
import time
import tracemalloc
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import zmq
from reader import buffer_capacity, drain

from melissa_trainer.client import Client, ClientTuning

KB, MB = 1 << 10, 1 << 20
MEMORY_FIELD = KB  # the one step each idle simulation sends


def hwm(nbytes: int) -> int:
    """SNDHWM / RCVHWM for `nbytes` fields, as benchmarks/ingest.py: at most 64 MB queued."""
    return int(min(1000, max(4, (64 * MB) // nbytes)))


def raise_fd_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit: 1,000 peers need 1,000 descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def send_json(conn: Connection, obj: Any) -> None:
    conn.send_bytes(json.dumps(obj).encode())


def recv_json(conn: Connection, timeout: float = 300.0) -> Any:
    if not conn.poll(timeout):
        raise TimeoutError(f"no answer from a benchmark process in {timeout} s")
    reply = json.loads(conn.recv_bytes())
    if isinstance(reply, dict) and "error" in reply:
        raise RuntimeError(f"a benchmark process failed: {reply['error']}")
    return reply


def _serve(conn: Connection, handle: Any) -> None:
    """A child's loop: answer each command with `handle(cmd)` (an exception is sent back
    as {"error"} and ends the child) until "quit" (or the parent's end), then
    `handle.close()`."""
    raise_fd_limit()
    try:
        while (cmd := json.loads(conn.recv_bytes()))["op"] != "quit":
            send_json(conn, handle(cmd))
    except EOFError:
        pass  # the parent is gone
    except BaseException as exc:
        send_json(conn, {"error": f"{type(exc).__name__}: {exc}"})
        raise
    finally:
        handle.close()


# -- the receiver process -----------------------------------------------------------------


def thread_cpu(task: str) -> tuple[str, float]:
    """(name, CPU seconds) of a thread of this process, `task` its /proc/self/task/TID
    directory (schedstat's time on CPU: nanoseconds, as CLOCK_THREAD_CPUTIME_ID)."""
    with open(f"{task}/comm") as f:
        comm = f.read()
    with open(f"{task}/schedstat") as f:
        return comm, int(f.read().split()[0]) / 1e9


def cpu_snapshot() -> dict[str, float]:
    """This process's CPU seconds: all threads, and libzmq's background threads."""
    zmq_s = 0.0
    for task in glob.glob("/proc/self/task/*"):
        with contextlib.suppress(OSError):  # (a thread that just ended)
            comm, seconds = thread_cpu(task)
            zmq_s += seconds if comm.startswith("ZMQbg") else 0.0
    return {"process": time.process_time(), "zmq": zmq_s}


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


class ReceiverSide:
    """The commands of the receiver process (one Receiver at a time)."""

    def __init__(self) -> None:
        from melissa_trainer.buffers import FIFOBuffer
        from melissa_trainer.stream.receiver import Receiver
        from melissa_trainer.stream.receiver_config import ReceiverConfig

        self._fifo, self._receiver, self._config = FIFOBuffer, Receiver, ReceiverConfig
        self.rec: Any = None
        self.buffer: Any = None
        self.consumer: threading.Thread | None = None
        self.consumer_end = 0.0  # the consumer's CPU seconds when it ended

    def __call__(self, cmd: dict[str, Any]) -> Any:
        return getattr(self, cmd["op"])(**{k: v for k, v in cmd.items() if k != "op"})

    def open(self, sims: int | None, nbytes: int) -> str:
        """A Receiver expecting `sims` simulations, its buffer drained: its endpoint."""
        self.buffer = self._fifo(buffer_capacity(nbytes))
        config = self._config(expected_simulations=sims, rcvhwm=hwm(nbytes))
        self.rec = self._receiver(self.buffer, config=config)
        self.rec.start()
        rec, buffer = self.rec, self.buffer
        self.consumer = threading.Thread(target=self._consume, args=(rec, buffer, nbytes))
        self.consumer.start()
        return str(self.rec.endpoint)

    def _consume(self, rec: Any, buffer: Any, nbytes: int) -> None:
        """The reader: pumps the receiver (which ingests in this thread) and drains."""
        drain(rec, buffer, nbytes)
        self.consumer_end = time.thread_time()

    def measure(self, start: float, seconds: float) -> dict[str, float]:
        """CPU time and counters from `start` (monotonic) to the end of the stream, and
        ("steady_*") over its middle half, `seconds` being its expected length: no
        connection, HELLO, BYE nor disconnection happens there."""
        assert self.consumer is not None
        marks = [start, start + seconds / 4, start + seconds * 3 / 4]
        snaps, pump0 = [], 0.0
        for mark in marks if seconds > 0 else marks[:1]:
            time.sleep(max(0.0, mark - time.monotonic()))
            snaps.append((time.monotonic(), cpu_snapshot(), self.rec.telemetry()))
            if len(snaps) == 1:
                pump0 = thread_cpu(f"/proc/self/task/{self.consumer.native_id}")[1]
        t0, cpu0, tel0 = snaps[0]
        self.consumer.join(600)
        if self.consumer.is_alive():
            raise RuntimeError(f"the stream did not end: waiting for {self.rec.waiting_for()}")
        t1, cpu1, tel1 = time.monotonic(), cpu_snapshot(), self.rec.telemetry()
        self.close()
        out = {k: cpu1[k] - cpu0[k] for k in cpu0} | {"pump": self.consumer_end - pump0}
        out |= {k: tel1[k] - tel0[k] for k in ("samples_put", "messages", "bytes")}
        if len(snaps) == 3:
            (_, c1, m1), (_, c2, m2) = snaps[1:]
            out["steady_process"] = c2["process"] - c1["process"]
            out["steady_samples"] = m2["samples_put"] - m1["samples_put"]
        return out | {"wall": t1 - t0}

    def hellos(self) -> int:
        """How many simulations said HELLO and have not finished."""
        return len(self.rec.waiting_for())

    def probe(self) -> dict[str, Any]:
        """Memory and counters now (the receiver stays open)."""
        traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
        state = len(json.dumps(self.rec.state_dict())) if self.rec is not None else 0
        tel = self.rec.telemetry() if self.rec is not None else {}
        return {
            "rss": rss_bytes(),
            "traced": traced,
            "state": state,
            "fds": len(os.listdir("/proc/self/fd")),
            "waiting": len(self.rec.waiting_for()) if self.rec is not None else 0,
            "samples_put": tel.get("samples_put", 0),
            "rejected": tel.get("rejected", 0),
        }

    def quiet(self) -> bool:
        """Silence the receiver's log (of the messages it is sent to reject)."""
        logging.getLogger("melissa_trainer").setLevel(logging.CRITICAL)
        return True

    def trace(self) -> bool:
        """Trace Python allocations from now on (before `open`: the receiver's own)."""
        tracemalloc.start()
        return True

    def close(self) -> bool:
        if self.rec is not None:
            self.buffer.close()
            self.rec.stop()
            if self.consumer is not None:
                self.consumer.join(30)
        self.rec = self.buffer = self.consumer = None
        return True


def receiver_main(conn: Connection) -> None:
    _serve(conn, ReceiverSide())


# -- the client processes -----------------------------------------------------------------


class ClientSide:
    """The commands of one client process: run a paced simulation, or hold idle peers."""

    def __init__(self) -> None:
        self.ctx: zmq.Context | None = None  # created after the fork
        self.client: Client | None = None
        self.u = np.zeros(0, np.float32)  # the field the client sends
        self.held: list[Any] = []

    def __call__(self, cmd: dict[str, Any]) -> Any:
        if self.ctx is None:
            self.ctx = zmq.Context()
        return getattr(self, cmd["op"])(**{k: v for k, v in cmd.items() if k != "op"})

    def hello(self, endpoint: str, sim: int, nbytes: int, batch: bool) -> bool:
        """A new simulation: connect, HELLO."""
        tuning = ClientTuning(sndhwm=hwm(nbytes), batch_bytes=65536 if batch else 0)
        spec = {"u": ((nbytes // 4,), "float32")}
        self.client = Client(spec, None, sim, [endpoint], context=self.ctx, tuning=tuning)
        self.u = np.full(nbytes // 4, 1.0, np.float32)
        return True

    def go(self, start: float, first: int, every: int, steps: int, rate: float) -> float:
        """Send `steps` steps, step j at ``start + (first + j every) / rate`` (as fast as
        possible if `rate` is 0), then BYE; returns the latest a step left, in seconds."""
        c, u, late = self.client, self.u, 0.0
        assert c is not None
        time.sleep(max(0.0, start - time.monotonic()))
        for j in range(steps):
            if rate > 0:
                wait = start + (first + j * every) / rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                else:
                    late = max(late, -wait)
            c.send(j, u=u)
        c.close()
        self.client = None
        return late

    def peers(self, endpoint: str, n: int, sim: int | None, junk: bool = False) -> bool:
        """Hold `n` more idle peers: bare PUSH sockets (`sim` None; with `junk`, each
        sends one message of MEMORY_FIELD bytes that is not protocol, which the receiver
        rejects) or simulations with ids from `sim` on that sent HELLO and one step (no
        BYE)."""
        assert self.ctx is not None
        tuning = ClientTuning(batch_bytes=0, close_timeout=10)
        u = np.full(MEMORY_FIELD // 4, 1.0, np.float32)
        for i in range(n):
            if sim is None:
                s = self.ctx.socket(zmq.PUSH)
                s.connect(endpoint)
                if junk:
                    s.send(bytes(MEMORY_FIELD))
                self.held.append(s)
            else:
                spec = {"u": (u.shape, "float32")}
                c = Client(spec, None, sim + i, [endpoint], context=self.ctx, tuning=tuning)
                c.send(0, u=u)
                c.flush()
                self.held.append(c)
            time.sleep(0.005)  # not a storm of connections: see run_round
        return True

    def release(self) -> bool:
        """Close the idle peers (a simulation's close delivers its BYE: while the receiver
        is there)."""
        for h in self.held:
            h.close(linger=0) if isinstance(h, zmq.Socket) else h.close()
        self.held = []
        return True

    def close(self) -> None:
        self.release()
        if self.client is not None:
            self.client.close()
        if self.ctx is not None:
            self.ctx.term()


def client_main(conn: Connection) -> None:
    _serve(conn, ClientSide())


class Pool:
    """Child processes (forked now, before this process has any ZeroMQ context or
    thread), each answering commands over a pipe."""

    def __init__(self, n: int, main: Any) -> None:
        ctx = mp.get_context("fork")
        self.conns: list[Connection] = []
        self.procs = []
        for _ in range(n):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=main, args=(child,), daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)

    def ask(self, cmds: list[dict[str, Any]], timeout: float = 300.0) -> list[Any]:
        """Send cmds[i] to child i, then gather their answers."""
        for conn, cmd in zip(self.conns, cmds, strict=False):
            send_json(conn, cmd)
        return [recv_json(conn, timeout) for conn in self.conns[: len(cmds)]]

    def close(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(OSError):  # a child that already ended
                send_json(conn, {"op": "quit"})
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
