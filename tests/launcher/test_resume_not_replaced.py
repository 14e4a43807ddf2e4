"""A simulation that failed the study (``on_failure="raise"``, or a redraw study out of
its ``max_redraws``) holds its place unreplaced (`StudyRecord.not_replaced`), on resume
too: the checkpoint saves the count, and a resumed study draws what the uninterrupted
one would have, nothing in that place (docs/concepts/study.md: "a resumed study draws
what the uninterrupted one would have"; `study_record`: "nothing is drawn in its
place"). Before, the resume reset the count to 0 and drew one more simulation than the
policy allowed (past max_redraws, or in place of a failure under raise). A state saved
before the field loads as 0 (as before)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from melissa_trainer.launcher import UniformSampler
from melissa_trainer.launcher.study_record import StudyRecord


def make(n: int, **policy: Any) -> StudyRecord:
    options: dict[str, Any] = dict(max_restarts=0, first_simulation_id=0)
    options.update(policy)
    study = StudyRecord(UniformSampler({"a": (0.0, 1.0)}, seed=0), n, **options)
    study.data_reported = True
    return study


def failed_the_study(**policy: Any) -> tuple[StudyRecord, dict[str, Any]]:
    """A study of 3 whose first simulation failed it (the others not started), and its
    checkpoint state, through JSON as a checkpoint holds it."""
    study = make(3, **policy)
    sid = study.take(0.0)
    assert sid == 0
    assert study.process_ended(sid, 1.0, 1) == "raise"
    assert study.not_replaced == 1 and study.undrawn() == 2  # (the other two places)
    return study, json.loads(json.dumps(study.state_dict()))


def drawn_after_resume(state: dict[str, Any], **policy: Any) -> list[int]:
    """The ids a study resumed from `state` draws, until it has nothing left to start."""
    resumed = make(3, **policy)
    resumed.load_state_dict(state)
    resumed.reconcile([])
    ids = []
    while (sid := resumed.take(2.0)) is not None:
        ids.append(sid)
    assert resumed.work_left() == 0
    return ids


@pytest.mark.parametrize(
    "policy",
    [
        {"on_failure": "raise", "max_redraws": 3},
        {"on_failure": "redraw", "max_redraws": 0},  # (its redraws used up)
    ],
)
def test_a_resume_keeps_the_failure_unreplaced(policy: dict[str, Any]) -> None:
    """Failed before: 3 draws after the resume (ids 1, 2, 3), one in the failure's place."""
    study, state = failed_the_study(**policy)
    assert state["not_replaced"] == 1
    assert drawn_after_resume(state, **policy) == [1, 2]
    resumed = make(3, **policy)
    resumed.load_state_dict(state)
    summary = resumed.summary(2.0)
    assert summary["not_replaced"] == 1 and summary["pending"] == 2  # (as before the stop)
    assert resumed.not_replaced_ids == {0}  # (the account names it after a resume too)


def test_a_state_saved_before_the_field_loads_as_none_kept() -> None:
    """Backward compatible: an older checkpoint (no ``not_replaced``) resumes as before."""
    policy = {"on_failure": "raise", "max_redraws": 3}
    _, state = failed_the_study(**policy)
    del state["not_replaced"], state["not_replaced_ids"]
    assert drawn_after_resume(state, **policy) == [1, 2, 3]


def test_a_malformed_count_is_refused_naming_the_field() -> None:
    policy = {"on_failure": "raise", "max_redraws": 3}
    _, state = failed_the_study(**policy)
    state["not_replaced"] = 5
    with pytest.raises(ValueError, match="not_replaced=5"):
        make(3, **policy).load_state_dict(state)
    state["not_replaced"] = "many"
    with pytest.raises(ValueError, match="invalid launcher state"):
        make(3, **policy).load_state_dict(state)


def test_ids_that_are_not_among_the_failures_not_replaced_are_refused() -> None:
    policy = {"on_failure": "raise", "max_redraws": 3}
    _, state = failed_the_study(**policy)
    state["not_replaced_ids"] = [0, 7]
    with pytest.raises(ValueError, match=r"not_replaced_ids=\[0, 7\]"):
        make(3, **policy).load_state_dict(state)
