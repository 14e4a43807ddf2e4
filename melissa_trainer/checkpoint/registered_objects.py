"""The objects registered with Accelerate for checkpointing, checked before a resume.

Accelerate saves each object of ``Accelerator.register_for_checkpointing`` (the
trainer's learning-rate scheduler first, then any a user's script registers through
``trainer.accelerator``) as ``custom_checkpoint_<i>.pkl``, by its index, and its load
gives file ``i`` to the object registered ``i``-th: another number of objects is its raw
"Number of custom checkpoints ... does not match the number of registered objects",
raised after the model and optimizer were loaded, and the same number in another order
gives each object another's state without a word. So each checkpoint records the
classes registered, in order (`names`, under `KEY` of the scheduler's record,
`scheduler_class.SCHEDULER_FILE`), and `check` refuses, before anything is loaded, a
resume that registers others, naming both lists and the fix. A checkpoint written
before the record is judged by its number of ``custom_checkpoint_<i>.pkl`` files.

Pure but for the file `check` reads (`scheduler_class.record` writes it).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.config.reading import ConfigError

__all__ = ["KEY", "check", "names"]

#: the key of the scheduler's record that lists the registered objects' classes
KEY = "registered"
_STATE = re.compile(r"^custom_checkpoint_(\d+)\.pkl$")


def names(accelerator: Any) -> list[str]:
    """The class names (``QualName``) of the objects registered with `accelerator` for
    checkpointing, in the order Accelerate saves them."""
    return [type(obj).__qualname__ for obj in getattr(accelerator, "_custom_objects", [])]


def check(path: Path, record_file: Path, accelerator: Any) -> None:
    """Refuse a resume from checkpoint `path` whose registered objects (`record_file`'s
    `KEY`; without it, its ``custom_checkpoint_<i>.pkl`` files) are not those registered
    with `accelerator` now, in the same order.

    Raises:
        ConfigError: naming both lists and the fix.
    """
    if not hasattr(accelerator, "_custom_objects"):
        return  # (an Accelerate without the list: its own load checks the count)
    mine = names(accelerator)
    recorded = ckpt.read_json(record_file).get(KEY) if record_file.is_file() else None
    if recorded is not None:
        if list(recorded) == mine:
            return
        theirs = [str(name) for name in recorded]
    else:  # written before the record: only its files are known
        files = sorted(
            (int(m.group(1)), p.name) for p in path.iterdir() if (m := _STATE.match(p.name))
        )
        if len(files) == len(mine):
            return
        theirs = [name for _, name in files]
    raise ConfigError(
        f"{path} has {len(theirs)} objects registered for checkpointing "
        f"({', '.join(theirs) or 'none'}) and this run registers {len(mine)} "
        f"({', '.join(mine) or 'none'}): Accelerate gives each object the state saved by "
        f"its index. Register the objects the run that wrote it registered, in the same "
        f"order (the trainer registers its lr_scheduler first; then your script's "
        f"trainer.accelerator.register_for_checkpointing(...) calls, before train()), or "
        f"train afresh in another output_dir"
    )
