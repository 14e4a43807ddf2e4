"""A run that a signal reaches in its last window (as
``last_window_signal.py``: its hook holds `on_step_end` of step 4 until ``go``), then
whose `on_loop_end` raises, before the end's action point (`ending.end_training`'s
``deciding``): ``late_signal_then_fail.py OUTPUT_DIR``
(tests/checkpoint/test_late_signal_said_at_failure.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from last_window_signal import HoldAtLastStep  # noqa: E402
from tiny_trainer import tiny_arguments, tiny_trainer  # noqa: E402


class FailsAtLoopEnd(HoldAtLastStep):
    def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
        raise RuntimeError("on_loop_end fails")


def main() -> None:
    out = Path(sys.argv[1])
    args = tiny_arguments(out, stop_sync_steps=8, save_at_end=False)
    tiny_trainer(args, [FailsAtLoopEnd(out.parent)]).train()
    print("script end", flush=True)


if __name__ == "__main__":
    main()
