"""An example in external mode (`train.py --external`) prints the line that starts a
solver by hand. Its `--parameters` are the parameter box's centre, one example: a user
trial (fresh user, 2026-12-04) read "start each (with a distinct ID) with" and would have
started the study's 64 simulations with the one set, 64 copies of one simulation. The
line says each simulation takes its own parameters, and within which ranges
(examples/study_common.py `prepare_rendezvous`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import study_common

pytestmark = pytest.mark.timeout(60)


def test_the_start_line_says_each_simulation_takes_its_own_parameters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trainer = SimpleNamespace(
        is_main_process=True,
        accelerator=SimpleNamespace(wait_for_everyone=lambda: None),
        args=SimpleNamespace(resume_from_checkpoint=None, overwrite_output_dir=False),
        checkpoint_root=tmp_path / "checkpoints",  # (none: a fresh start, not refused)
        state=SimpleNamespace(global_step=0),
    )
    opts = SimpleNamespace(external=True, num_simulations=3)
    bounds = {"k": (0.1, 2.0), "t0": (100.0, 500.0)}
    study_common.prepare_rendezvous(
        trainer,
        opts,
        tmp_path / "rendezvous",
        ["solver.py"],
        bounds,
    )
    out = capsys.readouterr().out
    head, line = out.splitlines()
    assert head.startswith("waiting for 3 simulations; start each with a distinct ID and its")
    assert (
        "its own parameters (k in [0.1, 2], t0 in [100, 500]; the line below gives the "
        "box's centre) with"
    ) in head, head
    assert line.strip().startswith("python solver.py --rendezvous ")
    assert """--parameters '{"k": 1.05, "t0": 300.0}'""" in line, line
