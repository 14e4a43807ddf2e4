"""Run under `accelerate launch --multi_gpu --num_processes 2` by
tests/trainer/test_bad_flag_said_once.py: a script given a flag it does not know (or
``--help``).

Every rank waits for the others before it parses (files in $BAD_FLAG_DIR), so that no
rank is stopped by torchrun before it has met the error: the test would otherwise count
one error on a machine where rank 1 was slow, with or without the fix. Each rank writes
what it caught, a `SystemExit` and its code, to $BAD_FLAG_DIR/caught_R.json, waits for
the others to have written theirs, and lets it go uncaught, as a user's script would.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from melissa_trainer import ArgumentParser, TrainingArguments

BARRIER_TIMEOUT = 120.0  # seconds; the test's own timeout is longer


def wait_for(directory: Path, prefix: str, world: int) -> None:
    """Until `world` files named PREFIX_R exist (a barrier without a process group)."""
    deadline = time.monotonic() + BARRIER_TIMEOUT
    while len(list(directory.glob(f"{prefix}_*"))) < world:
        if time.monotonic() > deadline:
            sys.exit(f"the other ranks never wrote {prefix}_R: a barrier timed out")
        time.sleep(0.01)


def main() -> None:
    directory = Path(os.environ["BAD_FLAG_DIR"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    (directory / f"ready_{rank}").touch()
    wait_for(directory, "ready", world)
    try:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    except SystemExit as exc:
        caught = {"class": "SystemExit", "code": exc.code}
        (directory / f"caught_{rank}.json").write_text(json.dumps(caught))
        wait_for(directory, "caught", world)
        raise
    (directory / f"caught_{rank}.json").write_text(json.dumps({"class": None}))


if __name__ == "__main__":
    main()
