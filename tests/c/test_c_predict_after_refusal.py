"""A C solver the trainer refused gets `MT_ESIMREFUSED` from `mt_predict` too, once its
watch told it at an `mt_send` (clients/c/src/admission_watch.c: why; as the Python
client, tests/client/test_predict_after_refusal.py): the same sentence, nothing asked of
the serving socket. Before, the refused solver's `mt_predict` was answered by the
study's model (`MT_OK`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import running
from predict_server import answering_server
from test_c_admission_watch import FLOAT32, MAX_SENDS, MT_ESIMREFUSED, STUDY, refused_here, solver
from waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_a_refused_c_solver_asking_for_a_prediction_gets_the_refusal(
    script_exe: Path,
    tmp_path: Path,
) -> None:
    rendezvous = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv")}
    with (
        running(rendezvous_dir=tmp_path / "rv", fields=STUDY, run_id="run-a") as receiver,
        answering_server(tmp_path / "rv", run_id="run-a") as (server, _),
        solver(script_exe, tmp_path, 3, "v", **rendezvous) as s,
    ):
        for line in (f"serve {server.endpoint}", f"input u {FLOAT32} 1 4 : 1 2 3 4",
                     f"output y {FLOAT32} 4"):  # fmt: skip
            assert s.do(line) == (0, ""), line
        wait_until(refused_here(receiver, 3), "the receiver's refusal", procs=[s.proc])
        status, told, sends = 0, "", 0
        while status == 0 and sends < MAX_SENDS:
            status, told = s.do(f"send {sends} v {FLOAT32} 4 {sends}")
            sends += 1
        assert status == MT_ESIMREFUSED, (sends, status, told)
        asked = s.do("predict 5")
        again = s.do("predict 5")
        s.do("close")
    assert asked == (MT_ESIMREFUSED, told), asked  # (before: (0, ""), the model's answer)
    assert again == asked
    assert "field 'v' is not one of the study's" in told, told
