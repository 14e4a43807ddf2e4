"""The flags that rebuild the Navier–Stokes example's trained model, recorded in its
checkpoint folder: ``OUTPUT_DIR/checkpoints/model_flags.json`` (`FILE`), beside the
checkpoints and the library's ``history.json``.

Why: a user trial (htrial13) came back to a run's folder and could not rebuild its
model without remembering ``--model``, ``--width``, ``--modes``, ``--layers`` and the
``--grid_size`` and ``--time_steps`` its inputs were built for; the how-to's "Predict
with the trained model" repeated them by hand. Now:

- every run records them as its training starts (`RecordModelFlags`, the main rank;
  written aside and renamed, so that a reader sees the old record or the new one, never
  part of one): after the library has chosen to resume or start afresh, so a refused
  start leaves an earlier run's record as it was, and ``--overwrite_output_dir``'s
  move of the earlier checkpoints takes their record with them;
- a resume whose command line says otherwise is refused before anything starts
  (`check_resume`), naming each flag and both values: its checkpoint would not load
  (another width) or would load and mean something else (another ``--time_steps``
  scales t in the inputs, another ``--interval`` the lead times);
- `load_trained` rebuilds the model from the record and loads a checkpoint's weights.

A model given to the example's ``main(model=...)`` is recorded by its class name
(``own_model``): the example cannot rebuild it, `load_trained` says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors.torch import load_model

from melissa_trainer.checkpoint.files import fsync_dir, fsync_file
from melissa_trainer.common.checkpoint_names import latest_checkpoint, list_checkpoints
from melissa_trainer.common.json_output import to_json
from melissa_trainer.config.reading import ConfigError
from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.hook import Hook
from navier_stokes.cli import FlowArgs
from navier_stokes.models import make_model

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView

__all__ = [
    "FILE",
    "RecordModelFlags",
    "Trained",
    "check_resume",
    "checkpoint_folder",
    "load_trained",
    "mismatches",
    "read_flags",
    "record_of",
    "write_flags",
]

#: the record's name, in the checkpoint folder (OUTPUT_DIR/checkpoints)
FILE = "model_flags.json"
#: each model's own flags (the U-Net has no modes nor layers: `make_model`)
MODEL_FLAGS = {"fno": ("width", "modes", "layers"), "unet": ("width",),
               "neuralop": ("width", "modes", "layers")}  # fmt: skip
#: the flags of the model's inputs: the grid, t = (step + 1) / time_steps, the lead times
INPUT_FLAGS = ("grid_size", "time_steps", "interval")
#: recorded, not flags: what the record says about itself
NOT_FLAGS = ("channels", "own_model")


def checkpoint_folder(output_dir: str | os.PathLike[str]) -> Path:
    """The checkpoint folder of a run in `output_dir` (the trainer's `checkpoint_root`),
    where the record is."""
    return Path(output_dir) / "checkpoints"


def record_of(opts: FlowArgs, model_name: str, own_model: bool, channels: int) -> dict[str, Any]:
    """What a run with the options `opts` records: ``model`` (``--model``, or the class
    name of a model given to ``main(model=...)`` when `own_model`), that model's flags
    (`MODEL_FLAGS`; none for one's own), `INPUT_FLAGS`, and its input ``channels``."""
    record: dict[str, Any] = {"model": model_name}
    if own_model:
        record["own_model"] = True
    else:
        record.update({name: getattr(opts, name) for name in MODEL_FLAGS[model_name]})
    record.update({name: getattr(opts, name) for name in INPUT_FLAGS})
    record["channels"] = channels
    return record


def write_flags(root: str | os.PathLike[str], record: Mapping[str, Any]) -> Path:
    """Write `record` to `root`/`FILE` (creating `root`): aside, fsynced, renamed; its
    path. Main rank only."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    aside = root / f".{FILE}.tmp"
    aside.write_text(to_json(dict(record), indent=1) + "\n")
    fsync_file(aside)
    os.replace(aside, root / FILE)
    fsync_dir(root)
    return root / FILE


def read_flags(root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The record in `root`/`FILE`; None where there is none (a run of a version before
    it). ValueError naming the file when it is not a JSON object."""
    path = Path(root) / FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path}: not the JSON object of a run's model flags ({exc})") from exc
    if not isinstance(record, dict):
        raise ValueError(f"{path}: not the JSON object of a run's model flags")
    return record


def mismatches(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """One line per flag whose value differs between `recorded` (the run's) and
    `current` (this command's), each naming the flag and both values; a flag one of
    them lacks (another model's) counts when the other has it."""
    names = [n for n in {**recorded, **current} if n not in NOT_FLAGS]
    return [
        f"--{name} {_value(recorded.get(name))} in the run, {_value(current.get(name))} in "
        "this command"
        for name in names
        if recorded.get(name) != current.get(name)
    ]


def _value(value: Any) -> str:
    return "unset" if value is None else str(value)


def check_resume(
    resume_from_checkpoint: str | None, root: Path, current: Mapping[str, Any]
) -> None:
    """Refuse (`ConfigError`) a resume whose model flags `current` differ from those
    recorded beside the checkpoint it resumes: the folder `root` for "latest" (when it
    holds a checkpoint: none, and the run starts afresh), the folder of a checkpoint
    named by its path. Nothing to check without a resume or a record."""
    if resume_from_checkpoint is None:
        return
    if resume_from_checkpoint == "latest":
        folder = root
        if not list_checkpoints(folder):
            return
    else:
        folder = Path(resume_from_checkpoint).parent
    recorded = read_flags(folder)
    if recorded is None:
        return
    different = mismatches(recorded, current)
    if different:
        raise ConfigError(
            f"resume_from_checkpoint={resume_from_checkpoint!r}: the run recorded in "
            f"{folder / FILE} trained with other flags than this command's: "
            f"{'; '.join(different)}. Resume with the run's values, or start afresh in "
            "another --output_dir (a checkpoint holds the weights of its run's model, "
            "for inputs built with its run's grid and times)"
        )


class RecordModelFlags(Hook):
    """Writes the run's `record` (`write_flags`) in its checkpoint folder as training
    starts, on the main rank: after the start's choice (a refused start writes nothing;
    ``--overwrite_output_dir`` has moved the earlier run's folder, record included)."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self.record = dict(record)

    def on_train_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        if trainer.is_main_process:
            write_flags(trainer.checkpoint_root, self.record)


@dataclass
class Trained:
    """A trained model (`model`, in eval mode), the `flags` its run recorded and the
    `checkpoint` its weights came from."""

    model: torch.nn.Module
    flags: dict[str, Any]
    checkpoint: Path


def load_trained(
    output_dir: str | os.PathLike[str], checkpoint: str | os.PathLike[str] = "latest"
) -> Trained:
    """The model a run of the example in `output_dir` trained, rebuilt from its record
    (`FILE`) and loaded from `checkpoint`: "latest" (the newest under
    OUTPUT_DIR/checkpoints) or a checkpoint's path.

    Raises:
        FileNotFoundError: no record (a run before 2026-12-07 wrote none: rebuild its
            model with `make_model` and the run's flags) or no checkpoint.
        ValueError: the run trained a model of its own (``main(model=...)``), which
            the example cannot rebuild; or another checkpoint's size (safetensors'
            strict load names it).
    """
    root = checkpoint_folder(output_dir)
    flags = read_flags(root)
    if flags is None:
        raise FileNotFoundError(
            f"{root / FILE}: no record of the run's model flags (a run of the example "
            "writes it as its training starts; one before 2026-12-07 did not): build "
            "the model with navier_stokes.models.make_model and that run's --model, "
            "--width, --modes and --layers, and load its model.safetensors"
        )
    if flags.get("own_model"):
        raise ValueError(
            f"{root / FILE}: the run trained a model of your own, {flags['model']} (given "
            "to main(model=...)), which the example cannot rebuild: build it as you did, "
            "then safetensors.torch.load_model(model, CHECKPOINT/model.safetensors)"
        )
    path = latest_checkpoint(root) if checkpoint == "latest" else Path(checkpoint)
    if path is None:
        raise FileNotFoundError(f"{root}: no checkpoint yet (the run wrote none)")
    width, modes, layers = (flags.get(name, 1) for name in ("width", "modes", "layers"))
    model = make_model(flags["model"], flags["channels"], width, modes, layers)
    load_model(model, str(Path(path) / "model.safetensors"))  # strict: names what differs
    model.eval()
    return Trained(model, flags, Path(path))
