"""Melissa (INRIA) configuration keys that are not this library's, and what to use
instead: said where such a key is refused, as a Hugging Face name is (`hf_names`).

A Melissa study's JSON holds ``dl_config`` keys that match `TrainingArguments` fields
under other names (``per_server_watermark``, ``nb_batches_update``, ...). Given as a flag
or a `--config` key, such a key was refused with "remove it" and the list of valid keys
(htrial48), leaving the user to guess the replacement. Here each one names it:
``--nb_batches_update (Melissa's name: use --eval_steps ...)``.

docs/how-to/configuration.md ("From a Melissa study") holds the full table for readers,
the study's keys included (those go to `Launcher` and friends, in code);
tests/config/test_melissa_names_refused.py checks that every name here is refused so.

Pure (no torch): the configuration layer imports it.
"""

from __future__ import annotations

__all__ = ["MELISSA_ARGUMENTS", "melissa_hint"]

#: where the fuller mapping is, said after each hint
_PAGE = "docs/how-to/configuration.md, 'From a Melissa study'"

#: Melissa key -> (the TrainingArguments field to use, or None; what else to know)
MELISSA_ARGUMENTS: dict[str, tuple[str | None, str]] = {
    "per_server_watermark": ("watermark", "per rank, as Melissa's"),
    # (Melissa steps its optimizer once per batch: a step here spans
    # gradient_accumulation_steps batches per rank, so its counts divide by that too)
    "nb_batches_update": (
        "eval_steps",
        "optimizer steps: Melissa's value divided by the ranks, and by "
        "gradient_accumulation_steps when above 1 (a step is that many batches on every rank)",
    ),
    "checkpoint_interval": (
        "save_steps",
        "optimizer steps: Melissa's value, divided by gradient_accumulation_steps when "
        "above 1 (a step is that many batches on every rank)",
    ),
    "tensorboard": ("report_to", "tensorboard (the default) or none"),
    "convert_log_to_df": (None, "the metrics are in trainer.state.log_history"),
    "dl_config": (None, "a flat file: its keys at the top level, under this library's names"),
    "study_options": (None, "the study is configured in your script: Launcher, LauncherTuning"),
    "launcher_config": (None, "the launcher is configured in your script: Launcher(backend=...)"),
}


def melissa_hint(name: str, flag: bool) -> str | None:
    """What replaces the Melissa key `name` (``Melissa's name: use --eval_steps (...)``,
    said as a flag when `flag`, else as a key); None when `name` is not one."""
    if name not in MELISSA_ARGUMENTS:
        return None
    field, note = MELISSA_ARGUMENTS[name]
    if field is None:
        return f"Melissa's name, none here: {note} ({_PAGE})"
    use = f"--{field}" if flag else repr(field)
    return f"Melissa's name: use {use} ({note}; {_PAGE})"
