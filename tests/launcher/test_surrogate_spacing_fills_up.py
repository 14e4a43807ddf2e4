"""The surrogate acquisition's `spacing` once the space fills up (user trial 31,
MEDIUM): once no candidate keeps `spacing` from every draw remembered (a 1-D study
after about 10 draws, a 2-D one after about 80), an acquisition keeps half the largest
gap a candidate reaches (`launcher.acquisition_spacing`), said once in the log, the
draws still resumable exactly.

Before the fix the spacing was dropped at once and silently: the acquisitions piled
onto the best-scored spot again (1-D: c = 0.1 drawn 3 times; 2-D: 8 of 60 acquisitions
within 0.01 of an earlier draw, the nearest 0.0023)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import numpy as np
import pytest
from launcher_said import one_line

from melissa_trainer import make_sampler
from melissa_trainer.launcher import SurrogateSampler
from melissa_trainer.launcher.acquisition_spacing import SHRINK, kept_spacing

pytestmark = pytest.mark.timeout(300)

#: one varying parameter (nu fixed), the loss highest at c's low bound
LINE = {"nu": (0.01, 0.01), "c": (0.1, 1.0)}
PLANE = {"nu": (0.001, 0.02), "c": (0.1, 1.0)}


def line_loss(u: np.ndarray) -> float:
    return float(np.exp(-3 * u[0])) + 0.01


def plane_loss(u: np.ndarray) -> float:
    return float(np.exp(-u[0] / 0.15) * u[1]) + 0.01


def unit(bounds: dict, parameters: dict[str, float]) -> np.ndarray:
    """`parameters` in the unit interval/square over the varying parameters."""
    varying = [k for k, (lo, hi) in bounds.items() if hi > lo]
    return np.array(
        [(parameters[k] - bounds[k][0]) / (bounds[k][1] - bounds[k][0]) for k in varying]
    )


def run(
    sampler: SurrogateSampler, bounds: dict, start: int, n: int, loss: Callable
) -> list[tuple[dict[str, float], bool]]:
    """Draws `start` .. `start + n - 1` of `sampler`, each observed at once with its
    loss: (parameters, whether an acquisition) each."""
    out = []
    for i in range(start, start + n):
        before = sampler.acquired
        parameters = sampler.draw()
        out.append((parameters, sampler.acquired > before))
        sampler.observe(i, parameters, loss(unit(bounds, parameters)))
    return out


def acquisition_gaps(bounds: dict, n: int, loss: Callable) -> list[float]:
    """Each acquisition's distance to the nearest earlier draw (explored or acquired)."""
    sampler = make_sampler("surrogate", bounds, seed=0)
    assert isinstance(sampler, SurrogateSampler)
    sampler.prepare()
    draws = run(sampler, bounds, 0, n, loss)
    points = [unit(bounds, parameters) for parameters, _ in draws]
    return [
        float(min(np.linalg.norm(points[i] - q) for q in points[:i]))
        for i, (_, acquired) in enumerate(draws)
        if acquired and i
    ]


def test_one_varying_parameter_acquisitions_do_not_duplicate_draws(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    gaps = acquisition_gaps(LINE, 20, line_loss)
    # before: 0.0 (c = 0.1 drawn 3 times, 0.101 3 times); now about 0.03, the half of
    # the largest gap 20 points on a line leave
    assert len(gaps) >= 5 and min(gaps) > 0.01, gaps
    # (an INFO cut at 100 columns, log_lines.inform: matched as one line)
    said = [r for r in caplog.records if "no candidate keeps spacing=0.1" in r.getMessage()]
    # once, though most acquisitions shrank it; with the spacing kept and why
    assert len(said) == 1, [r.getMessage() for r in said]
    assert said[0].levelno == logging.INFO
    assert "the space is filling up" in one_line(said[0].getMessage())
    assert "half the largest gap" in one_line(said[0].getMessage())


def test_two_parameters_many_draws_acquisitions_do_not_duplicate_draws() -> None:
    gaps = acquisition_gaps(PLANE, 130, plane_loss)
    # before: 8 of 60 acquisitions within 0.01 of an earlier draw (the nearest 0.0023)
    assert sum(g < 0.01 for g in gaps) == 0, sorted(gaps)[:10]


def test_a_resume_past_the_fill_up_draws_as_the_uninterrupted_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    whole = SurrogateSampler(LINE, seed=3)
    run(whole, LINE, 0, 14, line_loss)
    assert "no candidate keeps spacing" in caplog.text  # (filled up before the checkpoint)
    state = json.loads(json.dumps(whole.state_dict()))
    rest = run(whole, LINE, 14, 10, line_loss)
    assert sum(acquired for _, acquired in rest) >= 3
    resumed = SurrogateSampler(LINE, seed=3)
    resumed.load_state_dict(state)
    assert run(resumed, LINE, 14, 10, line_loss) == rest


def test_the_spacing_kept_is_the_option_while_a_candidate_keeps_it() -> None:
    # the draws that kept `spacing` before are unchanged: one candidate far enough is
    # enough, and none remembered (inf) keeps it too
    assert kept_spacing(np.array([0.01, 0.02, 0.1]), 0.1) == 0.1
    assert kept_spacing(np.array([0.0, np.inf]), 0.1) == 0.1
    # none: half the largest gap; none allowed, or all on a draw: nothing kept
    assert kept_spacing(np.array([0.01, 0.06, 0.02]), 0.1) == pytest.approx(SHRINK * 0.06)
    assert kept_spacing(np.zeros(0), 0.1) == 0.0
    assert kept_spacing(np.zeros(3), 0.1) == 0.0
