"""The loss check and the stop flag's agreement, read one window after they start.

The trainer starts the agreement on window k+1 (with the loss check's code of the
losses recorded so far) before window k's steps, and reads it after them: the losses
recorded in between must survive the read, and be checked by the next one. A single
rank is the reduction of itself, so the codes are fed back as the all-reduce would.
"""

from __future__ import annotations

import pytest
import torch

from melissa_trainer.core.loss_guard import LossGuard, NonFiniteLossError
from melissa_trainer.core.stop_sync import StopSync

CPU = torch.device("cpu")


def test_a_nan_recorded_while_an_agreement_runs_is_caught_by_the_next_one() -> None:
    guard = LossGuard(CPU, distributed=True, limit=16)
    for step in (1, 2, 3):
        guard.record(torch.tensor(0.5), step, ())
    code = guard.window_code()  # started with the agreement on the next window
    assert code is not None
    guard.record(torch.tensor(float("nan")), 4, ())  # this window's steps run meanwhile
    guard.record(torch.tensor(0.25), 5, ())
    guard.settle(int(code))  # read at the window's end: steps 1-3 were finite
    later = guard.window_code()
    assert later is not None
    with pytest.raises(NonFiniteLossError, match="at step 4") as caught:
        guard.settle(int(later))
    assert caught.value.step == 4


def test_a_nan_within_the_coded_losses_raises_at_the_read_naming_its_step() -> None:
    guard = LossGuard(CPU, distributed=True, limit=16)
    guard.record(torch.tensor(1.0), 7, ())
    guard.record(torch.tensor(float("inf")), 8, ())
    code = guard.window_code()
    assert code is not None
    guard.record(torch.tensor(1.0), 9, ())
    with pytest.raises(NonFiniteLossError, match="at step 8"):
        guard.settle(int(code))


def test_a_check_between_start_and_read_leaves_nothing_for_the_read_to_forget() -> None:
    """A log or a checkpoint in the window checks (and forgets) every loss: the read of
    the code started before then forgets none of the losses recorded after the check."""
    guard = LossGuard(CPU, distributed=True, limit=16)
    guard.record(torch.tensor(1.0), 1, ())
    code = guard.window_code()
    assert code is not None
    guard.distributed = False  # (check's all-reduce: one rank is its own reduction)
    guard.check()
    guard.distributed = True
    guard.record(torch.tensor(float("nan")), 2, ())
    guard.settle(int(code))  # must not forget step 2's loss
    later = guard.window_code()
    assert later is not None
    with pytest.raises(NonFiniteLossError, match="at step 2"):
        guard.settle(int(later))


def test_stop_sync_without_a_process_group_returns_what_was_started() -> None:
    sync = StopSync(CPU, num_processes=1)
    assert not sync.distributed and not sync.started
    sync.start(True, 6, 15)
    assert sync.started
    assert sync.result() == (True, 6, 15) and sync.most == 6
    assert sync.agree(False, 3) == (False, 3, 0)
    assert sync.agree(False, 8, batches_in_hand=2) == (False, 8, 0) and sync.most == 2
    with pytest.raises(RuntimeError, match="no agreement was started"):
        sync.result()
    sync.start(False, 1)
    with pytest.raises(RuntimeError, match="not read"):
        sync.start(False, 1)
    sync.abandon()
    assert not sync.started
    assert sync.collectives == 0


@pytest.mark.parametrize("with_ids", [True, False])
def test_a_block_names_the_simulations_its_samples_as_a_list_would(with_ids: bool) -> None:
    """A columnar batch's simulations are read from its column by reference (the fast
    path): the error names what the same samples, as a list of dicts, name."""
    import numpy as np

    from melissa_trainer.buffers import SampleBlock

    fields = {"x": np.arange(4, dtype=np.float32)}
    if with_ids:
        fields["simulation_id"] = np.array([7, 3, 7, 12], dtype=np.int64)
    block = SampleBlock(fields)
    named = []
    for batch in (block, list(block)):
        guard = LossGuard(CPU, distributed=False, limit=16)
        guard.record(torch.tensor(0.5), 1, batch)
        guard.record(torch.tensor(float("nan")), 2, batch)
        with pytest.raises(NonFiniteLossError, match="at step 2") as caught:
            guard.check()
        named.append(caught.value.simulations)
    assert named[0] == named[1] == ([3, 7, 12] if with_ids else [])


def test_losses_of_other_dtypes_and_shapes_are_checked_together() -> None:
    """Losses are kept by reference and stacked when checked: a bf16 loss, a float64
    one and a one-element vector are checked like float32 scalars."""
    guard = LossGuard(CPU, distributed=False, limit=16)
    guard.record(torch.tensor(0.5, dtype=torch.bfloat16), 1, ())
    guard.record(torch.tensor([0.25]), 2, ())
    guard.check()  # finite: nothing raised, all forgotten
    guard.record(torch.tensor(float("inf"), dtype=torch.float64), 3, ())
    with pytest.raises(NonFiniteLossError, match="at step 3"):
        guard.check()


@pytest.mark.timeout(60)
def test_a_loss_made_inf_by_huge_finite_samples_is_told_as_a_solver_blowing_up() -> None:
    """A user's trial (htrial10, 2026-12-07): a Burgers solver blowing up sent finite
    samples up to 1.7e38 before its NaN (which the receiver refused): their squared
    error is Inf in float32, and the error's hint, samples holding NaN or Inf (refused,
    so not the cause), sent the user the wrong way. It names huge finite samples too."""
    huge = torch.full((4,), 1e30)  # finite, as the receiver's check sees it
    assert torch.isfinite(huge).all()
    loss = torch.nn.functional.mse_loss(huge, torch.zeros(4))  # the oracle: torch's own
    guard = LossGuard(CPU, distributed=False, limit=16)
    guard.record(loss, 2, ())
    with pytest.raises(NonFiniteLossError, match="at step 2") as caught:
        guard.check()
    assert "huge finite values (a solver blowing up" in str(caught.value)
