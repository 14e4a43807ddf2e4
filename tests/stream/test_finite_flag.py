"""FLAG_FINITE (issue 28): a field its sender checked for NaN and Inf is not checked
again by the receiver (docs/protocol.md, section 7b).

Oracles: the messages are written by `reference_protocol` (from the document, not the
library's encoder), and the receiver's check is counted by a wrapper around
`all_finite` in the modules that call it, so that "not checked" is observed, not
inferred; a flagged payload holding NaN (a sender breaking its word) reaching the
buffer shows the skip without the counter. End to end, real client processes stream
to a real `Receiver`: a finite field arrives flagged and is never checked, a NaN is
refused and the simulation's own log (its stderr) names the step and the field, and
an MPI-sliced field with one unflagged part is checked.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import reference_protocol as R
from helpers import NO_MPI, drain, find_mpiexec, running

from melissa_trainer.buffers import FIFOBuffer, Sample, SampleBlock
from melissa_trainer.stream import finite as finite_module
from melissa_trainer.stream import ingest as ingest_module
from melissa_trainer.stream import nonfinite as nonfinite_module
from melissa_trainer.stream.data_decoder import DataDecoder
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.wire import Batch, Data, Hello

SID = 5


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the arrays the receiver checks for NaN and Inf, in order."""
    calls: list[int] = []
    real = finite_module.all_finite

    def counting(arr: np.ndarray) -> bool:
        calls.append(int(arr.size))
        return real(arr)

    for module in (ingest_module, nonfinite_module):
        monkeypatch.setattr(module, "all_finite", counting)
    return calls


class Feed:
    """An `Ingest` fed frames written by the reference encoder, decoded by one
    `DataDecoder` (its memo keys on the flags byte too), collecting what is put."""

    def __init__(self, policy: str = "refuse") -> None:
        self.put: list[Sample] = []
        self.decode = DataDecoder(1 << 30)
        self.ingest = Ingest(
            0,
            1,
            put=self._put,
            end=lambda why: None,
            expected=None,
            max_field_bytes=1 << 20,
            max_pending=64,
            max_pending_bytes=1 << 24,
            max_time_step=1 << 20,
            recent_size=64,
            nonfinite=policy,
        )

    def _put(self, sample: Sample) -> bool:
        if isinstance(sample, SampleBlock):
            self.put.extend(sample.samples())
        else:
            self.put.append(sample)
        return True

    def send(self, *frames: bytes) -> None:
        msg = self.decode(frames[0], frames[1] if len(frames) > 1 else None)
        if type(msg) is Data:
            self.ingest.data(msg, len(frames) == 1)
        elif type(msg) is Batch:
            self.ingest.batch(msg)
        else:
            assert type(msg) is Hello
            self.ingest.hello(msg)

    def hello(self, fields: list[R.Field], ranks: int = 1) -> None:
        for rank in range(ranks):
            self.send(R.encode_hello(SID, rank, ranks, R.hello_body(fields, {})))

    def steps(self) -> list[int]:
        return [int(s["time_step"]) for s in self.put]


def data(
    f: R.Field,
    t: int,
    values: np.ndarray,
    finite: bool,
    inline: bool = True,
    rank: int = 0,
    ranks: int = 1,
    offset: int = 0,
) -> list[bytes]:
    head = R.part_header(R.DATA, SID, t, rank, ranks, f, offset, values.size, inline, finite)
    body = values.astype(f.dtype).tobytes()
    return [head + body] if inline else [head, body]


U = R.Field("u", "<f4", (3, 4))


@pytest.mark.parametrize("inline", [True, False])
def test_a_flagged_field_is_not_checked_an_unflagged_one_is(
    checks: list[int], inline: bool
) -> None:
    feed = Feed()
    feed.hello([U])
    ok, nan = np.arange(12.0), np.arange(12.0)
    nan[5] = np.nan
    feed.send(*data(U, 0, ok, True, inline))
    assert checks == [] and feed.steps() == [0]
    feed.send(*data(U, 1, ok, False, inline))  # (the same header but its flags: memoized)
    assert checks == [12] and feed.steps() == [0, 1]
    feed.send(*data(U, 2, nan, False, inline))  # unflagged NaN: refused, as ever
    assert checks == [12, 12] and feed.steps() == [0, 1]
    assert feed.ingest.nonfinite_refused == 1
    feed.send(*data(U, 3, ok, True, inline))
    # a sender that breaks its word: put (the flag is trusted, not verified)
    feed.send(*data(U, 4, nan, True, inline))
    assert checks == [12, 12] and feed.steps() == [0, 1, 3, 4]
    assert np.isnan(feed.put[-1]["u"]).sum() == 1


def test_accept_checks_nothing_flagged_or_not(checks: list[int]) -> None:
    feed = Feed("accept")
    feed.hello([U])
    nan = np.full(12, np.nan)
    feed.send(*data(U, 0, nan, False))
    feed.send(*data(U, 1, np.ones(12), True))
    assert checks == [] and feed.steps() == [0, 1]


W = R.Field("w", "<f8", (10,))


@pytest.mark.parametrize("flagged_rank", [0, 1])
def test_a_field_of_several_parts_is_checked_unless_every_part_was_flagged(
    checks: list[int], flagged_rank: int
) -> None:
    """Two client ranks send halves of `w`: both flagged, no check; one unflagged, the
    whole field is checked (whichever part came first), and a NaN in it is refused."""
    feed = Feed()
    feed.hello([W], ranks=2)

    def halves(t: int, values: np.ndarray, flags: tuple[bool, bool]) -> None:
        for rank in (0, 1):
            part = values[5 * rank : 5 * rank + 5]
            feed.send(*data(W, t, part, flags[rank], rank=rank, ranks=2, offset=5 * rank))

    ok = np.arange(10.0)
    halves(0, ok, (True, True))
    assert checks == [] and feed.steps() == [0]
    one = (flagged_rank == 0, flagged_rank == 1)
    halves(1, ok, one)
    assert checks == [10] and feed.steps() == [0, 1]
    nan = ok.copy()
    nan[7 if flagged_rank == 0 else 2] = np.nan  # in the unflagged part
    halves(2, nan, one)
    assert checks == [10, 10] and feed.steps() == [0, 1]
    assert feed.ingest.nonfinite_refused == 1


def test_only_the_unflagged_fields_of_a_sample_are_checked(checks: list[int]) -> None:
    feed = Feed()
    feed.hello([U, W])
    feed.send(*data(U, 0, np.ones(12), True))
    feed.send(*data(W, 0, np.ones(10), False))
    assert checks == [10] and feed.steps() == [0]
    feed.send(*data(U, 1, np.ones(12), True))
    feed.send(*data(W, 1, np.ones(10), True))
    assert checks == [10] and feed.steps() == [0, 1]


def batch(f: R.Field, steps: list[int], rows: np.ndarray, finite: bool) -> bytes:
    head = R.part_header(R.BATCH, SID, len(steps), 0, 1, f, 0, f.size, False, finite)
    body = b"".join(
        t.to_bytes(8, "little") + row.astype(f.dtype).tobytes()
        for t, row in zip(steps, rows, strict=True)
    )
    return head + body


def test_a_flagged_batch_is_not_checked_an_unflagged_one_is(checks: list[int]) -> None:
    feed = Feed()
    feed.hello([U])
    rows = np.arange(48.0).reshape(4, 12)
    feed.send(batch(U, [0, 1, 2, 3], rows, True))
    assert checks == [] and feed.steps() == [0, 1, 2, 3]
    rows[2, 3] = np.inf
    feed.send(batch(U, [4, 5, 6, 7], rows, False))  # record by record after one check
    assert checks[0] == 48 and feed.steps() == [0, 1, 2, 3, 4, 5, 7]
    assert feed.ingest.nonfinite_refused == 1


@pytest.mark.parametrize("policy", ["refuse", "fail"])
def test_a_single_field_batch_holding_nan_is_refused_per_step_as_the_policy_says(
    policy: str,
) -> None:
    """A BATCH of a single-field simulation (what the Python client sends for small
    fields) with Inf in one step: that step alone is dropped and counted, the others put.
    "refuse" marks it received (a re-send is a duplicate); "fail" does not (a re-send is
    checked again and, finite, put) and reports the simulation to the launcher once."""
    feed = Feed(policy)
    feed.ingest.nonfinite.launcher = True  # a study's rank 0: "fail" reports, not raises
    feed.hello([U])
    rows = np.arange(48.0).reshape(4, 12)
    rows[2, 5] = np.inf
    feed.send(batch(U, [0, 1, 2, 3], rows, False))
    assert feed.steps() == [0, 1, 3] and feed.ingest.nonfinite_refused == 1
    feed.send(batch(U, [2], np.arange(12.0).reshape(1, 12), False))  # a restart re-sends it
    resent = [0, 1, 3] if policy == "refuse" else [0, 1, 3, 2]
    assert feed.steps() == resent
    assert feed.ingest.duplicates == (1 if policy == "refuse" else 0)
    refused = [(sid, why.split(":")[0]) for sid, why in feed.ingest.refused]
    assert refused == ([] if policy == "refuse" else [(SID, f"simulation {SID} time step 2")])


# -- end to end: client processes and a real receiver ---------------------------------------

CLIENT = r"""
import sys
import numpy as np
from melissa_trainer.client import Client, ClientTuning

endpoint, steps, nan_steps, timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
nan_steps = {int(t) for t in nan_steps.split(",") if t}
fields = {"big": ((20000,), "<f8"), "small": ((4, 4), "<f4"), "n": ((3,), "<i4")}
name = sys.argv[5]  # the float field that holds NaN at nan_steps
with Client({k: fields[k] for k in sys.argv[6].split(",")}, simulation_id=7,
            endpoints=[endpoint], send_timeout=None if timeout == "-" else float(timeout),
            tuning=ClientTuning(close_timeout=30)) as c:
    for t in range(steps):
        arrays = {k: np.full(fields[k][0], t, fields[k][1]) for k in sys.argv[6].split(",")}
        if t in nan_steps:
            arrays[name].reshape(-1)[3] = np.nan
        c.send(t, **arrays)
"""

# (fields sent, send_timeout): the fast large path, batches, and the general path
CLIENTS = [("big", "-"), ("small", "-"), ("big,small,n", "30")]


def run_client(endpoint: str, steps: int, nan_steps: str, name: str, fields: str, timeout: str):
    return subprocess.run(
        [sys.executable, "-c", CLIENT, endpoint, str(steps), nan_steps, timeout, name, fields],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def stream() -> Iterator[tuple[Any, FIFOBuffer]]:
    buffer = FIFOBuffer(1000)
    with running(buffer, expected_simulations=1) as rec:
        yield rec, buffer


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize(("fields", "timeout"), CLIENTS)
def test_a_finite_field_from_the_client_arrives_flagged_and_is_never_checked(
    checks: list[int], stream: tuple[Any, FIFOBuffer], fields: str, timeout: str
) -> None:
    rec, buffer = stream
    proc = run_client(rec.endpoint, 30, "", fields.split(",")[0], fields, timeout)
    assert proc.returncode == 0, proc.stderr
    samples = drain(buffer)
    assert sorted(int(s["time_step"]) for s in samples) == list(range(30))
    for s in samples:
        assert all((s[k] == int(s["time_step"])).all() for k in fields.split(","))
    assert checks == []
    assert "NaN" not in proc.stderr


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize(("fields", "timeout"), CLIENTS)
def test_a_nan_from_the_client_is_refused_and_the_simulation_log_says_so_once(
    checks: list[int], stream: tuple[Any, FIFOBuffer], fields: str, timeout: str
) -> None:
    rec, buffer = stream
    name = fields.split(",")[0]
    proc = run_client(rec.endpoint, 30, "4,9", name, fields, timeout)
    assert proc.returncode == 0, proc.stderr
    samples = drain(buffer)
    assert sorted(int(s["time_step"]) for s in samples) == [t for t in range(30) if t not in (4, 9)]
    assert rec.telemetry()["nonfinite_refused"] == 2
    assert checks  # the unflagged messages were checked
    warning = f"simulation 7 rank 0: field '{name}' of time step 4 holds NaN or Inf"
    assert proc.stderr.count(warning) == 1, proc.stderr
    assert proc.stderr.count("holds NaN or Inf") == 1, proc.stderr  # once per simulation


MPI_CLIENT = r"""
import sys
import numpy as np
from mpi4py import MPI
from melissa_trainer.client import Client, ClientTuning

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
# batch_bytes=0: each part its own DATA (a batch holding one NaN goes unflagged whole)
with Client({"w": ((10,), "<f8")}, simulation_id=3, endpoints=[sys.argv[1]], comm=comm,
            send_timeout=30, tuning=ClientTuning(close_timeout=30, batch_bytes=0)) as c:
    for t in range(4):
        part = np.full(5, float(t))
        if rank == 1 and t == 2:
            part[1] = np.nan  # rank 1's part of step 2: sent without FLAG_FINITE
        c.send(t, w=part)
comm.Barrier()
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_an_mpi_sliced_field_with_one_unflagged_part_is_checked(
    checks: list[int], stream: tuple[Any, FIFOBuffer]
) -> None:
    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip(NO_MPI)
    rec, buffer = stream
    proc = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, "-c", MPI_CLIENT, rec.endpoint],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    samples = drain(buffer)
    assert sorted(int(s["time_step"]) for s in samples) == [0, 1, 3]
    assert checks == [10]  # step 2's whole field, once; the others came flagged
    assert rec.telemetry()["nonfinite_refused"] == 1
    assert "field 'w' of time step 2 holds NaN or Inf" in proc.stderr
