"""What the launcher's tests against real processes share (test_launcher_*.py): a
`Launcher` on a `LocalBackend` tuned `FAST` (`launcher`), the simulation script they
run (`SIMULATION`, its mode and options on its command line: `command`), a receiver for
what it streams (`receive`, `stream_study`), and waits on a study's end or failure.

Simulations are small Python scripts written into each test's directory (no shell), and
record what they did (start/end times, attempts, pids) in files there.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
from helpers import drain
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import (
    Launcher,
    LauncherError,
    LauncherTuning,
    LocalBackend,
    make_sampler,
)
from melissa_trainer.launcher.simulation_record import records_of
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

FAST = LauncherTuning(poll_interval=0.05, kill_grace=2.0)

SIMULATION = r"""
import json, os, signal, subprocess, sys, time

mode, out = sys.argv[1], sys.argv[2]
options = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
with open(os.path.join(out, "runs.txt"), "a") as f:
    f.write(f"{sid} {attempt} {os.getpid()}\n")
first = attempt == 0

if mode == "overlap":  # its lifetime, on the system-wide monotonic clock
    start = time.monotonic()
    together = options.get("together", 0)
    if sid < together:  # the first wave runs at once: each waits for the others' start
        open(os.path.join(out, f"{sid}.started"), "w").close()
        while sum(n.endswith(".started") for n in os.listdir(out)) < together:
            time.sleep(0.01)
    time.sleep(options["sleep"])
    with open(os.path.join(out, f"{sid}.span"), "w") as f:
        f.write(f"{start} {time.monotonic()}")
elif mode == "exit":
    if sid in options.get("fail", []):
        print(options.get("say", "").format(sid=sid), flush=True)  # its log's last line
        sys.exit(options.get("code", 1))
elif mode == "hang":  # silent forever on its first attempt
    if first and sid in options["hang"]:
        time.sleep(600)
elif mode == "family":  # a child of its own, and SIGTERM ignored: needs SIGKILL
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    path = os.path.join(out, f"{sid}.family")
    with open(path + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    os.replace(path + ".tmp", path)  # never seen empty by the test
    time.sleep(600)
elif mode == "stream":
    import numpy as np
    from melissa_trainer.client import Client

    client = Client({"u": ((4,), "float32")})  # id, parameters, endpoints: from the launcher
    if options.get("ready"):  # its start-up done (see `ReadyBackend`)
        open(os.path.join(out, f"{sid}-{attempt}.ready"), "w").close()
    for t in range(options["steps"]):
        if first and sid in options.get("crash", []) and t == options["at"]:
            client.close(bye=False)  # deliver what was sent, then die
            sys.exit(1)
        if first and sid in options.get("stall", []) and t == options["at"]:
            time.sleep(600)
        client.send(t, u=np.full(4, 100 * sid + t, np.float32))
        time.sleep(options.get("period", {}).get(str(sid), 0.0))
    client.close()
"""


# -- helpers ------------------------------------------------------------------------------


def script(tmp_path: Path, source: str = SIMULATION, name: str = "sim.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def command(tmp_path: Path, mode: str, **options: Any) -> list[str]:
    """The simulation's command; a literal brace is doubled in a template (str.format)."""
    escaped = json.dumps(options).replace("{", "{{").replace("}", "}}")
    return [sys.executable, script(tmp_path), mode, str(tmp_path), escaped]


def launcher(
    sim: Any, n: int, sampler: Any = None, *, tuning: dict[str, Any] | None = None, **kwargs: Any
) -> Launcher:
    """A Launcher on a `LocalBackend` (unless `backend` says otherwise, a class is
    instantiated), tuned `FAST` with the fields of `tuning` changed."""
    backend = kwargs.pop("backend", LocalBackend)
    backend = backend() if isinstance(backend, type) else backend
    sampler = sampler if sampler is not None else make_sampler("uniform", {"x": (0, 1)})
    fast = dataclasses.replace(FAST, **(tuning or {}))
    return Launcher(sim, sampler, n, backend=backend, tuning=fast, **kwargs)


def stream_study(
    launch: Launcher,
    tmp_path: Path,
    receiver: Receiver,
    buffer: FIFOBuffer,
    after_start: Callable[[], None] = lambda: None,
    timeout: float = 40.0,
) -> list[dict[str, np.ndarray]]:
    """Start the study into `receiver`, take every sample it streams, wait for it to
    complete (`after_start` runs in between); stop both. The samples, in order.
    `timeout`: seconds, a bound on the stream and on the study's end, each."""
    try:
        launch.start(tmp_path / "rendezvous", heartbeat=receiver.activity)
        after_start()
        samples = drain(buffer, timeout=timeout)
        run_study(launch, timeout)
    finally:
        launch.stop()
        receiver.stop()
    return samples


def run_study(launch: Launcher, timeout: float = 30.0) -> None:
    """Wait for the study to complete, checking it; the caller stops the launcher."""

    def finished() -> bool:
        launch.check()
        return launch.done

    wait_until(finished, "the study to complete", timeout)


def failure(launch: Launcher, timeout: float = 20.0) -> LauncherError:
    """Wait for the study to fail; the error `check()` raises."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            launch.check()
        except LauncherError as exc:
            return exc
        time.sleep(0.02)
    raise AssertionError("the study did not fail")


def runs(tmp_path: Path) -> list[tuple[int, int, int]]:
    """(simulation id, attempt, pid) of every simulation process started."""
    path = tmp_path / "runs.txt"
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [(int(a), int(b), int(c)) for a, b, c in (line.split() for line in lines)]


def alive(pid: int) -> bool:
    """A live process (a zombie, killed but not yet reaped by its parent, is dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def receive(tmp_path: Path, expected: int) -> tuple[Receiver, FIFOBuffer]:
    buffer = FIFOBuffer(1000)
    config = ReceiverConfig(expected_simulations=expected, rendezvous_dir=tmp_path / "rendezvous")
    receiver = Receiver(buffer, config=config)
    receiver.start()
    return receiver, buffer


def keys(samples: list[dict[str, np.ndarray]]) -> Counter[tuple[int, int]]:
    return Counter((int(s["simulation_id"]), int(s["time_step"])) for s in samples)


def statuses(launch: Launcher) -> dict[int, str]:
    return {int(k): v["status"] for k, v in records_of(launch.state_dict()).items()}
