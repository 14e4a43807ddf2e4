"""A `Study`'s watermark check at start (`melissa_trainer.study.watermark`): a watermark
above the most samples a rank can ever receive from the study is said as the source
starts, naming the fix; one that can be reached is not."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from melissa_trainer import StreamSource, Study
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.study.watermark import study_sample_bound

LOGGER = "melissa_trainer.study.watermark"


def launcher(n: int, on_failure: str = "redraw", max_redraws: int | None = None) -> Launcher:
    """A study of `n` simulations, never started here (only its rules are read)."""
    tuning = LauncherTuning(on_failure=on_failure, max_redraws=max_redraws)
    return Launcher("true", [{"a": float(i)} for i in range(n)], n, tuning=tuning)


def started_warnings(
    launch: Launcher,
    tmp_path: Path,
    watermark: int,
    caplog: pytest.LogCaptureFixture,
    received: int = 0,
    **config: int,
) -> list[str]:
    """The watermark warnings of `launch`'s `Study` started on one rank (then stopped),
    its buffer holding `received` samples already (as a resume restores them)."""
    source = Study(launch, StreamSource(ReceiverConfig(rendezvous_dir=tmp_path, **config)))
    buffer = FIFOBuffer(max(1000, watermark), watermark=watermark)
    for i in range(received):
        buffer.put({"x": np.full(1, i, dtype=np.float32)})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        source.start(buffer, 0, 1)
    source.stop()
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


@pytest.mark.timeout(30)
def test_a_watermark_above_every_sample_a_study_can_send_is_said_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # 3 simulations given up without replacement, steps 0..9: at most 30 samples
    said = started_warnings(launcher(3, "abandon"), tmp_path, 31, caplog, max_time_step=10)
    assert len(said) == 1
    assert "--watermark 31 is above the 30 samples" in said[0]
    assert "Lower --watermark (to 30 or fewer" in said[0]
    assert "Launcher(n_simulations=...)" in said[0]
    assert "a client started by hand is not counted" in said[0]  # (the bound is the launcher's)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("on_failure", "max_redraws", "watermark"),
    [
        ("abandon", None, 30),  # exactly every step of every simulation: reachable
        ("redraw", None, 60),  # 3 redraws (None: n_simulations) send 30 more at most
        ("redraw", 1, 40),
    ],
)
def test_a_watermark_the_study_can_reach_is_not_said(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    on_failure: str,
    max_redraws: int | None,
    watermark: int,
) -> None:
    launch = launcher(3, on_failure, max_redraws)
    assert started_warnings(launch, tmp_path, watermark, caplog, max_time_step=10) == []


@pytest.mark.timeout(30)
def test_a_resumed_buffers_samples_count_beside_the_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # a run before this one may have had more simulations (n_simulations shrunk at the
    # resume) or a larger max_time_step: what the buffer received counts on top
    launch = launcher(3, "abandon")
    assert started_warnings(launch, tmp_path, 35, caplog, received=5, max_time_step=10) == []
    said = started_warnings(launch, tmp_path, 36, caplog, received=5, max_time_step=10)
    assert len(said) == 1 and "above the 35 samples the trainer (5 of them already" in said[0]


@pytest.mark.timeout(30)
def test_the_default_max_time_step_bounds_nothing_a_watermark_could_reach(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the steps a simulation sends are unknown at start: no warning on a guess
    assert started_warnings(launcher(1, "abandon"), tmp_path, 10**6, caplog) == []


@pytest.mark.timeout(30)
@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("max_time_step", [1, 5, 6, 7])
def test_the_bound_is_the_largest_share_either_routing_gives_a_rank(
    world: int, max_time_step: int
) -> None:
    n = 3
    shares = [
        sum(
            1
            for s in range(n)
            for t in range(max_time_step)
            if (t if routing == "t" else s + t) % world == rank
        )
        for routing in ("t", "s+t")
        for rank in range(world)
    ]
    # no rank can receive more; the busiest rank under `t % W` receives exactly that
    assert max(shares) == study_sample_bound(launcher(n, "abandon"), max_time_step, world)
