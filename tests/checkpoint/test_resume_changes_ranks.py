"""Two claims of docs/resume.md about resumes with changed settings, under real ranks
(tests/scripts/resume_ranks.py, `accelerate launch --multi_gpu --num_processes 2`, gloo
on CPU); the one-process tests are tests/checkpoint/test_resume_seed.py and
test_resume_best_metric.py.

* Another `seed` has no effect on a resume, on another number of ranks too: there the
  ranks' random states are derived from the checkpoint's (`checkpoint.reshard.
  reshard_seed`, the buffers' `reshard`), not from the seed. A one-rank checkpoint of a
  run with dropout and a reservoir buffer, resumed on two ranks with the same seed and
  with another, trains bitwise the same weights (the two runs' final model.safetensors,
  tensor by tensor); the seed's warning is said once, by the main rank.
* A resume that flips `greater_is_better` starts the best afresh on every rank
  (`checkpoint.resumed_best.restart_best`), said once: early stopping then counts from
  the resume's validations, and both ranks stop at the same step with the same best.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from process_tree import run_group
from safetensors.torch import load_file

SCRIPT = Path(__file__).parents[1] / "scripts" / "resume_ranks.py"
TINY = [
    "--batch_size", "8", "--buffer_size", "32", "--watermark", "16",
    "--report_to", "none", "--disable_progress_bar",
]  # fmt: skip


def launch(ranks: int, out: Path, tag: str, *flags: str) -> tuple[list[dict[str, Any]], str]:
    """`SCRIPT` on `ranks` ranks (one: plain ``python``) in `out`: each rank's end
    record (OUT/{tag}end_rank_R.json) and what the launch said (stdout and stderr)."""
    args = ["--output_dir", str(out), "--tag", tag, *TINY, *flags]
    if ranks == 1:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SCRIPT.parents[2])}
        proc = run_group([sys.executable, str(SCRIPT), *args], timeout=120, env=env)
    else:
        assert ranks == 2, ranks
        sys.path.insert(0, str(SCRIPT.parents[1] / "trainer"))  # (for this import only)
        try:
            from two_ranks import launch_two_ranks
        finally:
            sys.path.remove(str(SCRIPT.parents[1] / "trainer"))
        proc = launch_two_ranks(SCRIPT, *args, timeout=120)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-4000:]
    ends = [json.loads((out / f"{tag}end_rank_{r}.json").read_text()) for r in range(ranks)]
    return ends, said


def final_weights(out: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(str(out / "checkpoints" / f"checkpoint-{step}" / "model.safetensors"))


SEED_WORDS = "seed 42 -> 7, which has no effect on a resume"


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_another_seed_on_two_ranks_from_one_trains_the_same(tmp_path: Path) -> None:
    reservoir = ["--buffer", "reservoir"]
    launch(1, tmp_path / "same", "first", *reservoir, "--max_steps", "6")
    shutil.copytree(tmp_path / "same", tmp_path / "other")
    resumed = [*reservoir, "--max_steps", "12", "--resume_from_checkpoint", "latest"]
    same, _ = launch(2, tmp_path / "same", "resumed", *resumed, "--seed", "42")
    other, said = launch(2, tmp_path / "other", "resumed", *resumed, "--seed", "7")
    assert [e["global_step"] for e in same + other] == [12] * 4
    mine, theirs = final_weights(tmp_path / "same", 12), final_weights(tmp_path / "other", 12)
    assert sorted(mine) == sorted(theirs)
    for name, tensor in mine.items():
        assert torch.equal(tensor, theirs[name]), name  # the seed changed nothing
    # (the oracle can tell: the resumed steps trained, with dropout, from the checkpoint)
    start = final_weights(tmp_path / "same", 6)
    assert any(not torch.equal(tensor, start[name]) for name, tensor in mine.items())
    # said once, by the main rank, and not for the unchanged seed
    assert [sum(SEED_WORDS in w for w in e["warnings"]) for e in other] == [1, 0], other
    assert said.count(SEED_WORDS) == 1, said[-4000:]
    assert not any("with settings changed" in w for e in same for w in e["warnings"]), same


BEST_WORDS = "not of this run's metric"


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_flipped_direction_on_two_ranks_restarts_the_best_alike(tmp_path: Path) -> None:
    out = tmp_path / "out"
    score = ["--patience", "2", "--eval_steps", "5", "--metric_for_best_model", "score"]
    first, _ = launch(2, out, "first", *score, "--greater_is_better", "True", "--max_steps", "10")
    # the score rose to the checkpoint's step: the best there, none since
    assert [(e["global_step"], e["best_step"]) for e in first] == [(10, 10)] * 2, first
    flipped = ["--greater_is_better", "False", "--max_steps", "60"]
    ends, said = launch(2, out, "resumed", *score, *flipped, "--resume_from_checkpoint", "latest")
    # both ranks stopped early, at the same step, with the same best ...
    assert ends[0]["global_step"] == ends[1]["global_step"] < 60, ends
    assert ends[0]["best_metric"] == ends[1]["best_metric"] is not None, ends
    assert ends[0]["best_step"] == ends[1]["best_step"], ends
    # ... one of this run's validations (the checkpoint's best of the other direction,
    # kept, would have been beaten by none: the run would stop with best_step 10)
    assert ends[0]["best_step"] > 10, ends
    assert ends[0]["validations_since_best"] >= 2, ends
    # the stop requested at the second validation without a better score, taken at the
    # end of the next stop-sync window (stop_sync_steps 8) under several ranks at the latest
    requested = ends[0]["best_step"] + 2 * 5
    assert requested <= ends[0]["global_step"] <= requested + 2 * 8, ends
    assert [sum(BEST_WORDS in w for w in e["warnings"]) for e in ends] == [1, 0], ends
    (message,) = [w for w in ends[0]["warnings"] if BEST_WORDS in w]
    assert "greater_is_better True -> False" in message
    assert "at step 10, is of score (greater is better)" in message
    assert said.count(BEST_WORDS) == 1, said[-4000:]
