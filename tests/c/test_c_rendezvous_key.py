"""The C client finds its receivers' CURVE keys in the rendezvous, as the Python client
does (`melissa_trainer.client.config.resolve_receivers`): a trainer with CURVE publishes
each rank's public key in ``rank_{r}.json``; a solver given only
``MELISSA_TRAINER_RENDEZVOUS`` (what the launcher sets), no ``MELISSA_TRAINER_KEY``,
streams to it. A file whose key is not a 40-character Z85 key is invalid, for both.

The oracle: real receivers with CURVE on (two ranks, a key pair each, so that each
socket must take its own rank's key) take every time step of the compiled C client,
each exactly once, on the rank the routing sends it to ((simulation id + t) % 2: the
rendezvous advertises it), bit for bit."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest
import zmq
from c_driver import payload, run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from helpers import drain
from two_receivers import two_receivers

from melissa_trainer.stream.endpoints import fetch_rendezvous, write_rendezvous

pytestmark = [
    pytest.mark.e2e,  # every test here starts a process
    pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq was built without CURVE"),
]

STEPS = 6
FLOAT32 = 1  # the protocol's dtype code


@pytest.mark.timeout(120)
def test_a_c_solver_streams_to_curve_receivers_found_in_the_rendezvous(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rendezvous"
    with ExitStack() as stack:
        buffers, receivers = two_receivers(stack, rv, 1, curve=True)  # a key pair per rank
        published = fetch_rendezvous(rv, timeout=10)
        keys = [e["curve_public_key"] for e in published]
        assert keys == [r.curve_public_key for r in receivers] and keys[0] != keys[1]
        sends = "".join(f"send {t} u {FLOAT32} 4 {t}\n" for t in range(STEPS))
        script = f"close_timeout 20\nfield u {FLOAT32} 1 4\nstart\n{sends}close\n"
        env = {"MELISSA_TRAINER_RENDEZVOUS": str(rv), "MELISSA_TRAINER_SIMULATION_ID": "7"}
        result = run_script(script_exe, script, tmp_path, env, timeout=60)
        assert all(code == 0 for code, _ in result.values()), result
        got = [drain(buffer) for buffer in buffers]  # (each stream ends at the BYE)
    for rank in range(2):
        steps = sorted(int(s["time_step"]) for s in got[rank])
        # (7 + t) % 2: the routing the rendezvous advertises (docs/protocol.md section 3)
        assert steps == [t for t in range(STEPS) if (7 + t) % 2 == rank], (rank, steps)
        for s in got[rank]:
            assert int(s["simulation_id"]) == 7
            want = payload(FLOAT32, 4, int(s["time_step"]))
            assert s["u"].tobytes() == want.tobytes(), s


@pytest.mark.timeout(60)
def test_a_rendezvous_key_not_40_characters_is_invalid_as_for_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rendezvous"
    write_rendezvous(rv, 0, 1, "tcp://127.0.0.1:9", {"curve_public_key": "short"})
    with pytest.raises(TimeoutError, match=r"rank_0\.json invalid"):
        fetch_rendezvous(rv, timeout=0.1)
    script = f"rendezvous {rv} 0.1\nid 1\nfield u {FLOAT32} 1 4\nstart\nabort\n"
    result = run_script(script_exe, script, tmp_path)
    code, message = result[4]
    assert code != 0 and "rank_0.json invalid" in message and "short" in message, result
