"""The cost, at `Client.close`, of asking the trainer whether it took the simulation
(`melissa_trainer.client.admission`: one ADMISSION_QUERY per receiver on its follow
socket, docs/protocol.md section 17a), which a client in external mode pays once (its
endpoints read from a rendezvous, not started by the launcher: a launched simulation
does not ask).

Ours: a `Client` reading the rendezvous of a real in-process `Receiver` (one rank, a
follow socket), sending `--steps` steps of a 4 KB float32 field, then `close` with the
check. Baseline: the same, with the check replaced by a no-op (what `close` did
before). The clock times `close` alone. A and B alternate (A B A B ...), each round a
new simulation id; medians compared, in milliseconds; ratio = baseline / ours (higher
is better; no target: the figure is what a close costs). `--json` prints
``{"rows": [...]}``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

import numpy as np

import melissa_trainer.client.admission as admission
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client
from melissa_trainer.common.json_output import to_json
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig


def close_ms(sid: int, steps: int) -> float:
    u = np.ones(1024, dtype="<f4")
    client = Client({"u": (u.shape, "<f4")}, {}, simulation_id=sid)
    for t in range(steps):
        client.send(t, u=u)
    start = time.perf_counter()
    client.close()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    check = admission.check_admission

    def skip(*_: Any, **__: Any) -> None:
        return None

    with tempfile.TemporaryDirectory() as tmp:
        buffer = FIFOBuffer(2 * args.rounds * args.steps + 10)
        receiver = Receiver(buffer, 0, 1, ReceiverConfig(rendezvous_dir=tmp, run_id="bench"))
        receiver.start()
        os.environ["MELISSA_TRAINER_RENDEZVOUS"] = tmp
        for name in (
            "MELISSA_TRAINER_ENDPOINTS",
            "MELISSA_TRAINER_RUN_ID",
            "MELISSA_TRAINER_ATTEMPT",
        ):
            os.environ.pop(name, None)
        ours, base = [], []
        try:
            for i in range(args.rounds):
                admission.check_admission = check
                ours.append(close_ms(2 * i, args.steps))
                admission.check_admission = skip
                base.append(close_ms(2 * i + 1, args.steps))
        finally:
            admission.check_admission = check
            receiver.stop()
    o, b = statistics.median(ours), statistics.median(base)
    rows = [{"case": "Client.close, one receiver, with the admission check vs without",
             "ours": round(o, 3), "baseline": round(b, 3), "unit": "ms",
             "ratio": round(b / o, 3), "target": None}]  # fmt: skip
    if args.json:
        print(to_json({"rows": rows}))
    else:
        for r in rows:
            print(f"{r['case']}: ours {r['ours']} ms, baseline {r['baseline']} ms, "
                  f"ratio {r['ratio']} (median of {args.rounds})")  # fmt: skip


if __name__ == "__main__":
    main()
