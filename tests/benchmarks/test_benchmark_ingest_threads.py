"""benchmarks/ingest_threads.py --quick: it runs, and splits the pinned core's time per
step by thread for ours and the raw PULL thread (the figures are timings, not asserted;
what must hold on one core is)."""

from __future__ import annotations

import os

import pytest
from benchmark_json import json_rows

pytestmark = pytest.mark.e2e  # it starts a process (and streaming clients)


@pytest.mark.timeout(300)
@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="the pinned rows need Linux and 2 cores",
)
def test_ingest_threads_quick_splits_the_core_by_thread() -> None:
    rows = json_rows("ingest_threads.py", "--quick")
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert r["unit"] == "us/step"
    part = {r["case"].split(": ", 1)[1].split(" (")[0]: r for r in rows}
    assert list(part)[:6] == [
        "wall time per step, to the loop's end",
        "the training thread's CPU",
        "ZeroMQ's I/O threads",
        "the process's other threads",
        "run delay of the training thread",
        "the source's stop after the loop",
    ]
    io, train, wall = (
        part[k]
        for k in (
            "ZeroMQ's I/O threads",
            "the training thread's CPU",
            "wall time per step, to the loop's end",
        )
    )
    # both runs received the stream through ZeroMQ's I/O thread, and trained
    assert io["ours"] > 0 and io["baseline"] > 0
    assert train["ours"] > 0 and train["baseline"] > 0
    # one core: the threads' CPU cannot exceed the wall time (a 5% allowance for the
    # accounts' granularity)
    for key in ("ours", "baseline"):
        assert train[key] + io[key] <= wall[key] * 1.05
