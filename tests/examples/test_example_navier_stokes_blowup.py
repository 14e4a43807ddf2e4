"""The navier_stokes example's study gives a blown-up simulation up at once: its solver
exits `UNSTABLE_EXIT_CODE` (3) when the solution blows up (too large a --dt), a failure
that repeats with the same parameters, and the example names it in
`LauncherTuning.final_exit_codes`. Before, the launcher restarted it twice (exit codes
[3, 3, 3]: three solver runs, each as long, before the redraw)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest
import study_common

# examples/ is on the tests' sys.path (pyproject): the example's modules by package name
from navier_stokes import solver, train
from waiting import wait_until

from melissa_trainer.launcher import Launcher, LauncherError, LauncherTuning
from melissa_trainer.launcher.simulation_record import records_of

#: parameters whose solution blows up at --dt 0.1 on 64^2 (the solver's tests' corner)
CORNER = {"nu": 0.01, "amplitude": 0.2, "wavenumber": 4.9}


class Built(Exception):
    """Raised by the stand-in `study_source` once it has the example's tuning."""


def example_tuning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LauncherTuning:
    """The `LauncherTuning` the example's own `main` builds (its `study_source` call,
    through `study_common._tuning`), stopped there: nothing launched."""
    built: list[LauncherTuning] = []

    def stand_in(opts: Any, *args: Any, **kwargs: Any) -> Any:
        # (the codes as `study_source` passes them to `_tuning`, from the example's call)
        codes = kwargs.get("final_exit_codes", ())
        built.append(dataclasses.replace(study_common._tuning(opts), final_exit_codes=codes))
        raise Built

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(study_common, "study_source", stand_in)
    tiny = ["--time_steps", "4", "--num_simulations", "2", "--num_validation", "1",
            "--width", "4", "--layers", "1", "--modes", "4", "--no_plot"]  # fmt: skip
    with pytest.raises(Built):
        train.main(tiny)
    return built[0]


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_blown_up_simulation_is_given_up_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tuning = example_tuning(tmp_path, monkeypatch)
    assert tuning.final_exit_codes == (solver.UNSTABLE_EXIT_CODE,) == (3,)
    # the solver as the launcher runs it, writing (not streaming) its run: no trainer
    command = [sys.executable, str(train.SOLVER), "--dt", "0.1", "--save_npy",
               str(tmp_path / "sim.npy")]  # fmt: skip
    launcher = Launcher(command, [CORNER], 1, tuning=tuning, log_dir=tmp_path / "logs")
    launcher.start(tmp_path / "rendezvous")
    errors: list[LauncherError] = []

    def failed() -> bool:
        try:
            launcher.check()
        except LauncherError as exc:  # its one simulation given up: the study fails
            errors.append(exc)
            return True
        return False

    try:
        wait_until(failed, lambda: launcher.summary(), 100)
    finally:
        launcher.stop()
    record = records_of(launcher.state_dict())[0]
    assert record["exit_codes"] == [3], record  # before: [3, 3, 3]
    assert "exit 3 is one of LauncherTuning.final_exit_codes: not restarted" in str(errors[0])
    assert not (tmp_path / "sim.npy").exists()
