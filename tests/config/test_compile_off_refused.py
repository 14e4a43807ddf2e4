"""An explicit ``torch_compile=False`` with a backend or a mode is refused (trial 29):
`transformers`' rule (a backend or a mode turns compiling on) made ``--torch_compile
false --torch_compile_backend eager`` compile, silently. Refused before anything starts,
on the command line as in Python, naming both fields and the fixes; a backend alone
still turns compiling on, and ``torch_compile=False`` alone is off.
"""

from __future__ import annotations

from typing import Any

import pytest

from melissa_trainer import ArgumentParser, ConfigError, TrainingArguments

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("over", "named"),
    [
        ({"torch_compile": False, "torch_compile_backend": "eager"}, "torch_compile_backend"),
        ({"torch_compile": "false", "torch_compile_mode": "default"}, "torch_compile_mode"),
    ],
)
def test_explicit_false_with_a_backend_or_mode_is_refused(over: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        TrainingArguments(**over)
    message = str(raised.value)
    assert "torch_compile=False with" in message and named in message, message
    assert f"drop {named}" in message and "torch_compile=True" in message, message


def test_on_the_command_line_it_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    parser = ArgumentParser(TrainingArguments)
    with pytest.raises(SystemExit) as info:
        parser.parse_args_into_dataclasses(
            ["--torch_compile", "false", "--torch_compile_backend", "eager"]
        )
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "torch_compile=False with torch_compile_backend='eager'" in err, err


def test_a_backend_alone_compiles_and_false_alone_does_not() -> None:
    on = TrainingArguments(torch_compile_backend="eager")
    assert on.torch_compile and on.torch_compile_backend == "eager"
    off = TrainingArguments(torch_compile=False)
    assert not off.torch_compile and off.torch_compile_backend is None
    (parsed,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses(
        ["--torch_compile_backend", "eager"]
    )
    assert parsed.torch_compile
