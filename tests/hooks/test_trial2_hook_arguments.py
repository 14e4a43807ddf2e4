"""What `OnlineTrainer(..., hooks=...)` says to the mistakes a user trial made with it.

`hooks=None` (transformers' `callbacks=None` idiom) is no hooks; one hook where a list
belongs, or a hook class where an instance belongs, is a `TypeError` that names the fix
(they were `'NoneType' object is not iterable`, `'MyHook' object is not iterable` and
`... got <class 'type'>`). Refused at construction, before anything starts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments


class MyHook(Hook):
    def on_step_end(self, trainer, state, control):  # type: ignore[no-untyped-def]
        self.steps = state.global_step


def samples(rank: int, world_size: int):  # type: ignore[no-untyped-def]
    for i in range(32):
        yield {"x": np.full(3, i / 32, np.float32), "y": np.full(2, i / 16, np.float32)}


def trainer(tmp_path: Path, hooks: object) -> OnlineTrainer:
    model = torch.nn.Linear(3, 2)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        report_to="none",
        disable_progress_bar=True,
        save_at_end=False,
        batch_size=4,
        watermark=4,
        max_steps=2,
    )
    return OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), 0.1),
        train_source=samples,
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
        hooks=hooks,  # type: ignore[arg-type]
    )


@pytest.mark.timeout(120)
def test_hooks_none_is_no_hooks(tmp_path: Path) -> None:
    t = trainer(tmp_path, None)
    t.train()
    assert t.state.global_step == 2
    assert not any(isinstance(h, MyHook) for h in t.hooks.hooks)


@pytest.mark.timeout(60)
def test_one_hook_instead_of_a_list_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"a list of hooks.*hooks=\[MyHook\(\)\]"):
        trainer(tmp_path, MyHook())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hooks", [[MyHook], MyHook], ids=["in a list", "alone"])
def test_a_hook_class_instead_of_an_instance_names_the_fix(tmp_path: Path, hooks: object) -> None:
    with pytest.raises(TypeError, match=r"the class MyHook.*an instance.*MyHook\(\)"):
        trainer(tmp_path, hooks)


@pytest.mark.timeout(60)
def test_something_else_names_its_type(tmp_path: Path) -> None:
    with pytest.raises(
        TypeError, match=r"subclass of melissa_trainer\.Hook.*an object of type str"
    ):
        trainer(tmp_path, ["MyHook"])
