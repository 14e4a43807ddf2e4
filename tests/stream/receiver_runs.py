"""What the stream receiver's tests over real sockets share (test_receiver_*.py, the
STUDY_END and hand-off tests): raw pyzmq PUSH sockets (`pushes`; `push`, messages sent
and out), messages built with the wire encoder (`data`, `batch`, `send`, `value`), the
receiver's telemetry (`tel`) and failure (`failure`), the check that every step
arrived exactly once bit-exact (`check_stream`), and an `Ingest` fed messages directly
(`_ingest`, `_feed`). Nothing here depends on `melissa_trainer.client`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from melissa_trainer import wire as P
from melissa_trainer.buffers import Sample
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.receiver import Receiver

SCRIPTS = Path(__file__).parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import stream_client as sc  # noqa: E402

F32 = np.dtype("<f4")


U = P.FieldSpec("u", F32, (4, 3))


@contextmanager
def pushes(*endpoints: str, n: int = 1, **opts: Any) -> Iterator[list[zmq.Socket]]:
    """`n` PUSH sockets connected to every endpoint given (one context)."""
    ctx = zmq.Context()
    socks = []
    for _ in range(n):
        s = ctx.socket(zmq.PUSH)
        for k, v in opts.items():
            setattr(s, k, v)
        for ep in endpoints:
            s.connect(ep)
        socks.append(s)
    try:
        yield socks
    finally:
        for s in socks:
            s.close(linger=0)
        ctx.term()


def data(
    sim: int,
    t: int,
    spec: P.FieldSpec,
    value: np.ndarray,
    rank: int = 0,
    count: int = 1,
    start: int = 0,
    end: int | None = None,
    **kw: Any,
) -> list[bytes]:
    """The frames of one DATA message (INLINE when small, like the client)."""
    flat = np.ascontiguousarray(value).reshape(-1)
    end = flat.size if end is None else end
    payload = flat[start:end].tobytes()
    inline = kw.pop("inline", len(payload) <= sc.INLINE_MAX_BYTES)
    args = dict(name=spec.name.encode(), dtype_code=P.dtype_code(spec.dtype), shape=spec.shape)
    args.update(kw)
    head = P.encode_data_header(
        sim,
        t,
        rank,
        count,
        args["name"],
        args["dtype_code"],
        args["shape"],
        start,
        end - start,
        inline,
    )
    return [head + payload] if inline else [head, payload]


def send(sock: zmq.Socket, frames: list[bytes]) -> None:
    sock.send_multipart(frames)


def push(endpoint: str, frames: list[bytes]) -> None:
    """Send `frames`, a message each, to `endpoint` on a PUSH socket of its own, and
    wait until they are out (its linger): the receiver has them to read on return."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.connect(endpoint)
    for frame in frames:
        sock.send(frame)
    sock.close(linger=-1)
    ctx.term()


def value(sim: int, t: int, spec: P.FieldSpec, index: int = 0) -> np.ndarray:
    return sc.field_value(sim, t, index, spec)


def tel(rec: Receiver, key: str) -> float:
    return rec.telemetry()[key]


def failure(rec: Receiver) -> str | None:
    """The receiver's failure as `check` raises it, or None while it runs."""
    try:
        rec.check()
    except SourceError as exc:
        return str(exc)
    return None


def check_stream(
    samples: list[Sample], sims: dict[int, tuple[range, list[P.FieldSpec], dict[str, float]]]
) -> None:
    """Every (simulation, step) exactly once, every value bit for bit."""
    keys = [(int(s["simulation_id"]) % 2**64, int(s["time_step"])) for s in samples]
    assert len(keys) == len(set(keys)), "a (simulation, step) arrived twice"
    assert set(keys) == {(sim, t) for sim, (steps, _, _) in sims.items() for t in steps}
    for s in samples:
        sim, t = int(s["simulation_id"]) % 2**64, int(s["time_step"])
        _, specs, params = sims[sim]
        assert set(s) == {f.name for f in specs} | {"simulation_id", "time_step", "parameters"}
        for i, spec in enumerate(specs):
            got, want = s[spec.name], value(sim, t, spec, i)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes(), (sim, t, spec.name)
        assert s["parameters"].dtype == np.float64
        assert s["parameters"].tolist() == list(params.values())
        assert s["simulation_id"].shape == () and s["simulation_id"].dtype == np.int64


def _ingest(rank: int = 0, world: int = 1, **kw: Any) -> tuple[Ingest, list[Sample], list[str]]:
    samples: list[Sample] = []
    ends: list[str] = []

    def put(sample: Sample) -> bool:
        samples.append(sample)
        return True

    options = dict(
        expected=1,
        max_field_bytes=1 << 20,
        max_pending=8,
        max_pending_bytes=1 << 20,
        max_time_step=1 << 24,
        recent_size=16,
    )
    options.update(kw)
    return Ingest(rank, world, put=put, end=ends.append, **options), samples, ends


def _feed(ing: Ingest, frames: list[bytes]) -> None:
    msg = P.decode(frames[0], frames[1] if len(frames) > 1 else None)
    if isinstance(msg, P.Data):
        ing.data(msg, len(frames) == 1)
    elif isinstance(msg, P.Hello):
        ing.hello(msg)
    else:
        ing.bye(msg)


def batch(
    sim: int,
    steps: list[int],
    spec: P.FieldSpec,
    start: int = 0,
    end: int | None = None,
    records: int | None = None,
    rank: int = 0,
    count: int = 1,
) -> list[bytes]:
    """One BATCH frame: `steps` of field `spec` (elements [start, end)) from `rank`."""
    size = int(np.prod(spec.shape))
    end = size if end is None else end
    head = P.encode_batch_header(
        sim,
        len(steps) if records is None else records,
        rank,
        count,
        spec.name.encode(),
        P.dtype_code(spec.dtype),
        spec.shape,
        start,
        end - start,
    )
    index = 1 if spec.name == "v" else 0  # as check_stream numbers the fields
    body = b"".join(
        t.to_bytes(8, "little") + value(sim, t, spec, index).reshape(-1)[start:end].tobytes()
        for t in steps
    )
    return [head + body]
