"""A user's tiny training script, run by tests/trainer/test_device_flags.py with flags
its machine's device cannot run (``--mixed_precision fp16`` on a CPU): parse the flags,
build the model and the trainer (which locks --output_dir), train a few steps."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tiny_trainer import tiny_trainer  # noqa: E402

from melissa_trainer import ArgumentParser, TrainingArguments  # noqa: E402


def main() -> None:
    (args,) = ArgumentParser(
        TrainingArguments, defaults={"report_to": "none", "disable_progress_bar": True}
    ).parse_args_into_dataclasses()
    print("parsed: building the model", flush=True)
    tiny_trainer(args).train()


if __name__ == "__main__":
    main()
