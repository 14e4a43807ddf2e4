"""What the client's usual `send` costs its thread, this tree's package against another
revision's (`--base`): did a change to the client slow the send that does not block?

Written for `send_wait` (a send blocked on a trainer that is gone raises): the blocking
calls of a send are bounded by a slice (SNDTIMEO, set once when the socket is made; a
tracker's wait) and only a call that ran out of its slice pays for the rest. This
checks that the send whose queue is not full costs what it did.

Each arm runs in a process of its own, with the package of its version first on
``sys.path`` (the base: ``git archive`` of `--base` into a temporary directory): one
`Client` sends `--messages` steps (after 50 unmeasured) of a float32 field "u" to a
PULL process that receives and discards them: 1 KB (batched: the fast small path),
1 MiB (without a copy, ``array_reuse="immediate"``: the fast large path) and 16 B with
batching off (``batch_bytes=0``: each step its own message, copied by ZeroMQ, the path
of `marks`, whose marks tiny messages should not pay for). The clock is
the sending thread's CPU time (`time.thread_time`: not ZeroMQ's I/O thread, not the
waits for the receiver), per send. Arms alternate (base, ours; ours, base; ...),
`--rounds` each; medians; ratio = base / ours (higher is better; 1: no change).

    python benchmarks/client_send.py                     # about 30 s
    python benchmarks/client_send.py --base b2e12b3 --json   # {"rows": [...]}
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from discard_sink import discard_sink  # noqa: E402
from report import add_flags, finish  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: the client before `send_wait` (its sends blocked without a slice)
DEFAULT_BASE = "b2e12b3"

#: run with the arm's root as the working directory: ``-c`` puts it first on sys.path
MEASURE = r"""
import json, sys, time
import numpy as np
from melissa_trainer.client import Client, ClientTuning
endpoint, messages = sys.argv[1], int(sys.argv[2])
out = {"package": __import__("melissa_trainer").__file__}
for case, elements, batch in (("1 KB", 256, None), ("1 MiB", 1 << 18, None),
                              ("16 B unbatched", 4, 0)):
    u = np.ones(elements, np.float32)
    more = {} if batch is None else {"batch_bytes": batch}
    with Client({"u": ((elements,), "float32")}, None, 1, [endpoint],
                tuning=ClientTuning(close_timeout=60, **more)) as c:
        for t in range(50):
            c.send(t, u=u)
        start = time.thread_time()
        for t in range(50, 50 + messages):
            c.send(t, u=u)
        out[case] = (time.thread_time() - start) / messages * 1e6
print(json.dumps(out))
"""


def measure(root: Path, endpoint: str, messages: int) -> dict[str, Any]:
    """One arm's run: microseconds of the sending thread's CPU per send, per case."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, endpoint, str(messages)],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert result["package"].startswith(str(root)), (result["package"], root)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser)
    parser.add_argument("--base", default=DEFAULT_BASE, help="git revision of the baseline")
    parser.add_argument("--rounds", type=int, default=5, help="of each arm, alternating")
    parser.add_argument("--messages", type=int, default=2000, help="sends per case and round")
    opts = parser.parse_args()
    if opts.rounds < 1 or opts.messages < 1:
        parser.error("--rounds and --messages must be >= 1")
    runs: dict[str, dict[str, list[float]]] = {"ours": {}, "base": {}}
    with (
        discard_sink() as endpoint,
        tempfile.TemporaryDirectory(prefix="client_send_base_") as base_root,
    ):
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", opts.base, "melissa_trainer"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", base_root], input=archive, check=True)
        roots = {"ours": ROOT, "base": Path(base_root)}
        for r in range(opts.rounds):
            order = ("base", "ours") if r % 2 == 0 else ("ours", "base")
            for arm in order:
                for case, us in measure(roots[arm], endpoint, opts.messages).items():
                    if case != "package":
                        runs[arm].setdefault(case, []).append(us)
    rows = []
    for case in runs["ours"]:
        ours, base = statistics.median(runs["ours"][case]), statistics.median(runs["base"][case])
        rows.append(
            {
                "case": f"sender CPU per Client.send ({case} float32): ours vs {opts.base}",
                "ours": ours,
                "baseline": base,
                "unit": "us",
                "ratio": base / ours,
                "target": None,
            }
        )
    title = f"{opts.rounds} rounds of {opts.messages} sends per case and arm, interleaved; medians"
    notes = [
        "every run: " + json.dumps({arm: runs[arm] for arm in runs}),
        "a busy machine measures what else it runs too: compare the ratio, not the figures",
    ]
    finish(rows, title, 60, as_json=opts.json, notes=notes, table_too=True)


if __name__ == "__main__":
    main()
