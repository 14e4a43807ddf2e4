"""What a failed rank's ERROR line says a resume does when torchrun restarts the run
(`resume_words.failure_words`): under ``accelerate launch --max_restarts N`` with
restarts left and a command that resumes, the restart comes on its own, so the line
says so ("torchrun restarts it (K of N restarts left): it resumes from checkpoint ...")
before what a person does if the restarts fail too. With no restart left, not under
torchrun, or a command that does not resume (no restart is promised: the stop record's
``restarts_left`` is 0 then), the words are those of a person's resume, as before.
Failed before (task hwords): every case said "once the cause is fixed, resume from",
which read as a call to act while torchrun was about to restart the run.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from melissa_trainer.common.setting import setting
from melissa_trainer.trainer.resume_words import SAVES, failure_words

pytestmark = pytest.mark.timeout(60)

RESUME = setting("resume_from_checkpoint", "latest")
WHY = "the failing rank left"


def trainer(tmp_path: Path, step: int, resume: str | None) -> SimpleNamespace:
    """The view `failure_words` reads: its checkpoints' root, its step, its command's
    ``resume_from_checkpoint``; with checkpoints 2 and 4 on disk (4 the newest)."""
    root = tmp_path / "checkpoints"
    for saved in (2, 4):
        (root / f"checkpoint-{saved}").mkdir(parents=True)
    return SimpleNamespace(
        checkpoint_root=root,
        state=SimpleNamespace(global_step=step),
        args=SimpleNamespace(resume_from_checkpoint=resume),
    )


def torchrun(monkeypatch: pytest.MonkeyPatch, most: int, done: int) -> None:
    """This process as a torchrun worker's: ``--max_restarts most``, `done` so far."""
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "t")
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", str(most))
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", str(done))


def test_with_a_restart_left_the_words_say_torchrun_restarts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torchrun(monkeypatch, 3, 1)
    view = trainer(tmp_path, 7, "latest")
    newest = tmp_path / "checkpoints" / "checkpoint-4"
    said = failure_words(view, None, WHY, "")  # type: ignore[arg-type]
    assert said == (
        f"torchrun restarts it (2 of 3 restarts left): it resumes from checkpoint {newest} "
        f"(no checkpoint at this stop: {WHY}; {SAVES}); if the restarts fail too, once the "
        f"cause is fixed, resume with {RESUME}"
    )
    written = tmp_path / "checkpoints" / "checkpoint-7"
    said = failure_words(view, written, "", "the study keeps its counts")  # type: ignore[arg-type]
    assert said == (
        f"torchrun restarts it (2 of 3 restarts left): it resumes from checkpoint {written}; "
        f"if the restarts fail too, once the cause is fixed, resume with {RESUME}; "
        "the study keeps its counts"
    )


def test_a_restart_of_a_command_naming_its_checkpoint_resumes_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torchrun(monkeypatch, 1, 0)
    said = failure_words(trainer(tmp_path, 7, "/ckpt/checkpoint-2"), None, WHY, "")  # type: ignore[arg-type]
    assert said.startswith(
        "torchrun restarts it (1 of 1 restarts left): it resumes from /ckpt/checkpoint-2, "
        "as its command says"
    ), said


def test_a_restart_with_no_checkpoint_yet_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torchrun(monkeypatch, 1, 0)
    view = trainer(tmp_path, 0, "latest")
    for saved in (2, 4):
        (tmp_path / "checkpoints" / f"checkpoint-{saved}").rmdir()
    said = failure_words(view, None, "nothing trained yet", "a note")  # type: ignore[arg-type]
    assert said == (
        "torchrun restarts it (1 of 1 restarts left): it starts again from step 0 (no "
        f"checkpoint was written yet); if the restarts fail too, once the cause is fixed, "
        f"resume with {RESUME}"
    )


@pytest.mark.parametrize(
    ("restarts", "resume"),
    [((1, 1), "latest"), (None, "latest"), ((2, 0), None)],
    ids=["no restart left", "not torchrun", "the command does not resume"],
)
def test_with_no_restart_that_resumes_the_words_are_a_persons(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    restarts: tuple[int, int] | None,
    resume: str | None,
) -> None:
    for name in ("TORCHELASTIC_RUN_ID", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RESTART_COUNT"):
        monkeypatch.delenv(name, raising=False)
    if restarts is not None:
        torchrun(monkeypatch, *restarts)
    newest = tmp_path / "checkpoints" / "checkpoint-4"
    said = failure_words(trainer(tmp_path, 7, resume), None, WHY, "")  # type: ignore[arg-type]
    assert said == (
        f"no checkpoint at this stop ({WHY}): once the cause is fixed, resume from "
        f"{newest} with {RESUME}; {SAVES}"
    )
