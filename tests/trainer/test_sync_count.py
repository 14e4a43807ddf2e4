"""No host synchronisation per step: the training loop's host waits, counted.

On CPU a stand-in counts the calls that would make the host wait for an accelerator
(`tests/sync_counter.py`); on a GPU, CUDA's own sync debug mode counts the real ones.
The budget (docs/concepts/loop.md, "No host synchronisation per step"):

* inside a step (its micro-batches, its hooks): none;
* between two steps of a window, with no log, validation or checkpoint asked: none;
* at the end of a window: none with one process; under several ranks, one read of the
  stop flag's agreement, started one window earlier (the host waits for that
  all-reduce, not for the steps queued since);
* a log: the loss check's read and the figures' read (and, under several ranks, their
  two all-reduces).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from held_ports import held_port
from helpers import linear_samples, small_model, xy
from process_tree import run_group
from sync_counter import StepSyncs, SyncCounter

from melissa_trainer import Hook, OnlineTrainer, TrainerState, TrainingArguments

pytestmark = pytest.mark.timeout(120)

SCRIPT = Path(__file__).parents[1] / "scripts" / "sync_count.py"
WINDOW, LOG_EVERY, STEPS = 4, 6, 16


def _args(tmp_path: Path, **overrides: Any) -> TrainingArguments:
    base = dict(
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        logging_steps=LOG_EVERY,
        report_to="none",
        save_at_end=False,
        stop_sync_steps=WINDOW,
        max_steps=STEPS,
    )
    base.update(overrides)
    return TrainingArguments(**base)


def _trainer(args: TrainingArguments, hooks: list[Hook]) -> OnlineTrainer:
    model = small_model(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return OnlineTrainer(
        model,
        args,
        optimizer,
        train_source=list(linear_samples(STEPS * 8 * 2)),
        process_sample=xy,
        hooks=hooks,
    )


@pytest.mark.parametrize("stage_batches", [True, False])
def test_one_process_waits_for_nothing_but_its_logs(tmp_path: Path, stage_batches: bool) -> None:
    """The default hooks (progress bar and TensorBoard included) and the loop make no
    host wait per step or per window on one process; each log makes two (the loss
    check, the figures), which shows that the counter sees the loop's reads."""
    counter = SyncCounter()
    steps = StepSyncs(counter)
    args = _args(
        tmp_path, stage_batches=stage_batches, disable_progress_bar=False, report_to="tensorboard"
    )
    trainer = _trainer(args, [steps])
    with counter:
        state = trainer.train()
    assert state.global_step == STEPS
    assert steps.inside == dict.fromkeys(range(1, STEPS + 1), 0), counter.describe()
    logs = {s: 2 for s in range(LOG_EVERY, STEPS, LOG_EVERY)}
    expected = {s: logs.get(s, 0) for s in range(1, STEPS)}  # (none after the last step)
    assert steps.between == expected, counter.describe()
    assert sum(steps.stop_reads.values()) == 0


def test_the_counter_counts_the_package_s_reads_only() -> None:
    """The oracle of the tests here: a read made by melissa_trainer's code counts, one
    made elsewhere (this test, torch) does not."""
    from melissa_trainer.core.loss_guard import LossGuard

    guard = LossGuard(torch.device("cpu"), distributed=False)
    guard.record(torch.tensor(1.0), 1, ())
    counter = SyncCounter()
    with counter:
        torch.ones(2).tolist()  # this test's own: not counted
        guard.check()  # one read of the device: counted
        assert bool(torch.ones(()))  # (not counted)
    assert counter.count == 1 and counter.calls[0].startswith("loss_guard.py:")
    assert torch.ones(()).item() == 1.0  # the wrappers are gone
    assert "item" not in vars(torch.Tensor)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (sync debug mode)")
def test_on_a_gpu_cuda_counts_no_sync_per_step(tmp_path: Path) -> None:
    """CUDA's sync debug mode warns at each synchronizing operation (torch's too): none
    inside a step, none between the steps of a window on one GPU."""

    class Warned(Hook):
        def __init__(self, record: list[Any]) -> None:
            self.record, self.inside, self.between = record, {}, {}
            self._start = self._end = 0
            self._last: int | None = None

        def on_step_start(self, trainer: Any, state: TrainerState, control: Any) -> None:
            if self._last is not None:
                self.between[self._last] = len(self.record) - self._end
            self._start = len(self.record)

        def on_step_end(self, trainer: Any, state: TrainerState, control: Any) -> None:
            self.inside[state.global_step] = len(self.record) - self._start
            self._end, self._last = len(self.record), state.global_step

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        hook = Warned(record)
        trainer = _trainer(_args(tmp_path, disable_progress_bar=True), [hook])
        torch.cuda.set_sync_debug_mode("warn")
        try:
            trainer.train()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert trainer.accelerator.device.type == "cuda"
    assert set(hook.inside.values()) == {0}, [str(w.message) for w in record][:5]
    quiet = [s for s in hook.between if s % LOG_EVERY]
    assert all(hook.between[s] == 0 for s in quiet), hook.between


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_two_ranks_wait_once_a_window_for_an_agreement_started_a_window_earlier(
    tmp_path: Path,
) -> None:
    """Two ranks (gloo): nothing inside a step, nothing between the steps of a window;
    at each window's end one read of the stop flag's agreement, which was started one
    window earlier (no blocking all-reduce then: before this change, a blocking
    all-reduce and a read at every window's end); each log its check and figures (two
    all-reduces, two reads)."""
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    out = tmp_path / "out"
    out.mkdir()
    cmd = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    cmd += ["--mixed_precision", "no", "--dynamo_backend", "no"]
    cmd += ["--main_process_port", str(held_port())]
    cmd += [str(SCRIPT), "--output_dir", str(out), "--batch_size", "8", "--buffer", "fifo"]
    cmd += ["--buffer_size", "64", "--report_to", "none", "--disable_progress_bar"]
    cmd += ["--logging_steps", str(LOG_EVERY), "--stop_sync_steps", str(WINDOW)]
    cmd += ["--max_steps", str(STEPS), "--save_at_end", "false"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU on any machine
    proc = run_group(cmd, timeout=200, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rank in range(2):
        result = json.loads((out / f"rank_{rank}.json").read_text())
        assert result["world_size"] == 2 and result["global_step"] == STEPS
        # one agreement per window, and one after step 1 (a train()'s first window is
        # one step, so that training starts once each rank holds one batch)
        assert result["collectives"] == 1 + STEPS // WINDOW
        calls = "\n".join(result["calls"])
        inside = {int(s): n for s, n in result["inside"].items()}
        between = {int(s): n for s, n in result["between"].items()}
        reads = {int(s): n for s, n in result["stop_reads"].items()}
        assert inside == dict.fromkeys(range(1, STEPS + 1), 0), calls
        logs = {s: 4 for s in range(LOG_EVERY, STEPS, LOG_EVERY)}
        assert between == {s: logs.get(s, 0) for s in range(1, STEPS)}, calls
        windows = {1, *range(WINDOW, STEPS, WINDOW)}  # (the last window's end: none)
        assert reads == {s: int(s in windows) for s in range(1, STEPS)}
