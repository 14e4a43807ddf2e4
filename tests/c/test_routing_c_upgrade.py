"""The C client keeps the routing ``t % W`` for a simulation its rendezvous lists under
``"routed_t_mod_w"`` (docs/protocol.md section 3, "Upgrading in the middle of a study";
`melissa_trainer.wire.routing.routing_of_entries`): a trainer resumed from a record of a
version from before the routing key lists there the simulations its receivers hold steps
of routed ``t % W``, and the current C client, restarted for one of them, routes as its
first client did, without the key in its HELLO; the others take ``(s + t) % W``. The ids
are read exactly (2**53 + 1 is not 2**53, as a double would have it; 2**64 - 1 is read).

The oracle: two real receivers (their files given the list, as a resumed receiver writes
it: tests/stream/test_routing_upgrade.py), each draining its own buffer; the one-step
simulations each took, and that nothing was rejected."""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from pathlib import Path

import pytest
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from helpers import drain
from two_receivers import two_receivers

from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.wire.routing import KEPT

pytestmark = pytest.mark.e2e  # every test here starts processes

FLOAT32 = 1  # the protocol's dtype code
SCRIPT = f"close_timeout 20\nfield u {FLOAT32} 1 4\nstart\nsend 0 u {FLOAT32} 4 0\nclose\n"
SIMULATIONS = [0, 1, 2**53 + 1, 2**64 - 1]
LISTED = [1, 2**53, 2**64 - 1]  # (2**53 + 1, not listed, routes (s + t) % W)


def _list_in(rv: Path, kept: list[int]) -> None:
    """Add ``"routed_t_mod_w": kept`` to every rank file of `rv` (each replaced whole, as
    a receiver writes it: a client never reads one half-written)."""
    for path in rv.glob("rank_*.json"):
        info = json.loads(path.read_text())
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**info, KEPT: kept}))
        os.replace(tmp, path)


@pytest.mark.timeout(180)
def test_c_a_listed_simulation_keeps_t_mod_w(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rendezvous"
    with ExitStack() as stack:
        buffers, receivers = two_receivers(stack, rv, len(SIMULATIONS))
        fetch_rendezvous(rv, timeout=10)
        _list_in(rv, LISTED)
        for sid in SIMULATIONS:
            env = {"MELISSA_TRAINER_RENDEZVOUS": str(rv), "MELISSA_TRAINER_SIMULATION_ID": str(sid)}
            result = run_script(script_exe, SCRIPT, tmp_path, env, timeout=60)
            assert all(code == 0 for code, _ in result.values()), result
        # (a sample's id is an int64: 2**64 - 1 comes back as -1)
        got = [sorted(int(s["simulation_id"]) % 2**64 for s in drain(b)) for b in buffers]
        rejected = sum(int(r.ingest.telemetry()["rejected"]) for r in receivers)
        shifted = [sorted(r.ingest.shifted) for r in receivers]
    # step 0: t % 2 = rank 0 for the listed ones; (s + 0) % 2 for the others (before
    # the list was read: [[0], [1, 2**53 + 1, 2**64 - 1]])
    assert got == [[0, 1, 2**64 - 1], [2**53 + 1]] and rejected == 0
    assert shifted == [[0, 2**53 + 1]] * 2  # their HELLOs: with the key only when not listed
