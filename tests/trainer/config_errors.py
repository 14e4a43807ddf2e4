"""What the tests of `TrainingArguments`' checks share (test_arguments_*.py):
`config_error`, the `ConfigError` that arguments made of its keywords raise (the test
fails if they raise none)."""

from __future__ import annotations

import pytest

from melissa_trainer.config.arguments import TrainingArguments
from melissa_trainer.config.reading import ConfigError


def config_error(**kwargs: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        TrainingArguments(**kwargs)  # type: ignore[arg-type]
    return info.value
