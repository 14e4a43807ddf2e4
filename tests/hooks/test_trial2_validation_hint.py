"""The refusal of validation settings without an eval dataset names the flag to unset.

A user trial (2026-11-30): ``early_stopping_patience=2`` without an ``eval_dataset`` was
refused with "leave early_stopping_patience unset (--eval_steps none)", a flag the user
had not given and which leaves early stopping on. The oracle: the hint's flag is the one
refused, and the hinted command line, parsed, clears it.
"""

from __future__ import annotations

import re

import pytest

from melissa_trainer import ArgumentParser, TrainingArguments
from melissa_trainer.hooks import default_hooks


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "given",
    [
        {"early_stopping_patience": 2},
        {"eval_steps": 5},
        {"eval_steps": 5, "early_stopping_patience": 2},
    ],
    ids=lambda g: "+".join(g),
)
def test_the_hint_unsets_what_was_refused(given: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="asks for validation") as refused:
        default_hooks(TrainingArguments(**given), has_eval=False)
    hinted = re.findall(r"--(\w+) none", str(refused.value))
    assert sorted(hinted) == sorted(given), str(refused.value)
    argv = [f"--{k}={v}" for k, v in given.items()] + [f"--{k}=none" for k in hinted]
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses(argv)
    default_hooks(args, has_eval=False)  # refused no more
