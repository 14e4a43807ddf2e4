"""A stream that ends on a `save_steps` step: its checkpoint is written once when nothing
changed after the periodic save (hmelissa2 counted the saves: the end's save_at_end
found checkpoint-25 current and wrote nothing), and written again when something did
(a study's last simulations' ends arrive after it: `trainer.end_save`), which the
progress line then says (before, the same "step 25 | checkpoint ..." line twice read as
a checkpoint written twice by mistake). Resuming from either trains nothing again."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers import xy
from tiny_resume import tiny_run

from melissa_trainer import Hook

pytestmark = pytest.mark.timeout(120)

#: the progress line's note on a checkpoint of a step written again
REWRITTEN = (
    " (rewritten: replaces this step's earlier write, with whatever came since it: "
    "simulations ended, samples received)"
)


class Saves(Hook):
    """Records each save's step, and the samples trained on (their ``index``)."""

    def __init__(self) -> None:
        self.saves: list[int] = []
        self.trained: list[int] = []

    def process(self, sample: Mapping[str, Any]) -> Any:
        self.trained.append(int(sample["index"]))
        return xy(sample)  # type: ignore[arg-type]

    def on_save(self, trainer: Any, state: Any, control: Any, path: str) -> None:
        self.saves.append(state.global_step)


class EndsLate(Saves):
    """A hook whose state changes after the last step's periodic save (at LOOP_END), as
    a study's record does when its last simulations end."""

    name = "ends_late"

    def __init__(self) -> None:
        super().__init__()
        self.ended = False

    def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.ended = True

    def state_dict(self) -> dict[str, Any]:
        return {"ended": self.ended}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.ended = bool(state["ended"])


def _run(out: Path, hook: Saves, **overrides: Any) -> Any:
    # 200 samples in batches of 8: the stream ends at step 25, a save_steps step
    return tiny_run(
        out,
        save_steps=25,
        process_sample=hook.process,
        trainer_kwargs={"hooks": [hook]},
        **overrides,
    )


def test_a_stream_ending_on_a_save_step_writes_it_once(tmp_path: Path) -> None:
    first = Saves()
    trainer = _run(tmp_path / "out", first)
    assert trainer.state.global_step == 25 and first.saves == [25]
    assert sorted(first.trained) == list(range(200))  # each sample once (a FIFO)
    resumed = Saves()
    again = _run(tmp_path / "out", resumed, resume_from_checkpoint="latest")
    assert again.state.global_step == 25 and resumed.trained == [] and resumed.saves == []


def test_a_rewrite_of_the_last_steps_checkpoint_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hook = EndsLate()
    _run(tmp_path / "out", hook)
    assert hook.saves == [25, 25]  # the periodic save, then the end's with the change
    lines = [x for x in capsys.readouterr().out.splitlines() if "| checkpoint " in x]
    path = tmp_path / "out" / "checkpoints" / "checkpoint-25"
    assert lines == [
        f"step 25 | checkpoint {path}",
        f"step 25 | checkpoint {path}{REWRITTEN}",
    ]
    assert json.loads((path / "hooks.json").read_text())["ends_late"] == {"ended": True}
    resumed = EndsLate()
    _run(tmp_path / "out", resumed, resume_from_checkpoint="latest")
    assert resumed.ended and resumed.trained == [] and resumed.saves == []


class CountsEnds(Saves):
    """A hook whose state changes at every LOOP_END (how many it saw, resumes included):
    a run resumed at its last step rewrites the checkpoint it resumed from."""

    name = "counts_ends"

    def __init__(self) -> None:
        super().__init__()
        self.ends = 0

    def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.ends += 1

    def state_dict(self) -> dict[str, Any]:
        return {"ends": self.ends}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.ends = int(state["ends"])


def test_a_rewrite_of_the_checkpoint_resumed_from_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """hrev17: the note was kept per hook instance from its saves only, so the rewrite
    of the checkpoint a run resumed from (`trainer.ending._end_checkpoint`'s 'or the one
    the run resumed from') printed the bare line, as a checkpoint written twice by
    mistake, though resume.md promises the note for it."""
    _run(tmp_path / "out", CountsEnds())
    capsys.readouterr()
    resumed = CountsEnds()
    _run(tmp_path / "out", resumed, resume_from_checkpoint="latest")
    assert resumed.saves == [25] and resumed.trained == [] and resumed.ends == 2
    lines = [x for x in capsys.readouterr().out.splitlines() if "| checkpoint " in x]
    path = tmp_path / "out" / "checkpoints" / "checkpoint-25"
    assert lines == [f"step 25 | checkpoint {path}{REWRITTEN}"]


def test_a_second_save_of_an_unchanged_step_claims_no_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """hrev17: `save_checkpoint()` called again at the step just saved, nothing changed
    in between (after train(); "Idempotent: saving twice at one step rewrites the same
    checkpoint"), printed "(rewritten: its first write lacked what came after it,
    simulations ended or samples received)": nothing had come. The note now says what
    is always true: the earlier write is replaced, with whatever came since."""
    trainer = _run(tmp_path / "out", Saves())
    capsys.readouterr()
    path = trainer.save_checkpoint()
    lines = [x for x in capsys.readouterr().out.splitlines() if "| checkpoint " in x]
    assert lines == [f"step 25 | checkpoint {path}{REWRITTEN}"]
    assert "lacked" not in lines[0]
