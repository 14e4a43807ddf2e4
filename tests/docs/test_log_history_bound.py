"""`trainer.state.log_history` is bounded, and the pages say so with the code's figure
(user trial htrial46: after 300 steps with ``--logging_steps 1`` it held steps 203-300
only, where Hugging Face's `TrainerState.log_history` keeps every log, and no page said
it: a loss curve plotted from it after `train()` lost its start, silently)."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer import TrainerState

DOCS = Path(__file__).parents[2] / "docs"
KEEP = TrainerState.LOG_HISTORY_LEN


@pytest.mark.parametrize("page", ["reference/quick.md", "how-to/configuration.md"])
def test_the_pages_say_how_many_entries_are_kept(page: str) -> None:
    text = " ".join((DOCS / page).read_text(encoding="utf-8").split())
    assert f"`trainer.state.log_history` keeps the last {KEEP} logs and validations only" in text


def test_the_history_keeps_the_newest_entries() -> None:
    state = TrainerState()
    for step in range(1, KEEP + 51):
        state.global_step = step
        state.append_log({"loss": 1.0 / step})
    assert len(state.log_history) == KEEP
    assert [e["step"] for e in state.log_history] == [float(s) for s in range(51, KEEP + 51)]
