"""User trial 37 (an engineer who knows Hugging Face `Trainer`), severity LOW.

What a user did: passed ``--save_strategy no`` (Hugging Face's "never checkpoint"), and
read the refusal's hint to find this library's way.

What happened: the hint said "use --save_steps (no strategy: unset, a checkpoint at the
end)". Unset ``save_steps`` also checkpoints every ``--save_seconds`` (600 s by default,
docs/how-to/configuration.md's table says so), which the hint left out: the user
expected one checkpoint at the end and got one every 10 minutes as well, and the hint
did not name how to have none (``--save_seconds none --no_save_at_end``).

What was expected: the hint naming both: the wall-clock checkpoints of unset
``save_steps``, and the flags that turn checkpoints off.
"""

from __future__ import annotations

import pytest

from melissa_trainer import ArgumentParser, TrainingArguments

pytestmark = pytest.mark.timeout(60)


def test_save_strategy_s_hint_names_save_seconds_and_how_to_save_none(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as raised:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(["--save_strategy", "no"])
    assert raised.value.code == 2
    said = capsys.readouterr().err.strip().splitlines()[-1]  # the error, not the usage
    assert "use --save_steps" in said, said
    assert "--save_seconds" in said, said  # unset save_steps: every 600 s too
    assert "--no_save_at_end" in said, said  # and how to have no checkpoint at all
