"""What `queued_end` says of a job that squeue last listed PENDING and that ended
CANCELLED without an exit code: only what is known. It may have started and been
cancelled within one poll, before its script wrote a code, so "never started" is not
claimed (the Slurm cluster's tests: test_slurm_queued_cancel.py)."""

from __future__ import annotations

import pytest

from melissa_trainer.launcher.backends.slurm.queued_end import queued_text


@pytest.mark.parametrize("by_study", [True, False])
def test_the_words_say_what_is_known_not_that_it_never_started(by_study: bool) -> None:
    text = queued_text("sim-2 (Slurm job 17)", by_study)
    assert "never started" not in text, text
    assert "cancelled while queued or just as it started" in text, text
    assert "squeue last listed it PENDING; it wrote no exit code" in text, text
    assert "by the study" in text and ("not by the study" in text) is not by_study
