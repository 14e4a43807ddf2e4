"""The words of a ``MELISSA_TRAINER_PARAMETERS`` that json.loads refuses do not depend
on the Python that runs: `json_fault` says a trailing comma in Python 3.13's words
("Illegal trailing comma before end of object" at the comma) where 3.10-3.12 said
"Expecting property name enclosed in double quotes" at the bracket, and leaves every
other failure as the running json says it. The C client says 3.13's too (json_scan.c;
tests/c/test_c_env_parity.py compares them). A test that spelled the running Python's
words (tests/client/test_client_configuration.py: "at character 10") failed under 3.13.

A lone UTF-16 surrogate escaped in a string ("\\ud800") is refused where it is written:
json.loads took it into a str that no UTF-8 holds, the C client read U+FFFD.
"""

from __future__ import annotations

import json
import sys

import pytest

from melissa_trainer.client.parameters import ENV_PARAMETERS, check_parameters
from melissa_trainer.common.json_words import json_fault

#: texts json.loads refuses; a trailing comma's 3.13 words, or None: as json says them
FAULTS = [
    ('{"a": 1,}', ("Illegal trailing comma before end of object", 7)),
    ('{"a": 1 ,\n\t }', ("Illegal trailing comma before end of object", 8)),
    ("[1, 2,]", ("Illegal trailing comma before end of array", 5)),
    ('{"a": [{"b": 1,}]}', ("Illegal trailing comma before end of object", 14)),
    ('{"a": [1,}', None),  # (an array closed by a brace: a value expected)
    ('{"a": 1, ]', None),  # (an object closed by a bracket: a name expected)
    ("{,}", None),
    ("[,]", None),
    ('{"a" 1}', None),
    ('{"a": "x', None),
    ("", None),
]


def loads_fault(text: str) -> json.JSONDecodeError:
    with pytest.raises(json.JSONDecodeError) as error:
        json.loads(text)
    return error.value


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("text", "said"), FAULTS)
def test_json_fault_is_3_13s_words_on_every_python(text: str, said: tuple[str, int] | None) -> None:
    exc = loads_fault(text)
    running = (exc.msg.removesuffix(" at"), exc.pos)
    assert json_fault(text, exc) == (said or running)
    if sys.version_info >= (3, 13):  # (the words are the running json's there)
        assert json_fault(text, exc) == running


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("value", "at"),
    [
        ('{"\\ud800": 1}', "\\ud800 at character 2"),
        ('{"a": 1, "x\\uDC00": 2}', "\\uDC00 at character 11"),
        ('{"\\ud800\\ud800": 1}', "\\ud800 at character 2"),
        ('{"a": {"b": "\\udfff"}}', "\\udfff at character 13"),
    ],
)
def test_a_lone_surrogate_is_refused_where_it_is_written(
    monkeypatch: pytest.MonkeyPatch, value: str, at: str
) -> None:
    monkeypatch.setenv(ENV_PARAMETERS, value)
    with pytest.raises(ValueError) as error:
        check_parameters(None)
    assert str(error.value) == (
        f"{ENV_PARAMETERS} has a lone UTF-16 surrogate ({at}), which is no character: "
        f"{value!r}; give an object of name -> number, e.g. '{{\"k\": 0.5}}'"
    )


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("value", "name"),
    [('{"a": 1, "\\ud83d\\ude00": 2}', "\U0001f600"), ('{"a": 1, "\\\\ud800": 2}', "\\ud800")],
)
def test_a_pair_and_an_escaped_backslash_are_taken(
    monkeypatch: pytest.MonkeyPatch, value: str, name: str
) -> None:
    monkeypatch.setenv(ENV_PARAMETERS, value)
    assert check_parameters(None) == {"a": 1.0, name: 2.0}
