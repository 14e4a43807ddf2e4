"""What the wait watch's looks cost the launcher's store when many ranks are held.

A rank held in a collective (a named wait, or a step that does not move) has its wait
watch's thread look every `core.wait_watch.roll_look` (world) s (`ROLL_LOOK`, 0.5, up to
1,024 ranks; then spaced so that all ranks together ask at most `STORE_RATE`, 2,048
times a second) and, each look, ask the launcher's store whether rank 0 left a refusal
mark (`trainer.refusal_mark.read_if_left`: one ``check`` request). When every rank is
held at once (one rank hung, the others in its collective), the store, hosted by the
launch agent of the first node (``accelerate launch``/torchrun's ``TCPStore``), takes
``ranks / roll_look(ranks)`` requests per second. Is that a load it notices?

One store host (a process of its own, as the agent's), then, per case of N held ranks,
interleaved rounds (A B A B): a window with no look (the baseline) and a window with
the looks of N ranks, N / `roll_look` (N) ``check`` requests a second (ours), sent by
`LOADERS` processes over `CONNECTIONS` clients each: fewer connections than ranks,
the same requests. (A torch client's making costs a reverse lookup of the store's
address, and where the DNS loses queries, as on our test machine, every 25th waits 5 s:
4,096 clients took minutes to connect. What the store pays is per request; an idle
connection costs it a descriptor.) In each window the bench's own client times
``check`` requests (the store's answer as any rank sees it: the refusal mark read, a
roll call's ``add``) and the host's CPU time is read from ``/proc`` (Linux only).

Rows, medians over rounds:

* ``check_latency_{N}_held``: a ``check``'s round trip in microseconds with N ranks
  looking (ours) and with none (baseline); ratio = baseline / ours (1: unnoticed),
  target 0.5.
* ``store_cpu_{N}_held``: the store host's CPU, in percent of one core, with N ranks
  looking (ours) against the whole core (baseline, 100); ratio = baseline / ours, the
  headroom, target 10 (a tenth of a core at most).

The JSON line also gives each case's request rate reached (``rates``: requests per
second, against the ``wanted`` N / roll_look(N)).

    python benchmarks/store_traffic.py [--quick] [--json] [--ranks 256 1024 4096]
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

#: processes the looking ranks' requests are spread over, and the clients of each
LOADERS, CONNECTIONS = 2, 16
#: the latency target (baseline / ours) and the headroom target (100% / ours)
LATENCY_TARGET, CPU_TARGET = 0.5, 10.0
#: the key the looks ask for (rank 0's refusal mark is absent while nothing refuses)
KEY = "melissa_trainer/bench/refusal"


def _store(port: int) -> Any:
    from torch.distributed import TCPStore

    return TCPStore("127.0.0.1", port, 1, False, wait_for_workers=False)


def host() -> None:
    """The store's host: print its port, serve until stdin closes."""
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
    print(store.port, flush=True)
    sys.stdin.read()


def load(port: int, ranks: int, period: float) -> None:
    """The looks of `ranks` ranks, each a ``check`` once per `period` s, sent over
    `CONNECTIONS` clients in turn, while on: stdin's ``on``/``off`` lines switch, its
    end stops; each ``off`` prints the requests sent while on and the seconds it was
    on."""
    clients = min(ranks, CONNECTIONS)
    stores = [_store(port) for _ in range(clients)]
    print("ready", flush=True)
    rate = ranks / period
    on, sent, began, i = False, 0, 0.0, 0
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0 if on else None)
        if ready:
            line = sys.stdin.readline().strip()
            if not line:
                return
            if line == "on":
                on, sent, began = True, 0, time.monotonic()
            else:
                on = False
                print(sent, time.monotonic() - began, flush=True)
            continue
        due = began + (sent + 1) / rate  # (the n-th at n / rate: n in n / rate s)
        ahead = due - time.monotonic()
        if ahead > 0:
            time.sleep(min(ahead, 0.01))  # (pacing; short, so that "off" is read soon)
            continue
        stores[i].check([KEY])
        i = (i + 1) % clients
        sent += 1


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"store_traffic: a child ({proc.args}) ended: {proc.wait()}")
    return line.strip()


def _tell(procs: list[subprocess.Popen[str]], what: str) -> None:
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(what + "\n")
        p.stdin.flush()


def window(probe: Any, host_pid: int, seconds: float) -> tuple[float, float]:
    """(median ``check`` round trip in µs, host CPU in % of a core) over `seconds`:
    the probe asks every 5 ms (200 requests a second of its own, in both arms)."""
    cpu0, t0 = _cpu_seconds(host_pid), time.monotonic()
    trips = []
    while time.monotonic() - t0 < seconds:
        start = time.perf_counter()
        probe.check([KEY])
        trips.append((time.perf_counter() - start) * 1e6)
        time.sleep(0.005)
    cpu = (_cpu_seconds(host_pid) - cpu0) / (time.monotonic() - t0) * 100
    return statistics.median(trips), cpu


def case(port: int, host_pid: int, ranks: int, rounds: int, seconds: float) -> dict[str, Any]:
    from melissa_trainer.core.roll_call import roll_look

    period = roll_look(ranks)  # (the library's: spaced beyond STORE_RATE requests/s)
    share = [ranks // LOADERS + (k < ranks % LOADERS) for k in range(LOADERS)]
    loaders = [_spawn("--load", str(port), str(n), str(period)) for n in share if n]
    try:
        for p in loaders:
            _line(p)  # ("ready": every client connected)
        probe = _store(port)
        idle, held, rates = [], [], []
        for _ in range(rounds):
            idle.append(window(probe, host_pid, seconds))
            _tell(loaders, "on")
            held.append(window(probe, host_pid, seconds))
            _tell(loaders, "off")
            done = [_line(p).split() for p in loaders]
            rates.append(sum(int(n) / float(s) for n, s in done))
    finally:
        for p in loaders:
            assert p.stdin is not None
            p.stdin.close()
        for p in loaders:
            p.wait(timeout=60)
    return {
        "ranks": ranks,
        "idle_us": statistics.median(t for t, _ in idle),
        "held_us": statistics.median(t for t, _ in held),
        "idle_cpu": statistics.median(c for _, c in idle),
        "held_cpu": statistics.median(c for _, c in held),
        "rate": statistics.median(rates),
        "wanted": ranks / period,
    }


def rows_of(results: list[dict[str, Any]], seconds: float) -> list[dict[str, Any]]:
    """The rows of `results` (`case`'s), windows of `seconds`."""
    # (the CPU time's resolution, one clock tick over a window, in % of a core: a host
    # that used less is given that, not 0, so that the headroom stays a number)
    tick = 100.0 / (os.sysconf("SC_CLK_TCK") * seconds)
    rows = []
    for r in results:
        n = r["ranks"]
        rows.append({
            "case": f"check_latency_{n}_held", "ours": r["held_us"], "baseline": r["idle_us"],
            "unit": "us", "ratio": r["idle_us"] / r["held_us"], "target": LATENCY_TARGET,
        })  # fmt: skip
        cpu = max(r["held_cpu"], tick)
        rows.append({
            "case": f"store_cpu_{n}_held", "ours": r["held_cpu"], "baseline": 100.0,
            "unit": "% core", "ratio": 100.0 / cpu, "target": CPU_TARGET,
        })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_flags(parser, quick="64 and 512 ranks, 3 rounds of 1 s")
    parser.add_argument("--ranks", type=int, nargs="+", help="held ranks per case")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per window")
    parser.add_argument("--host", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--load", nargs=3, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.host:
        return host()
    if opts.load:
        return load(int(opts.load[0]), int(opts.load[1]), float(opts.load[2]))
    if not Path("/proc/self/stat").exists():
        raise SystemExit("store_traffic: reads the host's CPU time from /proc (Linux only)")
    ranks = opts.ranks or ([64, 512] if opts.quick else [256, 1024, 4096])
    rounds, seconds = (3, 1.0) if opts.quick else (opts.rounds, opts.seconds)
    if min(ranks) < 1 or rounds < 1 or seconds <= 0:
        raise SystemExit("store_traffic: --ranks, --rounds and --seconds must be positive")
    store_host = _spawn("--host")
    try:
        port = int(_line(store_host))
        results = [case(port, store_host.pid, n, rounds, seconds) for n in ranks]
    finally:
        assert store_host.stdin is not None
        store_host.stdin.close()
        store_host.wait(timeout=60)
    notes = [
        f"{r['ranks']} held ranks: {r['rate']:,.0f} requests/s reached of {r['wanted']:,.0f} "
        f"wanted; host {r['idle_cpu']:.1f}% of a core with the probe alone"
        for r in results
    ]
    finish(
        rows_of(results, seconds), "the launcher's store under the wait watch's looks",
        as_json=opts.json, notes=notes,
        rates={str(r["ranks"]): r["rate"] for r in results},
        wanted={str(r["ranks"]): r["wanted"] for r in results},
    )  # fmt: skip


if __name__ == "__main__":
    main()
