"""A trainer running without a `ServingHook` (its receivers' ``rank_0.json`` live, no
``serve_0.json``) is said alike by the C client (clients/c/src/missing_dir.c
mt_unserved_check, mt_unserved_note) and the Python `Predictor` (client/predict_lookup.py
``Unserved``): a request's timeout adds "the trainer is running but serves no
predictions: add ServingHook to its hooks (docs/how-to/serve-while-training.md)", and a
warning once, 3 s into the lookups (counted over requests), says it while they wait.

Before: C said only "no trainer serves predictions there (yet)" at each timeout, and
warned of nothing. A real `Receiver` (what a trainer's rank runs) writes the file.

A trainer that ran there and stopped (its ``rank_0.json`` marked stopped, with its stop
record) is said alike too (missing_dir.c mt_stopped_story, predict_lookup.py
``stopped_story``): "the trainer that ran there stopped (CODE: MESSAGE; no trainer serves
predictions there): a resumed one would serve there", where both said only "(yet)" (a
user trial waited for a first trainer)."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from c_driver import run_script
from helpers import running
from test_c_env_parity import ASK, RENDEZVOUS, by_hand, python_request  # noqa: F401

from melissa_trainer.client.predict import Predictor
from melissa_trainer.client.predict_errors import PredictTimeout
from melissa_trainer.client.predict_lookup import UNSERVED
from melissa_trainer.stream.stop_record import StopReason

pytestmark = pytest.mark.e2e  # every test here starts a process

FIELDS = {"u": ((4,), np.float32)}


def warnings_of_three(
    script_exe: Path,
    tmp_path: Path,
    env: dict[str, str],
    caplog: pytest.LogCaptureFixture,
    match: str,
    said: str,
) -> tuple[list[str], list[str]]:
    """Three requests of 2 s by the C client (`script_exe`) then by Python's `Predictor`,
    each failing its timeout (`match` in Python's error): the lines of C's stderr and
    the messages Python logged that hold `said`."""
    script = tmp_path / "script.txt"
    script.write_text(f"{ASK}predict 2\npredict 2\npredict 2\nabort\n")
    proc = subprocess.run(
        [str(script_exe), str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}, **env},
    )
    predictor = Predictor(1)
    try:
        with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.predict"):
            for _ in range(3):
                with pytest.raises(PredictTimeout, match=match):
                    predictor.predict({"u": np.zeros(4, np.float32)}, timeout=2)
    finally:
        predictor.close()
    c = [line for line in proc.stderr.splitlines() if said in line]
    return c, [r.getMessage() for r in caplog.records if said in r.getMessage()]


@pytest.mark.timeout(60)
def test_a_trainer_running_without_serving_is_said_alike_at_the_timeout(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,  # noqa: F811
) -> None:
    rendezvous = tmp_path / "rv"
    env = {RENDEZVOUS: str(rendezvous)}
    monkeypatch.setenv(RENDEZVOUS, env[RENDEZVOUS])
    with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-a"):
        got = run_script(script_exe, f"{ASK}predict 1\nabort\n", tmp_path, env)
        python = python_request(1)
    assert got[7][1].endswith(f"no trainer serves predictions there (yet); {UNSERVED}"), got
    assert got[7][1] == python, (got, python)


@pytest.mark.timeout(60)
def test_a_trainer_running_without_serving_is_warned_of_once_alike(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    by_hand: None,  # noqa: F811
) -> None:
    """Three requests of 2 s: the second, 3 s after the first lookup, warns; once."""
    rendezvous = tmp_path / "rv"
    env = {RENDEZVOUS: str(rendezvous)}
    monkeypatch.setenv(RENDEZVOUS, env[RENDEZVOUS])
    with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-a"):
        c, python = warnings_of_three(
            script_exe, tmp_path, env, caplog, "add ServingHook", UNSERVED
        )
    assert len(python) == 1, python
    words = python[0].removeprefix("Predictor: ").replace("PredictTimeout", "MT_ETIMEDOUT")
    assert c == [f"melissa_trainer: mt_predict: {words}"], c


#: what both say of a trainer that ran and was preempted (its message's first line)
PREEMPTED = (
    "the trainer that ran there stopped (preempted: SIGTERM received; no trainer serves "
    "predictions there): a resumed one would serve there"
)


@pytest.mark.timeout(60)
def test_a_trainer_that_ran_and_stopped_is_said_alike_at_the_timeout(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,  # noqa: F811
) -> None:
    rendezvous = tmp_path / "rv"
    env = {RENDEZVOUS: str(rendezvous)}
    monkeypatch.setenv(RENDEZVOUS, env[RENDEZVOUS])
    with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-a") as receiver:
        receiver.note_stop(StopReason("preempted", "SIGTERM received\nsecond line"))
    got = run_script(script_exe, f"{ASK}predict 1\nabort\n", tmp_path, env)
    python = python_request(1)
    assert got[7][1].endswith(PREEMPTED), got
    assert got[7][1] == python, (got, python)


@pytest.mark.timeout(60)
def test_a_trainer_that_ran_and_stopped_is_warned_of_once_alike(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    by_hand: None,  # noqa: F811
) -> None:
    """Three requests of 2 s: the second, 3 s after the first lookup, warns; once."""
    rendezvous = tmp_path / "rv"
    env = {RENDEZVOUS: str(rendezvous)}
    monkeypatch.setenv(RENDEZVOUS, env[RENDEZVOUS])
    with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-a") as receiver:
        receiver.note_stop(StopReason("preempted", "SIGTERM received\nsecond line"))
    resumed = "a resumed one would serve there"
    c, python = warnings_of_three(script_exe, tmp_path, env, caplog, resumed, PREEMPTED)
    assert python == [
        f"Predictor: {rendezvous}: {PREEMPTED}; each request waits up to its timeout for a "
        "serve file (then fails: PredictTimeout)"
    ], python
    words = python[0].removeprefix("Predictor: ").replace("PredictTimeout", "MT_ETIMEDOUT")
    assert c == [f"melissa_trainer: mt_predict: {words}"], c
