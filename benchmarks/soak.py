"""A long run, as a user runs one: the heat example's study of many short simulations,
its process tree sampled every few seconds, against the same trainer left idle.

Sampled (from ``/proc``; Linux only): the trainer's RSS, open descriptors by kind
(sockets: the receiver's ZeroMQ sockets, its monitor and its I/O threads' eventfds),
threads, CPU seconds; its children (running solvers, zombies: state ``Z``); the
entries of ``/dev/shm``. The study's progress (simulations finished) is rank 0's
``{output_dir}/rendezvous/study_progress.json`` (`study.progress`).

Two arms, in turn:

* study: ``examples/heat_pde/train.py`` with SIMULATIONS simulations of 5 steps on an
  8x8 grid, ``--job_limit`` at a time (local backend), a buffer of 200 samples, until
  the study ends;
* idle (the baseline): the same trainer with ``--external`` and no simulation started,
  for IDLE seconds, then SIGINT (it writes its checkpoint and exits).

The baseline is what the trainer grows by with time alone (its logging, the
allocator, the receiver's idle polling), with no simulation: the study's growth above
it is what simulations cost. Rows (``--json``: ``{"rows": [...]}``): for RSS, the
growth per 1,000 simulations over the study's second half (after warm-up: torch's and
the first batches' allocations) against the idle arm's growth over the same wall time;
for descriptors, sockets, threads and children, the largest minus the smallest count
over the same windows (a leak per simulation or per reconnect shows as a count that
keeps rising); the idle arm's CPU share (a busy-wait shows there); zombies seen and
``/dev/shm`` entries left. Then, for each arm, whether its process exited 0 and its
lock file says ``ended``.

    python benchmarks/soak.py                    # 2,000 simulations; about 25 min on 2 cores
    python benchmarks/soak.py --quick --json     # 200 simulations, 60 s idle
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, print_json, print_rows  # noqa: E402

from melissa_trainer.common.json_output import to_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "examples" / "heat_pde" / "train.py"
# (a buffer of 200 samples, full after 40 simulations: the second half measures what
# each simulation costs, not the buffer's fill, bounded by its size)
SMALL = ["--time_steps", "5", "--grid_size", "8", "--num_validation", "4", "--plot", "false",
         "--buffer_size", "200", "--watermark", "100"]  # fmt: skip


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):  # (the thread ended meanwhile)
                out += map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split())
    except OSError:
        pass
    return out


def sample(pid: int) -> dict[str, Any] | None:
    """One sample of process `pid` and its children, or None once it has ended."""
    try:
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        links = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):  # (closed between the listing and the read)
                links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    except (OSError, ValueError):
        return None
    kids = _children(pid)
    states = []
    for kid in kids:
        with contextlib.suppress(OSError):  # (ended and reaped meanwhile)
            states.append(Path(f"/proc/{kid}/stat").read_text().rsplit(")", 1)[1].split()[0])
    return {
        "rss_kb": int(status["VmRSS"].split()[0]),
        "threads": int(status["Threads"]),
        "fds": len(links),
        "sockets": sum(link.startswith("socket:") for link in links),
        "eventfds": sum("eventfd" in link for link in links),
        "cpu_s": (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK"),
        "children": len(kids),
        "zombies": states.count("Z"),
        "shm": len(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else 0,
    }


def finished(out: Path) -> int | None:
    """Rank 0's count of finished simulations, None before its first write."""
    try:
        return int(json.loads((out / "rendezvous" / "study_progress.json").read_text())["finished"])
    except (OSError, ValueError, KeyError):  # (not written yet, or mid-replace)
        return None


def run_arm(args: list[str], out: Path, period: float, idle: float | None) -> list[dict[str, Any]]:
    """Run train.py with `args` in `out`, sampling every `period` s until it exits (idle:
    SIGINT after `idle` s). Returns the samples (``t``, ``finished`` added), the last
    one ``{"exit": code, "lock": state}``."""
    cmd = [sys.executable, str(TRAIN), "--output_dir", str(out), *SMALL, *args]
    log = open(out.parent / f"{out.name}.log", "w")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    samples: list[dict[str, Any]] = []
    start = time.monotonic()
    stop = threading.Event()
    try:
        while proc.poll() is None:
            row = sample(proc.pid)
            if row is not None:
                row.update(t=round(time.monotonic() - start, 1), finished=finished(out))
                row["stopping"] = stop.is_set()  # (after the idle arm's SIGINT: its end)
                samples.append(row)
            if idle is not None and time.monotonic() - start >= idle and not stop.is_set():
                stop.set()
                proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):  # (the next sample is due)
                proc.wait(period)
    finally:
        if proc.poll() is None:  # (interrupted: leave nothing running)
            proc.kill()
            proc.wait()
        log.close()
    try:
        lock = json.loads((out / "trainer.lock").read_text())["state"]
    except (OSError, ValueError, KeyError):
        lock = None
    samples.append({"exit": proc.returncode, "lock": lock})
    return samples


def window(samples: list[dict[str, Any]], t0: float, t1: float) -> list[dict[str, Any]]:
    return [s for s in samples if "t" in s and t0 <= s["t"] <= t1]


def spread(rows: list[dict[str, Any]], key: str) -> float:
    values = [r[key] for r in rows]
    return float(max(values) - min(values)) if values else float("nan")


def summarise(study: list[dict[str, Any]], idle: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows: the study's second half (by simulations finished, to its last one)
    against the idle arm's last samples over as many seconds (or all, if it ran
    less), before its SIGINT."""
    # (the windows leave out the start-up, before the receiver's sockets exist, and
    # the end: the study's last validation, save and exit; the idle arm's SIGINT)
    done = [s for s in study if s.get("finished") is not None and s["sockets"]]
    total = done[-1]["finished"]
    half = next(s for s in done if s["finished"] >= total / 2)
    end = next(s for s in done if s["finished"] == total)
    late = window(done, half["t"], end["t"])
    sims = late[-1]["finished"] - late[0]["finished"]
    span = late[-1]["t"] - late[0]["t"]
    up = [s for s in idle if "t" in s and s["sockets"] and not s["stopping"]]
    if not up:  # (an --idle shorter than the trainer's start-up)
        raise SystemExit(
            "soak: the idle arm took no sample with its sockets open: give --idle more "
            "seconds than the trainer's start-up (60 or more)"
        )
    base = window(up, up[-1]["t"] - span, up[-1]["t"])  # (its last `span` s, or all)
    base_span = base[-1]["t"] - base[0]["t"] if len(base) > 1 else float("nan")
    per_k = 1000 / sims if sims else float("nan")
    # the idle arm's growth over as many seconds as the study's 1,000 simulations took
    idle_per_k = (
        (base[-1]["rss_kb"] - base[0]["rss_kb"]) / base_span * (span * per_k)
        if base_span > 0
        else float("nan")
    )
    rows = [
        {
            "case": "RSS growth per 1,000 simulations",
            "ours": (late[-1]["rss_kb"] - late[0]["rss_kb"]) * per_k / 1024,
            "baseline": idle_per_k / 1024,
            "unit": "MB",
            "ratio": None,
            "target": None,
        }
    ]
    for key in ("fds", "sockets", "eventfds", "threads"):
        rows.append(
            {
                "case": f"{key}: max - min (study 2nd half / idle)",
                "ours": spread(late, key),
                "baseline": spread(base, key),
                "unit": "count",
                "ratio": None,
                "target": 0,
            }
        )
    cpu = (base[-1]["cpu_s"] - base[0]["cpu_s"]) / base_span if base_span > 0 else float("nan")
    rows += [
        {
            "case": "children: max (study / idle)",
            "ours": max(s["children"] for s in late),
            "baseline": max(s["children"] for s in base),
            "unit": "count",
            "ratio": None,
            "target": None,
        },
        {
            "case": "zombies seen (study / idle)",
            "ours": max(s["zombies"] for s in study if "t" in s),
            "baseline": max(s["zombies"] for s in idle if "t" in s),
            "unit": "count",
            "ratio": None,
            "target": 0,
        },
        {
            "case": "idle trainer CPU share (study: same window)",
            "ours": (late[-1]["cpu_s"] - late[0]["cpu_s"]) / span if span else float("nan"),
            "baseline": cpu,
            "unit": "core",
            "ratio": None,
            "target": None,
        },
    ]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulations", type=int, default=2000)
    parser.add_argument("--job_limit", type=int, default=2)
    parser.add_argument("--idle", type=float, default=300.0, help="idle arm's seconds")
    parser.add_argument("--period", type=float, default=3.0, help="seconds between samples")
    parser.add_argument("--samples", type=Path, help="also write every sample here (JSON lines)")
    add_flags(parser, quick="200 simulations, 60 s idle")
    opts = parser.parse_args()
    sims, idle_s = (200, 60.0) if opts.quick else (opts.simulations, opts.idle)
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        shm_before = len(os.listdir("/dev/shm"))
        study = run_arm(
            ["--num_simulations", str(sims), "--job_limit", str(opts.job_limit)],
            Path(tmp) / "study", opts.period, None,
        )  # fmt: skip
        idle = run_arm(
            ["--external", "--num_simulations", "4"], Path(tmp) / "idle", opts.period, idle_s
        )
        shm_left = len(os.listdir("/dev/shm")) - shm_before
    if opts.samples:
        with open(opts.samples, "w") as f:
            for arm, rows in (("study", study), ("idle", idle)):
                for row in rows:
                    f.write(to_json({"arm": arm, **row}) + "\n")
    rows = summarise(study, idle)
    ends = {"study": study[-1], "idle": idle[-1], "shm_left": shm_left, "simulations": sims}
    if opts.json:
        print_json(rows, **ends)
    else:
        print_rows(rows, f"soak: {sims} simulations, job_limit {opts.job_limit}; idle {idle_s:g} s")
        print(to_json(ends))


if __name__ == "__main__":
    main()
