"""The neural-operator how-to's "Your own model" command must train, not warn.

A user trial (2026-11-30) ran the how-to's `python my_operator.py --grid_size 32
--num_simulations 12 --time_steps 5 ...` as printed: the example's default
`--watermark 64` is above the 60 samples that 12 simulations of 5 steps stream, so the
buffer never reached it, training ran only after the stream ended (8 steps, each sample
once) and the run ended with the example's "the model may be far from trained" warning,
not with the figures the page printed. The oracle: the example's own parser, given the
page's flags, and the stream's size (simulations x time steps, one rank).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

# examples/ is on the tests' sys.path (pyproject)
from navier_stokes import train

PAGE = Path(__file__).parents[2] / "docs" / "how-to" / "neural-operator.md"


def own_model_commands() -> list[list[str]]:
    """The flags of each `python my_operator.py ...` command the page prints (a command
    wraps over lines inside one backtick span)."""
    text = PAGE.read_text(encoding="utf-8")
    spans = re.findall(r"`python my_operator\.py ([^`]+)`", text)
    return [shlex.split(" ".join(span.split())) for span in spans if "--" in span]


def test_the_page_prints_a_command_with_flags() -> None:
    assert own_model_commands(), f"no `python my_operator.py --...` command in {PAGE}"


@pytest.mark.parametrize("argv", own_model_commands(), ids=lambda a: " ".join(a))
def test_the_own_model_command_reaches_its_watermark(argv: list[str]) -> None:
    args, flow = train.parser(argv).parse_args_into_dataclasses(argv)
    streamed = flow.num_simulations * flow.time_steps  # samples of the one rank
    assert args.watermark <= streamed // 2, (
        f"the how-to's command streams {streamed} samples but waits for --watermark "
        f"{args.watermark} before training: it trains only after the stream ends"
    )
