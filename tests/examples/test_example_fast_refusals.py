"""Every example answers ``--help`` and refuses a bad flag before it imports torch: the
refusal of ``python examples/navier_stokes/train.py --width -3`` took 16-29 s on a
loaded machine, all of it torch's import (and accelerate's, pyzmq's) before the one
line of error. Each train.py parses its command line with its light command-line
module (`study_args`, the example's ``cli.py``) first, and imports the rest only for
a command line it takes.

What it checks is what was imported, not how long it took: each command line runs as
a user runs it (the script as ``__main__``), in a process of its own, which reports
its exit status and which heavy modules it had loaded when the refusal ended it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from run_as_main import run_as_main

# (a process of its own each: what the example imports is seen only in a fresh one)
pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).parents[2] / "examples"
#: what a refusal or ``--help`` must not have imported
HEAVY = ("torch", "accelerate", "zmq", "melissa_trainer.trainer", "melissa_trainer.stream")
#: example -> a flag it refuses (exit status 2)
REFUSED = {
    "navier_stokes": ["--width", "-3"],
    "heat_pde": ["--hidden", "0"],
    "lorenz": ["--horizon", "0"],
    "heat_c": ["--ranks", "0"],
    "oscillators": ["--hidden", "many"],
    "heat_guess": ["--kernel", "4"],
}


def answer(example: str, argv: list[str]) -> tuple[object, list[str], str]:
    """Run `example`'s train.py with `argv`: its exit status, the heavy modules it had
    imported when it ended, and what it wrote on stderr."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    return run_as_main(EXAMPLES / example / "train.py", HEAVY, argv, env)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("example", sorted(REFUSED))
def test_a_refused_flag_answers_before_torch_is_imported(example: str) -> None:
    code, loaded, err = answer(example, REFUSED[example])
    assert code == 2, err[-2000:]
    assert REFUSED[example][0] in err, err[-2000:]  # the refusal names its flag
    assert loaded == [], f"imported before refusing {REFUSED[example]}: {loaded}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("example", sorted(REFUSED))
def test_help_answers_before_torch_is_imported(example: str) -> None:
    code, loaded, err = answer(example, ["--help"])
    assert code == 0, err[-2000:]
    assert loaded == [], f"imported before --help's answer: {loaded}"
