"""The end-of-run lines of a real two-rank run (gloo on CPU) whose ranks received unequal
shares of the stream (a user trial: "20 per rank" of ranks that took 30 and 11) say
each rank's figure, and the log's stream counters are what the clients sent, counted as
docs/concepts/loop.md says: ``messages`` one per HELLO and BYE at each receiver and per
DATA (a field of a time step), ``connections_lost`` one per client rank and receiver.

The oracle is the clients' side: tests/scripts/stream_client.py prints each time step it
sent, and its routing sends step t to rank ``t % 2`` (HELLO and BYE to both)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from two_ranks import launch_two_ranks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SCRIPTS = Path(__file__).parents[1] / "scripts"
FIELDS = ["--field", "x:<f4:1", "--field", "y:<f4:1"]
#: simulation 9 ends without its BYE (its connection lost at both receivers), then 0
#: sends its even steps (all to rank 0), 1 its odd ones (all to rank 1)
CLIENTS = [
    ["--simulation-id", "9", "--steps", "2", "--no-bye"],
    ["--simulation-id", "0", "--steps", "60", "--stride", "2"],
    ["--simulation-id", "1", "--first-step", "1", "--steps", "23", "--stride", "2"],
]


def run_clients(rendezvous: Path, said: list[str]) -> None:
    """The clients one after the other (each waits for both rendezvous files); what each
    printed goes to `said`."""
    for args in CLIENTS:
        cmd = [sys.executable, str(SCRIPTS / "stream_client.py"), *args, *FIELDS]
        done = subprocess.run(
            [*cmd, "--rendezvous", str(rendezvous)], capture_output=True, text=True, timeout=120
        )
        said.append(done.stdout)


@pytest.mark.e2e
def test_unequal_ranks_are_each_said_and_the_counters_match_what_was_sent(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    said: list[str] = []
    clients = threading.Thread(target=run_clients, args=(out / "rendezvous", said))
    clients.start()
    proc = launch_two_ranks(
        SCRIPTS / "uneven_receivers.py",
        "--output_dir", str(out), "--batch_size", "4", "--buffer", "fifo",
        "--buffer_size", "64", "--watermark", "25", "--report_to", "none",
        "--disable_progress_bar", "--logging_steps", "4",
    )  # fmt: skip
    clients.join(timeout=180)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-5000:]
    assert len(said) == len(CLIENTS) and all(s.endswith("done\n") for s in said), said
    # the oracle: the steps each client printed, routed t % 2
    steps = [[int(w.split()[1]) for w in s.splitlines() if w.startswith("sent ")] for s in said]
    per_rank = [sum(t % 2 == r for s in steps for t in s) for r in range(2)]
    assert per_rank == [31, 12]  # (the clients' arguments say so too: sanity)
    byes = len(CLIENTS) - 1
    messages = 2 * len(CLIENTS) + 2 * byes + len(FIELDS) // 2 * sum(map(len, steps))
    logs = [json.loads((out / f"rank_{r}.json").read_text())["last_log"] for r in range(2)]
    assert logs[0] == logs[1]
    assert logs[0]["buffer_put"] == sum(per_rank) == logs[0]["source_samples_put"]
    assert logs[0]["source_messages"] == messages
    assert logs[0]["source_connections_lost"] == 2  # one client rank, at 2 receivers
    # the end-of-run line and the warning: each rank's figure, no mean said per rank
    each = f"{per_rank[0]} on rank 0 and {per_rank[1]} on rank 1"
    assert f"of {sum(per_rank)} inserted, all ranks: {each}" in output
    assert f"The stream ({sum(per_rank)} samples, {each}) never filled rank 1's buffer" in output
    assert "per rank)" not in output
