"""A hook's `eval_figures` that fails on one rank only, under two ranks (gloo on CPU):
the user's metric raises on rank 1, returns a value that is not a number (a tensor of
two elements) there, omits a key it declares there, returns no figure there, or returns
None there (which rank 1 once said as a raw AttributeError naming no hook). Before the
ranks gathered their figures (`add_eval_figures`), rank 1 raised (or skipped the
gather) and rank 0 waited in ``all_gather_object`` for ever; now both ranks raise,
promptly, rank 0 with an error naming rank 1 and its message. Run as a script, this file
is what each rank runs (``accelerate launch``): each rank writes the error it raised to
``OUT/said_<rank>.txt`` and raises it again, so that it exits non-zero."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402

#: each way of failing on rank 1, and what rank 1's own error says
CASES = {
    "raises": "my metric failed on this rank",
    "tensor": "which is not a number",
    "missing": "declares ['eval_metric'] in its eval_keys",
    "empty": None,  # (no error on rank 1: it returns no figure; rank 0 names the key)
    "none": "hook OneRankFails's eval_figures returned None, not a dict",  # (a trial's)
}


class OneRankFails(Hook):
    """A metric of 1.0 on rank 0; on rank 1, the failure `case` names."""

    def __init__(self, case: str) -> None:
        self.case = case
        self.eval_keys = frozenset({"metric"}) if case == "missing" else frozenset()

    def eval_figures(self, trainer: Any) -> dict[str, Any]:
        if trainer.accelerator.process_index == 0:
            return {"metric": 1.0}
        if self.case == "raises":
            raise RuntimeError(CASES["raises"])
        if self.case == "tensor":
            return {"metric": torch.ones(2)}
        if self.case == "missing":
            return {"other": 1.0}
        if self.case == "none":  # (a method that forgot its return)
            return None  # type: ignore[return-value]
        return {}


def main(out: str, case: str) -> None:
    args = TrainingArguments(
        output_dir=str(Path(out) / "run"), batch_size=8, buffer="fifo", buffer_size=64,
        watermark=8, max_steps=3, eval_steps=3, report_to="none", disable_progress_bar=True,
        save_at_end=False,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(200, seed=rank)),
        process_sample=xy, eval_dataset=list(linear_samples(11, seed=7)),
        hooks=[OneRankFails(case)],
    )  # fmt: skip
    rank = trainer.process_index
    try:
        trainer.train()
    except Exception as exc:
        (Path(out) / f"said_{rank}.txt").write_text(f"{type(exc).__name__}: {exc}")
        raise
    (Path(out) / f"said_{rank}.txt").write_text("no error")


@pytest.mark.e2e
@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hook_failing_on_one_rank_fails_both_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "trainer"))
    from two_ranks import launch_two_ranks

    # promptly: a rank 0 that waits in the gather for ever is killed with its launch at
    # `timeout` (TimeoutExpired fails the test, saying so); the words below say that
    # rank 0 raised from the gather, naming rank 1 (no clock read: a loaded machine)
    try:
        done = launch_two_ranks(Path(__file__), str(tmp_path), case, timeout=600)
    except subprocess.TimeoutExpired:
        pytest.fail("the ranks did not end within 600 s (as rank 0 waiting in the gather)")
    both = (done.stdout + done.stderr)[-4000:]
    assert done.returncode != 0, both
    said = [(tmp_path / f"said_{r}.txt").read_text() for r in "01"]  # (each rank's own)
    assert "no error" not in said, (said, both)
    mine = CASES[case]
    if mine is not None:
        assert mine in said[1], said
        assert mine in said[0] and "on rank 1" in said[0], said  # rank 1's, named
    else:
        assert "'eval_metric'" in said[0] and "missing on rank 1" in said[0], said
        assert "'eval_metric'" in said[1] and "missing on rank 1" in said[1], said


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
