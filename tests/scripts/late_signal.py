"""A run that a signal reaches after its last line: ``late_signal.py OUTPUT_DIR``.

Trains 4 steps; its hook's `on_train_end` (after the progress hook's last line, "end
of training ...") writes ``OUTPUT_DIR/../marker`` and waits for ``OUTPUT_DIR/../go``
(the test signals it in between). Prints "script end" if `train()` returns."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tiny_trainer import tiny_arguments, tiny_trainer  # noqa: E402

from melissa_trainer import Hook  # noqa: E402


class HoldAtEnd(Hook):
    """Holds `on_train_end` until the test's ``go`` file exists."""

    def __init__(self, folder: Path) -> None:
        self.marker, self.go = folder / "marker", folder / "go"

    def on_train_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.marker.write_text("held")
        while not self.go.exists():  # (the test's file: it signals this process first)
            time.sleep(0.01)


def main() -> None:
    out = Path(sys.argv[1])
    tiny_trainer(tiny_arguments(out, save_steps=2), [HoldAtEnd(out.parent)]).train()
    print("script end", flush=True)


if __name__ == "__main__":
    main()
