"""`melissa_trainer.wire` imports its rare-path modules on first use (`_LAZY`): every
public name of theirs is still there, the same object, and nothing else is claimed."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from melissa_trainer import wire


@pytest.mark.parametrize("module_name", sorted(wire._LAZY))
def test_the_lazy_names_are_each_modules_public_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert tuple(wire._LAZY[module_name]) == tuple(module.__all__)
    for name in module.__all__:
        assert getattr(wire, name) is getattr(module, name)
        assert name in wire.__all__


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        wire.no_such_name  # noqa: B018


FRESH = """
import sys
import melissa_trainer.wire as wire
lazy = [m for m in sys.modules if m.rsplit(".", 1)[-1] in ("held", "admission", "predict")
        and m.startswith("melissa_trainer.wire.")]
assert not lazy, lazy
from melissa_trainer.wire import encode_held_query, REFUSAL_CODES
assert "melissa_trainer.wire.held" in sys.modules and "melissa_trainer.wire.predict" in sys.modules
assert "melissa_trainer.wire.admission" not in sys.modules
assert wire.decode_admission.__module__ == "melissa_trainer.wire.admission"
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_fresh_process_loads_each_lazy_module_only_when_one_of_its_names_is_asked() -> None:
    result = subprocess.run(
        [sys.executable, "-c", FRESH], capture_output=True, text=True, timeout=50
    )
    assert result.returncode == 0, result.stderr
