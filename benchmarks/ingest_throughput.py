"""`ingest.py`'s throughput rows: for each field size and number of clients, ours
(`ingest_arms.run_ours`, in each ``array_reuse`` mode above 64 KB) and the raw
baseline (`ingest_arms.run_raw`) alternate round by round (A B A B); medians. Each case
gives its msgs/s (with the issue's target) and GB/s rows, the receiving threads' CPU per
message, the receiving process's minor page faults per message and, above 64 KB, ours
against raw given the same malloc thresholds (the like-for-like row)."""

from __future__ import annotations

import statistics
from typing import Any

from ingest_arms import FAULTS, INLINE_MAX, KB, MB, _wire_bytes, run_ours, run_raw

SIZES = [(KB, "1 KB"), (64 * KB, "64 KB"), (MB, "1 MB"), (8 * MB, "8 MB")]
TARGETS = {KB: 0.5, MB: 0.85}


def ingest_rows(
    rounds: int,
    quick: bool,
    sizes: list[str] | None = None,
    clients_of: tuple[int, ...] = (1, 4),
    reuse: list[str] | None = None,
    nonfinite: str = "refuse",
) -> list[dict[str, Any]]:
    """The throughput rows of the sizes labelled `sizes` (all by default; "1 KB" may be
    written "1KB") with each number of clients of `clients_of`, above 64 KB in the
    `array_reuse` modes `reuse` (all three by default), the receiver's policy for
    non-finite values `nonfinite`."""
    counts = {KB: 800_000, 64 * KB: 20_000, MB: 3000, 8 * MB: 400}  # steady state
    if quick:
        counts = {k: max(v // 5, 40) for k, v in counts.items()}
    rows = []
    wanted = None if sizes is None else {x.replace(" ", "") for x in sizes}
    for nbytes, label in SIZES:
        if wanted is not None and label.replace(" ", "") not in wanted:
            continue
        # above INLINE_MAX arrays leave without a copy: each array_reuse mode
        every = ["immediate", "next_send", "never"]
        modes = (reuse or every) if nbytes > INLINE_MAX else ["immediate"]
        for clients in clients_of:
            n = counts[nbytes]
            ours: dict[str, list[float]] = {m: [] for m in modes}
            ours_cpu: dict[str, list[float]] = {m: [] for m in modes}
            ours_faults: dict[str, list[float]] = {m: [] for m in modes}
            base, base_cpu, base_faults, recycled = [], [], [], []
            for _ in range(rounds):
                for mode in modes:
                    seconds, cpu = run_ours(nbytes, clients, n, mode, nonfinite)
                    ours[mode].append(seconds)
                    ours_cpu[mode].append(cpu)
                    ours_faults[mode].append(FAULTS[-1])
                seconds, cpu = run_raw(nbytes, clients, n)
                base.append(seconds)
                base_cpu.append(cpu)
                base_faults.append(FAULTS[-1])
                if nbytes > INLINE_MAX:  # frames of their own: raw with ours' thresholds
                    recycled.append(run_raw(nbytes, clients, n, recycle=True)[0])
            t_base, cpu_base = statistics.median(base), statistics.median(base_cpu)
            for mode in modes:
                t_ours, cpu_ours = statistics.median(ours[mode]), statistics.median(ours_cpu[mode])
                case = f"{label} x{clients} client{'s' if clients > 1 else ''}"
                case += f", reuse={mode}" if nbytes > INLINE_MAX else ""
                case += "" if nonfinite == "refuse" else f", nonfinite={nonfinite}"
                rows += _throughput_rows(case, nbytes, n / t_ours, n / t_base)
                rows.append(
                    {  # what a message costs the threads that receive it (not ZeroMQ's)
                        "case": f"{case} (CPU us/msg, receiving threads)",
                        "ours": round(cpu_ours / n * 1e6, 2),
                        "baseline": round(cpu_base / n * 1e6, 2),
                        "unit": "us/msg",
                        "ratio": round(cpu_base / cpu_ours, 3),
                        "target": None,
                    }
                )
                rows.append(faults_row(case, ours_faults[mode], base_faults))
                if recycled:  # like for like: both receivers recycle their frames
                    t_same = statistics.median(recycled)
                    rows.append(
                        {
                            "case": f"{case} (msgs/s, raw with the same malloc thresholds)",
                            "ours": round(n / t_ours, 1),
                            "baseline": round(n / t_same, 1),
                            "unit": "msgs/s",
                            "ratio": round(t_same / t_ours, 3),
                            "target": None,
                        }
                    )
    return rows


def faults_row(case: str, ours: list[float], base: list[float]) -> dict[str, Any]:
    """The minor page faults per message of the receiving process (medians): a frame's
    memory faulted in again for each message shows here (256 per MiB) and not in the
    CPU row. Ratio (baseline + 1) / (ours + 1): 0 faults are no division by zero."""
    a, b = statistics.median(ours), statistics.median(base)
    return {
        "case": f"{case} (minor page faults/msg, receiving process)",
        "ours": round(a, 2),
        "baseline": round(b, 2),
        "unit": "faults/msg",
        "ratio": round((b + 1) / (a + 1), 3),
        "target": None,
    }


def _throughput_rows(case: str, nbytes: int, msgs_o: float, msgs_b: float) -> list[dict[str, Any]]:
    """The msgs/s row (with the issue's target) and the GB/s row of one case."""
    gb = _wire_bytes(nbytes) / 1e9
    ratio = round(msgs_o / msgs_b, 3)
    return [
        {
            "case": f"{case} (msgs/s)",
            "ours": round(msgs_o, 1),
            "baseline": round(msgs_b, 1),
            "unit": "msgs/s",
            "ratio": ratio,
            "target": TARGETS.get(nbytes),
        },
        {
            "case": f"{case} (GB/s)",
            "ours": round(msgs_o * gb, 3),
            "baseline": round(msgs_b * gb, 3),
            "unit": "GB/s",
            "ratio": ratio,
            "target": None,
        },
    ]
