"""A study that fails on rank 0 of two, under a real launch (``accelerate launch
--multi_gpu --num_processes 2``, gloo on CPU, real solvers and sockets): every rank stops
at the same step, all write one checkpoint of it together (none was due:
save_seconds=600), every rank exits non-zero, and rank 0's line names the checkpoint and
what a resume does; then the resume loads that checkpoint and does what the line says
(the simulation given up does not run again, the one the failure interrupted does, and
one more failing for good fails the study again), with no sample trained twice across
the two runs.

Before (`trainer.source_failure`), rank 0 raised at once and rank 1 at its next
collective: the ranks met the failure at steps of their own, none could save, and the
line named the latest periodic checkpoint (none here: the training was lost).

The run: tests/scripts/study_fails_two_ranks.py (its docstring says the study)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from melissa_trainer.study.progress_words import RESUME_NOTE

SCRIPT = Path(__file__).parents[1] / "scripts" / "study_fails_two_ranks.py"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc")
@pytest.mark.timeout(500)
def test_a_study_failed_on_rank_0_of_two_keeps_its_training_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "trainer"))
    from two_ranks import run_study_script

    proc, (zero, one), said = run_study_script(SCRIPT, tmp_path, "0", timeout=220)
    # every rank stopped at the same step, after some training, and failed (never exit 0)
    assert zero["ended"] == "SourceError", (zero, one, said)
    assert one["ended"] in ("RankFailed", "SourceError"), (zero, one, said)
    assert proc.returncode != 0, said
    step = zero["steps"]
    assert step >= 2 and one["steps"] == step, (zero, one, said)
    # ... and every rank saved that step, together (none was due)
    assert zero["last_save_step"] == one["last_save_step"] == step, (zero, one, said)
    checkpoints = sorted(p.name for p in (tmp_path / "out" / "checkpoints").glob("checkpoint-*"))
    assert checkpoints == [f"checkpoint-{step}"], (checkpoints, said)
    lines = [x for x in said.splitlines() if f"checkpoint-{step} holds this step" in x]
    assert all("resume with resume_from_checkpoint='latest'" in x for x in lines), said
    assert any(x.endswith(RESUME_NOTE) for x in lines), said  # (rank 0's: the study's words)
    assert f"training stopped at step {step}: the simulation study failed" in said, said
    launched = (tmp_path / "launches").read_text().split()
    first = {r: [tuple(p) for p in e["trained"]] for r, e in enumerate((zero, one))}

    proc, (zero, one), said = run_study_script(SCRIPT, tmp_path, "1", timeout=220)
    # the resume loaded the failure's checkpoint and failed again, as the line said
    assert zero["started"] == one["started"] == step, (zero, one, said)
    assert zero["ended"] == "SourceError", (zero, one, said)
    assert proc.returncode != 0, said
    assert "simulation 2 failed once" in said, said
    again = (tmp_path / "launches").read_text().split()[len(launched) :]
    assert "2" in again and "1" not in again, (launched, again)  # 1 was given up
    # the resume trained on what the checkpoint held (rank 0's launcher failed with data
    # left: the failure's pending batches, its buffers), each sample once over both runs
    assert zero["steps"] >= step + 3 and one["steps"] == zero["steps"], (zero, one, said)
    for r, record in enumerate((zero, one)):
        pairs = first[r] + [tuple(p) for p in record["trained"]]
        assert len(pairs) == len(set(pairs)), (r, first[r], record["trained"])
        assert all(p[0] == 0 and p[1] % 2 == r for p in pairs), (r, pairs)  # (its own)
