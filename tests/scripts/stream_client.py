"""A test simulation that streams with raw pyzmq PUSH sockets and `protocol.encode_*`.

    python tests/scripts/stream_client.py --simulation-id 3 --steps 20 \
        --field u:<f4:16,8 --field v:<f8:3 (--endpoints tcp://...,tcp://... | --rendezvous DIR)

Independent of `melissa_trainer.client` on purpose: the receiver's tests must not
depend on the client's internals. Field values are a deterministic function of
(simulation, time step, field), `field_value`, so that tests check them bit for bit.
With `--client-count R --client-rank r` it sends only its contiguous element range of
each field, as one rank of an MPI simulation would. Time step t goes to endpoint
``t % len(endpoints)``; HELLO and BYE go to every endpoint. `--stride S` sends the
steps ``first, first + S, ...`` below `--steps` (S = 2 under two receivers: all to one).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import zmq

from melissa_trainer import wire as P

INLINE_MAX_BYTES = 65536


def parse_field(text: str) -> P.FieldSpec:
    name, dtype, shape = text.split(":")
    dims = tuple(int(d) for d in shape.split(",") if d)
    return P.FieldSpec(name, np.dtype(dtype), dims)


def field_value(simulation_id: int, step: int, index: int, spec: P.FieldSpec) -> np.ndarray:
    """The deterministic value of field `index` of a simulation at a time step."""
    rng = np.random.default_rng([simulation_id, step, index])
    raw = rng.integers(0, 256, size=spec.size * spec.dtype.itemsize, dtype=np.uint8)
    arr = raw.view(spec.dtype)
    if spec.dtype.kind == "f":  # no NaN payloads: keeps == comparisons meaningful
        arr = rng.standard_normal(spec.size).astype(spec.dtype)
    elif spec.dtype.kind == "b":
        arr = raw.astype(bool)
    return arr.reshape(spec.shape)


def part_range(size: int, rank: int, count: int) -> tuple[int, int]:
    """Contiguous block decomposition: element range [start, end) of `rank`."""
    base, extra = divmod(size, count)
    start = rank * base + min(rank, extra)
    return start, start + base + (rank < extra)


def send_data(
    sock: zmq.Socket,
    simulation_id: int,
    step: int,
    rank: int,
    count: int,
    spec: P.FieldSpec,
    flat: np.ndarray,
    start: int,
    end: int,
) -> None:
    payload = np.ascontiguousarray(flat[start:end])
    inline = payload.nbytes <= INLINE_MAX_BYTES
    head = P.encode_data_header(
        simulation_id,
        step,
        rank,
        count,
        spec.name.encode(),
        P.dtype_code(spec.dtype),
        spec.shape,
        start,
        end - start,
        inline,
    )
    if inline:
        sock.send(head + payload.tobytes())
    else:
        sock.send(head, zmq.SNDMORE)
        sock.send(payload, copy=False)


def read_rendezvous(directory: str, timeout: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout
    path = Path(directory)
    while True:
        files = sorted(path.glob("rank_*.json"))
        if files:
            infos = [json.loads(f.read_text()) for f in files]
            world = infos[0]["world_size"]
            if len(infos) == world:
                return [i["endpoint"] for i in sorted(infos, key=lambda i: i["rank"])]
        if time.monotonic() > deadline:
            raise TimeoutError(f"no complete rendezvous in {directory}")
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoints", default=None)
    ap.add_argument("--rendezvous", default=None)
    ap.add_argument("--simulation-id", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--first-step", type=int, default=0)
    ap.add_argument("--stride", type=int, default=1, help="steps first, first + stride, ...")
    ap.add_argument("--field", action="append", required=True)
    ap.add_argument("--param", action="append", default=[], help="name=value")
    ap.add_argument("--client-rank", type=int, default=0)
    ap.add_argument("--client-count", type=int, default=1)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds between steps")
    ap.add_argument("--sndhwm", type=int, default=1000)
    ap.add_argument("--no-bye", action="store_true")
    a = ap.parse_args(argv)
    endpoints = a.endpoints.split(",") if a.endpoints else read_rendezvous(a.rendezvous)
    specs = [parse_field(f) for f in a.field]
    params = {k: float(v) for k, v in (p.split("=") for p in a.param)}
    ctx = zmq.Context()
    socks = []
    for ep in endpoints:
        s = ctx.socket(zmq.PUSH)
        s.setsockopt(zmq.SNDHWM, a.sndhwm)
        s.connect(ep)
        socks.append(s)
    sim, rank, count = a.simulation_id, a.client_rank, a.client_count
    for s in socks:
        s.send(P.encode_hello(sim, rank, count, specs, params))
    for step in range(a.first_step, a.steps, a.stride):
        sock = socks[step % len(socks)]
        for index, spec in enumerate(specs):
            flat = field_value(sim, step, index, spec).reshape(-1)
            start, end = part_range(spec.size, rank, count)
            send_data(sock, sim, step, rank, count, spec, flat, start, end)
        print(f"sent {step}", flush=True)
        if a.delay:
            time.sleep(a.delay)
    if not a.no_bye:
        # the steps sent to that receiver over the whole run (from 0: a restart's
        # --first-step resumes a run whose earlier steps went to the same receivers)
        run = range(a.first_step % a.stride, a.steps, a.stride)
        for i, s in enumerate(socks):
            s.send(P.encode_bye(sim, rank, count, sum(t % len(socks) == i for t in run)))
    for s in socks:
        s.close(linger=-1)
    ctx.term()
    print("done", flush=True)


if __name__ == "__main__":
    sys.exit(main())
