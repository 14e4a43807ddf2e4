"""The objects registered with Accelerate for checkpointing, checked before a resume.

Accelerate saves each object of ``Accelerator.register_for_checkpointing`` (the
trainer's learning-rate scheduler first, then any a user's script registers through
``trainer.accelerator``) as ``custom_checkpoint_<i>.pkl``, by its index, and its load
gives file ``i`` to the object registered ``i``-th: another number of objects is its raw
"Number of custom checkpoints ... does not match the number of registered objects",
raised after the model and optimizer were loaded, and the same number in another order
gives each object another's state without a word. So each checkpoint records
(`recorded`, in the scheduler's record, `scheduler_class.SCHEDULER_FILE`) the classes
registered, in order (`KEY`), and a `fingerprint` of each object's state (`SHAPES_KEY`:
its keys and tensor shapes, not its values), and `check` refuses, before anything is
loaded, a resume that registers other classes or another order of classes, and one
whose objects of one class match the saved fingerprints only in another order (two
``Ema`` of different sizes swapped), naming the positions and the fix.

What cannot be told: objects of one class whose states have the same keys and shapes
(two counters, two averages of one size) are loaded by index, whatever order the
script registers them in: register them in the order of the run that wrote the
checkpoint. A resume whose objects changed shape otherwise (a size changed in the
script) is not an order and is left to the object's own ``load_state_dict``. A
checkpoint written before the fingerprints is checked by its classes; one written
before the classes, by its number of ``custom_checkpoint_<i>.pkl`` files.

Pure but for the file `check` reads (`scheduler_class.record` writes it) and the
``state_dict()`` of each registered object, read (not changed) at save and at `check`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from melissa_trainer.checkpoint.files import read_json
from melissa_trainer.config.reading import ConfigError

__all__ = ["KEY", "SHAPES_KEY", "check", "fingerprint", "names", "recorded"]

#: the key of the scheduler's record that lists the registered objects' classes
KEY = "registered"
#: the key of the scheduler's record that lists the registered objects' fingerprints
SHAPES_KEY = "registered_shapes"
_STATE = re.compile(r"^custom_checkpoint_(\d+)\.pkl$")
_FIX = (
    "Register the objects the run that wrote it registered, in the same order (the "
    "trainer registers its lr_scheduler first; then your script's "
    "trainer.accelerator.register_for_checkpointing(...) calls, before train()), or "
    "train afresh in another output_dir"
)


def _objects(accelerator: Any) -> list[Any]:
    return list(getattr(accelerator, "_custom_objects", []))


def names(accelerator: Any) -> list[str]:
    """The class names (``QualName``) of the objects registered with `accelerator` for
    checkpointing, in the order Accelerate saves them."""
    return [type(obj).__qualname__ for obj in _objects(accelerator)]


def fingerprint(obj: Any) -> str:
    """A short hash of the layout of ``obj.state_dict()``: its keys (nested mappings'
    too) and, for values with a ``shape`` (tensors, arrays), the shape; never the
    values, which training changes. Lists and other values count by their key alone
    (their length may grow)."""
    parts: list[str] = []
    _layout(obj.state_dict(), "", parts)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _layout(value: Any, at: str, parts: list[str]) -> None:
    if isinstance(value, Mapping):
        for key in sorted(value, key=str):
            _layout(value[key], f"{at}/{key}", parts)
    elif hasattr(value, "shape"):
        parts.append(f"{at}:{tuple(value.shape)}")
    else:
        parts.append(at)


def recorded(accelerator: Any) -> dict[str, list[str]]:
    """What a checkpoint records of the objects registered with `accelerator`: their
    classes (`KEY`) and fingerprints (`SHAPES_KEY`), in registration order."""
    objects = _objects(accelerator)
    return {KEY: names(accelerator), SHAPES_KEY: [fingerprint(obj) for obj in objects]}


def check(path: Path, record_file: Path, accelerator: Any) -> None:
    """Refuse a resume from checkpoint `path` whose registered objects (`record_file`'s
    `KEY`; without it, its ``custom_checkpoint_<i>.pkl`` files) are not those registered
    with `accelerator` now, in the same order, or whose objects of one class match its
    fingerprints (`SHAPES_KEY`) only in another order.

    Raises:
        ConfigError: naming both lists (or the swapped positions) and the fix.
    """
    if not hasattr(accelerator, "_custom_objects"):
        return  # (an Accelerate without the list: its own load checks the count)
    mine = names(accelerator)
    record = read_json(record_file) if record_file.is_file() else {}
    if record.get(KEY) is not None:
        if list(record[KEY]) == mine:
            _check_order(path, record.get(SHAPES_KEY), accelerator, mine)
            return
        theirs = [str(name) for name in record[KEY]]
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
        f"its index. {_FIX}"
    )


def _check_order(path: Path, saved: Any, accelerator: Any, mine: list[str]) -> None:
    """Refuse objects of one class whose fingerprints match `saved` (the checkpoint's,
    None: not recorded) only in another order: each would load another's state."""
    if not isinstance(saved, list) or len(saved) != len(mine):
        return  # written before the fingerprints: the classes were all it could check
    classes = [name for name in dict.fromkeys(mine) if mine.count(name) > 1]
    if not classes:
        return  # (one object per class: the classes' order said it all)
    now = [fingerprint(obj) for obj in _objects(accelerator)]
    swapped: list[str] = []
    for name in classes:
        at = [i for i, mine_name in enumerate(mine) if mine_name == name]
        theirs, ours = [saved[i] for i in at], [now[i] for i in at]
        if theirs == ours or sorted(theirs) != sorted(ours):
            continue  # the same order, or shapes changed otherwise: not a swap
        swapped += [
            f"custom_checkpoint_{i}.pkl ({name}) holds the state of this run's object "
            f"{next(j for j in at if now[j] == saved[i])}"
            for i in at
            if saved[i] != now[i]
        ]
    if swapped:
        raise ConfigError(
            f"{path}: objects of one class are registered in another order than the run "
            f"that wrote it registered them (told by their state's keys and shapes): "
            f"{'; '.join(swapped)} (objects numbered from 0 in registration order, as the "
            f"files). Accelerate gives each object the state saved by its "
            f"index, so each would load another's. {_FIX}"
        )
