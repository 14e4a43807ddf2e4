"""Two ranks that a SIGTERM reaches in their last window while a hook's save request
awaits the ranks' agreement: ``last_window_asked_save.py OUTPUT_DIR [fail]``, under
``accelerate launch --num_processes 2``.

Trains 4 steps (``max_steps=4``, one stop window of 8 steps: the stop synchronisation
before step 1 is the last), ``save_at_end`` off. At step 4 (after that synchronisation)
rank 0's hook sets ``control.should_save`` (kept for the ranks' agreement, performed on
every rank at the end's action point: checkpoint-4), and each rank sends itself SIGTERM
and waits until its handler has said so (a log handler of its own: the line comes from
the handler's thread). With ``fail``, every rank's write of its files raises ``OSError``
(ENOSPC): the end's save fails, `FinalCheckpointSaveError` on every rank. Warnings are
said on stderr as ``rank R WARNING NAME: MESSAGE``. Prints "script end" if `train()`
returns."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tiny_trainer import tiny_arguments, tiny_trainer  # noqa: E402

from melissa_trainer import Hook  # noqa: E402
from melissa_trainer.checkpoint import registry  # noqa: E402


class Said(logging.Handler):
    """Set once a record says `words`."""

    def __init__(self, words: str) -> None:
        super().__init__()
        self.words, self.seen = words, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.words in record.getMessage():
            self.seen.set()


class AskAndSignal(Hook):
    """At step 4: rank 0 asks for a save; every rank SIGTERMs itself and waits for the
    handler's line."""

    def __init__(self, said: Said) -> None:
        self.said = said

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step != 4:
            return
        if trainer.is_main_process:
            control.should_save = True  # (one rank's request: kept for the agreement)
        os.kill(os.getpid(), signal.SIGTERM)
        assert self.said.seen.wait(60), "the handler never said the signal"


def main() -> None:
    out = Path(sys.argv[1])
    fail = len(sys.argv) > 2 and sys.argv[2] == "fail"
    said = Said("SIGTERM received")
    # (a handler of our own: Python's last resort, which says warnings where no handler
    # is, no longer would: the root's says them)
    rank = os.environ.get("RANK", "0")
    logging.basicConfig(format=f"rank {rank} %(levelname)s %(name)s: %(message)s")
    logging.getLogger("melissa_trainer.trainer.preemption").addHandler(said)
    if fail:

        def refuse(*_: Any, **__: Any) -> None:
            raise OSError(28, "No space left on device (this test's)")

        registry.write = refuse  # (every rank's write of its files: the save fails)
    args = tiny_arguments(out, stop_sync_steps=8, save_at_end=False)
    tiny_trainer(args, [AskAndSignal(said)]).train()
    print("script end", flush=True)


if __name__ == "__main__":
    main()
