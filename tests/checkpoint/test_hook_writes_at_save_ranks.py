"""Under two ranks (gloo on CPU), a hook's `on_save` on rank 1 alone that overwrites a
file rank 1 wrote into the checkpoint makes that save a `CheckpointError` on both
ranks (the ranks agree after the hooks: no rank waits for one that raised), naming
the file. Run as a script, this file is what each rank runs (``accelerate launch``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import CheckpointError, Hook, OnlineTrainer, TrainingArguments  # noqa: E402


class SpoilRankOne(Hook):
    """On rank 1 only: appends a byte to the first file of the checkpoint's rank_1/."""

    def on_save(self, trainer: Any, state: Any, control: Any, path: str) -> None:
        if trainer.process_index == 1:
            first = sorted(p for p in (Path(path) / "rank_1").iterdir() if p.is_file())[0]
            with open(first, "ab") as f:
                f.write(b" ")


def main(out: str) -> None:
    """Each rank: a run saving at step 4; the error it raised, to ``said_<rank>.txt``."""
    args = TrainingArguments(
        output_dir=out, batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        max_steps=8, save_steps=4, report_to="none", disable_progress_bar=True,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(200, seed=rank)),
        process_sample=xy, hooks=[SpoilRankOne()],
    )  # fmt: skip
    try:
        trainer.train()
        said = "no error"
    except CheckpointError as exc:
        said = f"{exc.file}\n{exc}"
    (Path(out) / f"said_{trainer.process_index}.txt").write_text(said)


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_file_one_ranks_hook_overwrote_fails_the_save_on_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "trainer"))
    from two_ranks import launch_two_ranks

    done = launch_two_ranks(Path(__file__), str(tmp_path))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    said = [(tmp_path / f"said_{r}.txt").read_text() for r in "01"]
    assert said[0] == said[1], said
    file, message = said[0].split("\n", 1)
    assert file.startswith("rank_1/"), said[0]
    assert f"{file}: overwritten" in message and "checkpoint-4" in message, message
    assert "in order: SpoilRankOne" in message, message


if __name__ == "__main__":
    main(sys.argv[1])
