"""What the client's check for NaN and Inf costs the simulation (issue 28): CPU time of
the sending thread per 1 MiB float32 `Client.send`, with the check and without.

Since issue 28 the client checks every float field before it leaves and sets the
FINITE flag when it passed (docs/protocol.md, section 7b), so that the trainer's
receiver skips its own check. This measures the price on the sender's side: one client
in this process sends `--messages` fields of `--bytes` (1 MiB of float32 by default,
the fast large path, ``array_reuse="immediate"``) to a raw PULL process that receives
and discards them. Arm "check" is the client as it is; arm "no check" is the same
client with the check replaced by one that passes at once (the benchmark patches
`melissa_trainer.client.finite_check.all_finite`: the only difference is the check,
the messages still leave flagged). The clock is the sending thread's CPU time
(`time.thread_time`: not ZeroMQ's I/O thread, not the waits for the receiver).
Arms alternate (A B A B ...), `--rounds` each; medians; ratio = ours / baseline
(no check / check: higher is better, 1 is free). A third row times `all_finite` alone
on the same array (`timeit`, best of 5), the part of the cost the trainer's core no
longer pays.

    python benchmarks/client_finite_check.py            # about 20 s
    python benchmarks/client_finite_check.py --json     # {"rows": [...]}
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
from pathlib import Path
from typing import Any

import numpy as np

from melissa_trainer.client import Client, ClientTuning, finite_check
from melissa_trainer.stream.finite import all_finite

sys.path.insert(0, str(Path(__file__).resolve().parent))
from discard_sink import discard_sink  # noqa: E402
from report import add_flags, finish  # noqa: E402


def _no_check(arr: np.ndarray) -> bool:
    """The "no check" arm's `all_finite`: passes at once."""
    return True


def send_cpu_us(endpoint: str, nbytes: int, messages: int, check: bool) -> float:
    """CPU microseconds of this thread per `Client.send` of `nbytes` of float32, over
    `messages` sends (after 20 unmeasured), the check on or replaced."""
    finite_check.all_finite = all_finite if check else _no_check  # type: ignore[attr-defined]
    try:
        field = np.random.default_rng(0).standard_normal(nbytes // 4).astype(np.float32)
        tuning = ClientTuning(close_timeout=30)
        with Client({"u": ((field.size,), "float32")}, None, 1, [endpoint], tuning=tuning) as c:
            for t in range(20):
                c.send(t, u=field)
            start = time.thread_time()
            for t in range(20, 20 + messages):
                c.send(t, u=field)
            elapsed = time.thread_time() - start
    finally:
        finite_check.all_finite = all_finite  # type: ignore[attr-defined]
    return elapsed / messages * 1e6


def row(case: str, ours: list[float], base: list[float]) -> dict[str, Any]:
    o, b = statistics.median(ours), statistics.median(base)
    return {"case": case, "ours": o, "baseline": b, "unit": "us", "ratio": b / o, "target": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser)
    parser.add_argument("--rounds", type=int, default=7, help="of each arm, alternating")
    parser.add_argument("--messages", type=int, default=300, help="sends per round")
    parser.add_argument("--bytes", type=int, default=1 << 20, help="the field's size")
    opts = parser.parse_args()
    if opts.rounds < 1 or opts.messages < 1 or opts.bytes < 4:
        parser.error("--rounds, --messages must be >= 1 and --bytes >= 4")
    runs: dict[bool, list[float]] = {True: [], False: []}
    with discard_sink(rcvhwm=1000) as endpoint:
        for _ in range(opts.rounds):
            for check in (True, False):
                runs[check].append(send_cpu_us(endpoint, opts.bytes, opts.messages, check))
    field = np.random.default_rng(0).standard_normal(opts.bytes // 4).astype(np.float32)
    alone = min(timeit.repeat(lambda: all_finite(field), number=200, repeat=5)) / 200 * 1e6
    size = f"{opts.bytes / (1 << 20):g} MiB"
    rows = [
        row(f"sender CPU per send ({size} float32): check / no check", runs[True], runs[False]),
        {
            "case": f"all_finite alone ({size} float32)",
            "ours": alone,
            "baseline": alone,
            "unit": "us",
            "ratio": 1.0,
            "target": None,
        },
    ]
    title = f"{opts.rounds} rounds of {opts.messages} sends per arm, interleaved; medians"
    added = statistics.median(runs[True]) - statistics.median(runs[False])
    notes = [
        f"the check adds {added:.1f} us of the sender's CPU per send",
        "rounds (us/send): check " + ", ".join(f"{x:.1f}" for x in runs[True]),
        "               no check " + ", ".join(f"{x:.1f}" for x in runs[False]),
    ]
    finish(rows, title, 52, as_json=opts.json, notes=notes, table_too=True)


if __name__ == "__main__":
    main()
