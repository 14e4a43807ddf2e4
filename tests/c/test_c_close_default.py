"""The C client's default close timeout is the Python client's: one number, read from
each client's source of truth, the header's ``MT_DEFAULT_CLOSE_TIMEOUT`` and
`tuning.DEFAULT_CLOSE_TIMEOUT` (`ClientTuning().close_timeout`), and the one the C
client sets when created (clients/c/src/client.c). Before, C waited 60 s and Python
1800 s: a solver moved from one to the other gave up 30 times sooner, or later. Failed
before: the header had no such constant, the C default a literal 60."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from melissa_trainer.client import ClientTuning
from melissa_trainer.client.tuning import DEFAULT_CLOSE_TIMEOUT

pytestmark = pytest.mark.timeout(30)

C = Path(__file__).resolve().parents[2] / "clients" / "c"


def test_the_c_default_close_timeout_is_the_python_one() -> None:
    header = (C / "include" / "melissa_trainer.h").read_text()
    found = re.findall(r"^#define MT_DEFAULT_CLOSE_TIMEOUT\s+([0-9.eE+]+)\s*$", header, re.M)
    assert len(found) == 1, found
    assert float(found[0]) == DEFAULT_CLOSE_TIMEOUT == ClientTuning().close_timeout
    source = (C / "src" / "client.c").read_text()
    # (the client created gets it: no literal of its own that could drift)
    assert re.findall(r"c->close_timeout = ([^;]+);", source) == ["MT_DEFAULT_CLOSE_TIMEOUT"]
