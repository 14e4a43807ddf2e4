"""docs/how-to/slurm.md's killed-trainer section says that a running solver usually ends
on its client's own `disconnected_timeout` before the job's lease cancels it: the
figures it quotes are the code's defaults (the Python client's, the C client's, the
lease's), and the client's is the smaller (else the claim is false)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from melissa_trainer.client.tuning import DEFAULT_DISCONNECTED_TIMEOUT
from melissa_trainer.launcher.backends.lease import DEFAULT_TIMEOUT

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "slurm.md"
C_CLIENT = ROOT / "clients" / "c" / "src" / "client.c"


@pytest.mark.timeout(30)
def test_the_page_quotes_the_client_timeout_and_the_lease() -> None:
    text = " ".join(PAGE.read_text().split())
    c_default = re.search(r"c->disconnected_timeout = ([0-9.]+);", C_CLIENT.read_text())
    assert c_default is not None and float(c_default[1]) == DEFAULT_DISCONNECTED_TIMEOUT
    assert DEFAULT_DISCONNECTED_TIMEOUT < DEFAULT_TIMEOUT
    assert f"`disconnected_timeout` seconds (default {DEFAULT_DISCONNECTED_TIMEOUT:g}:" in text
    assert f"well before the {DEFAULT_TIMEOUT:g} s lease" in text
    assert f"for `lease_timeout` seconds (default {DEFAULT_TIMEOUT:g};" in text
