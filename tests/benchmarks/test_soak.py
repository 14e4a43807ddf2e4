"""benchmarks/soak.py: its sample of a process (this test's own, whose sockets and
threads the test opens) and its summary of a study's samples against the idle
arm's, from samples the test writes. The run itself (minutes) is not repeated here."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import pytest
from benchmark_json import benchmark_module

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


@pytest.mark.timeout(30)
def test_sample_counts_the_sockets_and_threads_a_process_opens() -> None:
    """This process, sampled before and after it opens 2 sockets and starts 2 threads."""
    soak = benchmark_module("soak")
    before = soak.sample(os.getpid())
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait) for _ in range(2)]
    a, b = socket.socketpair()
    try:
        for t in threads:
            t.start()
        after = soak.sample(os.getpid())
    finally:
        stop.set()
        for t in threads:
            t.join()
        a.close()
        b.close()
    assert before is not None and after is not None
    assert after["sockets"] - before["sockets"] == 2
    assert after["threads"] - before["threads"] == 2
    assert after["fds"] - before["fds"] == 2 and after["zombies"] == 0 and after["rss_kb"] > 0
    # a process that is not there (above any pid_max Linux allows: 2**22)
    assert soak.sample(2**22 + 1) is None


def _row(t: float, done: int | None, rss: int, fds: int, cpu: float) -> dict[str, Any]:
    return {"t": t, "finished": done, "rss_kb": rss, "threads": 15, "fds": fds,
            "sockets": 4, "eventfds": 10, "cpu_s": cpu, "children": 2, "zombies": 0,
            "shm": 0, "stopping": False}  # fmt: skip


def test_summarise_takes_the_second_half_per_1000_simulations_against_idle() -> None:
    """The study finishes 100 simulations every 10 s, 2,000 in all; its RSS grows
    1 MB per 100 simulations in its second half (after 1,000), and its descriptors
    count one more there; the idle arm grows 1 MB per 100 s and uses 0.01 core. Left
    out: the start-up (no socket yet: RSS far lower), the study's end (its descriptors
    closed) and the idle arm's after its SIGINT (RSS far higher)."""
    soak = benchmark_module("soak")
    study = [_row(10.0 * i, 100 * i, 1024 * (i - 10 if i > 10 else 0), 27 + (i == 15), i)
             for i in range(1, 21)]  # fmt: skip
    start = {**_row(5.0, 50, -(10**6), 5, 0.5), "sockets": 0}
    study = [start, *study, _row(210.0, 2000, 10**6, 5, 30.0), {"exit": 0, "lock": "ended"}]
    idle = [{**_row(0.0, None, -(10**6), 5, 0.0), "sockets": 0}]
    idle += [_row(10.0 * i, None, 1024 * i // 10, 24, 0.1 * i) for i in range(1, 31)]
    idle += [{**_row(310.0, None, 10**6, 5, 9.0), "stopping": True}, {"exit": 130}]
    rows = {r["case"]: r for r in soak.summarise(study, idle)}
    rss = rows["RSS growth per 1,000 simulations"]
    # 1,000 .. 2,000 finished from t = 100 to 200 s: 10 MB; idle: 1 MB over those 100 s
    assert rss["ours"] == pytest.approx(10.0) and rss["baseline"] == pytest.approx(1.0)
    fds = rows["fds: max - min (study 2nd half / idle)"]
    assert (fds["ours"], fds["baseline"]) == (1.0, 0.0)
    cpu = rows["idle trainer CPU share (study: same window)"]
    assert cpu["ours"] == pytest.approx(0.1) and cpu["baseline"] == pytest.approx(0.01)


@pytest.mark.timeout(30)
def test_an_idle_arm_too_short_for_a_sample_is_a_clear_error() -> None:
    """An --idle shorter than the trainer's start-up (no sample with its sockets open)
    says so and how to fix it (before: IndexError in summarise)."""
    soak = benchmark_module("soak")
    study = [_row(10.0 * i, 100 * i, 1024 * i, 27, i) for i in range(1, 21)]
    idle = [{**_row(0.0, None, 0, 5, 0.0), "sockets": 0}, {"exit": 130}]
    with pytest.raises(SystemExit, match="give --idle more seconds"):
        soak.summarise(study, idle)
