"""An external-mode close asks each receiver's follow socket whether it ingested the BYE
(`receipts.Rounds`); when no connection to that socket was ever accepted (its
``follow_endpoint`` wrong, or unreachable from here), the failed close says so and what
to check, as a data socket never connected is said (`patience.never_note`). Before: only
"the trainer died, or its node", though the trainer's receiver had just read the BYE.

A real `Receiver` with its rendezvous; its ``rank_0.json`` is then made to name, as its
follow endpoint, a port bound and held (`held_ports`: every connection refused at once)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from held_ports import refused_endpoint
from helpers import running
from stopped_close import close_failure, stop_during_close

from melissa_trainer.client import Client
from melissa_trainer.client.tuning import ClientTuning

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("short_receipt_rounds")]


def test_a_follow_socket_never_connected_is_said(external: Path) -> None:
    tuning = ClientTuning(disconnected_timeout=0.5, follow_timeout=0.5, close_timeout=60)
    with running(rendezvous_dir=external, run_id="run-a"):
        client = Client(simulation_id=6, fields={"u": ((4,), np.float64)}, tuning=tuning)
        for t in range(4):
            client.send(t, u=np.full(4, t, np.float64))
        entry_file = external / "rank_0.json"
        entry = json.loads(entry_file.read_text())
        dead = refused_endpoint()
        entry["follow_endpoint"] = dead
        (external / "rank_0.json.tmp").write_text(json.dumps(entry))
        os.replace(external / "rank_0.json.tmp", entry_file)
        with pytest.raises(TimeoutError) as caught:
            client.close()
    said = str(caught.value)
    assert "its BYE was not confirmed" in said, said
    assert (
        f"the trainer died, or its node; no receiver ever accepted a connection at {dead}: "
        "check the endpoint (the trainer's rank_0.json) or start the trainer first"
    ) in said, said


def test_a_follow_socket_that_connected_is_not_said_never_connected(external: Path) -> None:
    """The trainer stops with the BYE unread after the client's query reached it (as
    tests/client/test_close_receipt.py's trainer gone): connected once, not "never"."""
    tuning = ClientTuning(disconnected_timeout=0.5, follow_timeout=0.5)
    error = close_failure(*stop_during_close(external, 6, tuning))
    said = str(error)
    assert "its BYE was not confirmed" in said and "nor been connected" in said, said
    assert "ever accepted" not in said, said
