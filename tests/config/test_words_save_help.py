"""`--help` on checkpoints tells the truth (htrial16): `--save_steps` once said
"(default: only at the end)" while `--save_seconds` defaults to 600, a checkpoint every
10 minutes as well. Each field's help names the other and the end-of-run checkpoint."""

from __future__ import annotations

import re

from melissa_trainer import ArgumentParser, TrainingArguments


def help_of(flag: str) -> str:
    """The help text of `flag` in `--help`, its lines joined."""
    text = ArgumentParser(TrainingArguments).format_help()
    match = re.search(rf"\n  {flag} [A-Z_]+\n(.*?)\n  --", text, re.S)
    assert match, flag
    return " ".join(match.group(1).split())


def test_save_steps_help_does_not_say_only_at_the_end() -> None:
    words = help_of("--save_steps")
    assert "only at the end" not in words
    assert TrainingArguments().save_seconds == 600  # (the figure the words give)
    assert "--save_seconds, 600 s by default" in words
    assert "at the end unless --no_save_at_end" in words


def test_save_seconds_help_names_the_other_checkpoints() -> None:
    words = help_of("--save_seconds")
    assert "besides those every --save_steps and at the end" in words
    assert "none: by --save_steps and at the end only" in words
    assert "(default: 600; a save" in words
    assert "(default: 600.0)" not in words  # (said once, in its own words)
