"""An adaptive ``--sampler`` with ``--simulation_loss_steps 0`` (the losses that steer
it turned off) is a usage error of the examples' command line, naming both flags and
the fixes, like every other bad flag (htrial49: it was a ValueError's traceback from
the trainer's construction, after the command line had been taken)."""

from __future__ import annotations

import pytest
from usage_error import heat_usage_error

from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.samplers import _all_kinds


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sampler", ["breed", "density", "surrogate"])
def test_an_adaptive_sampler_without_its_losses_is_a_usage_error(
    sampler: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = heat_usage_error(["--sampler", sampler, "--simulation_loss_steps", "0"], capsys)
    assert "argument --simulation_loss_steps: 0 turns the per-simulation losses off" in err
    assert f"--sampler {sampler} is adaptive" in err and "--sampler lhs" in err
    assert "Traceback" not in err


@pytest.mark.timeout(60)
def test_a_fixed_design_takes_simulation_loss_steps_0() -> None:
    from heat_pde.train import parser

    argv = ["--sampler", "lhs", "--simulation_loss_steps", "0"]
    args, opts = parser(argv).parse_args_into_dataclasses(argv)
    assert args.simulation_loss_steps == 0 and opts.sampler == "lhs"


def test_the_examples_adaptive_names_are_the_librarys() -> None:
    """`ADAPTIVE_SAMPLERS` (named in the light command-line module) follows the library."""
    from study_args import ADAPTIVE_SAMPLERS

    adaptive = {k for k, cls in _all_kinds().items() if issubclass(cls, AdaptiveSampler)}
    assert set(ADAPTIVE_SAMPLERS) == adaptive
