"""When an example clears its rendezvous directory (examples/study_common.py
`prepare_rendezvous`): at a fresh start only.

* A resume kept nothing there: the folder was removed at every start, though the
  library takes an earlier run's files for what they are (`stream.endpoints`: a stopped
  trainer's file is waited past, replaced as the resumed receiver publishes), and a
  stopped file holds that run's stop record, which a closing client or a `Predictor`
  reads; a client listing the folder meanwhile failed ("cannot list"). Failed before:
  the stopped file was gone.
* A start the library will refuse changes nothing there: the example mirrored the
  library's rule (complete checkpoints listed) and missed a checkpoint whose replacement
  a crash interrupted (``checkpoint-STEP.old`` beside its staging), which `train()` puts
  back, then refuses to start over. Failed before: the folder was removed. Now both ask
  the library (`resume_choice.start_refusal`).

The trainer is a stand-in (what `prepare_rendezvous` reads of one)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import study_common

pytestmark = pytest.mark.timeout(60)

BOUNDS = {"k": (0.1, 2.0)}


def stand_in(root: Path, resume: str | None = None, overwrite: bool = False) -> SimpleNamespace:
    return SimpleNamespace(
        is_main_process=True,
        accelerator=SimpleNamespace(wait_for_everyone=lambda: None),
        args=SimpleNamespace(resume_from_checkpoint=resume, overwrite_output_dir=overwrite),
        checkpoint_root=root,
        state=SimpleNamespace(global_step=0),
    )


def stopped_file(rendezvous: Path) -> Path:
    """An earlier run's rank file, marked stopped, with its stop record (its shape:
    `endpoints.mark_stopped`)."""
    rendezvous.mkdir(parents=True)
    path = rendezvous / "rank_0.json"
    record = {"version": 1, "reason": {"code": "preempted", "message": "SIGTERM"}}
    path.write_text(json.dumps({"version": 1, "rank": 0, "world_size": 1,
                                "stopped": True, "stop_record": record}))  # fmt: skip
    return path


def prepare(trainer: SimpleNamespace, rendezvous: Path) -> None:
    opts = SimpleNamespace(external=False, num_simulations=2)
    study_common.prepare_rendezvous(trainer, opts, rendezvous, ["solver.py"], BOUNDS)


def test_a_resume_keeps_the_earlier_runs_stopped_file(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    (root / "checkpoint-4").mkdir(parents=True)
    kept = stopped_file(tmp_path / "rendezvous")
    before = kept.read_text()
    prepare(stand_in(root, resume="latest"), tmp_path / "rendezvous")
    assert kept.read_text() == before


def test_a_start_refused_over_an_interrupted_replacement_keeps_the_rendezvous(
    tmp_path: Path,
) -> None:
    root = tmp_path / "checkpoints"
    (root / "checkpoint-4.old").mkdir(parents=True)  # (set aside by the replacement...)
    (root / ".tmp-checkpoint-4").mkdir()  # (...whose new one was still staged)
    kept = stopped_file(tmp_path / "rendezvous")
    prepare(stand_in(root), tmp_path / "rendezvous")
    assert kept.exists()


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_fresh_start_clears_the_rendezvous(tmp_path: Path, overwrite: bool) -> None:
    """No checkpoint (or --overwrite_output_dir over one): the earlier run's files go."""
    root = tmp_path / "checkpoints"
    (root / "checkpoint-4").mkdir(parents=True)
    if not overwrite:
        (root / "checkpoint-4").rmdir()
    stopped_file(tmp_path / "rendezvous")
    prepare(stand_in(root, overwrite=overwrite), tmp_path / "rendezvous")
    assert not (tmp_path / "rendezvous").exists()
