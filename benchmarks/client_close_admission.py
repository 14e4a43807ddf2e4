"""The cost, at `Client.close`, of asking the trainer whether it has the simulation's
BYE (`melissa_trainer.client.confirm`: one RECEIPT_QUERY per receiver on its follow
socket, answered once the BYE is ingested, docs/protocol.md section 17b), which a
client in external mode pays once (its endpoints read from a rendezvous, not started
by the launcher: a launched simulation does not ask).

Each close is a `Client` reading the rendezvous of a real in-process `Receiver` (one
rank, a follow socket), sending `--steps` steps of a 4 KB float32 field, then `close`;
the clock times `close` alone. The variants, interleaved (A B C D E F G, A B ...),
each round new simulation ids:

* receipt: external mode, as shipped (the close returns once the BYE is confirmed);
* admission: external mode, the confirmation replaced by the ADMISSION question of
  section 17a (what `close` did before the receipt: it returned once the BYE left);
* none: external mode, no question at all (what `close` did before either);
* launched, launched-none: ``MELISSA_TRAINER_ATTEMPT`` set (a launched simulation, no
  replay window), as shipped and with the confirmation removed: the same, as a
  launched close asks nothing;
* worker, worker-none: the simulation a worker was given (`worker_given.given_attempt`, no
  replay window, the worker's one context shared by its clients), as shipped (its
  close asks for the receipt) and with the confirmation removed (what a worker's
  close did before: it returned once the BYE left ZeroMQ's queue).

Medians compared, in milliseconds; ratio = baseline / ours (higher is better; no
target: the figure is what a close costs). `--json` prints ``{"rows": [...]}``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

import numpy as np
import zmq

import melissa_trainer.client.confirm as confirm
import melissa_trainer.client.worker as worker
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client
from melissa_trainer.client.admission import check_admission
from melissa_trainer.common.json_output import to_json
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig


def close_ms(sid: int, steps: int, context: zmq.Context | None = None) -> float:
    u = np.ones(1024, dtype="<f4")
    client = Client({"u": (u.shape, "<f4")}, {}, simulation_id=sid, context=context)
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
    shipped = confirm.confirm_close

    def none(*_: Any, **__: Any) -> None:
        return None

    def admission(client: Any, rendezvous: str, *_: Any) -> None:
        check_admission(rendezvous, client.endpoints, client.simulation_id, client.rank,
                        client.admission_rejected)  # fmt: skip

    variants = {
        "receipt": (shipped, False),
        "admission": (admission, False),
        "none": (none, False),
        "launched": (shipped, True),
        "launched-none": (none, True),
        "worker": (shipped, None),
        "worker-none": (none, None),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as tmp:
        buffer = FIFOBuffer(len(variants) * args.rounds * args.steps + 10)
        receiver = Receiver(buffer, 0, 1, ReceiverConfig(rendezvous_dir=tmp, run_id="bench"))
        receiver.start()
        os.environ["MELISSA_TRAINER_RENDEZVOUS"] = tmp
        for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID"):
            os.environ.pop(name, None)
        sid = 0
        shared = zmq.Context()  # (a worker's, for its life: `serve_simulations`)
        try:
            for _ in range(args.rounds):
                for name, (check, launched) in variants.items():
                    confirm.confirm_close = check  # type: ignore[assignment]
                    if launched:
                        os.environ["MELISSA_TRAINER_ATTEMPT"] = "0"
                    else:
                        os.environ.pop("MELISSA_TRAINER_ATTEMPT", None)
                    # (None: worker mode, the simulation its worker was given)
                    worker._given = (sid, 0) if launched is None else None
                    context = shared if launched is None else None
                    times[name].append(close_ms(sid, args.steps, context))
                    sid += 1
        finally:
            confirm.confirm_close = shipped  # type: ignore[assignment]
            os.environ.pop("MELISSA_TRAINER_ATTEMPT", None)
            worker._given = None
            receiver.stop()
            shared.term()
    m = {name: statistics.median(values) for name, values in times.items()}

    def row(case: str, ours: str, baseline: str) -> dict[str, Any]:
        o, b = m[ours], m[baseline]
        return {"case": case, "ours": round(o, 3), "baseline": round(b, 3), "unit": "ms",
                "ratio": round(b / o, 3), "target": None}  # fmt: skip

    rows = [
        row("Client.close, external mode, one receiver: the BYE receipt vs the ADMISSION "
            "question (the close before the receipt)", "receipt", "admission"),
        row("Client.close, external mode, one receiver: the BYE receipt vs no question",
            "receipt", "none"),
        row("Client.close, launched (MELISSA_TRAINER_ATTEMPT set): as shipped vs the "
            "confirmation removed (a launched close asks nothing)", "launched", "launched-none"),
        row("Client.close, worker mode (the simulation its worker was given, one context): "
            "the BYE receipt vs none (the close before it)", "worker", "worker-none"),
    ]  # fmt: skip
    if args.json:
        print(to_json({"rows": rows}))
    else:
        for r in rows:
            print(f"{r['case']}: ours {r['ours']} ms, baseline {r['baseline']} ms, "
                  f"ratio {r['ratio']} (median of {args.rounds})")  # fmt: skip


if __name__ == "__main__":
    main()
