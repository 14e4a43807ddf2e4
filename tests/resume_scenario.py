"""One training run of the kill/resume tests, in this process or as a script.

    python tests/resume_scenario.py CONFIG.json   # writes CONFIG's "result" file

With ``kill`` in the config, the run writes the ``marker`` file two steps after the
first checkpoint saved at or after step ``from_step`` in pseudo-epoch
``pseudo_epoch`` or later, then sleeps in that step's ``on_step_end`` until its parent
SIGKILLs it.

With ``file_size_limit`` (``{"after_step": S, "bytes": B, "rank": R}``), training rank R
limits the size of any file it writes to B bytes from the end of step S on
(``RLIMIT_FSIZE``: the kernel then fails larger writes with EFBIG), so that a later save
fails for real on that rank only.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import (  # noqa: E402
    Hook,
    OnlineTrainer,
    SampleBlock,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

#: logged figures that depend on time, not on the data
_TIMING = {"samples_per_second", "steps_per_second"}


class Record(Hook):
    """Each micro-batch's loss with its step, and the logs without their timings."""

    def __init__(self) -> None:
        self.losses: list[tuple[int, float]] = []
        self.logs: list[dict[str, float]] = []
        self.samples_per_step: list[int] = []  # each step's samples (this rank's)
        self._seen: int | None = None

    def on_step_start(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self._seen = state.samples_seen

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if self._seen is not None:
            self.samples_per_step.append(state.samples_seen - self._seen)

    def on_after_backward(
        self, trainer: Any, state: TrainerState, control: TrainerControl, loss: Any
    ) -> None:
        self.losses.append((state.global_step + 1, float(loss)))

    def on_log(
        self, trainer: Any, state: TrainerState, control: TrainerControl, logs: dict[str, float]
    ) -> None:
        kept = {k: v for k, v in logs.items() if k not in _TIMING}
        self.logs.append({"step": state.global_step, **kept})


class KillAfterSave(Hook):
    """Blocks two steps after a checkpoint, once `marker` is written (see the module)."""

    def __init__(self, marker: str, pseudo_epoch: int, from_step: int) -> None:
        self.marker, self.pseudo_epoch, self.from_step = Path(marker), pseudo_epoch, from_step
        self.saved: int | None = None

    def on_save(
        self, trainer: Any, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        ok = state.pseudo_epoch >= self.pseudo_epoch and state.global_step >= self.from_step
        if self.saved is None and ok:
            self.saved = state.global_step

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if self.saved is not None and state.global_step == self.saved + 2:
            # Written aside then renamed: the parent polls for the marker and reads it
            # at once, so a plain write could be seen empty (a CI run failed so).
            tmp = self.marker.with_name(self.marker.name + ".tmp")
            tmp.write_text(str(state.global_step))
            tmp.replace(self.marker)
            time.sleep(600)  # until the test's SIGKILL


class LimitFileSize(Hook):
    """Caps the size of the files this process writes (see the module docstring)."""

    def __init__(self, after_step: int, bytes: int, rank: int = 0) -> None:
        self.after_step, self.bytes, self.rank = after_step, bytes, rank

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if state.global_step == self.after_step and trainer.process_index == self.rank:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.bytes, resource.RLIM_INFINITY))


def xy_block(block: SampleBlock) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(block.fields["x"]), torch.from_numpy(block.fields["y"])


def features(sample: dict[str, Any]) -> dict[str, Any]:
    """The ``"ingest": "sample"`` transform: not idempotent (x -> 2x + 1, x^2; y -> y - 1),
    so a sample transformed twice (a resume that transforms its buffer again) shows."""
    x = sample["x"]
    return {"x": np.concatenate([x[:2] * 2 + 1, x[2:] ** 2]), "y": sample["y"] - 1}


def features_block(block: SampleBlock) -> dict[str, Any]:
    """`features` for a block at once (``"ingest": "block"``)."""
    x = block.fields["x"]
    return {"x": np.concatenate([x[:, :2] * 2 + 1, x[:, 2:] ** 2], 1), "y": block.fields["y"] - 1}


def run(config: dict[str, Any]) -> dict[str, Any]:
    """Train as `config` says; returns what the tests compare (JSON-serializable)."""
    args = TrainingArguments(
        output_dir=config["output_dir"],
        batch_size=config.get("batch_size", 8),
        buffer=config["buffer"],
        buffer_size=config.get("buffer_size", 32),
        watermark=16,
        # none unless the scenario gives one (0: off; unset, a reservoir would get 16)
        sample_to_insert_ratio=config.get("sample_to_insert_ratio", 0),
        pseudo_epochs=config.get("pseudo_epochs", 1),
        max_steps=config.get("max_steps"),
        gradient_accumulation_steps=config.get("gradient_accumulation_steps", 1),
        logging_steps=3,  # not a divisor of save_steps: a log is due between saves
        save_steps=config["save_steps"],
        stop_sync_steps=4,
        resume_from_checkpoint=config.get("resume_from_checkpoint"),
        **{
            k: config[k]
            for k in ("max_to_keep", "on_save_error", "draw_choices", "save_at_end")
            if k in config
        },
        report_to="none",
        disable_progress_bar=True,
        seed=11,
    )
    record = Record()
    hooks: list[Hook] = [record]
    if "kill" in config:
        hooks.append(KillAfterSave(**config["kill"]))
    if "file_size_limit" in config:
        hooks.append(LimitFileSize(**config["file_size_limit"]))
    # columnar: batches are read from the buffer as blocks (`Buffer.get_block`)
    batching: dict[str, Any] = (
        {"process_batch": xy_block} if config.get("columnar") else {"process_sample": xy}
    )
    # features at ingest: the buffer and the checkpoint hold transformed samples
    if config.get("ingest") == "sample":
        batching["ingest_sample"] = features
    elif config.get("ingest") == "block":
        batching["ingest_block"] = features_block
    model = small_model(0, dropout=0.2)  # dropout: the torch RNG state matters
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.7)
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        scheduler,
        train_source=lambda rank, world: linear_samples(config["n_samples"], seed=3),
        hooks=hooks,
        **batching,
    )
    state = trainer.train()
    params = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
    stats = trainer.buffer.stats()
    return {
        "params": params.numpy().tobytes().hex(),
        "losses": record.losses,
        "logs": record.logs,
        "global_step": state.global_step,
        "samples_seen": state.samples_seen,
        "total_samples_seen": state.total_samples_seen,
        "pseudo_epoch": state.pseudo_epoch,
        "buffer": [stats.put, stats.got, stats.evicted, stats.size],
        "samples_per_step": record.samples_per_step,
    }


if __name__ == "__main__":
    torch.set_num_threads(1)
    cfg = json.loads(Path(sys.argv[1]).read_text())
    result = run(cfg)
    rank = int(os.environ.get("RANK", "0"))  # under `accelerate launch`: one file per rank
    Path(cfg["result"] + (f".{rank}" if rank else "")).write_text(json.dumps(result))
