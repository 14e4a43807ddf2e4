"""Drives the C client and the Python client through the same sends, for the tests of
clients/c (tests/c/test_c_client.py, tests/c/test_c_client_build.py).

The C side is `clients/c/tests/mt_script.c`, a program that runs a script of one
command per line and prints each command's status and message; `c_script` writes the
script of a `Scenario`, `run_python` makes the same sends with the Python `Client`, and
`Capture` keeps what PULL sockets receive, message by message, frame by frame. The
fixtures `script_exe`, `mpi_script_exe` (module-scoped) and `capture` are imported by
the test modules.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq
from compiled import C_SOURCE, CClient, c_client  # noqa: F401
from helpers import NO_MPI, find_mpiexec

from melissa_trainer import wire as P
from melissa_trainer.client import Client, ClientTuning

SCRIPT_SOURCE = C_SOURCE / "tests" / "mt_script.c"
Frames = list[bytes]


def as_c_client(captured: list[list[Frames]]) -> list[list[Frames]]:
    """The Python client's messages (`Capture.until_bye`) as the C client writes them:
    the same bytes, but for the HELLO's ``"client": "c"`` where the Python client writes
    ``"python"`` (docs/protocol.md, section 6)."""

    def as_c(message: Frames) -> Frames:
        if message[0][P.KIND_AT] != P.HELLO:
            return message
        h = P.decode(message[0])
        assert isinstance(h, P.Hello) and h.client == "python"
        fields, ranks = h.fields, (h.client_rank, h.client_count)
        return [P.encode_hello(h.simulation_id, *ranks, fields, h.parameters, h.run_id, "c")]

    return [[as_c(message) for message in socket] for socket in captured]


# -- the two clients ----------------------------------------------------------------------


@dataclass
class Scenario:
    """A sequence of sends, run by both clients. `fields`: (name, dtype code, global
    shape); `parts`: name -> (offset, count) for a rank of several; `other_counts`: the
    other rank's counts (rank 0 of 2), for the Python client's placement."""

    fields: list[tuple[str, int, tuple[int, ...]]]
    steps: list[int]
    receivers: int = 2
    simulation_id: int = 7
    parameters: dict[str, float] = field(default_factory=dict)
    batch_bytes: int = 65536
    batch_delay: float = 1000.0
    flush_after: set[int] = field(default_factory=set)  # indexes into steps
    rank: tuple[int, int] = (0, 1)
    parts: dict[str, tuple[int, int]] = field(default_factory=dict)
    reuse: str = "immediate"

    def count(self, name: str, shape: tuple[int, ...]) -> int:
        return self.parts[name][1] if name in self.parts else int(np.prod(shape, dtype=np.int64))


def payload(code: int, count: int, seed: int) -> np.ndarray:
    """The array mt_script generates for (dtype code, count, seed)."""
    j = np.arange(count * P.DTYPES[code].itemsize, dtype=np.int64)
    raw = (seed + j) & 1 if code == 12 else (seed * 31 + j * 7) & 255
    return raw.astype(np.uint8).view(P.DTYPES[code])


def seed_of(index: int, k: int) -> int:
    return (index * 13 + k * 5) % 251


def c_script(s: Scenario, endpoints: Sequence[str]) -> str:
    lines = [f"id {s.simulation_id}", f"endpoints {','.join(endpoints)}"]
    lines.append(f"batching {s.batch_bytes} {s.batch_delay!r}")
    lines.append(f"reuse {'next' if s.reuse == 'next_send' else 'immediate'}")
    lines += [f"param {k} {v!r}" for k, v in s.parameters.items()]
    if s.rank != (0, 1):
        lines.append(f"rank {s.rank[0]} {s.rank[1]}")
    for name, code, shape in s.fields:
        lines.append(f"field {name} {code} {len(shape)} {' '.join(map(str, shape))}".rstrip())
    lines += [f"part {n} {off} {cnt}" for n, (off, cnt) in s.parts.items()]
    lines.append("start")
    for i, t in enumerate(s.steps):
        for k, (name, code, shape) in enumerate(s.fields):
            lines.append(f"send {t} {name} {code} {s.count(name, shape)} {seed_of(i, k)}")
        if i in s.flush_after:
            lines.append("flush")
    lines.append("close")
    return "\n".join(lines) + "\n"


class _RankOneOfTwo:
    """Stands for MPI_COMM_WORLD seen from rank 1 of 2, rank 0 declaring the same fields
    and holding `other` elements of each field: what the Python client's first send
    asks of a communicator (`place_parts`: first a reduction of the declaration's count
    and hash pieces, each with its square, and "this rank failed"; then the sizes')."""

    def __init__(self, other: Sequence[int]) -> None:
        self.sizes = np.asarray(other, dtype=np.int64)
        self.agreed = False

    def Get_rank(self) -> int:  # noqa: N802 (mpi4py's names)
        return 1

    def Get_size(self) -> int:  # noqa: N802
        return 2

    def Exscan(self, local: np.ndarray, out: np.ndarray, op: Any = None) -> None:  # noqa: N802
        out[:] = self.sizes

    def Allreduce(self, local: np.ndarray, out: np.ndarray, op: Any = None) -> None:  # noqa: N802
        if not self.agreed:  # (rank 0: the same declaration, and it did not fail)
            self.agreed = True
            out[:-1], out[-1] = 2 * local[:-1], local[-1]
        else:
            out[:] = self.sizes + local


def run_python(s: Scenario, endpoints: Sequence[str], other_counts: Sequence[int] = ()) -> None:
    comm = None
    if s.rank != (0, 1):
        assert s.rank == (1, 2), "the stand-in communicator is rank 1 of 2"
        comm = _RankOneOfTwo(other_counts)
    fields = {name: (shape, P.DTYPES[code]) for name, code, shape in s.fields}
    tuning = ClientTuning(batch_bytes=s.batch_bytes, batch_delay=s.batch_delay)
    with Client(
        fields,
        s.parameters,
        s.simulation_id,
        list(endpoints),
        comm=comm,
        tuning=tuning,
        array_reuse=s.reuse,
    ) as client:
        for i, t in enumerate(s.steps):
            arrays = {}
            for k, (name, code, shape) in enumerate(s.fields):
                arr = payload(code, s.count(name, shape), seed_of(i, k))
                arrays[name] = arr if comm is not None else arr.reshape(shape)
            client.send(t, arrays)
            if i in s.flush_after:
                client.flush()


def run_script(
    exe: Path,
    script: str,
    tmp_path: Path,
    env: Mapping[str, str] | None = None,
    timeout=30,
    wrap: Sequence[str] = (),
) -> dict[int, tuple[int, str]]:
    """Run mt_script on `script`: {line: (status, message)} of each command. `wrap`: a
    command that runs it (``unshare --net``: in a network namespace of its own)."""
    path = tmp_path / f"script_{abs(hash(script))}.txt"
    path.write_text(script)
    proc = subprocess.run(
        [*wrap, str(exe), str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")},
            **(env or {}),
        },
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out: dict[int, tuple[int, str]] = {}
    for line in proc.stdout.splitlines():
        number, status, *message = line.split(" ", 2)
        if status in ("value", "info"):
            out[-int(number)] = (0, " ".join(message))
            continue
        out[int(number)] = (int(status), " ".join(message).strip())
    return out


@pytest.fixture(scope="module")
def script_exe(c_client: CClient, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    return c_client.compile(SCRIPT_SOURCE, tmp_path_factory.mktemp("mt_script") / "mt_script")


# -- capture ------------------------------------------------------------------------------


class Capture:
    """PULL sockets bound on loopback that keep every message (its frames) they get."""

    def __init__(self, n: int) -> None:
        self.ctx = zmq.Context()
        self.socks = []
        for _ in range(n):
            sock = self.ctx.socket(zmq.PULL)
            sock.setsockopt(zmq.LINGER, 0)
            sock.bind("tcp://127.0.0.1:*")
            self.socks.append(sock)
        self.endpoints = [s.getsockopt_string(zmq.LAST_ENDPOINT) for s in self.socks]

    def until_bye(self, byes: int = 1, timeout_ms: int = 20000) -> list[list[Frames]]:
        """Every message of each socket until it got `byes` BYE messages."""
        out: list[list[Frames]] = []
        for sock in self.socks:
            got: list[Frames] = []
            seen = 0
            while seen < byes:
                assert sock.poll(timeout_ms), f"no BYE after {len(got)} messages"
                frames = sock.recv_multipart()
                got.append(frames)
                seen += frames[0][P.KIND_AT] == P.BYE
            out.append(got)
        return out

    def close(self) -> None:
        for s in self.socks:
            s.close(0)
        self.ctx.term()


@pytest.fixture
def capture() -> Iterator[Any]:
    made: list[Capture] = []

    def make(n: int) -> Capture:
        made.append(Capture(n))
        return made[-1]

    yield make
    for c in made:
        c.close()


def both(
    exe: Path, s: Scenario, capture: Any, tmp_path: Path, other: Sequence[int] = ()
) -> tuple[list[list[Frames]], list[list[Frames]]]:
    """(Python's messages, C's messages) per receiver for scenario `s`."""
    cap = capture(s.receivers)
    run_python(s, cap.endpoints, other)
    want = cap.until_bye()
    result = run_script(exe, c_script(s, cap.endpoints), tmp_path)
    assert all(status == 0 for status, _ in result.values()), result
    got = cap.until_bye()
    return want, got


SCENARIOS = {
    "batched_two_receivers": Scenario(
        fields=[
            ("temperature", 1, (64, 64)),  # 16 KiB: batched
            ("pressure", 2, (100, 100)),  # 80 KB: two frames, no copy
            ("flag", 12, (3,)),
            ("count", 7, ()),  # a scalar
            ("vitesse_é", 9, (5,)),  # a non-ASCII name
        ],
        steps=list(range(9)),
        flush_after={5},
        parameters={
            "t0": 300.0,
            "left": 1e-05,
            "big": 1e16,
            "tiny": -2.5e-300,
            "pi": 3.141592653589793,
            'ünï"q\\': 0.1,
            "thousand": 1000000000000000.0,
        },
    ),
    "data_only_rank_part": Scenario(
        fields=[("u", 1, (10,)), ("v", 2, (3, 3)), ("w", 6, (5,)), ("big", 1, (20000,))],
        steps=[0, 1, 4, 9],
        batch_bytes=0,
        rank=(1, 2),
        parts={"u": (4, 6), "v": (0, 9), "w": (5, 0), "big": (5000, 15000)},
    ),
    "small_batches_cut_repeats_next_send": Scenario(
        fields=[("a", 1, (256,)), ("b", 8, (3000,)), ("c", 2, (9000,))],
        steps=[0, 10, 20, 10, 30, 40, 50, 60, 70, 80],
        receivers=1,
        batch_bytes=4096,  # a: 1 KiB, batched (cut when full); b: 3000 B > 2048, DATA
        reuse="next_send",
        simulation_id=2**64 - 1,
    ),
}
OTHER_COUNTS = {"data_only_rank_part": [4, 0, 5, 5000]}


def lines_of(result: dict[int, tuple[int, str]]) -> list[tuple[int, str]]:
    return [result[k] for k in sorted(k for k in result if k > 0)]


@pytest.fixture(scope="module")
def mpi_script_exe(c_client: CClient, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    if find_mpiexec() is None:
        pytest.skip(NO_MPI)
    out = tmp_path_factory.mktemp("mt_script_mpi") / "mt_script_mpi"
    return c_client.compile(SCRIPT_SOURCE, out, mpi=True, extra=["-DMT_SCRIPT_MPI"])


def mpi_run(exe: Path, scripts: Sequence[str], tmp_path: Path, env: Mapping[str, str]) -> list:
    """Run the 2-rank mt_script under mpiexec; each rank's {line: (status, message)}."""
    mpiexec = find_mpiexec()
    assert mpiexec is not None
    for rank, script in enumerate(scripts):
        (tmp_path / f"mpi_{rank}.txt").write_text(script)
    outs = [tmp_path / f"out_{rank}.txt" for rank in range(len(scripts))]
    base = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    proc = subprocess.run(
        [
            mpiexec,
            "-n",
            str(len(scripts)),
            "-outfile-pattern",
            str(tmp_path / "out_%r.txt"),
            str(exe),
            str(tmp_path / "mpi_RANK.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, **env},
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = []
    for out in outs:
        lines = [line.split(" ", 2) for line in out.read_text().splitlines()]
        results.append({int(n): (int(s), " ".join(m).strip()) for n, s, *m in lines})
    return results
