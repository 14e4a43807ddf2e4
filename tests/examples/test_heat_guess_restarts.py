"""heat_guess's ``--resume_from_checkpoint latest`` where its folder holds no checkpoint
reaches the trainer as "latest", so its stop record promises torchrun's restarts. Failed
before (review hrev11 F5, of 3914d6af..00d3489d): the example gave the trainer None
(hlines2, 52f2db50, `heat_guess.user_dir.resume_or_afresh`), so the trainer took its
command for one that did not resume (`Source.note_restarts_resume(False)`): under
``accelerate launch --max_restarts N`` a failure's stop record promised no restart
(``restarts_left`` 0) and the solvers gave up at once. But torchrun's restart runs the
same command, still ``--resume_from_checkpoint latest``: it resumes the checkpoint the
failed attempt wrote (or, with none, starts afresh: never refused), so a restart comes.

The oracle: torchrun's variables set by the test, and the example's own choice for the
restart's command once the first attempt has written a checkpoint ("latest": resumed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from heat_guess.user_dir import resume_or_afresh
from stop_records import failing_trainer

from melissa_trainer.hooks import Hook

pytestmark = pytest.mark.timeout(120)


class Boom(RuntimeError):
    """The first attempt's failure, after its receivers published."""


class FailingHook(Hook):
    def on_train_start(self, *args: Any, **kwargs: Any) -> None:
        raise Boom("fails on the first attempt")


def test_heat_guess_latest_on_an_empty_folder_promises_torchruns_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {"TORCHELASTIC_RUN_ID": "r", "TORCHELASTIC_MAX_RESTARTS": "2",
                        "TORCHELASTIC_RESTART_COUNT": "0"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    run_dir = tmp_path / "out"  # (failing_trainer's output_dir)
    with resume_or_afresh("latest", "outputs/heat_guess", run_dir) as resume:
        trainer = failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint=resume)
        with pytest.raises(Boom):
            trainer.train()
    # the restart's command, once the failed attempt saved (the example's own choice):
    (run_dir / "checkpoints" / "checkpoint-4").mkdir(parents=True)
    with resume_or_afresh("latest", "outputs/heat_guess", run_dir) as resume:
        assert resume == "latest"
    entry = json.loads((tmp_path / "rendezvous" / "rank_0.json").read_text())
    reason = entry["stop_record"]["reason"]
    assert reason["code"] == "error" and reason.get("restarts_left") == 2, reason
