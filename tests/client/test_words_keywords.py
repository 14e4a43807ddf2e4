"""A misspelled keyword of `Client` or `ClientTuning` names the closest valid one
("did you mean 'fields'?", `common.words.closest_name`), as `ReceiverConfig` does; it
was Python's bare "unexpected keyword argument 'feilds'". Still a `TypeError` (code
that catches Python's keeps working): `UnknownArgumentError`. Nothing is connected: the
keywords are checked before the client is built."""

from __future__ import annotations

from typing import Any

import pytest

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.config.reading import UnknownArgumentError

FIELDS = {"u": ((4,), "float32")}


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: Client(feilds=FIELDS), "unknown argument 'feilds': did you mean 'fields'?"),
        (
            lambda: Client(FIELDS, endpoints="tcp://127.0.0.1:1", send_timout=1.0),
            "unknown argument 'send_timout': did you mean 'send_timeout'?",
        ),
        (lambda: ClientTuning(sndhw=10), "unknown argument 'sndhw': did you mean 'sndhwm'?"),
        (
            lambda: ClientTuning(close_timout=5.0),
            "unknown argument 'close_timout': did you mean 'close_timeout'?",
        ),
    ],
)
def test_a_misspelled_keyword_names_the_closest_one(make: Any, said: str) -> None:
    with pytest.raises(TypeError) as caught:
        make()
    assert isinstance(caught.value, UnknownArgumentError), repr(caught.value)
    assert said in str(caught.value), str(caught.value)


def test_a_keyword_like_none_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownArgumentError) as caught:
        ClientTuning(zzz=1)
    assert "unknown argument 'zzz': remove it (valid arguments: batch_bytes, " in str(
        caught.value
    ), str(caught.value)
    assert "invalid ClientTuning" in str(caught.value)


def test_a_subclass_s_own_keyword_is_valid() -> None:
    class Tagged(ClientTuning):  # (a dataclass's subclass, no field of its own)
        pass

    assert Tagged(sndhwm=10).sndhwm == 10
    with pytest.raises(UnknownArgumentError, match="did you mean 'sndhwm'"):
        Tagged(sndhw=10)
