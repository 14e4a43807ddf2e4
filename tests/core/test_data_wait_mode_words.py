"""The long wait for data (`DataWait`, `core.data_wait`) says what ends it by mode: with
a launcher (a `Study`), a simulation silent past its timeout is killed and run again;
in external mode (simulations started by hand) nothing kills or reruns one, and the
notice said the launcher's words there too (user trial htrial27: "a simulation silent
past its timeout is killed and run again", with no launcher). `StreamDataset` picks the
words by its source. The external-mode test failed before (the launcher's words)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.core.data_wait import WAIT_NOTICE, DataWait
from melissa_trainer.core.dataset import StreamDataset

pytestmark = pytest.mark.timeout(30)

LAUNCHER_WORDS = "a simulation silent past its timeout is killed and run again"


def wait_notice(launched: bool, caplog: pytest.LogCaptureFixture) -> str:
    """The notice of a wait past `WAIT_NOTICE` with a buffer that was put data once (the
    test's clock: no sleep)."""
    now = [0.0]
    wait = DataWait(clock=lambda: now[0], launched=launched)
    buffer = FIFOBuffer(16)
    buffer.put({"x": np.zeros(2, np.float32)})  # (one sample of a batch of 4: a wait)
    caplog.clear()
    caplog.set_level(logging.WARNING, "melissa_trainer.core.dataset")
    wait.empty(buffer, 4)
    now[0] = WAIT_NOTICE + 1
    wait.empty(buffer, 4)
    (said,) = [r.getMessage() for r in caplog.records if "waited" in r.getMessage()]
    return said


def test_with_a_launcher_a_silent_simulation_is_said_killed_and_run_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    said = wait_notice(True, caplog)
    assert LAUNCHER_WORDS in said and "stall_timeout" in said, said


def test_in_external_mode_no_simulation_is_said_killed(caplog: pytest.LogCaptureFixture) -> None:
    said = wait_notice(False, caplog)
    assert LAUNCHER_WORDS not in said, said
    assert "no launcher runs the simulations here" in said and "stall_timeout" in said, said


class _Study:
    """What `StreamDataset` reads of a `Study`: that it has a launcher."""

    launcher: Any = object()

    def wait_for(self, n: int, timeout: float) -> None:
        pass


def test_the_dataset_picks_the_words_by_its_source() -> None:
    assert StreamDataset(FIFOBuffer(4), 2, source=_Study()).data_wait.launched  # type: ignore[arg-type]
    assert not StreamDataset(FIFOBuffer(4), 2).data_wait.launched
