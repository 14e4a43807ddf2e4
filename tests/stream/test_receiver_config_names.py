"""A misspelt name given to `ReceiverConfig` is answered with the closest right one, as
`TrainingArguments` answers its own (`common.words.closest_name`, one implementation):
an unknown keyword (``feilds=``: before, a bare TypeError, "got an unexpected keyword
argument 'feilds'") and a dtype name numpy does not know (``"flaot32"``: before,
"'flaot32' is not a dtype" and no suggestion; user trial htrial20)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from melissa_trainer import ConfigError, ReceiverConfig, TrainingArguments
from melissa_trainer.client import Client
from melissa_trainer.config.reading import UnknownArgumentError

pytestmark = pytest.mark.timeout(30)


def test_an_unknown_keyword_names_the_closest_field() -> None:
    with pytest.raises(UnknownArgumentError) as info:
        ReceiverConfig(feilds={"u": ((64,), "float32")})  # type: ignore[call-arg]
    said = str(info.value)
    assert said == "invalid ReceiverConfig: unknown argument 'feilds': did you mean 'fields'?"
    # a TypeError as Python's own (code catching that keeps working), and a ConfigError
    assert isinstance(info.value, TypeError) and isinstance(info.value, ConfigError)
    with pytest.raises(
        TypeError, match=r"unknown argument 'stall_timout': did you mean 'stall_timeout'"
    ):
        ReceiverConfig(stall_timout=5)  # type: ignore[call-arg]
    with pytest.raises(UnknownArgumentError, match="remove it"):  # nothing close: the fields
        ReceiverConfig(zzzzzzzz=1)  # type: ignore[call-arg]


def test_the_same_words_as_training_arguments() -> None:
    with pytest.raises(UnknownArgumentError) as ours:
        ReceiverConfig(bnid="tcp://*:*")  # type: ignore[call-arg]
    with pytest.raises(UnknownArgumentError) as theirs:
        TrainingArguments(batch_szie=4)  # type: ignore[call-arg]
    assert str(ours.value).endswith("unknown argument 'bnid': did you mean 'bind'?")
    assert str(theirs.value).endswith("unknown argument 'batch_szie': did you mean 'batch_size'?")


@pytest.mark.parametrize(
    ("dtype", "meant"), [("flaot32", "float32"), ("unit8", "uint8"), ("int46", "int64")]
)
def test_a_misspelt_dtype_name_is_told_numpys_closest(dtype: str, meant: str) -> None:
    with pytest.raises(ValueError) as info:
        ReceiverConfig(fields={"u": ((64,), dtype)})
    assert str(info.value) == f"field 'u': {dtype!r} is not a dtype: did you mean {meant!r}?"


def test_a_dtype_name_far_from_any_lists_numpys_names_and_good_ones_pass() -> None:
    with pytest.raises(
        ValueError, match=r"'qqqq' is not a dtype: give one of numpy's names: .*float32"
    ):
        ReceiverConfig(fields={"u": ((64,), "qqqq")})
    config = ReceiverConfig(fields={"u": ((64,), "float32"), "v": ((2, 2), "<f8")})
    assert pickle.loads(pickle.dumps(config)) == config  # (its __new__ leaves these be)
    assert dataclasses.replace(config, stall_timeout=5.0).stall_timeout == 5.0
    with pytest.raises(ValueError, match="cannot be streamed"):  # a dtype, not streamable
        ReceiverConfig(fields={"u": ((64,), "complex64")})


def test_a_client_s_misspelt_dtype_is_told_the_same() -> None:
    """The hint lives in `wire.field_specs`, which the client checks its schema with too:
    a solver's ``Client(fields=...)`` is told as the trainer's `ReceiverConfig` is."""
    with pytest.raises(ValueError) as info:
        Client({"u": ((64,), "flaot32")}, simulation_id=0, endpoints="tcp://127.0.0.1:9")
    assert str(info.value) == "field 'u': 'flaot32' is not a dtype: did you mean 'float32'?"
