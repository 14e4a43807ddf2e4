"""A large study: tiny simulations run by long-lived workers, every (simulation, step)
exactly once, the receiver's and launcher's records bounded as documented, and the
study's checkpoint saved, loaded and resumed without running anything again.

Its size is ``MT_SCALE_SIMULATIONS``: 5,000 in the test suite (about 7 s on 2 cores),
100,000 for the figures of the capacity page (about 100-140 s, which would take the
suite past its 10 minutes)::

    MT_SCALE_SIMULATIONS=100000 python -m pytest -n 0 tests/launcher/test_scale.py -s

The figures (rate, record sizes, save and load times) are printed with ``-s``. No time
is asserted.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from melissa_trainer import (
    FIFOBuffer,
    Launcher,
    LauncherTuning,
    ReceiverConfig,
    StreamSource,
    Study,
)
from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.simulation_record import records_of

pytestmark = pytest.mark.e2e  # every test here starts a process

N = int(os.environ.get("MT_SCALE_SIMULATIONS", "5000"))
STEPS, WORKERS, CAPACITY = 3, 4, 4096

# One ZeroMQ context for the worker's life, as client/worker.py advises.
WORKER = r"""
import sys
import numpy as np
import zmq
from melissa_trainer.client import Client
from melissa_trainer.client.worker import next_simulation

steps = int(sys.argv[1])
context = zmq.Context()
while (work := next_simulation()) is not None:
    sid, parameters = work
    with Client({"x": ((4,), "float32")}, simulation_id=sid, parameters=parameters,
                context=context) as client:
        for t in range(steps):
            client.send(t, x=np.full(4, parameters["a"], np.float32))
context.term()
"""


def study(tmp_path: Path) -> Study:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    launcher = Launcher(
        [sys.executable, str(script), str(STEPS)],
        make_sampler("uniform", {"a": (0.0, 1.0)}, seed=0),
        N,
        job_limit=WORKERS,
        worker=True,
        tuning=LauncherTuning(poll_interval=0.05, max_restarts=0),
    )
    return Study(launcher, StreamSource(ReceiverConfig(fields={"x": ((4,), "float32")})))


def drain(source: Study, buffer: FIFOBuffer) -> np.ndarray:
    """Every (simulation, step) read, as simulation * STEPS + step (no sample kept)."""
    keys: list[np.ndarray] = []
    while True:
        source.wait_for(256, 0.5)
        try:
            batch = buffer.get_batch(256, timeout=0.0)
        except TimeoutError:
            continue
        if not batch:
            return np.concatenate(keys) if keys else np.zeros(0, np.int64)
        sid = np.array([int(s["simulation_id"]) for s in batch], np.int64)
        step = np.array([int(s["time_step"]) for s in batch], np.int64)
        keys.append(sid * STEPS + step)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_large_study_every_step_once_records_bounded_and_resumed(tmp_path: Path) -> None:
    source, buffer = study(tmp_path), FIFOBuffer(CAPACITY)
    source.configure(str(tmp_path / "out"))
    began = time.perf_counter()
    source.start(buffer, 0, 1)
    try:
        source.on_all_ranks_started()
        keys = drain(source, buffer)
        wall = time.perf_counter() - began
        receiver = source.stream.receiver
        assert receiver is not None
        ingest = receiver.ingest
        ledgers, archived = len(ingest.sims), len(ingest.archive)
        # as the trainer does at LOOP_END, before its final checkpoint: the launcher sees
        # the last simulations end (a worker's report may follow its data: a state taken
        # before it recorded the last one "complete", not finished, in a CI run once)
        source.on_loop_end(preempted=False)
        save_began = time.perf_counter()
        arrays, meta = buffer.state_dict()
        assert not arrays  # drained: the checkpoint's buffer is its counters
        state = {"buffer": meta, "source": source.state_dict()}
        text = json.dumps(state, sort_keys=True)
        save = time.perf_counter() - save_began
    finally:
        source.stop()

    records = records_of(state["source"]["launcher"])
    failed = {sid: r for sid, r in records.items() if r["status"] != "finished"}
    assert not failed, f"{len(failed)} not finished, e.g. {list(failed.items())[:3]}"
    # every (simulation, step) exactly once
    assert keys.size == N * STEPS
    assert np.array_equal(np.bincount(keys, minlength=N * STEPS), np.ones(N * STEPS, np.int64))
    # the receiver keeps a ledger only for the simulations that finished within its
    # recent list (CAPACITY + 16 samples: see stream/archive.py) and the running ones
    recent = CAPACITY + 16
    assert archived >= N - recent and ledgers <= recent // STEPS + WORKERS + 1
    assert ingest.duplicates == 0 and sum(ingest.rejected.values()) == 0
    launcher_state = state["source"]["launcher"]
    assert {r["status"] for r in records_of(launcher_state).values()} == {"finished"}

    # resume from the checkpoint: nothing runs again, the stream ends at once
    load_began = time.perf_counter()
    loaded = json.loads(text)
    again, again_buffer = study(tmp_path), FIFOBuffer(CAPACITY)
    again_buffer.load_state_dict({}, loaded["buffer"])
    again.load_state_dict(loaded["source"])
    again.configure(str(tmp_path / "out"))
    again.start(again_buffer, 0, 1)
    load = time.perf_counter() - load_began
    try:
        again.on_all_ranks_started()
        assert drain(again, again_buffer).size == 0
        assert again.launcher.summary()["finished"] == N
        assert not list((tmp_path / "out" / "study" / "logs").glob("worker-*-r*"))
    finally:
        again.stop()

    receiver_bytes = len(json.dumps({k: v for k, v in state["source"].items() if k != "launcher"}))
    launcher_bytes = len(json.dumps(launcher_state))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\n{N} simulations x {STEPS} steps, {WORKERS} workers: {wall:.1f} s "
        f"({N / wall:.0f} simulations/s); receiver: {ledgers} ledgers, {archived} archived, "
        f"record {receiver_bytes / 1e6:.2f} MB; launcher record {launcher_bytes / 1e6:.2f} MB; "
        f"checkpoint state {len(text) / 1e6:.2f} MB saved in {save:.2f} s, loaded and "
        f"started in {load:.2f} s; peak RSS {rss:.0f} MB"
    )
