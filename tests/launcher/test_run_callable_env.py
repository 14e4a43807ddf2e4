"""`run_callable` (a Python callable simulation's process) reads its simulation id as
a `Client` and the C client do (client/config.py check_simulation_id; clients/c/src/env.c):
ASCII digits after `str.strip`, below 2**64. It read it with `int`, which takes "+7",
"7_000" and other scripts' digits ("\\u0667") that the launcher never writes and the C
client refuses, and said any refusal as "MELISSA_TRAINER_SIMULATION_ID/
MELISSA_TRAINER_PARAMETERS missing or invalid: ValueError(...)". Now one refused ends
the process with status 2 and the `Client`'s words, naming the variable.
"""

from __future__ import annotations

import json
from pathlib import Path

import cloudpickle
import pytest

from melissa_trainer.client import ENV_PARAMETERS, ENV_SIMULATION_ID
from melissa_trainer.client.worker_launcher import ENV_WORKER
from melissa_trainer.launcher.run_callable import main


def pickled(tmp_path: Path) -> tuple[Path, Path]:
    """(the pickled callable, the file where it writes its arguments)"""
    seen = tmp_path / "seen.json"

    def simulation(simulation_id: int, parameters: dict[str, float]) -> None:
        seen.write_text(json.dumps([simulation_id, parameters]))

    path = tmp_path / "fn.pkl"
    path.write_bytes(cloudpickle.dumps(simulation))
    return path, seen


@pytest.fixture(autouse=True)
def no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_WORKER, ENV_SIMULATION_ID, ENV_PARAMETERS):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("value", ["7", " 7\n", "007"])
def test_an_id_in_ascii_digits_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    path, seen = pickled(tmp_path)
    monkeypatch.setenv(ENV_SIMULATION_ID, value)
    monkeypatch.setenv(ENV_PARAMETERS, '{"a": 0.5, "b": -2}')
    assert main([str(path)]) == 0
    assert json.loads(seen.read_text()) == [7, {"a": 0.5, "b": -2.0}]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("value", ["+7", "7_000", "\u0667", "-0", "", "7.0"])
def test_an_id_int_would_take_is_refused_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    path, seen = pickled(tmp_path)
    monkeypatch.setenv(ENV_SIMULATION_ID, value)
    assert main([str(path)]) == 2
    assert capsys.readouterr().err == (
        f"run_callable: {ENV_SIMULATION_ID}={value!r} is not a simulation id: give a whole "
        f"number in ASCII digits 0-9, e.g. {ENV_SIMULATION_ID}=42\n"
    )
    assert not seen.exists()


@pytest.mark.timeout(30)
def test_no_id_says_who_sets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path, seen = pickled(tmp_path)
    assert main([str(path)]) == 2
    assert capsys.readouterr().err == (
        f"run_callable: {ENV_SIMULATION_ID} is not set: the launcher starts this program with "
        f"it and {ENV_PARAMETERS} (run the study, not this module by hand)\n"
    )
    assert not seen.exists()


@pytest.mark.timeout(30)
def test_parameters_are_judged_as_a_clients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path, seen = pickled(tmp_path)
    monkeypatch.setenv(ENV_SIMULATION_ID, "3")
    monkeypatch.setenv(ENV_PARAMETERS, '{"a": "0.5"}')  # (float() took it)
    assert main([str(path)]) == 2
    assert capsys.readouterr().err == (
        f"run_callable: {ENV_PARAMETERS}: parameter 'a': '0.5' is not a number\n"
    )
    assert not seen.exists()
