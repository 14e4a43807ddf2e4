"""A request whose rendezvous directory (``MELISSA_TRAINER_RENDEZVOUS``) is no directory
is said alike by the C client (clients/c/src/missing_dir.c) and the Python `Predictor`
(client/predict_lookup.py ``MissingDirectory``, rendezvous_words.py ``missing_note``):
its timeout's error after "cannot list 'DIR': No such file or directory" adds the typo
likely (not even its parent exists), the directory likely meant (a close sibling), or
what creates it and what to check; and a warning once, 3 s into the lookups (counted
over requests), says the same while the requests wait.

Before: C said only "cannot list 'DIR': No such file or directory" at each timeout, and
warned of nothing."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from c_driver import run_script
from test_c_env_parity import ASK, RENDEZVOUS, by_hand, python_request  # noqa: F401

from melissa_trainer.client.predict import Predictor
from melissa_trainer.client.predict_errors import PredictTimeout

pytestmark = pytest.mark.e2e  # every test here starts a process


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("gone", "; the trainer creates it at its start ({output_dir}/rendezvous): until then"),
        ("rendezvus", "; did you mean {tmp}/rendezvous?"),
        ("Rendez-vous/x", "; did you mean {tmp}/rendezvous/x?"),
        ("nope/gone", "; its parent {tmp}/nope does not exist either: a typo in"),
    ],
    ids=["parent-there", "a-typo", "a-typo-above", "no-parent"],
)
def test_a_rendezvous_that_is_no_directory_is_said_alike(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,  # noqa: F811
    given: str,
    said: str,
) -> None:
    """(a request's timeout: C said only "cannot list 'DIR': No such file or directory";
    Python adds the typo likely, the directory meant, or what creates it, with the fix:
    predict_lookup.py MissingDirectory.note, C's missing_dir.c)"""
    (tmp_path / "rendezvous").mkdir()
    env = {RENDEZVOUS: str(tmp_path / given)}
    monkeypatch.setenv(RENDEZVOUS, env[RENDEZVOUS])
    got = run_script(script_exe, f"{ASK}predict 1\nabort\n", tmp_path, env)
    assert said.replace("{tmp}", str(tmp_path)) in got[7][1], got
    assert got[7][1] == python_request(1), got


@pytest.mark.timeout(60)
def test_a_rendezvous_missing_a_while_is_warned_of_once_alike(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    by_hand: None,  # noqa: F811
) -> None:
    """Two requests of 2 s: the second, 3 s after the first lookup, warns; once."""
    env = {RENDEZVOUS: str(tmp_path / "nope" / "rendezvous")}
    monkeypatch.setenv(RENDEZVOUS, env[RENDEZVOUS])
    script = tmp_path / "script.txt"
    script.write_text(f"{ASK}predict 2\npredict 2\npredict 2\nabort\n")
    proc = subprocess.run(
        [str(script_exe), str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}, **env},
    )
    c = [line for line in proc.stderr.splitlines() if "each request waits up to" in line]
    predictor = Predictor(1)
    try:
        with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.predict"):
            for _ in range(3):
                with pytest.raises(PredictTimeout, match="no serving endpoint in"):
                    predictor.predict({"u": np.zeros(4, np.float32)}, timeout=2)
    finally:
        predictor.close()
    python = [r.getMessage() for r in caplog.records if "each request waits" in r.getMessage()]
    assert len(python) == 1, python
    words = python[0].removeprefix("Predictor: ").replace("PredictTimeout", "MT_ETIMEDOUT")
    assert c == [f"melissa_trainer: mt_predict: {words}"], proc.stderr
    assert "a typo in MELISSA_TRAINER_RENDEZVOUS is likely" in c[0], c
