"""Input names are strings (`Predictor.predict(inputs: Mapping[str, Any])`, as every name
of the protocol: the trainer's ``ServingHook(inputs=...)``, the fields, the parameters):
a name that is not one is a mistake in the call, a ValueError naming it, whatever the
trainer's state. Found in review: the names were turned into strings, so
``predict({1: a, "1": b})`` sent ``b`` alone, silently, under ``"1"`` (and ``{1: a}``
was sent as ``"1"``).

Real sockets, no trainer needed: a serve file whose port refuses connections (a trainer
gone), where a request that is not refused as a mistake falls back `PredictTimeout` at
once. Each request's timeout (20 s) is long: one that waited for it fails the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from melissa_trainer import wire as protocol
from melissa_trainer.client import Predictor
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY
from melissa_trainer.stream.serving_rendezvous import write_serving

pytestmark = pytest.mark.timeout(30)

_A = np.zeros(4, np.float32)
_B = np.ones(4, np.float32)


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.fixture
def gone(tmp_path: Path) -> Path:
    """A rendezvous whose trainer serves input ``"1"`` and is gone (port 1 refuses)."""
    specs = protocol.field_specs({"1": ((4,), "float32")})
    write_serving(tmp_path, 0, 1, "tcp://127.0.0.1:1", specs, "run-a", None)
    return tmp_path


@pytest.mark.parametrize(
    "inputs, named",
    [
        ({1: _A, "1": _B}, ["1", "'1'"]),  # both keys named: they would collide
        ({"1": _B, 1: _A}, ["1", "'1'"]),
        ({1: _A}, ["1"]),
        ({b"1": _A}, ["b'1'"]),
    ],
    ids=["int-then-str", "str-then-int", "int", "bytes"],
)
def test_a_name_that_is_not_a_string_is_refused(
    gone: Path, inputs: dict[Any, Any], named: list[str]
) -> None:
    with Predictor(0, rendezvous_dir=gone) as predictor, pytest.raises(ValueError) as error:
        predictor.predict(inputs, timeout=20.0)
    text = str(error.value)
    assert text.startswith("predict(): input names must be strings"), text
    for word in named:
        assert word in text, text


def test_string_names_still_reach_the_trainer(gone: Path) -> None:
    # (the oracle that the refusal is the names': the same request with a str name is
    # sent, and falls back as a gone trainer's)
    with Predictor(0, rendezvous_dir=gone) as predictor, pytest.raises(Exception) as fallback:
        predictor.predict({"1": _B}, timeout=20.0)
    assert type(fallback.value).__name__ == "PredictTimeout", fallback.value
