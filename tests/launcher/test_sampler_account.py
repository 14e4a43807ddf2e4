"""The end-of-study account's line on an adaptive sampler says what steered its draws,
in the sampler's own terms (`launcher.sampler_account.drawn_by`), in a real study (simulations
started by the local backend, streaming to rank 0's receiver).

Before: every sampler with an ``explored`` count was said to have "bred" the rest
"from the worst-trained simulations": the density sampler's draws made once its warp
could apply (whether or not the loss bent any parameter: with its `evidence` rule and
tens of simulations it often bends none), the surrogate acquisition's acquired ones;
and Breed's default, which never breeds, was not said to be unable to.

Oracle: the sampler's losses are given before the study starts (the trainer's tracker
feeds them in a run), so every draw is made with them: 16 simulations whose loss rises
with `x` only, `x` in an order of their ids with a rank correlation of 0.006 (the
sampler removes the launch-order trend of the losses first), `y` rising with the ids:
the loss must bend `x` alone (evidence about 1 x sqrt(15) = 3.9 > 3, `y`'s 0.1), and
equal losses must bend none.
"""

from __future__ import annotations

import logging
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers import drain
from launcher_said import one_line

from melissa_trainer import StreamSource, Study
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherTuning, make_sampler
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG"),
    pytest.mark.e2e,
]

SOLVER = r"""
import numpy as np
from melissa_trainer.client import Client

with Client({"u": ((2,), "float32")}) as client:
    for t in range(2):
        client.send(t, u=np.array([client.parameters["x"], t], np.float32))
"""
N = 3  # simulations per study
#: the 16 observed simulations' (x, y), by id: y rises with the ids, x in a shuffled
#: order (its rank correlation with the ids 0.006)
Y = [(i + 0.5) / 16 for i in range(16)]
X = [Y[j] for j in (5, 12, 0, 15, 3, 9, 14, 1, 10, 7, 2, 13, 6, 11, 4, 8)]


@contextmanager
def whole_study(tmp_path: Path, sampler: Any) -> Iterator[list[str]]:
    """A `Study` of `N` simulations drawn by `sampler`, run to its end; yields the
    account's lines (set when the study stops, after the body)."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "solver.py").write_text(textwrap.dedent(SOLVER))
    launch = Launcher(
        [sys.executable, str(tmp_path / "solver.py")],
        sampler,
        N,
        job_limit=2,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    source = Study(launch, StreamSource(ReceiverConfig(rendezvous_dir=tmp_path / "rdv")))
    buffer = FIFOBuffer(1000)
    source.start(buffer, 0, 1)
    lines: list[str] = []
    try:
        source.on_all_ranks_started()
        assert len(drain(buffer, timeout=60)) == 2 * N
        yield lines
    finally:
        source.stop()
    lines.extend(source.account_report)


def observed(sampler: Any, losses: list[float]) -> Any:
    """`sampler`, given the losses of 16 simulations at (X, Y) (ids 100...)."""
    for i, loss in enumerate(losses):
        sampler.observe(100 + i, {"x": X[i], "y": Y[i]}, loss)
    return sampler


BOUNDS = {"x": (0.0, 1.0), "y": (0.0, 1.0)}


@pytest.mark.timeout(60)
def test_the_density_sampler_says_which_parameters_the_loss_bends(tmp_path: Path) -> None:
    sampler = observed(make_sampler("density", BOUNDS, seed=0), [1.0 + 3 * x for x in X])
    with whole_study(tmp_path, sampler) as lines:
        pass
    assert lines[-1] == (
        "adaptive sampler: of 3 draws, 0 before min_observations=8 losses were kept, 3 "
        "with the high-loss warp (3 of them bent by the loss, 0 the design's alone); the "
        "loss bends x now; the training losses of 16 simulations observed (the last 100 kept), "
        "16 of them by its last draw; each draw, how it was drawn and its loss: "
        f"{tmp_path / 'study' / 'draws.csv'}"
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("edge", [0.7, 1.0])  # 1.0: no warp at all (`warp()` is None)
def test_the_density_sampler_says_when_the_loss_bends_nothing(
    tmp_path: Path, edge: float, caplog: pytest.LogCaptureFixture
) -> None:
    sampler = observed(make_sampler("density", BOUNDS, seed=0, edge=edge), [1.0] * 16)
    with (
        caplog.at_level(logging.INFO, logger="melissa_trainer.launcher"),
        whole_study(tmp_path, sampler) as shown,
    ):
        pass
    assert shown == []  # a WARNING: logged, not printed again by the progress hook
    (record,) = [r for r in caplog.records if r.getMessage().startswith("study account: ")]
    assert record.levelno == logging.WARNING
    lines = record.getMessage().split("\n")
    (line,) = [x for x in lines if x.startswith("adaptive sampler: ")]
    assert (
        "3 with the high-loss warp (0 of them bent by the loss, 3 the design's alone); the "
        "loss bends no parameter now: with evidence=3, one " in line
    )
    assert "rank correlation with the loss of at least 0.77 over the 16 losses kept" in line
    assert "bred" not in line
    design = "as it is (edge=1)" if edge == 1.0 else "bent towards the bounds alone (edge)"
    assert f"the draws follow the design {design}; lower evidence" in line
    # and the account ends by saying that the losses steered none (`unsteered_line`)
    assert lines[-1].startswith("  the adaptive sampler steered none of its draws: the loss ")


@pytest.mark.timeout(60)
def test_the_surrogate_acquisition_says_what_it_acquired(tmp_path: Path) -> None:
    sampler = make_sampler("surrogate", BOUNDS, seed=0, exploration=0.0)
    with whole_study(tmp_path, observed(sampler, [1.0 + 3 * x for x in X])) as lines:
        pass
    assert lines[-1].startswith("adaptive sampler: of 3 draws, 0 explored, 3 chosen by the loss")


@pytest.mark.timeout(60)
def test_breeds_default_says_that_it_breeds_nothing(tmp_path: Path) -> None:
    sampler = observed(make_sampler("breed", BOUNDS, seed=0), [1.0 + 3 * x for x in X])
    with whole_study(tmp_path, sampler) as lines:
        pass
    default = (
        "of 3 draws, 3 explored, 0 bred from the worst-trained simulations (exploration=1.0, "
        "Breed's default: every draw explores, the losses steer none"
    )
    assert default in lines[-1]
    bred = observed(make_sampler("breed", BOUNDS, seed=0, exploration=0.0), [1.0] * 16)
    with whole_study(tmp_path / "bred", bred) as lines:
        pass
    assert "of 3 draws, 0 explored, 3 bred from the worst-trained simulations;" in lines[-1]


def static_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        one_line(r.getMessage())
        for r in caplog.records
        if "cannot steer any draw" in one_line(r.getMessage()) and r.levelno == logging.WARNING
    ]


@pytest.mark.timeout(60)
def test_a_study_whose_sampler_cannot_adapt_is_told_when_it_starts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Breed's default never breeds; a density sampler with 3 simulations can keep at
    most 2 losses before its last draw, and needs 10 (its evidence, 3: a rank
    correlation of 1 x sqrt(10 - 1)); with 16 losses fed before the study, it can."""
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    with whole_study(tmp_path / "breed", make_sampler("breed", BOUNDS, seed=0)):
        pass
    assert static_warnings(caplog) == [
        "the 'breed' sampler cannot steer any draw of this study: exploration=1.0 (Breed's "
        "default): every draw explores; exploration below 1 breeds that share of the draws. "
        "Its draws are its design's; the per-simulation losses are tracked all the same"
    ]
    caplog.clear()
    with whole_study(tmp_path / "density", make_sampler("density", BOUNDS, seed=0)):
        pass
    assert len(static_warnings(caplog)) == 1
    assert (
        "it needs 10 losses kept before a draw can use them (min_observations, and the "
        "evidence), and a study of 3 simulations has at most 2 before its last draw"
    ) in static_warnings(caplog)[0]
    caplog.clear()
    fed = observed(make_sampler("density", BOUNDS, seed=0), [1.0 + 3 * x for x in X])
    with whole_study(tmp_path / "fed", fed):
        pass
    assert static_warnings(caplog) == []
    assert "launcher started" in caplog.text  # (the check ran: the study started)
