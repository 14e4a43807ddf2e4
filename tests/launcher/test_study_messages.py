"""Study messages say things in the library's terms (a user's trial, with its own
script's CLI): a resume with another number of simulations was told to "resume with
--num_simulations 40", a flag of the examples that the user's script does not have; and a
solver asking for a parameter name the sampler does not draw (a typo in the solver) was
told "The sampler is at fault, not the solver". The oracle: the words of the fix each
message must hold, and the flag it must not present as the user's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from melissa_trainer import make_sampler
from melissa_trainer.launcher.study_change import StudyChanged, _design_fits
from melissa_trainer.launcher.systematic import SystematicFailure


def test_a_changed_number_of_simulations_is_said_in_the_launchers_terms() -> None:
    """A Latin hypercube sized by the study (planned for 40), resumed with 48."""
    sampler = make_sampler("lhs", {"a": (0.0, 1.0)}, seed=0)
    sampler.plan(48)
    with pytest.raises(StudyChanged) as info:
        _design_fits({"batch": 40}, sampler, 40, 48)
    message = str(info.value)
    assert "the study's n_simulations changed from 40 to 48" in message
    assert "Launcher(n_simulations=40)" in message
    # a flag only as the examples' own, never as if the user's script had it
    assert not re.search(r"resume with --num_simulations", message)


def test_a_parameter_name_the_sampler_does_not_draw_names_both_sides(tmp_path: Path) -> None:
    """The solver reads "viscosity"; the sampler draws nu and c. Either side may be the
    wrong one (here the solver's typo): the message names both and both fixes, and
    blames neither."""
    check = SystematicFailure(2, parameters=("nu", "c"))
    verdict = None
    for attempt, sid in enumerate((0, 1)):
        log = tmp_path / f"sim-{sid}-{attempt}.log"
        log.write_text("Traceback (most recent call last):\nKeyError: 'viscosity'\n")
        verdict = check.failed(sid, 1, log)
    assert verdict is not None
    assert "at fault" not in verdict  # neither side is known to be the wrong one
    assert "the solver asked for parameter 'viscosity'" in verdict
    assert "the sampler draws ['nu', 'c']" in verdict
    assert "if the solver's name is wrong" in verdict and "fix it in the solver" in verdict
    assert "add 'viscosity' to the sampler's bounds" in verdict
