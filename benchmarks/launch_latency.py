"""`launch_cost.py`'s latency: from the call that starts a simulation to its first line
read by the launcher. Ours (`FifoLatency`): `LocalBackend.launch` from the big trainer
process, the job's log file a FIFO read here; main's fork path the same way
(`launch_fork_path.ForkPathBackend`); the baseline (`SmallLauncher`): ``os.posix_spawn``
from a small Python process that imported no torch. `measure_latency` interleaves them
and takes medians.
"""

from __future__ import annotations

import contextlib
import os
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from launch_fork_path import ForkPathBackend

from melissa_trainer.launcher.backends import Job, LocalBackend

HELPER = r"""
import os, select, sys, time
argv = sys.argv[1:]
devnull = os.open(os.devnull, os.O_RDONLY)
for request in sys.stdin:
    r, w = os.pipe()
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, w, 1)]
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions, setsid=True)
    os.close(w)
    data = b""
    while b"\n" not in data:
        select.select([r], [], [])
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    seconds = time.perf_counter() - start
    os.close(r)
    os.waitpid(pid, 0)
    print(seconds if data.startswith(b"ready") else "nan", flush=True)
"""


class SmallLauncher:
    """The baseline: a small Python process (no torch) that posix_spawns `argv` when
    asked and answers the seconds until the child's first line."""

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HELPER, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def latency(self) -> float:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("go\n")
        return float(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


class FifoLatency:
    """Launches through `backend` with the log file a FIFO read here: seconds from the
    call to the first line, and how long the call itself took."""

    def __init__(self, backend: LocalBackend, argv: list[str], directory: Path) -> None:
        self.backend, self.argv = backend, argv
        self.fifo = directory / f"{type(backend).__name__}.fifo"
        os.mkfifo(self.fifo)
        self.reader = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)  # before any writer
        self.calls: list[float] = []

    def latency(self) -> float:
        job = Job("latency", self.argv, log_path=self.fifo)
        start = time.perf_counter()
        handle = self.backend.launch(job)
        self.calls.append(time.perf_counter() - start)
        data = b""
        while b"\n" not in data:
            select.select([self.reader], [], [], 0.05)
            with contextlib.suppress(BlockingIOError):  # a writer, no data yet
                data += os.read(self.reader, 4096)
        seconds = time.perf_counter() - start
        while self.backend.poll(handle) is None:
            time.sleep(0.001)
        return seconds if data.startswith(b"ready") else float("nan")

    def close(self) -> None:
        os.close(self.reader)
        self.backend.close()


def measure_latency(argv: list[str], n: int, directory: Path, fork: bool) -> dict[str, Any]:
    """Medians (s) over `n` launches of each, interleaved: "ours", "baseline" and, with
    `fork`, "fork"; and "call_ours" / "call_fork", the launch call alone."""
    sides: dict[str, Any] = {
        "ours": FifoLatency(LocalBackend(), argv, directory),
        "baseline": SmallLauncher(argv),
    }
    if fork:
        sides["fork"] = FifoLatency(ForkPathBackend(), argv, directory)
    names = list(sides)
    samples: dict[str, list[float]] = {name: [] for name in names}
    try:
        for name in names:  # warm-up: page cache, the helper's first spawn
            sides[name].latency()
        for i in range(n):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                samples[name].append(sides[name].latency())
    finally:
        for side in sides.values():
            side.close()
    out = {name: statistics.median(values) for name, values in samples.items()}
    for name in ("ours", "fork"):
        if name in sides:
            out[f"call_{name}"] = statistics.median(sides[name].calls[1:])
    return out
