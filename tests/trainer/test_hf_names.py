"""Hugging Face names are told what replaces them (user trial 5, F6): the command line's
unknown flag, `TrainingArguments`' unknown argument, a `--config` file's unknown key and
`OnlineTrainer`'s Trainer keywords (``callbacks=``) used to get argparse's plain
"unrecognized arguments", "remove it (valid arguments: ...)" or Python's "unexpected
keyword argument". One table for the arguments (`config.hf_names`) and one for the
trainer's keywords (`config.hf_trainer_names`) serve all, and the docs' tables
(docs/how-to/configuration.md, "From Hugging Face") name the same names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from melissa_trainer import ArgumentParser, OnlineTrainer, TrainingArguments
from melissa_trainer.config.hf_names import HF_ARGUMENTS
from melissa_trainer.config.hf_trainer_names import HF_TRAINER_KEYWORDS
from melissa_trainer.config.reading import ConfigError, UnknownArgumentError

DOC = Path(__file__).parents[2] / "docs" / "how-to" / "configuration.md"

#: the trial's flags, and what the error must name for each
FLAGS = [
    (["--per_device_train_batch_size", "8"], "use --batch_size"),
    (["--save_total_limit", "2"], "use --max_to_keep"),
    (["--bf16"], "use --mixed_precision bf16"),
    (["--fp16"], "use --mixed_precision fp16"),
    (["--eval_strategy", "steps"], "use --eval_steps"),
    (["--learning_rate", "1e-3"], "the optimizer or scheduler you pass to OnlineTrainer"),
    (["--num_train_epochs", "2"], "the stream decides"),
    (["--load_best_model_at_end"], "recorded (state.best_metric), not restored"),
    (["--warmup_steps", "10"], "the optimizer or scheduler you pass"),
    (["--lr_scheduler_type", "cosine"], "the optimizer or scheduler you pass"),
    (["--logging_strategy", "steps"], "use --logging_steps"),
    (["--per-device-train-batch-size", "8"], "use --batch_size"),
]


@pytest.mark.parametrize(("argv", "named"), FLAGS, ids=[a[0] for a, _ in FLAGS])
def test_a_hugging_face_flag_is_told_what_replaces_it(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(argv)
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert f"{argv[0]} (Hugging Face's name" in err and named in err, err
    assert "did you mean" not in err  # (--logging_strategy used to get --logging_steps?)


def test_a_typo_still_gets_the_closest_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="^2$"):
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(["--batchsize", "3"])
    assert "--batchsize (did you mean --batch_size?)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"save_total_limit": 2}, "'save_total_limit': Hugging Face's name: use 'max_to_keep'"),
        ({"bf16": True}, "use 'mixed_precision' (mixed_precision='bf16')"),
        ({"learning_rate": 1e-3}, "none here: set it in the optimizer or scheduler"),
    ],
)
def test_in_python_an_hf_argument_is_told_what_replaces_it(
    kwargs: dict[str, object], said: str
) -> None:
    with pytest.raises(UnknownArgumentError) as raised:
        TrainingArguments(**kwargs)  # type: ignore[arg-type]
    assert said in str(raised.value)
    assert "remove it" not in str(raised.value)


def test_a_config_key_is_told_too() -> None:
    with pytest.raises(ConfigError, match="'save_total_limit': Hugging Face's name: use"):
        ArgumentParser(TrainingArguments).parse_dict({"save_total_limit": 2})


def test_onlinetrainer_refuses_callbacks_naming_hooks(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 1)
    with pytest.raises(TypeError, match="callbacks= is Hugging Face Trainer's: pass hooks="):
        OnlineTrainer(
            model,
            TrainingArguments(output_dir=str(tmp_path)),
            torch.optim.SGD(model.parameters(), lr=0.1),
            train_source=[],
            callbacks=[],  # type: ignore[call-arg]
        )
    # Trainer's pair (htrial44: Python's bare "unexpected keyword argument" before)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"optimizers= is Hugging Face Trainer's: pass optimizer="):
        OnlineTrainer(
            model,
            TrainingArguments(output_dir=str(tmp_path)),
            optimizers=(optimizer, None),  # type: ignore[call-arg]
            train_source=[],
        )
    with pytest.raises(TypeError, match="unexpected keyword argument 'nonsense'"):
        OnlineTrainer(model, None, None, train_source=[], nonsense=1)  # type: ignore[arg-type,call-arg]


def test_a_subclass_that_takes_the_keyword_is_left_alone(tmp_path: Path) -> None:
    class WithCallbacks(OnlineTrainer):
        def __init__(self, *args: object, callbacks: list[object], **kwargs: object) -> None:
            self.seen = callbacks
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    model = torch.nn.Linear(2, 1)
    trainer = WithCallbacks(
        model,
        TrainingArguments(output_dir=str(tmp_path), report_to="none"),
        torch.optim.SGD(model.parameters(), lr=0.1),
        train_source=[],
        callbacks=["mine"],
    )
    assert trainer.seen == ["mine"]


def _doc_names(heading: str) -> set[str]:
    """The backticked names of the first column of the first table's rows under
    `heading` (its header row left out)."""
    text = DOC.read_text(encoding="utf-8")
    names: set[str] = set()
    rows = False
    for line in text.split(heading, 1)[1].splitlines():
        if line.startswith("|---"):
            rows = True
        elif rows and line.startswith("|"):
            names |= set(re.findall(r"`(\w+)`", line.split("|")[1]))
        elif rows:
            break  # the end of the table
    return names


def test_the_docs_table_names_the_code_s_names() -> None:
    assert _doc_names("## From Hugging Face `TrainingArguments`") == set(HF_ARGUMENTS)
    assert _doc_names("| `Trainer` | `OnlineTrainer` |") == set(HF_TRAINER_KEYWORDS)
    fields = {f for f in TrainingArguments.__dataclass_fields__}
    assert not fields & set(HF_ARGUMENTS)  # a name here is never refused as HF's
