"""The C client routes as the Python client does (docs/protocol.md section 3;
`melissa_trainer.wire.routing`): with a rendezvous whose receivers all advertise
``"routing": "simulation_step"`` it sends simulation s's step t to receiver
``(s + t) % W`` and says so in its HELLO (else the receiver, judging by ``t % W``,
would reject half the steps as ``wrong_receiver``); given its endpoints
(``MELISSA_TRAINER_ENDPOINTS``) it keeps ``t % W``.

The oracle: two real receivers, each draining its own buffer; the one-step
simulations (a steady-state solver's) each took, and that nothing was rejected."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from helpers import drain
from two_receivers import two_receivers

from melissa_trainer.stream.endpoints import fetch_rendezvous

pytestmark = pytest.mark.e2e  # every test here starts processes

SIMULATIONS = 4
FLOAT32 = 1  # the protocol's dtype code
SCRIPT = f"close_timeout 20\nfield u {FLOAT32} 1 4\nstart\nsend 0 u {FLOAT32} 4 0\nclose\n"


def _stream(script_exe: Path, tmp_path: Path, given: bool) -> tuple[list[list[int]], int]:  # noqa: F811
    """Each rank's simulation ids, and the messages rejected on both ranks."""
    rv = tmp_path / "rendezvous"
    with ExitStack() as stack:
        buffers, receivers = two_receivers(stack, rv, SIMULATIONS)
        entries = fetch_rendezvous(rv, timeout=10)
        where = (
            {"MELISSA_TRAINER_ENDPOINTS": ",".join(e["endpoint"] for e in entries)}
            if given
            else {"MELISSA_TRAINER_RENDEZVOUS": str(rv)}
        )
        for sid in range(SIMULATIONS):
            env = {**where, "MELISSA_TRAINER_SIMULATION_ID": str(sid)}
            result = run_script(script_exe, SCRIPT, tmp_path, env, timeout=60)
            assert all(code == 0 for code, _ in result.values()), result
        got = [sorted(int(s["simulation_id"]) for s in drain(b)) for b in buffers]
        rejected = sum(int(r.ingest.telemetry()["rejected"]) for r in receivers)
    return got, rejected


@pytest.mark.timeout(180)
def test_c_one_step_simulations_spread_over_both_ranks(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    got, rejected = _stream(script_exe, tmp_path, given=False)
    # (before the routing: [0, 1, 2, 3] on rank 0, nothing on rank 1)
    assert got == [[0, 2], [1, 3]] and rejected == 0


@pytest.mark.timeout(180)
def test_c_endpoints_given_keep_the_old_routing(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    got, rejected = _stream(script_exe, tmp_path, given=True)
    assert got == [[0, 1, 2, 3], []] and rejected == 0
