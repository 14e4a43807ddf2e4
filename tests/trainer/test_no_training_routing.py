"""The words of `NoTrainingError` name the real cause (`trainer.no_training_words`): a
user trial (2 ranks; 2 one-step simulations, simulation 1 failed and replaced by
simulation 2) was told "fewer simulations than ranks… Run at least 2 simulations"
though 3 ran and 2 contributed: both had even ids, so the routing
``(simulation_id + t) % 2`` sent both samples to rank 0."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from melissa_trainer.trainer.no_training_words import StudyCounts, untrained_words

SCRIPT = Path(__file__).parents[1] / "scripts" / "one_step_redraw_study.py"


def test_ids_on_the_same_ranks_are_named_not_too_few_simulations() -> None:
    words = untrained_words([2, 0], [{0: 1, 2: 1}, {}], StudyCounts(2, 1, 1), batch_size=1)
    assert "rank 0: 2 from simulations 0, 2; rank 1: 0" in words
    assert "the study ran 3 simulations: 2 finished, 1 failed (1 replaced by a redraw)" in words
    assert "fewer simulations than ranks" not in words
    assert "Run at least 2 simulations" not in words
    assert "rank (simulation_id + t) % 2" in words
    assert "simulation 0 (1 step) to rank 0; simulation 2 (1 step) to rank 0" in words
    assert "Run more simulations" in words
    assert "routes t % 2" not in words  # (they went where the routing sends them)
    assert (
        "or give each at least 2 time steps, or train on fewer ranks (--num_processes 1)" in words
    )


def test_fewer_simulations_than_ranks_is_said_when_true() -> None:
    words = untrained_words([1, 0], [{0: 1}, {}], StudyCounts(1, 0, 0))
    assert "rank 0: 1 from simulation 0; rank 1: 0" in words
    assert "the study ran 1 simulation: 1 finished." in words
    assert "1 contributed (simulation 0), fewer simulations than ranks" in words
    assert "Run at least 2 simulations (or give each at least 2 time steps)" in words


def test_external_mode_names_the_ids_without_a_study() -> None:
    words = untrained_words([3, 0, 0], [{1: 1, 4: 1, 7: 1}, {}, {}])
    assert "the study ran" not in words  # (no launcher: what the receivers know)
    assert "rank 0: 3 from simulations 1, 4, 7; rank 1: 0; rank 2: 0" in words
    assert "other ranks than ranks 1, 2" in words
    # where they went, as received (4 % 3 == 1: a client routing t % 3 sent it to 0)
    assert "simulation 4 (1 step) to rank 0; simulation 7 (1 step) to rank 0" in words
    assert "some client routes t % 3" in words


def test_a_finished_simulation_not_yet_counted_is_named() -> None:
    # rank 1 saw simulation 2 finish, sending it nothing; rank 0 had not counted it yet
    held = [{0: 1, 2: 0}, {0: 0, 2: 0}]
    words = untrained_words([1, 0], held, StudyCounts(1, 1, 1, running=1))
    assert "the study ran 3 simulations: 1 finished, 1 failed (1 replaced by a redraw), " in words
    assert "1 not yet seen to end" in words
    assert "simulation 2 finished having sent rank 1 nothing" in words
    assert "fewer simulations than ranks" not in words


def test_every_rank_held_fewer_than_a_batch_names_batch_size() -> None:
    words = untrained_words([1, 1], [{0: 1}, {1: 1}], None, batch_size=4)
    assert "fewer samples than --batch_size 4" in words
    assert "lower it to at most 1" in words


@pytest.mark.e2e
@pytest.mark.timeout(180)
@pytest.mark.skipif(sys.platform != "linux", reason="accelerate launch with gloo")
def test_the_trials_study_fails_naming_the_routing_and_the_ids(tmp_path: Path) -> None:
    from two_ranks import launch_two_ranks

    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from one_step_redraw_study import SOLVER
    finally:
        sys.path.remove(str(SCRIPT.parent))
    solver = tmp_path / "solver.py"
    solver.write_text(SOLVER)
    proc = launch_two_ranks(SCRIPT, str(tmp_path / "out"), str(solver), timeout=150)
    said = proc.stdout[-3000:] + proc.stderr[-8000:]
    assert proc.returncode != 0, said
    ends = [(tmp_path / f"exit-{r}.txt").read_text().split() for r in range(2)]
    assert ends == [["NoTrainingError", "0"]] * 2, said
    (full,) = [x for x in proc.stderr.splitlines() if "no training step" in x]
    # (rank 1's stream ends once simulations 0 and 2 said BYE: simulation 2's sample may
    # not be counted on rank 0 yet, and the launcher may not have seen it end)
    assert re.search(r"rank 0: (2 from simulations 0, 2|1 from simulation 0); rank 1: 0", full)
    assert "the study ran 3 simulations: " in full, full
    assert "1 failed (1 replaced by a redraw)" in full, full
    assert "rank (simulation_id + t) % 2" in full, full
    assert "simulation 0 (1 step) to rank 0; simulation 2 " in full, full
    assert "fewer simulations than ranks" not in full, full
