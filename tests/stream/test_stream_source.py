"""`StreamSource`: the network stream as the trainer's source, end to end over real
sockets and real client processes (raw-pyzmq `scripts/stream_client.py`, and the
`melissa_trainer.client.Client` under `mpiexec -n 2`)."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import zmq
from helpers import NO_MPI, drain, find_mpiexec

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer, Sample
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream.ingest_counters import telemetry_keys
from melissa_trainer.stream.receiver_config import ReceiverConfig, ReceiverTuning
from melissa_trainer.stream.source_config import rank_bind
from melissa_trainer.stream.stream_source import StreamSource

SCRIPTS = Path(__file__).parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import stream_client as sc  # noqa: E402

U = P.FieldSpec("u", np.dtype("<f4"), (5,))


def stream_client(sim: int, steps: int, *args: str) -> subprocess.Popen:
    fields = ["--field", "x:<f4:3", "--field", "y:<f4:1"]
    cmd = [sys.executable, str(SCRIPTS / "stream_client.py"), "--simulation-id", str(sim)]
    return subprocess.Popen([*cmd, "--steps", str(steps), *fields, *args])


def xy(sample: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(sample["x"]), torch.from_numpy(sample["y"])


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_trainer_trains_from_two_client_processes_to_the_end_of_the_stream(
    tmp_path: Path,
) -> None:
    from helpers import Recorder

    from melissa_trainer import OnlineTrainer, TrainingArguments

    rendezvous = tmp_path / "out" / "rendezvous"
    procs = [
        stream_client(1, 30, "--rendezvous", str(rendezvous)),
        stream_client(2, 25, "--rendezvous", str(rendezvous), "--param", "p=2"),
    ]
    try:
        args = TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=8,
            buffer="fifo",  # each sample once: the counts below rely on it
            buffer_size=16,
            logging_steps=3,
            report_to="tensorboard",
            disable_progress_bar=True,
            save_at_end=True,
            stop_sync_steps=2,
        )
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        source = StreamSource(
            ReceiverConfig(expected_simulations=2, rendezvous_dir=str(rendezvous))
        )
        rec = Recorder()
        trainer = OnlineTrainer(
            model,
            args,
            torch.optim.Adam(model.parameters(), lr=1e-2),
            train_source=source,
            process_sample=xy,
            hooks=[rec],
        )
        state = trainer.train()
        for p in procs:
            assert p.wait(30) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert state.samples_seen == 55
    assert state.stream_ended
    last = rec.logs[-1]
    assert last["source_samples_put"] == 55 and last["source_simulations_finished"] == 2
    assert last["source_rejected"] == 0 and last["source_duplicates"] == 0
    assert source.finished_simulations() in ([1, 2], [2, 1])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "out" / "runs"))
    events.Reload()
    assert events.Scalars("source/samples_put")[-1].value == 55
    # the checkpoint written at the end holds the dedup record
    (saved,) = (tmp_path / "out" / "checkpoints").glob("**/source.json")
    record = json.loads(saved.read_text())
    assert {s: r["finished"] for s, r in record["simulations"].items()} == {"1": True, "2": True}
    assert record["simulations"]["2"]["parameters"] == [["p", 2.0]]


class _FailingBuffer(FIFOBuffer):
    def put(self, sample: Sample, timeout: float | None = None) -> None:
        raise RuntimeError("no room at the inn")


@pytest.mark.timeout(30)
def test_a_receiver_failure_surfaces_from_check_as_source_error() -> None:
    buf = _FailingBuffer(4)
    source = StreamSource()
    source.start(buf, 0, 1)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    try:
        assert source.endpoint is not None
        sock.connect(source.endpoint)
        sock.send(P.encode_hello(1, 0, 1, [U]))
        payload = sc.field_value(1, 0, 0, U).tobytes()
        sock.send(P.encode_data_header(1, 0, 0, 1, b"u", 1, (5,), 0, 5, True) + payload)
        deadline = time.monotonic() + 10
        while not buf.closed and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(SourceError, match="no room at the inn") as info:
            source.check()
        assert isinstance(info.value.__cause__, RuntimeError)
    finally:
        sock.close(linger=0)
        ctx.term()
        source.stop()
    source.stop()  # idempotent


@pytest.mark.timeout(30)
def test_client_finds_two_ranks_through_the_rendezvous_and_each_gets_its_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if importlib.util.find_spec("melissa_trainer.client") is None:
        pytest.skip("melissa_trainer.client is not there yet")
    from melissa_trainer.client import Client

    bufs = [FIFOBuffer(50), FIFOBuffer(50)]
    sources = [
        StreamSource(ReceiverConfig(expected_simulations=1, rendezvous_dir=tmp_path)) for _ in bufs
    ]
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    monkeypatch.setenv("MELISSA_TRAINER_SIMULATION_ID", "8")
    try:
        for rank, (src, buf) in enumerate(zip(sources, bufs, strict=True)):
            src.start(buf, rank, 2)
        with Client({"u": ((5,), "float32")}, {"a": 1.0}) as client:
            assert client.endpoints == [src.endpoint for src in sources]
            for t in range(7):
                client.send(t, u=sc.field_value(8, t, 0, U))
        parts = [drain(b) for b in bufs]
    finally:
        for src in sources:
            src.stop()
    assert [sorted(int(s["time_step"]) for s in p) for p in parts] == [[0, 2, 4, 6], [1, 3, 5]]
    for s in parts[0] + parts[1]:
        assert s["u"].tobytes() == sc.field_value(8, int(s["time_step"]), 0, U).tobytes()
        assert s["parameters"].tolist() == [1.0]


def _mpiexec() -> str:
    if importlib.util.find_spec("melissa_trainer.client") is None:
        pytest.skip("melissa_trainer.client is not there yet")
    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip(NO_MPI)
    return mpiexec


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_mpi_simulation_decomposed_field_is_reassembled_bit_for_bit() -> None:
    import mpi_stream_sim as sim

    mpiexec = _mpiexec()
    buf = FIFOBuffer(50)
    source = StreamSource(ReceiverConfig(expected_simulations=1))
    source.start(buf, 0, 1)
    try:
        assert source.endpoint is not None
        proc = subprocess.run(
            [
                mpiexec,
                "-n",
                "2",
                sys.executable,
                str(SCRIPTS / "mpi_stream_sim.py"),
                source.endpoint,
            ],
            capture_output=True,
            text=True,
            timeout=80,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        samples = drain(buf)
        tel = source.telemetry()
    finally:
        source.stop()
    specs = [sc.parse_field(f) for f in sim.FIELDS]
    assert sorted(int(s["time_step"]) for s in samples) == list(range(sim.STEPS))
    for s in samples:
        assert int(s["simulation_id"]) == sim.SIMULATION_ID
        assert s["parameters"].tolist() == list(sim.PARAMETERS.values())
        for i, spec in enumerate(specs):
            want = sc.field_value(sim.SIMULATION_ID, int(s["time_step"]), i, spec)
            assert s[spec.name].shape == spec.shape and s[spec.name].dtype == spec.dtype
            assert s[spec.name].tobytes() == want.tobytes()
    # 2 HELLOs, 5 steps x (2 parts of f + 1 of g) in DATA or BATCH messages, 2 BYEs
    assert 2 + 3 + 2 <= tel["messages"] <= 2 + 5 * 3 + 2
    assert tel["samples_put"] == sim.STEPS and tel["rejected"] == tel["duplicates"] == 0


# -- API ------------------------------------------------------------------------------------


def test_api_before_start() -> None:
    source = StreamSource(ReceiverConfig(expected_simulations=3, rcvhwm=10))
    assert source.endpoint is None and source.receiver is None
    assert source.telemetry() == dict.fromkeys(telemetry_keys(), 0.0)
    assert source.state_dict() == {}
    source.check()
    source.wait_for(4, 0.0)  # nothing to do before start
    source.stop()
    with pytest.raises(TypeError, match="high_water_mark"):
        ReceiverConfig(high_water_mark=3)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="expected_simulations"):
        ReceiverConfig(expected_simulations=-1)
    with pytest.raises(ValueError, match="not a StreamSource state"):
        source.load_state_dict({"something": 1})


@pytest.mark.timeout(30)
def test_state_round_trip_and_finish_before_start() -> None:
    first = StreamSource(ReceiverConfig(expected_simulations=1))
    buf = FIFOBuffer(10)
    first.start(buf, 0, 1)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    try:
        sock.connect(first.endpoint)
        sock.send(P.encode_hello(4, 0, 1, [U]))
        for t in range(3):
            payload = sc.field_value(4, t, 0, U).tobytes()
            sock.send(P.encode_data_header(4, t, 0, 1, b"u", 1, (5,), 0, 5, True) + payload)
        sock.send(P.encode_bye(4, 0, 1, 3))
        assert len(drain(buf)) == 3
        state = json.loads(json.dumps(first.state_dict()))
    finally:
        sock.close(linger=0)
        ctx.term()
        first.stop()
    second = StreamSource()
    second.load_state_dict(state)
    assert second.state_dict() == state
    second.finish()  # before start: applied at start
    buf2 = FIFOBuffer(10)
    for _ in range(3):
        buf2.put({"a": np.zeros(1)})  # what the restored buffer would have counted
    second.start(buf2, 0, 1)
    try:
        assert second.finished_simulations() == [4]
        deadline = time.monotonic() + 5
        while not buf2.closed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert buf2.closed  # every known simulation had finished
    finally:
        second.stop()


def test_explicit_ports_are_offset_by_rank() -> None:
    assert rank_bind("tcp://*:5555", 0) == "tcp://*:5555"
    assert rank_bind("tcp://*:5555", 3) == "tcp://*:5558"
    assert rank_bind("tcp://127.0.0.1:*", 2) == "tcp://127.0.0.1:*"
    assert rank_bind("ipc:///tmp/x", 1) == "ipc:///tmp/x"


MULTI_FIELD_CLIENT = r"""
import sys
import numpy as np
from melissa_trainer.client import Client, ClientTuning

endpoint, sim, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fields = {"u": ((64,), "<f4"), "w": ((3,), "<i8")}
tuning = ClientTuning(batch_bytes=4096)
with Client(fields, simulation_id=sim, endpoints=[endpoint], tuning=tuning) as c:
    for t in range(steps):
        c.send(t, u=np.full(64, sim * 10000 + t, np.float32), w=np.array([sim, t, -t]))
"""


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(90)
def test_batched_fields_of_interleaved_simulations_complete_without_drops() -> None:
    """The fields of a step leave a client together (one multipart message per receiver),
    so samples being assembled stay few even with many simulations interleaved: a small
    `max_pending` (a batch of 4 KB holds at most 15 steps of "u") loses nothing."""
    sims, steps = 4, 1500
    buf = FIFOBuffer(sims * steps)
    source = StreamSource(ReceiverConfig(expected_simulations=sims, max_pending=32))
    source.start(buf, 0, 1)
    procs = []
    try:
        assert source.endpoint is not None
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", MULTI_FIELD_CLIENT, source.endpoint, str(s), str(steps)]
            )
            for s in range(1, sims + 1)
        ]
        samples = drain(buf, timeout=60)
        assert all(p.wait(30) == 0 for p in procs)
        tel = source.telemetry()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        source.stop()
    assert tel["incomplete_dropped"] == 0 and tel["rejected"] == 0
    assert tel["messages"] < sims * steps  # batched: far fewer messages than fields
    keys = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert keys == [(s, t) for s in range(1, sims + 1) for t in range(steps)]
    for s in samples:
        sim, t = int(s["simulation_id"]), int(s["time_step"])
        assert np.all(s["u"] == sim * 10000 + t) and s["w"].tolist() == [sim, t, -t]


@pytest.mark.timeout(30)
def test_two_ranks_end_a_stream_of_every_tenth_step() -> None:
    """A simulation that sends every tenth step (all even: rank 0 gets them all, rank 1
    none) ends on both ranks, each with its own steps (protocol version 1 left both
    ranks waiting for steps that never come)."""
    from melissa_trainer.client import Client, ClientTuning

    bufs = [FIFOBuffer(100), FIFOBuffer(100)]
    sources = [StreamSource(ReceiverConfig(expected_simulations=1)) for _ in bufs]
    try:
        for rank, (source, buf) in enumerate(zip(sources, bufs, strict=True)):
            source.start(buf, rank, 2)
        endpoints = [s.endpoint for s in sources]
        with Client(
            {"u": ((5,), "<f4")}, None, 3, endpoints, tuning=ClientTuning(close_timeout=10)
        ) as c:
            for t in range(0, 100, 10):
                c.send(t, u=np.full(5, t, np.float32))
        got = [drain(buf, timeout=10) for buf in bufs]  # until the receiver closes it
    finally:
        for source in sources:
            source.stop()
    assert [int(s["time_step"]) for s in got[0]] == list(range(0, 100, 10))
    assert got[1] == [] and all(s.finished_simulations() == [3] for s in sources)
    assert all(np.all(s["u"] == s["time_step"]) for s in got[0])


def test_receiver_config_is_validated_in_one_place() -> None:
    """Every out-of-range value is refused when the config is made, by name (not at
    `start`, in a rank's receiver), and the CURVE secret key stays out of its repr."""
    for bad in (
        {"max_message_bytes": 0},
        {"rcvhwm": -1},
        {"max_pending": 0},
        {"max_pending_bytes": 1.5},
        {"max_time_step": -1},
        {"stall_timeout": 0.0},
        {"fields": "any"},
    ):
        (name,) = bad
        with pytest.raises(ValueError, match=name):
            ReceiverConfig(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="curve_secret_key"):
        ReceiverConfig(curve_public_key="x" * 40)
    for tuning in ({"takeover": 0.0}, {"pump_budget": -1.0}, {"stop_timeout": math.inf}):
        (name,) = tuning
        with pytest.raises(ValueError, match=name):
            ReceiverTuning(**tuning)
    secret, _ = zmq.curve_keypair()
    assert secret.decode() not in repr(ReceiverConfig(curve_secret_key=secret))
    config = ReceiverConfig(fields={"u": ((5,), "<f4")})
    assert config.schema == [U] and ReceiverConfig().schema is None
