"""The heat_guess example held at the end of its training loop: ``heat_guess_held_end.py
HOLD_DIR ARGS...`` runs ``examples/heat_guess/train.py ARGS...`` with one hook more,
whose `on_loop_end` (the loop over, before the end's save, its report and the study's
account) writes ``HOLD_DIR/marker`` and waits for ``HOLD_DIR/go`` (a test signals the
process in between: a SIGTERM after the last stop synchronisation)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from heat_guess import train as example  # noqa: E402

from melissa_trainer import Hook, refusals_end_the_program  # noqa: E402


class HoldAtLoopEnd(Hook):
    """Holds `on_loop_end` until the test's ``go`` file exists."""

    def __init__(self, folder: Path) -> None:
        self.marker, self.go = folder / "marker", folder / "go"

    def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.marker.write_text("held")
        while not self.go.exists():  # (the test's file: it signals this process first)
            time.sleep(0.01)


def main() -> int:
    folder, argv = Path(sys.argv[1]), sys.argv[2:]
    made = example.OnlineTrainer

    def held(*args: Any, hooks: list[Hook], **kwargs: Any) -> Any:
        return made(*args, hooks=[*hooks, HoldAtLoopEnd(folder)], **kwargs)

    example.OnlineTrainer = held  # type: ignore[misc,assignment]
    return example.main(argv)


if __name__ == "__main__":
    with refusals_end_the_program():
        sys.exit(main())
