"""The wait for the rest of a window (`DataWait`, `core.data_wait`) says what holds a
window back in the buffer in use: a FIFO or FIRO buffer's new data each batch, a
reservoir's held-back draws (its watermark, its sample_to_insert_ratio). Before, a
reservoir run was told the FIFO/FIRO words ("each batch is new data ... a reservoir
re-draws the samples it holds and waits less"; user trial htrial20)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch.distributed

from melissa_trainer.buffers import FIFOBuffer, FIROBuffer, ReservoirBuffer
from melissa_trainer.buffers.base import Buffer
from melissa_trainer.core.data_wait import WAIT_NOTICE, WINDOW_NOTICE, DataWait

pytestmark = pytest.mark.timeout(30)


def window_notice(buffer: Buffer, caplog: pytest.LogCaptureFixture) -> str:
    """The window notice a reader holding 3 of 8 batches says with `buffer` (the test's
    clock: no sleep)."""
    now = [0.0]
    wait = DataWait(clock=lambda: now[0])
    caplog.clear()
    caplog.set_level(logging.WARNING, "melissa_trainer.core.dataset")
    wait.window(3, 8)
    now[0] = WINDOW_NOTICE + 1
    wait.empty(buffer, 4)
    (said,) = [r.getMessage() for r in caplog.records if "batches it takes" in r.getMessage()]
    assert "--stop_sync_steps" in said and said.endswith("Said once"), said
    return said


@pytest.mark.parametrize("make", [FIFOBuffer, FIROBuffer])
def test_a_fifo_or_firo_run_is_told_each_batch_is_new_data(
    make: type[Buffer], caplog: pytest.LogCaptureFixture
) -> None:
    said = window_notice(make(16), caplog)
    assert "With a FIFO or FIRO buffer each batch is new data" in said, said
    assert "--watermark" not in said


def test_a_reservoir_run_is_told_what_holds_a_reservoirs_draws_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    said = window_notice(ReservoirBuffer(16), caplog)
    assert "FIFO" not in said and "each batch is new data" not in said, said
    assert "The reservoir re-draws the samples it holds" in said
    assert "--watermark" in said and "--sample_to_insert_ratio" in said


class _OwnBuffer:
    """A user's duck-typed buffer: `empty()` needs its `stats()` only (no `kind`)."""

    def stats(self) -> object:
        return ReservoirBuffer(4).stats()


def test_a_user_s_buffer_without_a_kind_gets_the_words_that_hold_for_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    said = window_notice(_OwnBuffer(), caplog)  # type: ignore[arg-type]
    assert "A slow stream holds every window back" in said, said
    assert "FIFO" not in said and "reservoir" not in said.lower()


def test_under_several_ranks_each_rank_names_itself(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rank says its own wait: under two ranks (htrial10, 2026-12-07) the window
    notice came twice, alike but for its figures and "Said once", naming no rank. Rank 1
    of 2 (torch.distributed's answers, as an initialised group of two gives them) names
    itself; one process names none (the test above)."""
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a, **k: 2)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda *a, **k: 1)
    said = window_notice(FIFOBuffer(16), caplog)
    assert said.startswith("training of rank 1 holds 3 of the 8 batches"), said
    # the longer wait for data (past WAIT_NOTICE, the buffer put data once) says it too
    now = [0.0]
    wait = DataWait(clock=lambda: now[0])
    buffer = FIFOBuffer(16)
    buffer.put({"x": np.zeros(2, np.float32)})  # (one sample of a batch of 4: a wait)
    caplog.clear()
    wait.empty(buffer, 4)
    now[0] = WAIT_NOTICE + 1
    wait.empty(buffer, 4)
    (said,) = [r.getMessage() for r in caplog.records if "has waited" in r.getMessage()]
    assert said.startswith("training of rank 1 has waited"), said
