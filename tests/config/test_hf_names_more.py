"""Hugging Face names a trial used (htrial9): ``--use_cpu``, ``--full_determinism``,
``--dataloader_num_workers``, ``--gradient_checkpointing`` are told what replaces them
(before: argparse's bare "unrecognized"), ``--logging_first_step`` no longer gets "did
you mean --logging_steps" (another meaning); ``report_to=["tensorboard"]`` (HF's list)
is taken (before: "is not a string" with no fix), a list of several is refused naming
the fix; fp16 on a CPU says what to set in a sentence that reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer import ArgumentParser, TrainingArguments
from melissa_trainer.config.device_checks import device_problems
from melissa_trainer.config.reading import ConfigError

FLAGS = [
    (["--use_cpu"], "accelerate launch --cpu"),
    (["--full_determinism"], "torch.use_deterministic_algorithms(True)"),
    (["--dataloader_num_workers", "4"], "no DataLoader"),
    (["--gradient_checkpointing"], "gradient_checkpointing_enable()"),
    (["--logging_first_step"], "--logging_steps 1 logs every step"),
    # htrial44: transformers examples' --do_train / --do_eval got a bare "unrecognized"
    (["--do_train"], "trainer.train()"),
    (["--do_eval"], "validation follows eval_steps"),
    # common transformers flags refused with a bare "unrecognized" (hhf2)
    (["--push_to_hub"], "no upload to the Hub: the checkpoints stay in output_dir/checkpoints"),
    (["--hub_model_id", "me/model"], "no upload to the Hub"),
    (["--hub_strategy", "end"], "no upload to the Hub"),
    (["--hub_token", "x"], "no upload to the Hub"),
    (["--hub_private_repo"], "no upload to the Hub"),
    (["--eval_delay", "100"], "leave eval_steps unset and set control.should_validate"),
    (["--save_safetensors"], "checkpoints are always safetensors"),
    (["--save_only_model"], "max_to_keep bounds how many"),
    (["--disable_tqdm"], "use --disable_progress_bar"),
    (["--run_name", "mine"], "logging_dir (default output_dir/runs)"),
    (["--data_seed", "3"], "--seed seeds the data order too"),
    (["--dataloader_drop_last"], "no DataLoader"),
    (["--dataloader_pin_memory", "false"], "no DataLoader"),
    (["--tf32", "true"], "torch.backends.cuda.matmul.allow_tf32 = True"),
    (["--no_cuda"], "accelerate launch --cpu"),
    (["--auto_find_batch_size"], "give --batch_size"),
    (["--log_level", "info"], "logging.getLogger('melissa_trainer')"),
    # refused with a bare "unrecognized" (hrank2)
    (["--deepspeed", "ds.json"], "no sharded training"),
    (["--fsdp", "full_shard"], "replicated on every rank (DistributedDataParallel)"),
    (["--fsdp_config", "f.json"], "no sharded training"),
    (["--ddp_backend", "gloo"], "InitProcessGroupKwargs(backend='gloo')"),
    (["--ddp_timeout", "7200"], "InitProcessGroupKwargs(timeout=timedelta(seconds=N))"),
]


@pytest.mark.parametrize(("argv", "named"), FLAGS, ids=[a[0] for a, _ in FLAGS])
def test_the_flag_is_told_what_replaces_it(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit, match="^2$"):
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(argv)
    err = capsys.readouterr().err
    assert f"{argv[0]} (Hugging Face's name" in err and named in err, err
    assert "did you mean" not in err


@pytest.mark.parametrize(
    ("given", "made"),
    [
        (["tensorboard"], "tensorboard"),
        (["none"], "none"),
        ([], "none"),
        (("TensorBoard",), "tensorboard"),
    ],
)
def test_report_to_as_a_list_of_one(tmp_path: Path, given: list[str], made: str) -> None:
    args = TrainingArguments(output_dir=str(tmp_path), report_to=given)  # type: ignore[arg-type]
    assert args.report_to == made


def test_report_to_naming_several_says_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        TrainingArguments(output_dir=str(tmp_path), report_to=["tensorboard", "wandb"])  # type: ignore[arg-type]
    said = str(caught.value)
    assert "report_to=['tensorboard', 'wandb'] names 2 reporters" in said
    assert "give one of tensorboard, none" in said


def test_fp16_on_cpu_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    (problem,) = device_problems("fp16", None, "cpu")
    assert "set mixed_precision='bf16' or 'no' (bf16's autocast runs on a CPU too)" in problem
    assert "(it)" not in problem
