"""The C client takes a rendezvous file marked stopped (`Receiver.stop` writes
``"stopped": true``) as not ready, as the Python client does (`fetch_rendezvous`): a
solver started while its trainer is down waits for the next trainer, and says why when
its rendezvous timeout ends, instead of dialing an endpoint nobody listens on.

The oracle: the Python reader's verdict on the same directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)

from melissa_trainer.stream.endpoints import fetch_rendezvous, mark_stopped, write_rendezvous

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]  # (each test starts a process)

FLOAT32 = 1  # the protocol's dtype code
ENDPOINT = "tcp://127.0.0.1:9"


def start(script_exe: Path, rv: Path, tmp_path: Path) -> tuple[int, str]:  # noqa: F811
    """(status, message) of `mt_client_start` on rendezvous `rv` (0.2 s to be ready)."""
    script = f"rendezvous {rv} 0.2\nid 1\nfield u {FLOAT32} 1 4\nstart\nabort\n"
    return run_script(script_exe, script, tmp_path)[4]


def test_a_stopped_rendezvous_is_not_ready_as_for_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rendezvous"
    write_rendezvous(rv, 0, 1, ENDPOINT, {"run_id": "run-a"})
    mark_stopped(rv, 0, ENDPOINT)
    with pytest.raises(TimeoutError, match="its trainer stopped"):
        fetch_rendezvous(rv, timeout=0.1)
    code, message = start(script_exe, rv, tmp_path)
    assert code != 0, message
    assert "rank_0.json: its trainer stopped (a trainer resumed from its checkpoint" in message


def test_a_rendezvous_rewritten_by_the_next_trainer_or_stopped_false_is_ready(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rendezvous"
    write_rendezvous(rv, 0, 1, ENDPOINT, {"run_id": "run-a"})
    mark_stopped(rv, 0, ENDPOINT)
    write_rendezvous(rv, 0, 1, "tcp://127.0.0.1:10", {"run_id": "run-b"})  # (the next one)
    assert fetch_rendezvous(rv, timeout=0.1)[0]["run_id"] == "run-b"
    assert start(script_exe, rv, tmp_path)[0] == 0
    write_rendezvous(rv, 0, 1, ENDPOINT, {"run_id": "run-c", "stopped": False})
    assert fetch_rendezvous(rv, timeout=0.1)[0]["run_id"] == "run-c"
    assert start(script_exe, rv, tmp_path)[0] == 0
