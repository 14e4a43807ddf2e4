"""`Study`: the one record of a study's simulations, its state machine and failure budget."""

from __future__ import annotations

import json

import pytest

from melissa_trainer.launcher import UniformSampler
from melissa_trainer.launcher.records import Study


def make(n: int = 4, *, data: bool = True, **policy: object) -> Study:
    options: dict = dict(max_restarts=1, on_failure="redraw", max_redraws=n, first_simulation_id=0)
    options.update(policy)
    study = Study(UniformSampler({"a": (0.0, 1.0)}, seed=0), n, **options)
    study.data_reported = data
    return study


def test_exit_0_is_not_finished_until_the_data_is_complete() -> None:
    study = make(2)
    a, b = study.take(0.0), study.take(0.0)
    assert (a, b) == (0, 1)
    assert study.process_ended(a, 1.0, 0) == "exited"
    assert study.records[a].status == "exited" and not study.done
    assert study.data_complete(a) and study.records[a].status == "finished"
    # data first, then the process ends (any exit code): finished
    assert study.data_complete(b) and study.records[b].status == "complete"
    assert study.process_ended(b, 2.0, 1) == "finished"
    assert study.done and study.summary(3.0)["finished"] == 2


def test_without_a_data_report_exit_0_finishes() -> None:
    study = make(1, data=False)
    sid = study.take(0.0)
    assert sid is not None and study.process_ended(sid, 1.0, 0) == "finished"
    assert study.done


def test_an_exit_0_whose_data_never_completes_is_a_failed_attempt() -> None:
    study = make(1, max_restarts=1)
    sid = study.take(0.0)
    assert sid is not None
    study.process_ended(sid, 1.0, 0)
    assert study.incomplete(sid, "3 of 10 steps") == "restart"
    record = study.records[sid]
    assert record.exit_codes == ["incomplete"] and record.status == "pending"
    assert study.take(2.0) == sid  # the restart keeps its id


def test_a_redraw_is_replaced_and_does_not_shorten_the_study() -> None:
    study = make(2, max_restarts=0)
    a, b = study.take(0.0), study.take(0.0)
    assert a is not None and b is not None
    assert study.process_ended(a, 1.0, 3) == "redraw"
    c = study.take(1.0)
    assert c == 2 and study.records[a].status == "failed"
    for sid in (b, c):
        study.process_ended(sid, 2.0, 0)
        study.data_complete(sid)
    assert study.done and study.summary(3.0)["finished"] == 2


@pytest.mark.parametrize("policy", ["redraw", "abandon"])
def test_the_failure_budget_fails_a_study_where_every_simulation_fails(policy: str) -> None:
    study = make(10, max_restarts=0, on_failure=policy, min_finished_fraction=0.5)
    assert study.max_given_up == 5
    outcomes = []
    while True:
        sid = study.take(0.0)
        assert sid is not None
        outcome = study.process_ended(sid, 1.0, 1)
        outcomes.append(outcome)
        if outcome == "raise":
            break
    assert outcomes == [policy] * 5 + ["raise"]
    assert "6 simulations failed for good" in study.failure
    assert "min_finished_fraction=0.5" in study.failure


def test_resume_reruns_what_the_receivers_do_not_all_have() -> None:
    study = make(4)
    for _ in range(4):
        study.take(0.0)
    study.process_ended(0, 1.0, 0)  # exited, data due
    study.process_ended(1, 1.0, 0)
    study.data_complete(1)  # finished at rank 0
    study.data_complete(2)  # complete, still running
    state = study.state_dict()
    resumed = make(4)
    resumed.load_state_dict(state)
    # every rank has 1 and 2 complete; 0 is complete nowhere; 3 was running
    assert resumed.reconcile({1, 2}) == [0]
    statuses = {s: r.status for s, r in resumed.records.items()}
    assert statuses == {0: "pending", 1: "finished", 2: "finished", 3: "pending"}
    assert sorted(resumed.queue) == [0, 3]
    # a simulation "finished" at rank 0 but incomplete on another rank runs again
    again = make(4)
    again.load_state_dict(state)
    assert again.reconcile({2}) == [0, 1]


def test_version_1_states_load_and_their_finished_simulations_are_checked() -> None:
    study = make(1, data=False)
    study.take(0.0)
    study.process_ended(0, 1.0, 0)
    state = dict(study.state_dict(), version=1)
    resumed = make(1)
    resumed.load_state_dict(state)
    assert resumed.reconcile(set()) == [0]


def test_interrupted_simulations_are_pending_not_running() -> None:
    study = make(2)
    study.take(0.0)
    study.take(0.0)
    study.data_complete(1)
    study.interrupted(0, 1.0)
    study.interrupted(1, 1.0)
    assert study.records[0].status == "pending" and study.records[1].status == "finished"
    assert study.summary(2.0)["running"] == 0


def test_parameters_keep_the_samplers_order_through_a_checkpoints_sorted_json() -> None:
    def zig() -> Study:
        sampler = UniformSampler({"z": (0.0, 1.0), "a": (0.0, 1.0)}, seed=0)
        return Study(sampler, 1, max_restarts=0, on_failure="redraw", max_redraws=1,
                     first_simulation_id=0)  # fmt: skip

    study = zig()
    study.take(0.0)
    state = json.loads(json.dumps(study.state_dict(), sort_keys=True))
    resumed = zig()
    resumed.load_state_dict(state)
    assert list(resumed.records[0].parameters) == ["z", "a"]  # what the solver is given
