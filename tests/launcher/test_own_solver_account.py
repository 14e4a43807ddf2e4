"""The end-of-run account of a user's own solver's study (issue 44): which simulations
contributed nothing and why, a study whose every simulation contributed said quietly,
and what an adaptive sampler drew and observed (the studies: `own_solver`)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import drain
from own_solver import FAST, solver
from waiting import wait_until

from melissa_trainer import StreamSource, Study
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, make_sampler
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG"),
    pytest.mark.e2e,
]


# -- the end-of-run account ---------------------------------------------------------------


def account(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "study account" in r.getMessage()]


@pytest.mark.timeout(90)
def test_the_end_of_a_study_says_which_simulations_contributed_nothing_and_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    options = {"nan": [1, 2], "fail": [3], "wrong": [4], "wrong_shape": [5]}
    tuning = dataclasses.replace(FAST, max_restarts=0, on_failure="abandon")
    launch = Launcher(
        solver(tmp_path, **options),
        make_sampler("uniform", {"x": (0, 1)}, seed=0),
        8,
        job_limit=2,
        backend=LocalBackend(),
        tuning=tuning,
    )
    config = ReceiverConfig(rendezvous_dir=tmp_path / "rendezvous", fields={"u": ((4,), "float32")})
    source = Study(launch, StreamSource(config))
    buffer = FIFOBuffer(1000)
    source.start(buffer, 0, 1)
    try:
        source.on_all_ranks_started()
        samples = drain(buffer, timeout=60)
        wait_until(lambda: launch.check() is None and launch.done, "the study")
    finally:
        source.stop()
    # an oracle of its own: the samples the buffer got, by simulation
    contributed = sorted({int(s["simulation_id"]) for s in samples})
    assert contributed == [0, 5, 6, 7]
    (text,) = account(caplog)
    lines = text.splitlines()
    assert lines[0] == (
        "study account: 8 simulations ended, 4 contributed samples; 4 (50% of the study) "
        "contributed none:"
    )
    assert "2 sent only NaN or Inf" in lines[1] and "simulations 1, 2;" in lines[1]
    assert "1 refused by the receiver: simulation 4:" in lines[2] and "(5,)" in lines[2]
    assert "1 failed with no sample received: simulation 3, exit codes" in lines[3]
    warned = [r for r in caplog.records if "study account" in r.getMessage()]
    assert warned[0].levelno == logging.WARNING


@contextlib.contextmanager
def whole_study(tmp_path: Path, sampler: str, n: int) -> Iterator[tuple[Launcher, Study]]:
    """A `Study` of `n` quick simulations drawn by `sampler`, run to its end (every
    sample drained) before the body, stopped after it."""
    launch = Launcher(
        solver(tmp_path),
        make_sampler(sampler, {"x": (0, 1)}, seed=0),
        n,
        job_limit=2,
        backend=LocalBackend(),
        tuning=FAST,
    )
    source = Study(launch, StreamSource(ReceiverConfig(rendezvous_dir=tmp_path / "rdv")))
    buffer = FIFOBuffer(1000)
    source.start(buffer, 0, 1)
    try:
        source.on_all_ranks_started()
        assert len(drain(buffer, timeout=60)) == 3 * n
        wait_until(lambda: launch.check() is None and launch.done, "the study")
        yield launch, source
    finally:
        source.stop()


@pytest.mark.timeout(60)
def test_a_study_whose_every_simulation_contributed_says_so_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    with whole_study(tmp_path, "uniform", 3):
        pass
    records = [r for r in caplog.records if "study account" in r.getMessage()]
    assert [r.getMessage() for r in records] == [
        "study account: 3 simulations ended, 3 contributed samples; every one contributed."
    ]
    assert records[0].levelno == logging.INFO


@pytest.mark.timeout(60)
def test_the_account_says_what_an_adaptive_sampler_drew_and_observed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    with whole_study(tmp_path, "breed", 4) as (launch, source):
        # (a trainer's tracker would feed these: two simulations' losses, after every
        # draw was made, so that each draw explored)
        assert launch.observe({0: 0.5, 1: 0.7}) == 2
    assert source.account_report == [
        "study account: 4 simulations ended, 4 contributed samples; every one contributed.",
        "adaptive sampler: of 4 draws, 4 explored, 0 bred from the worst-trained "
        "simulations (exploration=1.0, Breed's default: every draw explores, the losses "
        "steer none; exploration below 1 breeds that share of the draws); the training "
        "losses of 2 simulations observed (the last 100 kept), 0 of them by its last draw; "
        f"each draw, how it was drawn and its loss: {tmp_path / 'study' / 'draws.csv'}",
    ]
