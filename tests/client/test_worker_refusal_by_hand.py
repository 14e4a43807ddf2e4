"""`worker_launcher.refuse_worker_by_hand`, what a solver's script calls first: it exits
2 with one line when its command line asks for ``--worker`` and no launcher started the
process, and returns otherwise (a worker; ``--help``, which the solver's parser answers;
``--worker`` after ``--``, an argument of something else). Its words are
`worker_by_hand`'s, which the solver's ``main`` says too."""

from __future__ import annotations

import sys

import pytest

from melissa_trainer.client import worker_launcher
from melissa_trainer.client.worker_launcher import refuse_worker_by_hand, worker_by_hand

STUDY = "python my_study.py --worker"


@pytest.fixture(autouse=True)
def no_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (worker_launcher.ENV_LAUNCHER, worker_launcher.ENV_WORKER):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "argv", ["solver.py"])


def test_worker_by_hand_is_refused_in_one_line_with_status_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as ended:
        refuse_worker_by_hand(STUDY, ["--time_steps", "3", "--worker"])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err == f"solver.py: {worker_by_hand(STUDY)}\n", err
    assert err.startswith("solver.py: --worker: not started by a launcher in worker mode: ")
    assert err.rstrip().endswith(f"(this solver's study: {STUDY})"), err


@pytest.mark.parametrize(
    "argv", [[], ["--time_steps", "3"], ["--worker", "--help"], ["-h", "--worker"],
             ["--", "--worker"]],
)  # fmt: skip
def test_what_asks_for_no_worker_is_left_to_the_solver(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    refuse_worker_by_hand(STUDY, argv)
    assert capsys.readouterr().err == ""


def test_a_worker_is_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(worker_launcher.ENV_LAUNCHER, "tcp://127.0.0.1:5555")
    monkeypatch.setenv(worker_launcher.ENV_WORKER, "worker-0")
    refuse_worker_by_hand(STUDY, ["--worker"])
    assert worker_by_hand(STUDY) is None
