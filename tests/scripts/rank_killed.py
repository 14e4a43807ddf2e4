"""Run on two ranks by tests/trainer/test_rank_killed_said.py: rank VICTIM SIGKILLs
itself (as ``kill -9`` or the OOM killer would) in its hook's ``on_save`` of the first
checkpoint, ``checkpoint-4``: once that checkpoint is complete, before any other step.
The other rank trains on and finds it gone at its next collective.

With ORDER ``term-first``, the victim first SIGTERMs the other rank (its sibling under
the launcher) and waits until that rank's log says the signal was taken ("... received:
stopping at the next stop synchronisation ..."), then SIGKILLs itself: the order in
which a loaded machine may deliver the launcher's own SIGTERM (sent as it sees the
victim exit) before the survivor's collective fails (CI, 2026-12-07).

Each rank's stderr goes to ``OUT/stderr-<rank>.txt`` (fd 2 itself: its log lines, and
any traceback Python prints, whatever prints them), and the exception that ends a rank,
its class and exit status, to ``OUT/exit-<rank>.txt``; "training ended" is printed
only if `train()` returned.

    python rank_killed.py OUT VICTIM [kill|term-first]
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402

OUT = Path(sys.argv[1])
VICTIM = int(sys.argv[2])
ORDER = sys.argv[3] if len(sys.argv) > 3 else "kill"
RANK = int(os.environ.get("RANK", "0"))
TAKEN = "received: stopping at the next stop synchronisation"


def sibling() -> int:
    """The other rank's pid: the process of this script whose parent is this one's."""
    parent = os.getppid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:  # (a process that ended meanwhile)
            continue
        pid = int(stat.parent.name)
        if int(fields[1]) == parent and pid != os.getpid() and b"rank_killed.py" in cmdline:
            return pid
    raise RuntimeError("the other rank's process was not found")


def term_the_other_first() -> None:
    """SIGTERM the other rank, then wait (bounded) until its log says it took it."""
    os.kill(sibling(), signal.SIGTERM)
    log = OUT / f"stderr-{1 - RANK}.txt"
    deadline = time.monotonic() + 120
    while TAKEN not in log.read_text():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the other rank never said it took the SIGTERM: {log}")
        time.sleep(0.02)  # (polling the event: its log line)


class KillAtFirstSave(Hook):
    def on_save(self, trainer: Any, state: Any, control: Any, path: str) -> None:
        if RANK == VICTIM:
            if ORDER == "term-first":
                term_the_other_first()
            os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    args = TrainingArguments(
        output_dir=str(OUT), batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, report_to="none", disable_progress_bar=True, save_steps=4,
        max_steps=400,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(4000, seed=rank)),
        process_sample=xy, hooks=[KillAtFirstSave()],
    )  # fmt: skip
    trainer.train()
    print("training ended", flush=True)


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / f"stderr-{RANK}.txt").open("w") as err:
        os.dup2(err.fileno(), 2)  # (Python's traceback at exit goes there too)
    try:
        main()
    except BaseException as exc:
        said = f"{type(exc).__name__} {getattr(exc, 'code', 1)}\n"
        (OUT / f"exit-{RANK}.txt").write_text(said)
        raise
