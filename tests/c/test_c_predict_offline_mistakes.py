"""The C client's `mt_predict` says a request's inputs are a mistake whatever the
trainer's state, as the Python `Predictor` does (tests/client/test_predict_offline_mistakes.py,
whose scenarios these are; client/predict.py `_offline_check`): after a trainer that
served stopped (its serve file removed), during the backoff that follows and after it,
inputs that are not those of the serve file last read are `MT_EDTYPE`, `MT_ESHAPE`,
`MT_EFIELD` in the Python client's words, not the fallback's `MT_ETIMEDOUT`; right
inputs fall back. A restarted trainer whose inputs changed is read before they are
checked: its float64 request is answered, and so is one restarted at the same endpoint
(a fixed bind), whose serve file is read again.

Found in a user trial (hserve, 2026-12-05). Failed before: the three mistakes came back
`MT_ETIMEDOUT` (the backoff's, or the lookup's "the trainer that served this simulation
stopped").

Real parts: the compiled client (`clients/c/tests/mt_script.c`) in its own process, a
real `PredictServer` per trainer answering ``y = 2 u + VERSION`` (a thread), stopped.
Requests are given `LONG` seconds: one that waits for its timeout fails the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from held_ports import held_port
from predict_runs import CPredict
from predict_script import MT_EDTYPE, MT_EFIELD, MT_ESHAPE, MT_ETIMEDOUT, Script, outputs_of
from predict_server import VERSION, serving_u

pytestmark = pytest.mark.e2e  # every test here starts a process

#: longer than the test's own timeout: a request that waits for it fails the test
LONG = 120
F32 = ["input u 1 1 4 : 1 2 3 4", "output y 1 4"]  # (dtype code 1: float32)
F64 = ["input u 2 1 4 : 1 2 3 4", "output y 1 4"]  # (dtype code 2: float64; y float32)


def ask(script: Script, *staged: str) -> tuple[int, str, list[str]]:
    """One request of `LONG` seconds with `staged` inputs and outputs: its status,
    message and output lines."""
    lines = script.wait(script.send("unstage", *staged, f"predict {LONG}"))
    code, _, message = lines[-1].partition(" ")
    return int(code), message.strip(), lines


@pytest.mark.timeout(60)
def test_wrong_inputs_after_the_trainer_stopped_are_a_mistake_not_a_fallback(
    c_predict: CPredict, tmp_path: Path
) -> None:
    rv = tmp_path / "rv"
    with c_predict.script({"MELISSA_TRAINER_RENDEZVOUS": str(rv)}, 0, ask=F32) as script:
        with serving_u(rv, "float32"):
            code, message, lines = ask(script, *F32)
            assert (code, outputs_of({0: lines}, 0)[0]) == (0, VERSION), message
        code, message, _ = ask(script, *F32)  # the trainer stopped: a fallback
        assert code == MT_ETIMEDOUT, message
        for staged, want, words in [
            (F64, MT_EDTYPE, "input 'u' is <f8 (4,), declared <f4 (4,)"),
            (["input u 1 1 3 : 1 2 3", "output y 1 4"], MT_ESHAPE,
             "input 'u' is <f4 (3,), declared <f4 (4,)"),
            (["input v 1 1 4 : 1 2 3 4", "output y 1 4"], MT_EFIELD,
             "arrays ['v'], the trainer serves inputs ['u'] (unknown: 'v'; missing: 'u')"),
        ]:  # fmt: skip
            code, message, _ = ask(script, *staged)
            assert code == want, message  # (before: MT_ETIMEDOUT)
            assert words in message, message
        code, message, _ = ask(script, *F32)  # right inputs: the fallback's
        assert code == MT_ETIMEDOUT, message
        script.finish()


@pytest.mark.timeout(60)
def test_a_restarted_trainer_with_other_inputs_is_read_before_they_are_checked(
    c_predict: CPredict, tmp_path: Path
) -> None:
    rv = tmp_path / "rv"
    with c_predict.script({"MELISSA_TRAINER_RENDEZVOUS": str(rv)}, 0, ask=F32) as script:
        with serving_u(rv, "float32"):
            assert ask(script, *F32)[0] == 0
        assert ask(script, *F32)[0] == MT_ETIMEDOUT
        with serving_u(rv, "float64"):  # (its serve file ends the backoff)
            code, message, lines = ask(script, *F64)
            assert code == 0, message
            version, outputs = outputs_of({0: lines}, 0)
            assert version == VERSION
            assert outputs["y"].tolist() == [2 * x + VERSION for x in (1, 2, 3, 4)]
        script.finish()


@pytest.mark.timeout(60)
def test_a_trainer_restarted_at_the_same_endpoint_with_other_inputs_is_asked_with_them(
    c_predict: CPredict, tmp_path: Path
) -> None:
    """A fixed bind: the open socket reconnects to the restarted trainer by itself, and
    its float64 requests were refused `MT_EDTYPE` for ever, checked against the first
    trainer's serve file (failed before; as Python's,
    tests/client/test_predict_restarted_same_endpoint.py). The requests in between fall
    back (`MT_ETIMEDOUT`) until it serves."""
    rv, bind = tmp_path / "rv", f"tcp://127.0.0.1:{held_port()}"
    with c_predict.script({"MELISSA_TRAINER_RENDEZVOUS": str(rv)}, 0, ask=F32) as script:
        with serving_u(rv, "float32", bind=bind):
            assert ask(script, *F32)[0] == 0
        with serving_u(rv, "float64", bind=bind):
            while True:
                code, message, lines = ask(script, *F64)
                if code == 0:
                    break
                assert code == MT_ETIMEDOUT, message  # (before: MT_EDTYPE, for ever)
            assert outputs_of({0: lines}, 0)[0] == VERSION
        script.finish()
