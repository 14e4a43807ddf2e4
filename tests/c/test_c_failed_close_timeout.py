"""A C close without BYE (a time step left incomplete: MT_EFIELD, the run did not finish)
to a receiver connected but not reading is bounded in all by the failed close timeout
(mt_set_failed_close_timeout, default MT_DEFAULT_FAILED_CLOSE_TIMEOUT, 10 s), as the
Python client's close(bye=False) is by ``ClientTuning.failed_close_timeout``
(tests/client/test_failed_close_first_outcome.py): the lower of it and the close timeout,
the one the message names (clients/c/src/close_failed.c mt_close_bound).

Before, the C client had no such bound: the close below, with a close timeout of 600 s,
waited those 600 s (the test's own timeout failed it first), and a script's
``failed_close_timeout`` line was an unknown command.

The receiver is a real PULL socket that completed the ZeroMQ handshake and reads nothing
(`slow_pull`, never started): the client's batches stay queued on its side. No clock is
asserted: the words say which bound ended the close."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import MT_EFIELD, Script
from slow_pull import slow_pull

from melissa_trainer.client.tuning import DEFAULT_FAILED_CLOSE_TIMEOUT

pytestmark = pytest.mark.e2e  # every test here starts a process and waits its bound

SID, COUNT, STEPS = 9, 512, 64 * 8  # float64: 4 KiB a step a field, 8 batches of 256 KiB
HEADER = Path(__file__).resolve().parents[2] / "clients" / "c" / "include" / "melissa_trainer.h"
HOW = (
    " (the bound of a close without BYE, not close_timeout: mt_set_failed_close_timeout sets "
    "it; < 0 leaves only close_timeout)"
)


def test_the_c_default_is_the_python_one() -> None:
    found = re.findall(
        r"^#define MT_DEFAULT_FAILED_CLOSE_TIMEOUT\s+([0-9.]+)\s*$", HEADER.read_text(), re.M
    )
    assert [float(f) for f in found] == [DEFAULT_FAILED_CLOSE_TIMEOUT], found


def incomplete_close(
    exe: Path, endpoint: str, *settings: str, whole: bool = False
) -> tuple[int, str]:
    """The status and message of the close of an mt_script client of fields u and v for
    `endpoint` (batched, held 60 s: queued until the close), with `settings` lines, that
    sent STEPS whole steps and then u alone of the next one (not if `whole`: a close
    with BYE)."""
    script = Script(exe)
    try:
        sends = [f"send {t} {f} 2 {COUNT} {t % 200}" for t in range(STEPS) for f in "uv"]
        last = script.send(
            f"id {SID}", f"endpoints {endpoint}", "batching 262144 60",
            "disconnected_timeout 600", *settings, f"field u 2 1 {COUNT}",
            f"field v 2 1 {COUNT}", "start", *sends,
            *([] if whole else [f"send {STEPS} u 2 {COUNT} 1"]),
        )  # fmt: skip
        assert script.wait(last)[-1].strip() == "0", script.seen[last]
        done = script.send("close")
        code, _, message = script.wait(done)[-1].partition(" ")
    finally:
        script.kill()
    return int(code), message.strip()


def assert_bounded(message: str, endpoint: str, setting: str, how: str) -> None:
    incomplete = (
        f"closed with time step {STEPS} incomplete: field(s) 'v' missing; no BYE sent (the "
        "run did not finish); and "
    )
    pattern = (
        re.escape(f"{incomplete}simulation {SID} rank 0: ")
        + r"(batched data|queued messages) not delivered within "
        + re.escape(f"{setting} to ['{endpoint}']{how}")
    )
    assert re.fullmatch(pattern, message), message


@pytest.mark.timeout(120)
def test_the_default_bounds_a_close_without_bye_to_a_receiver_not_reading(
    script_exe: Path,  # noqa: F811
) -> None:
    with slow_pull(1.0) as receiver:  # (never started: it reads nothing)
        code, message = incomplete_close(script_exe, receiver.endpoint, "close_timeout 600")
    assert code == MT_EFIELD, message
    assert_bounded(message, receiver.endpoint, "failed_close_timeout=10.0 s", HOW)


@pytest.mark.timeout(120)
def test_the_lower_bound_is_the_one_named(script_exe: Path) -> None:  # noqa: F811
    """mt_set_failed_close_timeout's value ends the close when it is the lower; the close
    timeout when it is (or the failed one is < 0: none)."""
    with slow_pull(1.0) as receiver:
        code, message = incomplete_close(
            script_exe, receiver.endpoint, "close_timeout 600", "failed_close_timeout 1"
        )
    assert code == MT_EFIELD, message
    assert_bounded(message, receiver.endpoint, "failed_close_timeout=1.0 s", HOW)
    for failed in ("5", "-1"):
        with slow_pull(1.0) as receiver:
            code, message = incomplete_close(
                script_exe, receiver.endpoint, "close_timeout 1", f"failed_close_timeout {failed}"
            )
        assert code == MT_EFIELD, message
        assert_bounded(message, receiver.endpoint, "close_timeout=1.0 s", "")


@pytest.mark.timeout(120)
def test_a_close_with_bye_is_bounded_by_the_close_timeout_alone(
    script_exe: Path,  # noqa: F811
) -> None:
    """Every step whole, the close sends its BYE: failed_close_timeout (here the lower)
    does not bound it, as ClientTuning.failed_close_timeout does not bound the Python
    close(bye=True); the close timeout ends it, named, with its advice."""
    with slow_pull(1.0) as receiver:  # (never started: it reads nothing)
        code, message = incomplete_close(
            script_exe, receiver.endpoint, "close_timeout 1", "failed_close_timeout 0.1",
            whole=True,
        )  # fmt: skip
    assert code != 0, message
    assert "not delivered within close_timeout=1.0 s" in message, message
    assert "failed_close_timeout" not in message, message
