"""Run by tests/trainer/test_peer_start_fails.py under ``accelerate launch --multi_gpu
--num_processes 2 --max_restarts N`` (gloo on CPU): the external-mode trainer of
tests/lineage_trainer.py, its receivers publishing in ``--rendezvous``, no solver. Rank
1's source fails to start on every attempt (`StreamSource.start` raises after this rank's
receiver would have started: inside `train()`, its preemption handler installed), while
rank 0 has started its own and waits for rank 1 at the sources' barrier; rank 1 exits
1, torchrun SIGTERMs rank 0 (and restarts the pair while restarts are left). With
``EXIT=1`` rank 1's start ends its process at once instead (``os._exit(1)``: no Python
runs after it, as a rank killed by a signal). With ``BEFORE_TRAIN_FROM=N``, rank 1's
script raises `BEFORE` on the attempts from N on (a user's code between its
``OnlineTrainer(...)`` and ``train()``, uncaught), once its trainer is built. The test
reads the stop record rank 0's receiver wrote.

    start_fails_rank.py --output_dir OUT --rendezvous RV [TrainingArguments...]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lineage_trainer import ScriptArgs, lineage_trainer  # noqa: E402

from melissa_trainer import ArgumentParser, StreamSource, TrainingArguments  # noqa: E402

RANK = int(os.environ.get("RANK", "0"))
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
#: what rank 1's start raises (the test finds it named in rank 0's record)
ERROR = "rank 1's receiver cannot start (attempt {attempt})"
#: what rank 1's script raises before train() with BEFORE_TRAIN_FROM
BEFORE = "rank 1's script fails before train() (attempt {attempt})"


def failing_start(self: StreamSource, *args: Any, **kwargs: Any) -> None:
    if os.environ.get("EXIT"):
        os._exit(1)
    raise OSError(ERROR.format(attempt=ATTEMPT))


def main() -> None:
    args, opts = ArgumentParser(TrainingArguments, ScriptArgs).parse_args_into_dataclasses()
    before = int(os.environ.get("BEFORE_TRAIN_FROM", "-1"))
    if RANK == 1:
        StreamSource.start = failing_start  # type: ignore[method-assign]
    trainer = lineage_trainer(args, opts)
    if RANK == 1 and 0 <= before <= ATTEMPT:
        raise RuntimeError(BEFORE.format(attempt=ATTEMPT))
    trainer.train()


if __name__ == "__main__":
    main()
