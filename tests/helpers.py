"""Small deterministic models and sources for trainer tests, and the tests' mpiexec."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
import zmq

from melissa_trainer import Buffer, Hook, Source, TrainerControl, TrainerState
from melissa_trainer.launcher.backends.mpiexec import _next_to_python
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig, ReceiverTuning


def linear_samples(n: int, seed: int = 0, dim: int = 3) -> Iterator[dict[str, np.ndarray]]:
    """`n` samples of y = x . w + noise, deterministic for a given seed."""
    rng = np.random.default_rng(seed)
    w = np.arange(1, dim + 1, dtype=np.float32)
    for i in range(n):
        x = rng.standard_normal(dim).astype(np.float32)
        y = np.float32(x @ w) + np.float32(0.01) * rng.standard_normal(1).astype(np.float32)
        yield {"x": x, "y": y, "index": np.asarray(i)}


def xy(sample: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(sample["x"]), torch.from_numpy(sample["y"])


def small_model(seed: int = 0, dropout: float = 0.0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Dropout(dropout), torch.nn.Linear(16, 1)
    )


class Recorder(Hook):
    """Records every loss, the logs, and the events seen."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.events: list[str] = []
        self.logs: list[dict[str, float]] = []

    def on_train_start(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self.events.append("train_start")

    def on_after_backward(
        self, trainer: Any, state: TrainerState, control: TrainerControl, loss: Any
    ) -> None:
        self.losses.append(float(loss))

    def on_end_of_stream(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self.events.append(f"end_of_stream@{state.global_step}")

    def on_pseudo_epoch_start(
        self, trainer: Any, state: TrainerState, control: TrainerControl
    ) -> None:
        self.events.append(f"pseudo_epoch_start:{state.pseudo_epoch}")

    def on_log(
        self, trainer: Any, state: TrainerState, control: TrainerControl, logs: dict[str, float]
    ) -> None:
        self.logs.append({"step": state.global_step, **logs})

    def on_train_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self.events.append(f"train_end@{state.global_step}")


def drain(buffer: Buffer, timeout: float = 30.0) -> list[dict[str, np.ndarray]]:
    """Every sample until the end of the stream (the buffer closed and empty); fails
    once `timeout` seconds pass without a new sample (a stream stuck), not after
    `timeout` in all: a loaded machine streamed 284 of a test's 300 samples in 30 s."""
    out: list[dict[str, np.ndarray]] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            batch = buffer.get_batch(1, timeout=0.05)
        except TimeoutError:
            assert time.monotonic() < deadline, (
                f"stream did not end ({len(out)} samples, none for {timeout} s)"
            )
            continue
        if not batch:
            return out
        out.extend(batch)
        deadline = time.monotonic() + timeout  # (progress: the stream is not stuck)


def read_source(source: Source, buffer: Buffer) -> list[dict[str, np.ndarray]]:
    """Read `buffer` as a trainer would (`source.wait_for`, then a read), every sample
    until the end of the stream; `source`'s `SourceError` propagates."""
    out: list[dict[str, np.ndarray]] = []
    while True:
        source.wait_for(8, 0.5)
        try:
            batch = buffer.get_batch(8, timeout=0.0)
        except TimeoutError:
            continue
        if not batch:
            return out
        out.extend(batch)


def send_all(endpoint: str, frames: list[list[bytes]]) -> zmq.Context:
    """Queue every message to `endpoint` on one PUSH socket (ZeroMQ sends in the
    background, the socket lingering until they are out); the context is the caller's
    to close (`ctx.term()` waits for the sends)."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.connect(endpoint)
    for message in frames:
        sock.send_multipart(message)
    sock.close(linger=-1)
    return ctx


#: why an MPI test is skipped when `find_mpiexec()` is None
NO_MPI = "needs mpi4py and mpiexec (pip install mpich)"


@functools.cache
def find_mpiexec() -> str | None:
    """The mpiexec for MPI tests whose ranks run this Python with its mpi4py, or None
    (skip) when mpi4py or any mpiexec is missing.

    Order: the mpich wheel's (the ``mpi`` extra installs it beside mpi4py, which then
    loads its libmpi), next to this Python (as `MpiexecBackend` falls back to), then
    PATH. Not PATH first, as the library's bare-name lookup is: an unrelated MPI ahead
    on PATH (a system Open MPI, which also refuses to run as root) would not start
    this Python's ranks as one world. Tests pass the result explicitly.
    """
    if importlib.util.find_spec("mpi4py") is None:
        return None
    return mpich_wheel_mpiexec() or _next_to_python("mpiexec") or shutil.which("mpiexec")


def mpich_wheel_mpiexec() -> str | None:
    """The mpiexec the installed ``mpich`` wheel put in its scripts directory, if any."""
    try:
        dist = importlib.metadata.distribution("mpich")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name == "mpiexec" and file.parent.name == "bin":
            path = Path(str(dist.locate_file(file))).resolve()
            if os.access(path, os.X_OK):
                return str(path)
    return None


@contextmanager
def running(
    buffer: Any = None,
    rank: int = 0,
    world_size: int = 1,
    tuning: ReceiverTuning | None = None,
    **config: Any,
) -> Iterator[Receiver]:
    """A started `Receiver` (on a FIFO of 1000 by default) with `ReceiverConfig(**config)`,
    stopped on exit."""
    from melissa_trainer.buffers import FIFOBuffer

    buffer = buffer if buffer is not None else FIFOBuffer(1000)
    rec = Receiver(buffer, rank, world_size, ReceiverConfig(**config), tuning)
    rec.start()
    try:
        yield rec
    finally:
        rec.stop()


def handled(receiver: Receiver) -> int:
    """The messages `receiver` has read and handled: the count as of its ingester's
    last empty poll (its idle clock's, `watchdog.IdleClock`), which comes only once
    every message read before it was decoded and handled. ``telemetry()["messages"]``
    counts a message as it is read, before that (its sample put, its duplicate or its
    rejection counted): a test that waits for that count and then reads the other
    counters may read them one message short. Once this count reaches N, the
    telemetry of those N messages is final (0 before the first empty poll)."""
    return max(receiver._idle._messages, 0)


class Keys:
    """`process_sample` for samples with fields ``x`` and ``y`` that records the
    (simulation, step) of each sample trained on, in order (`seen`): the oracle of the
    exactly-once tests of studies."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def __call__(self, s: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        self.seen.append((int(s["simulation_id"]), int(s["time_step"])))
        return torch.from_numpy(s["x"]), torch.from_numpy(s["y"])


#: capabilities that let root ignore permission bits: CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
_DAC_CAPABILITIES = (1, 2)
_PR_CAPBSET_DROP = 24


def permission_bits_bite() -> None:
    """A `preexec_fn` for a subprocess that must meet permission bits as a user would:
    as root, the two capabilities that bypass them are dropped from the bounding set,
    so the program `exec`'d has them neither permitted nor effective (its files, owned
    by root, stay its own). Does nothing for another user, whom the bits bind anyway.
    Raises OSError where the drop is refused (no CAP_SETPCAP: a restricted container)."""
    if os.geteuid() != 0:
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in _DAC_CAPABILITIES:
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            errno_ = ctypes.get_errno()
            raise OSError(errno_, f"prctl(PR_CAPBSET_DROP, {cap}): {os.strerror(errno_)}")


class HeldIdleClock:
    """The receivers' idle clock (`melissa_trainer.stream.watchdog`'s ``time``) held
    still until `ready()` is first found true, then running at the real clock's pace:
    a stall test's `stall_timeout` counts from the moment the study can stall, not from
    the receiver's start. Without it, the start-up of the simulations (Python, numpy,
    ZeroMQ: 1 s on an idle machine, 30 s at load 19) was itself a stall of a few
    seconds, and the error named what was not yet there. Install with
    ``monkeypatch.setattr(watchdog, "time", HeldIdleClock(...))``. `ready` is called
    from the receiver's ingester at each empty poll until true: cheap, thread-safe."""

    def __init__(self, ready: Callable[[], bool]) -> None:
        self._ready = ready
        self._held = time.monotonic()  # what the clock says while held
        self._released: float | None = None  # the real time of the release

    def monotonic(self) -> float:
        now = time.monotonic()
        if self._released is None:
            if not self._ready():
                return self._held
            self._released = now
        return self._held + (now - self._released)


@contextmanager
def curve_pull_server() -> Iterator[tuple[zmq.Socket, str, str]]:
    """A CURVE PULL server on loopback: the socket, its endpoint and its public key (z85);
    its context destroyed on exit."""
    public, secret = zmq.curve_keypair()
    ctx = zmq.Context()
    try:
        sock = ctx.socket(zmq.PULL)
        sock.setsockopt(zmq.LINGER, 0)
        sock.curve_server = True
        sock.curve_secretkey = secret
        port = sock.bind_to_random_port("tcp://127.0.0.1")
        yield sock, f"tcp://127.0.0.1:{port}", public.decode()
    finally:
        ctx.destroy(linger=0)
