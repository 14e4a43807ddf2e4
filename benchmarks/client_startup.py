"""Simulation start-up: a fresh process, from its launch to its first step received.

Ours: a fresh `python` process configured as the launcher configures a simulation (the
environment variables `MELISSA_TRAINER_RENDEZVOUS`, `..._SIMULATION_ID`,
`..._PARAMETERS`, `..._ATTEMPT`: a launched simulation, so no replay window) runs
``import numpy, zmq`` then ``from melissa_trainer.client import Client`` (which imports
them: the order only splits the time), makes a `Client`
of one float32 field (the rendezvous file lookup, the HELLO with the parameters, the
connection) and sends time step 0. Baseline: a fresh `python` process runs ``import
numpy, zmq``, connects a PUSH socket to the endpoint given in an environment variable
and sends an array of the same size, as a bare pyzmq program would. Both arms create
their array after their imports, and close their sockets after the measured send.

The children run in a temporary directory, with the library this process imported first
on their `PYTHONPATH` (`PYTHONPATH=/other/checkout python benchmarks/client_startup.py`
measures that checkout's). The receiving end is a PULL socket in this process, bound
to a loopback TCP port and published in a rendezvous directory (`write_rendezvous`, as
the trainer's receivers do). Its clock (`time.monotonic`, one clock for every process
on Linux) runs from just before `subprocess.Popen` to the arrival of the first step:
ours, the DATA of time step 0 after the HELLO (both decoded and checked with
`melissa_trainer.wire`; the payload compared); the baseline, its one message. The arms
alternate (ours, baseline, ours ...) after a warm-up launch of each; medians over the
launches.

Rows (all in ms, ratio = baseline / ours, higher is better):

* start-up to first sent step, the whole launch (target: >= 0.8, issue 28 item 4);
* the imports alone, measured by the child itself around its import statements, in
  wall time and in the CPU time of the importing thread (which other processes on a
  loaded machine disturb less; numpy's BLAS threads, which start and spin while it is
  imported, would make the process's CPU time noisy);
* connect and first send: from the end of the imports to the step's arrival here.

It also prints the client's own share of the imports: ours imports numpy and zmq first,
then the client, timed apart (the figure the other rows' noise hides: numpy's import
varies by more than the client's whole import on a loaded machine).

Bytecode: each child runs with `PYTHONPYCACHEPREFIX` set to `--pycache` (by default a
directory under the system's temp dir, reused between runs; Python recompiles what is
stale) and `PYTHONDONTWRITEBYTECODE` unset, so that the warm-up launches leave every
module compiled: an installed package has its `.pyc` files, and an environment that
forbids writing them would make every launch of ours compile the package's sources
(numpy's and pyzmq's come compiled).

    python benchmarks/client_startup.py            # 20 launches of each, ~30 s
    python benchmarks/client_startup.py --quick    # 5 launches of each
    python benchmarks/client_startup.py --json     # {"rows": [...]}
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import zmq
from report import add_flags, finish

import melissa_trainer
from melissa_trainer import wire as protocol
from melissa_trainer.stream.endpoints import write_rendezvous

TARGET = 0.8
SIMULATION_ID = 7
TIMEOUT = 60.0  # seconds a launch may take before the benchmark gives up
#: The library measured: the one this process imported (first on the children's path).
LIBRARY = Path(melissa_trainer.__file__).resolve().parents[1]

# The children print, once the step is sent, the monotonic instants around their imports,
# the CPU time of the thread that ran them, and (ours) the wall and CPU time of the
# client's own import, after numpy and zmq.
OURS = """\
import time
t0, c0 = time.monotonic(), time.thread_time()
import numpy, zmq  # (what the client imports first: its own share is timed apart)
tm, cm = time.monotonic(), time.thread_time()
from melissa_trainer.client import Client
t1, c1 = time.monotonic(), time.thread_time()
import sys
import numpy as np
n = int(sys.argv[1])
u = np.arange(n, dtype=np.float32)
with Client({"u": ((n,), "float32")}) as client:
    client.send(0, u=u)
print(t0, t1, c1 - c0, t1 - tm, c1 - cm)
"""

BASELINE = """\
import time
t0, c0 = time.monotonic(), time.thread_time()
import numpy, zmq
t1, c1 = time.monotonic(), time.thread_time()
import os
import sys
n = int(sys.argv[1])
u = numpy.arange(n, dtype=numpy.float32)
context = zmq.Context()
sock = context.socket(zmq.PUSH)
sock.connect(os.environ["BENCH_ENDPOINT"])
sock.send(u)
sock.close(linger=-1)
context.term()
print(t0, t1, c1 - c0, 0, 0)
"""


class Launch:
    """One launch's instants (monotonic seconds): its start, the child's import start
    and end, the first step's arrival here; the imports' CPU time; the client's own
    import, wall and CPU (see the children's scripts)."""

    def __init__(self, start: float, printed: str, arrived: float) -> None:
        self.start, self.arrived = start, arrived
        t0, t1, cpu, own, own_cpu = (float(x) for x in printed.split())
        self.import_start, self.import_end = t0, t1
        self.import_cpu_ms = cpu * 1e3
        self.own_ms, self.own_cpu_ms = own * 1e3, own_cpu * 1e3  # (0 for the baseline)

    @property
    def total_ms(self) -> float:
        return (self.arrived - self.start) * 1e3

    @property
    def import_ms(self) -> float:
        return (self.import_end - self.import_start) * 1e3

    @property
    def send_ms(self) -> float:
        return (self.arrived - self.import_end) * 1e3


def _receive(pull: zmq.Socket, proc: subprocess.Popen[str], deadline: float) -> list[zmq.Frame]:
    """The next message on `pull`, failing if the child dies or time runs out first."""
    while not pull.poll(50):
        # (a message sent just before the child exited may still be on its way here)
        if proc.poll() is not None and not pull.poll(5000):
            raise RuntimeError(f"the child exited ({proc.returncode}) before sending")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no message within {TIMEOUT} s")
    return pull.recv_multipart(copy=False)


def _expect_step0(message: list[zmq.Frame], expected: bytes) -> None:
    """Check that `message` is the DATA of time step 0 carrying `expected`."""
    frames = [f.buffer for f in message]
    data = protocol.decode(frames[0], frames[1] if len(frames) > 1 else None)
    if not isinstance(data, protocol.Data) or data.time_step != 0:
        raise RuntimeError(f"expected the DATA of time step 0, got {data!r}"[:300])
    if bytes(data.payload) != expected:
        raise RuntimeError("the first step's payload differs from what was sent")


def launch(
    ours: bool, pull: zmq.Socket, env: dict[str, str], cwd: str, elements: int, expected: bytes
) -> Launch:
    """Launch one child of an arm in `cwd` and time it (see the module docstring)."""
    script = OURS if ours else BASELINE
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(elements)],
        env=env,
        cwd=cwd,  # (`python -c` puts its directory first on the path: not a checkout's)
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = start + TIMEOUT
        message = _receive(pull, proc, deadline)
        if ours:  # (the HELLO is checked once the clock has stopped)
            first, message = message, _receive(pull, proc, deadline)
            arrived = time.monotonic()
            hello = protocol.decode(first[0].buffer)
            if not isinstance(hello, protocol.Hello) or hello.simulation_id != SIMULATION_ID:
                raise RuntimeError(f"expected the HELLO first, got {hello!r}"[:300])
            _expect_step0(message, expected)
            bye = protocol.decode(_receive(pull, proc, deadline)[0].buffer)
            if not isinstance(bye, protocol.Bye) or bye.steps_sent != 1:
                raise RuntimeError(f"expected the BYE of 1 step, got {bye!r}")
        else:
            arrived = time.monotonic()
            if len(message) != 1 or message[0].bytes != expected:
                raise RuntimeError("the baseline's message differs from what was sent")
        out, err = proc.communicate(timeout=TIMEOUT)
        if proc.returncode != 0:
            raise RuntimeError(f"the child failed ({proc.returncode}): {err[-2000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return Launch(start, out, arrived)


def _row(case: str, ours: list[float], baseline: list[float], target: float | None) -> dict:
    a, b = statistics.median(ours), statistics.median(baseline)
    return {"case": case, "ours": round(a, 3), "baseline": round(b, 3), "unit": "ms",
            "ratio": round(b / a, 3), "target": target}  # fmt: skip


def measure(
    launches: int, nbytes: int, pycache: Path
) -> tuple[list[dict[str, Any]], dict[str, list[Launch]]]:
    """Warm up, then `launches` launches of each arm, alternating; the rows and the runs."""
    elements = nbytes // 4
    expected = np.arange(elements, dtype=np.float32).tobytes()
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    runs: dict[str, list[Launch]] = {"ours": [], "baseline": []}
    try:
        endpoint = f"tcp://127.0.0.1:{pull.bind_to_random_port('tcp://127.0.0.1')}"
        with tempfile.TemporaryDirectory(prefix="client_startup_") as tmp:
            write_rendezvous(Path(tmp, "rendezvous"), 0, 1, endpoint)
            env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_TRAINER_")}
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            path = [str(LIBRARY), *filter(None, [os.environ.get("PYTHONPATH")])]
            env.update(
                PYTHONPATH=os.pathsep.join(path),
                PYTHONPYCACHEPREFIX=str(pycache),
                BENCH_ENDPOINT=endpoint,
                MELISSA_TRAINER_RENDEZVOUS=str(Path(tmp, "rendezvous")),
                MELISSA_TRAINER_SIMULATION_ID=str(SIMULATION_ID),
                MELISSA_TRAINER_PARAMETERS=json.dumps({"x": 0.5, "y": 2.0}),
                MELISSA_TRAINER_ATTEMPT="0",  # the first launch's, as the launcher sets it
            )
            for ours in (True, False):  # warm-up: bytecode and page cache
                launch(ours, pull, env, tmp, elements, expected)
            for _ in range(launches):
                runs["ours"].append(launch(True, pull, env, tmp, elements, expected))
                runs["baseline"].append(launch(False, pull, env, tmp, elements, expected))
    finally:
        pull.close()
        context.term()
    a, b = runs["ours"], runs["baseline"]
    size = f"{nbytes / 1024:g} KiB" if nbytes < 1 << 20 else f"{nbytes / (1 << 20):g} MiB"
    rows = [
        _row(
            f"start-up to first sent step ({size}): bare numpy+zmq / ours",
            [r.total_ms for r in a], [r.total_ms for r in b], TARGET,
        ),
        _row(
            "import: `import numpy, zmq` / the client",
            [r.import_ms for r in a], [r.import_ms for r in b], None,
        ),
        _row(
            "import, CPU time: `import numpy, zmq` / the client",
            [r.import_cpu_ms for r in a], [r.import_cpu_ms for r in b], None,
        ),
        _row(
            f"connect + first send ({size}) to its arrival",
            [r.send_ms for r in a], [r.send_ms for r in b], None,
        ),
    ]  # fmt: skip
    return rows, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="5 launches of each arm")
    parser.add_argument("--launches", type=int, default=None, help="of each arm (20)")
    parser.add_argument("--bytes", type=int, default=1 << 20, help="the field's size (1 MiB)")
    parser.add_argument(
        "--pycache", type=Path, default=Path(tempfile.gettempdir(), "client_startup_pycache"),
        help="the children's PYTHONPYCACHEPREFIX",
    )  # fmt: skip
    opts = parser.parse_args()
    launches = opts.launches or (5 if opts.quick else 20)
    if launches < 1 or opts.bytes < 4:
        parser.error("--launches must be >= 1 and --bytes >= 4")
    rows, runs = measure(launches, opts.bytes, opts.pycache)
    title = f"{launches} launches of each arm, interleaved; medians; ratio = baseline / ours"
    start = [(r.import_start - r.start) * 1e3 for r in runs["ours"] + runs["baseline"]]
    own = statistics.median(r.own_ms for r in runs["ours"])
    own_cpu = statistics.median(r.own_cpu_ms for r in runs["ours"])
    notes = [
        f"interpreter start (both arms, before the imports): {statistics.median(start):.1f} ms",
        f"the client's own import, after numpy and zmq: {own:.1f} ms ({own_cpu:.1f} ms CPU)",
        f"library measured: {LIBRARY}",
    ]
    finish(rows, title, 52, as_json=opts.json, notes=notes, table_too=True)


if __name__ == "__main__":
    main()
