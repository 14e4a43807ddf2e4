"""Hugging Face's `TrainingArguments` names that are not this library's, and what to use
instead: one table, said wherever such a name is refused.

* `HF_ARGUMENTS`: `transformers.TrainingArguments` fields that `TrainingArguments` lacks.
  `config.parser.ArgumentParser` names the replacement of an unrecognized flag
  (``--save_total_limit 2``: ``use --max_to_keep``, `flag_hint`), `TrainingArguments(...)`
  and `ArgumentParser.parse_dict` of an unknown key (`unknown_name_problems`); a
  misspelling of one is told both (`closest_hint`).
* `HFName`: what replaces one name, the entries of this table and of
  `hf_trainer_names`' (`transformers.Trainer`'s keywords, methods and `transformers`'
  classes, refused by the trainer and the package).

docs/how-to/configuration.md ("From Hugging Face") holds the same table for readers;
tests/trainer/test_hf_names.py checks that the two name the same names.

Melissa's keys (`melissa_names`) are told their replacement in the same two places.

Pure (no torch): the configuration layer imports it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from melissa_trainer.common.words import closest_name
from melissa_trainer.config.melissa_names import melissa_hint
from melissa_trainer.config.reading import unknown_key_problems

__all__ = [
    "HF_ARGUMENTS",
    "NO_HUB",
    "HFName",
    "closest_hint",
    "flag_hint",
    "stray_value_hint",
    "unknown_name_problems",
]


@dataclass(frozen=True)
class HFName:
    """What replaces one Hugging Face name here.

    Attributes:
        field: the field (or keyword) to use instead; None when there is none.
        value: the value that field takes for this name (``--bf16``:
            ``mixed_precision bf16``); "" when the name's own value carries over.
        note: what else to know, or, without a `field`, what takes the name's place.
    """

    field: str | None
    value: str = ""
    note: str = ""


_OPTIMIZER = HFName(
    None,
    note="set it in the optimizer or scheduler you pass to "
    "OnlineTrainer(model, args, optimizer, lr_scheduler)",
)
_EPOCHS = "the stream decides when training ends (max_steps stops earlier; pseudo_epochs replays)"
#: (htrial: --push_to_hub and its hub_* companions got a bare "unrecognized"); its note is
#: said of `Trainer.push_to_hub` too (`hf_trainer_names`)
NO_HUB = HFName(
    None,
    note="no upload to the Hub: the checkpoints stay in output_dir/checkpoints "
    "(model.safetensors in each); upload one yourself, huggingface_hub's upload_folder",
)
#: (hrank2: --deepspeed, --fsdp got a bare "unrecognized")
_NO_SHARDING = HFName(
    None,
    note="no sharded training: under accelerate launch --multi_gpu the model is "
    "replicated on every rank (DistributedDataParallel), which must hold it whole",
)
_NO_DATALOADER = (
    "no DataLoader: batches are drawn from the buffer, the next one made a step ahead "
    "(--stage_batches; on a GPU copied through pinned memory)"
)

#: `transformers.TrainingArguments` names -> what to use here
HF_ARGUMENTS: Mapping[str, HFName] = {
    "per_device_train_batch_size": HFName("batch_size", note="per device"),
    "per_device_eval_batch_size": HFName("batch_size", note="validation uses it too"),
    "save_total_limit": HFName("max_to_keep"),
    "bf16": HFName("mixed_precision", "bf16"),
    "fp16": HFName("mixed_precision", "fp16"),
    "eval_strategy": HFName("eval_steps", note="no strategy: unset, validation at the end"),
    "evaluation_strategy": HFName("eval_steps", note="no strategy: unset, validation at the end"),
    "save_strategy": HFName(  # (htrial37: the 600 s checkpoints were left unsaid)
        "save_steps",
        note="no strategy: unset, a checkpoint every save_seconds (600 s) and at the end; "
        "none at all (save_strategy='no'): save_seconds=None and save_at_end=False, "
        "--save_seconds none --no_save_at_end",
    ),
    "logging_strategy": HFName("logging_steps", note="no strategy: every that many steps"),
    "learning_rate": _OPTIMIZER,
    "weight_decay": _OPTIMIZER,
    "adam_beta1": _OPTIMIZER,
    "adam_beta2": _OPTIMIZER,
    "adam_epsilon": _OPTIMIZER,
    "optim": _OPTIMIZER,
    "lr_scheduler_type": _OPTIMIZER,
    "warmup_steps": _OPTIMIZER,
    "warmup_ratio": _OPTIMIZER,
    "num_train_epochs": HFName(None, note=_EPOCHS),
    # in every transformers example's command line (htrial44: a bare "unrecognized")
    "do_train": HFName(None, note="your script trains by calling trainer.train()"),
    "do_eval": HFName(
        None, note="validation follows eval_steps (and runs at the end with an eval_dataset)"
    ),
    "load_best_model_at_end": HFName(
        None, note="the best validation is recorded (state.best_metric), not restored"
    ),
    "logging_first_step": HFName(
        None, note="logs come every logging_steps steps (--logging_steps 1 logs every step)"
    ),
    "use_cpu": HFName(
        None, note="launch on the CPU: accelerate launch --cpu, or CUDA_VISIBLE_DEVICES=''"
    ),
    "full_determinism": HFName(
        None,
        note="--seed seeds every rank; for deterministic kernels call "
        "torch.use_deterministic_algorithms(True) in your script",
    ),
    "dataloader_num_workers": HFName(
        None,
        note="no DataLoader: batches are drawn from the buffer, the next one made a step "
        "ahead (--stage_batches); per-sample work can move to the source (ingest_sample)",
    ),
    "gradient_checkpointing": HFName(
        None,
        note="enable it on your model before the trainer (a transformers model's "
        "gradient_checkpointing_enable(), or torch.utils.checkpoint in its forward)",
    ),
    # common in transformers' examples and tutorials, refused with a bare "unrecognized"
    "push_to_hub": NO_HUB,
    "hub_model_id": NO_HUB,
    "hub_strategy": NO_HUB,
    "hub_token": NO_HUB,
    "hub_private_repo": NO_HUB,
    "eval_delay": HFName(
        None,
        note="validation comes every eval_steps steps from the start (and at the end); "
        "for a later first one, leave eval_steps unset and set control.should_validate "
        "from a hook",
    ),
    "save_safetensors": HFName(
        None,
        note="checkpoints are always safetensors (model.safetensors; the optimizer's "
        "state in optimizer.bin, as Accelerate's save_state writes it)",
    ),
    "save_only_model": HFName(
        None,
        note="a checkpoint holds what a resume needs (model, optimizer, scheduler, buffer); "
        "max_to_keep bounds how many are kept",
    ),
    "disable_tqdm": HFName("disable_progress_bar"),
    "run_name": HFName(
        None, note="TensorBoard writes in logging_dir (default output_dir/runs): name that"
    ),
    "data_seed": HFName(None, note="--seed seeds the data order too (the buffer's draws)"),
    "dataloader_drop_last": HFName(None, note=_NO_DATALOADER),
    "dataloader_pin_memory": HFName(None, note=_NO_DATALOADER),
    "tf32": HFName(None, note="set torch.backends.cuda.matmul.allow_tf32 = True in your script"),
    "no_cuda": HFName(
        None, note="launch on the CPU: accelerate launch --cpu, or CUDA_VISIBLE_DEVICES=''"
    ),
    "auto_find_batch_size": HFName(None, note="give --batch_size (per device)"),
    "deepspeed": _NO_SHARDING,
    "fsdp": _NO_SHARDING,
    "fsdp_config": _NO_SHARDING,
    "ddp_backend": HFName(
        None,
        note="Accelerate picks it (nccl on GPUs, gloo on CPUs); to choose, pass "
        "OnlineTrainer(..., kwargs_handlers=[InitProcessGroupKwargs(backend='gloo')])",
    ),
    "ddp_timeout": HFName(
        None,
        note="the process group's timeout is torch's default unless given; to "
        "change it, pass OnlineTrainer(..., kwargs_handlers=[InitProcessGroupKwargs("
        "timeout=timedelta(seconds=N))])",
    ),
    "log_level": HFName(
        None,
        note="the library logs through Python's logging: "
        "logging.getLogger('melissa_trainer').setLevel(...)",
    ),
}


def _use(name: str, flag: bool) -> str:
    """How `HF_ARGUMENTS[name]` is said: ``Hugging Face's name: use ...``."""
    entry = HF_ARGUMENTS[name]
    if entry.field is None:
        return f"Hugging Face's name, none here: {entry.note}"
    if flag:
        use = f"--{entry.field}" + (f" {entry.value}" if entry.value else "")
    else:
        use = repr(entry.field) + (f" ({entry.field}={entry.value!r})" if entry.value else "")
    return f"Hugging Face's name: use {use}" + (f" ({entry.note})" if entry.note else "")


def flag_hint(flag: str) -> str | None:
    """What to use instead of the command-line `flag` (``--save_total_limit``,
    ``--per-device-train-batch-size``) when it is a Hugging Face name of
    `HF_ARGUMENTS`; None otherwise."""
    name = flag.lstrip("-").replace("-", "_")
    return _use(name, flag=True) if name in HF_ARGUMENTS else melissa_hint(name, flag=True)


#: flags that take one value here where Hugging Face's take a list: what to say of the
#: extra values (``--report_to tensorboard wandb`` left ``wandb`` unrecognized, unsaid why)
_ONE_VALUE_HERE = {
    "report_to": "one reporter here, tensorboard or none, not Hugging Face's list of several",
}


def stray_value_hint(token: str, argv: Sequence[str], one_value_flags: Iterable[str]) -> str | None:
    """Why `token`, a word argparse left unrecognized in `argv`, is there: when the flag
    before it (``--report_to tensorboard wandb``) takes one value, a hint naming that
    flag (``--report_to takes one value: one reporter here, ...``); None otherwise.
    `one_value_flags`: the parser's option strings that take exactly one value."""
    if token not in argv:
        return None
    before = list(argv[: list(argv).index(token)])
    flags = [i for i, word in enumerate(before) if word.startswith("-")]
    if not flags:
        return None
    flag = before[flags[-1]].split("=", 1)[0]
    # the flag's own value is the word after it (or after "="): a stray is one more
    given = len(before) - flags[-1] - 1 + ("=" in before[flags[-1]])
    if flag not in set(one_value_flags) or given < 1:
        return None
    name = flag.lstrip("-").replace("-", "_")
    return f"{flag} takes one value" + (
        f": {_ONE_VALUE_HERE[name]}" if name in _ONE_VALUE_HERE else ""
    )


def unknown_name_problems(
    unknown: Iterable[str], valid: Iterable[str], what: str = "key"
) -> list[str]:
    """`reading.unknown_key_problems`, but a Hugging Face name of `HF_ARGUMENTS` is told
    what to use instead (``unknown argument 'save_total_limit': Hugging Face's name:
    use 'max_to_keep'``) rather than the closest spelling; one line per name, sorted."""
    valid = list(valid)
    lines = []
    for key in sorted(unknown, key=str):
        if str(key) in HF_ARGUMENTS:
            lines.append(f"unknown {what} {key!r}: {_use(str(key), flag=False)}")
        elif (melissa := melissa_hint(str(key), flag=False)) is not None:
            lines.append(f"unknown {what} {key!r}: {melissa}")
        elif (hint := closest_hint(str(key), valid, flag=False)) is not None:
            lines.append(f"unknown {what} {key!r}: {hint}")
        else:
            lines.extend(unknown_key_problems([key], valid, what))
    return lines


def closest_hint(
    name: str, valid: Iterable[str], flag: bool, cutoff: float = 0.6,
    spellings: Mapping[str, Collection[str]] | None = None) -> str | None:  # fmt: skip
    """``did you mean 'X'?`` (``--X`` when `flag`) for `name`, a misspelt key or flag
    name (no dashes before it), or None when nothing is close (`common.words.closest_name`,
    `cutoff`). X is the closest of `valid` and of the Hugging Face names of `HF_ARGUMENTS`
    that `valid` lacks; a Hugging Face name is followed by what replaces it: a user trial's
    ``--learning_rat`` (a script with no learning rate of its own) was told nothing, since
    ``learning_rate`` is no flag here, while ``--learning_rate`` was told to set it in the
    optimizer.

    `spellings` (flags): a name of `valid` -> its flag's real spellings (no dashes); the
    hint is one (`_spelled`): a script's own ``--grid-size`` has no ``--grid_size``."""
    valid = set(valid)
    close = closest_name(name, valid | set(HF_ARGUMENTS), cutoff=cutoff)
    if close is None:
        return None
    said = f"--{_spelled(close, name, (spellings or {}).get(close))}" if flag else repr(close)
    hint = f"did you mean {said}?"
    return hint if close in valid else f"{hint} {_use(close, flag)}"


def _spelled(close: str, typed: str, options: Collection[str] | None) -> str:
    """`close` spelt as `typed` is (--job-limits: --job-limit), if `options` has it."""
    wanted = close.replace("_", "-") if "-" in typed else close
    if not options or wanted in options:
        return wanted
    return close if close in options else sorted(options)[0]
