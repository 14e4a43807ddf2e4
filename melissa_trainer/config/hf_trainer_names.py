"""`transformers.Trainer`'s names that `OnlineTrainer` lacks, and `transformers`' classes
this package lacks: what to use instead, said wherever such a name is refused.

* `HF_CLASSES`: `transformers` classes a port imports from this package instead
  (``from melissa_trainer import TrainerCallback``): the package's ``__getattr__``
  raises an ImportError naming the class to use.
* `HF_TRAINER_METHODS`: `transformers.Trainer` methods that `OnlineTrainer` lacks:
  `hf_method_hint` says what to use (`OnlineTrainer.__getattr__`, an AttributeError).
* `HF_TRAINER_KEYWORDS`: `transformers.Trainer` keywords that `OnlineTrainer` lacks:
  `refuse_hf_keywords` raises a TypeError naming the keyword to use (``callbacks=`` ->
  ``hooks=``); no alias is accepted silently. `refuse_train_resume`: the same for
  ``train(resume_from_checkpoint=...)``.

The `TrainingArguments` names (`HF_ARGUMENTS`, `HFName`) are `hf_names`'; the docs' table
(docs/how-to/configuration.md, "From Hugging Face") holds both modules' names for readers.

Pure (no torch): the configuration layer imports it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from melissa_trainer.config.hf_names import NO_HUB, HFName

__all__ = [
    "HF_CLASSES",
    "HF_TRAINER_KEYWORDS",
    "HF_TRAINER_METHODS",
    "hf_method_hint",
    "refuse_hf_keywords",
    "refuse_train_resume",
]


#: `transformers.Trainer` keywords -> what `OnlineTrainer` takes instead
HF_TRAINER_KEYWORDS: Mapping[str, HFName] = {
    "callbacks": HFName("hooks", note="Hook instances, docs/how-to/hooks.md"),
    "train_dataset": HFName("train_source", note="a Source, an iterable or a factory"),
    "data_collator": HFName("collate_fn"),
    # Trainer(model, args, optimizers=(optimizer, scheduler)): htrial44 got Python's bare
    # "unexpected keyword argument 'optimizers'"
    "optimizers": HFName(
        "optimizer",
        note="and lr_scheduler=: Hugging Face's pair as two arguments, "
        "OnlineTrainer(model, args, optimizer, lr_scheduler)",
    ),
    "compute_metrics": HFName(
        None,
        note="a validation logs eval_loss and the held-out simulations' tails; a hook's"
        " eval_figures adds metrics to it",
    ),
}


_CALLBACKS = "hooks are given when the trainer is built: OnlineTrainer(..., hooks=[...])"

#: `transformers.Trainer` methods -> what to use on an `OnlineTrainer` (htrial46:
#: `trainer.save_model("final")` after `train()` got Python's bare AttributeError)
HF_TRAINER_METHODS: Mapping[str, str] = {
    "save_model": "the run's last checkpoint holds the model "
    "(output_dir/checkpoints/checkpoint-STEP/model.safetensors, written at the end: "
    "save_at_end); trainer.save_checkpoint() writes one now (every rank calls it); the "
    "weights alone: trainer.accelerator.unwrap_model(trainer.model).state_dict()",
    "save_state": "trainer.save_checkpoint() (every rank calls it)",
    "predict": "call the model yourself, trainer.model under torch.no_grad() "
    "(trainer.evaluate() gives eval_loss over the eval_dataset)",
    "add_callback": _CALLBACKS,
    "remove_callback": _CALLBACKS,
    "pop_callback": _CALLBACKS,
    "is_world_process_zero": "trainer.is_main_process (a property, not a method)",
    "is_local_process_zero": "trainer.accelerator.is_local_main_process",
    "push_to_hub": NO_HUB.note,
}


#: `transformers` classes -> what this package has instead (htrial46: ``from
#: melissa_trainer import TrainerCallback`` got Python's bare "cannot import name")
HF_CLASSES: Mapping[str, str] = {
    "Trainer": "OnlineTrainer",
    "TrainerCallback": "Hook (docs/how-to/hooks.md)",
    "EarlyStoppingCallback": "EarlyStoppingHook(patience=N), or --early_stopping_patience N",
    "HfArgumentParser": "ArgumentParser",
    "DefaultFlowCallback": "FlowHook",
    "ProgressCallback": "ProgressHook",
    "PrinterCallback": "ProgressHook",
    "TensorBoardCallback": "TensorBoardHook",
}


def hf_method_hint(cls: type, name: str) -> str | None:
    """The AttributeError's words for `name`, a `transformers.Trainer` method of
    `HF_TRAINER_METHODS` missing on an instance of `cls`; None for any other name."""
    if name not in HF_TRAINER_METHODS:
        return None
    return f"{cls.__name__} has no {name!r} (Hugging Face Trainer's): {HF_TRAINER_METHODS[name]}"


def refuse_hf_keywords(cls: type, kwargs: Mapping[str, Any]) -> None:
    """Raise TypeError when `kwargs` (of a call of `cls`, `OnlineTrainer` or a subclass)
    holds a keyword of `HF_TRAINER_KEYWORDS` that ``cls.__init__`` does not take,
    naming the keyword to use (``callbacks=`` -> ``hooks=``); else nothing. A subclass
    that takes the keyword itself (or ``**kwargs``) is left alone."""
    wrong = [key for key in kwargs if key in HF_TRAINER_KEYWORDS]
    if not wrong:
        return
    owner: Any = cls  # (`cls.__init__` is the class's own, not an instance's)
    params = inspect.signature(owner.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    lines = []
    for key in wrong:
        if key in params:
            continue
        entry = HF_TRAINER_KEYWORDS[key]
        use = f"pass {entry.field}=" if entry.field else "none here"
        note = f" ({entry.note})" if entry.note else ""
        lines.append(f"{key}= is Hugging Face Trainer's: {use}{note}")
    if lines:
        said = "; ".join(lines)
        raise TypeError(f"{cls.__name__}() got an unexpected keyword argument: {said}")


def refuse_train_resume(resume_from_checkpoint: object) -> None:
    """Raise TypeError, naming where it goes, for a `resume_from_checkpoint` given to
    `OnlineTrainer.train` (Hugging Face `Trainer.train`'s keyword): a resume is the
    arguments' here, checked when they are made (a path, or "latest"); None is nothing."""
    if resume_from_checkpoint is None:
        return
    latest = " (True: 'latest', the newest checkpoint in output_dir)"
    raise TypeError(
        f"train(resume_from_checkpoint={resume_from_checkpoint!r}) is Hugging Face "
        "Trainer's: here it is TrainingArguments(resume_from_checkpoint=...), a checkpoint "
        f"directory or 'latest'{latest if resume_from_checkpoint is True else ''}; on the "
        "command line --resume_from_checkpoint latest"
    )
