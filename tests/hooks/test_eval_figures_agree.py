"""A hook's `eval_figures` values are not reduced over ranks: they must be the same on
every rank. Under two ranks (gloo on CPU) a value that differs (a figure of the rank's
share, not reduced) is a ValueError on both ranks naming the hook, the key and each
rank's value; values equal up to rounding are rank 0's on both ranks. Run as a script,
this file is what each rank runs (``accelerate launch``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402
from melissa_trainer.hooks.eval_figures import REL_TOL, disagreement  # noqa: E402


class Share(Hook):
    """The number of validation samples of the rank's share, not reduced (6 and 5)."""

    def eval_figures(self, trainer: Any) -> dict[str, float]:
        acc = trainer.accelerator
        return {"share": float(len(range(acc.process_index, 11, acc.num_processes)))}


class Rounded(Hook):
    """A figure equal on both ranks up to rounding (rank 1's off by a tenth of REL_TOL)."""

    eval_keys = frozenset({"rounded"})

    def eval_figures(self, trainer: Any) -> dict[str, float]:
        return {"rounded": 2.0 * (1 + 0.1 * REL_TOL * trainer.accelerator.process_index)}


def trainer_for(out: str, hook: Hook) -> OnlineTrainer:
    best = {"metric_for_best_model": "rounded"} if isinstance(hook, Rounded) else {}
    args = TrainingArguments(
        output_dir=out, batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        max_steps=3, eval_steps=3, report_to="none", disable_progress_bar=True,
        save_at_end=False, **best,
    )  # fmt: skip
    model = small_model()
    return OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(200, seed=rank)),
        process_sample=xy, eval_dataset=list(linear_samples(11, seed=7)), hooks=[hook],
    )  # fmt: skip


def main(out: str) -> None:
    """Each rank: a run with `Rounded` (its metrics to ``rounded_<rank>.json``), then one
    with `Share` (the error it raised to ``share_<rank>.txt``)."""
    rounded = trainer_for(str(Path(out) / "rounded"), Rounded())
    state = rounded.train()
    rank = rounded.process_index
    evals = [h for h in state.log_history if "eval_loss" in h]
    (Path(out) / f"rounded_{rank}.json").write_text(
        json.dumps({"evals": evals, "best": state.best_metric})
    )
    try:
        trainer_for(str(Path(out) / "share"), Share()).train()
        said = "no error"
    except ValueError as exc:
        said = str(exc)
    (Path(out) / f"share_{rank}.txt").write_text(said)


def test_disagreement_names_the_key_the_hook_and_each_ranks_value() -> None:
    owners = {"eval_a": "A", "eval_b": "B"}
    assert disagreement([{"eval_a": 1.0, "eval_b": 2.0}] * 2, owners) is None
    nan = float("nan")
    assert disagreement([{"eval_a": nan, "eval_b": 2.0}] * 3, owners) is None
    close = 2.0 * (1 + REL_TOL / 10)
    assert (
        disagreement([{"eval_a": 1.0, "eval_b": 2.0}, {"eval_a": 1.0, "eval_b": close}], owners)
        is None
    )
    said = disagreement([{"eval_a": 1.0, "eval_b": 6.0}, {"eval_a": 1.0, "eval_b": 5.0}], owners)
    assert said is not None
    assert "hook B's eval_figures gives 'eval_b' different values on the ranks" in said
    assert "(6.0 on rank 0, 5.0 on rank 1)" in said and "accelerator.reduce" in said
    said = disagreement([{"eval_a": 1.0}, {"eval_a": 1.0, "eval_b": 2.0}], owners)
    assert said is not None and "(missing on rank 0, 2.0 on rank 1)" in said


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_hook_value_that_differs_on_the_ranks_is_an_error_on_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "trainer"))
    from two_ranks import launch_two_ranks

    done = launch_two_ranks(Path(__file__), str(tmp_path))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    # a value off by rounding: rank 0's, on both ranks (logs and best metric alike)
    ranks = [json.loads((tmp_path / f"rounded_{r}.json").read_text()) for r in "01"]
    assert ranks[0] == ranks[1]
    assert [e["eval_rounded"] for e in ranks[0]["evals"]] == [2.0]
    assert ranks[0]["best"] == 2.0
    # a rank's share, not reduced: the same error on both ranks, naming it
    said = [(tmp_path / f"share_{r}.txt").read_text() for r in "01"]
    assert said[0] == said[1], said
    assert "hook Share's eval_figures gives 'eval_share' different values" in said[0], said[0]
    assert "(6.0 on rank 0, 5.0 on rank 1)" in said[0] and "accelerator.reduce" in said[0]


if __name__ == "__main__":
    main(sys.argv[1])
