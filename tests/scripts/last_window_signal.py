"""A run that a signal reaches during its last window: ``last_window_signal.py OUTPUT_DIR
[SAVE_STEPS]``.

Trains 4 steps (``max_steps=4``, one stop window of 8 steps: the stop synchronisation
before step 1 is its last); its hook's `on_step_end` at step 4 (after that
synchronisation, before the loop sees max_steps reached) writes
``OUTPUT_DIR/../marker`` and waits for ``OUTPUT_DIR/../go`` (the test signals it in
between). ``save_at_end`` is off, as the heat_guess example's was. With SAVE_STEPS 4,
the last step is a ``save_steps`` step: a checkpoint of the end (checkpoint-4) is written
as the run ends, after the hold. Prints "script end" if `train()` returns."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tiny_trainer import tiny_arguments, tiny_trainer  # noqa: E402

from melissa_trainer import Hook  # noqa: E402


class HoldAtLastStep(Hook):
    """Holds `on_step_end` of step 4 until the test's ``go`` file exists."""

    def __init__(self, folder: Path) -> None:
        self.marker, self.go = folder / "marker", folder / "go"

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step != 4:
            return
        self.marker.write_text("held")
        while not self.go.exists():  # (the test's file: it signals this process first)
            time.sleep(0.01)


def main() -> None:
    out = Path(sys.argv[1])
    save_steps = int(sys.argv[2]) if len(sys.argv) > 2 else None
    args = tiny_arguments(out, stop_sync_steps=8, save_at_end=False, save_steps=save_steps)
    tiny_trainer(args, [HoldAtLastStep(out.parent)]).train()
    print("script end", flush=True)


if __name__ == "__main__":
    main()
