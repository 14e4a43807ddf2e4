"""The stop's account says what a run resumed from the last checkpoint will do, and the
resume agrees: its own line (`resume_lines`, after `reconcile` on what every rank's
checkpointed receiver holds) is the oracle.

A user trial (2 training ranks, SIGTERM, resume) saw at the stop "15 simulations ended ...
simulation 15 still running ... a resumed run runs it again", and at the resume "14 done
(0-13); 1 run again (14)": simulation 14 had all its data on rank 0, whose launcher
counted it finished, but rank 1's checkpoint lacked some of its steps. Rank 0 alone cannot
see that; at the save the ranks now gather what each checkpoint holds
(`study.saved_account`), and the stop says the resume's own words."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from melissa_trainer.buffers import META_FILE
from melissa_trainer.checkpoint.paths import rank_path
from melissa_trainer.launcher import UniformSampler
from melissa_trainer.launcher.account import (
    SimulationOutcome,
    resume_lines,
    stop_resume_lines,
    study_account,
)
from melissa_trainer.launcher.study_record import StudyRecord
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.study.saved_account import SavedAccount
from melissa_trainer.wire import Bye, Data, FieldSpec, Hello

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stream"))
from small_ingest import small_ingest  # noqa: E402

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))
STEPS = 4  # per simulation: steps 0 and 2 to rank 0, 1 and 3 to rank 1 (t % 2)


def outcomes(study: StudyRecord) -> list[SimulationOutcome]:
    """As `Launcher.outcomes` builds them."""
    return [
        SimulationOutcome(sid, r.status, list(r.exit_codes), r.reason, dict(r.parameters),
                          r.attempts)
        for sid, r in sorted(study.records.items())
    ]  # fmt: skip


def make(n: int) -> StudyRecord:
    study = StudyRecord(
        UniformSampler({"a": (0.0, 1.0)}, seed=0), n, max_restarts=1, on_failure="redraw",
        max_redraws=n, first_simulation_id=0,
    )  # fmt: skip
    study.data_reported = True
    return study


def stream(ingest: Ingest, sid: int, steps: list[int], bye: bool) -> None:
    """Simulation `sid` (one client rank) sends `steps` to `ingest`, then its BYE."""
    ingest.hello(Hello(sid, 0, 1, (FIELD,), {"a": float(sid)}))
    for t in steps:
        payload = np.array([sid, t], np.float32).tobytes()
        ingest.data(Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload), True)
    if bye:
        ingest.bye(Bye(sid, 0, 1, len(steps)))


def write_buffer_meta(checkpoint: Path, rank: int, put: int) -> None:
    """The one figure of the buffer's checkpoint file that the account reads."""
    path = rank_path(checkpoint, rank)
    path.mkdir(parents=True, exist_ok=True)
    (path / META_FILE).write_text(json.dumps({"put": put}))


def the_resume(study: StudyRecord, records: list[dict], puts: list[int], n: int) -> list[str]:
    """The oracle: what a run resumed from this checkpoint says, as it does it (each
    rank's receiver loads its record against its restored buffer; `reconcile` takes the
    simulations complete on every rank; `resume_lines`)."""
    complete = None
    for rank, (record, put) in enumerate(zip(records, puts, strict=True)):
        ingest = small_ingest(rank, len(records), recent_size=64)
        ingest.load_state_dict(json.loads(json.dumps(record)), put)
        mine = set(ingest.finished_ids)
        complete = mine if complete is None else complete & mine
    again = make(n)
    again.load_state_dict(json.loads(json.dumps(study.state_dict())))
    again.reconcile(complete or set())
    return resume_lines(outcomes(again), n)


def body(line: str) -> str:
    """A resume line without its head ("study resumed: " or "a run resumed from X: ")."""
    return line.split(": ", 1)[1]


def test_the_stop_says_a_simulation_another_rank_lacks_runs_again(tmp_path: Path) -> None:
    # 5 simulations: 0-3 exited 0 with all their data on rank 0 (finished, its launcher
    # says), 4 still running; rank 1's receiver was behind: it lacks step 3 of simulation 3
    n = 5
    study = make(n)
    for _ in range(n):
        study.take(0.0)
    ranks = [small_ingest(r, 2, recent_size=64) for r in range(2)]
    for sid in range(4):
        stream(ranks[0], sid, [0, 2], bye=True)
        assert study.process_ended(sid, 1.0, 0) == "exited"
        assert study.data_complete(sid)  # (rank 0's report: finished)
        stream(ranks[1], sid, [1, 3] if sid < 3 else [1], bye=sid < 3)
    stream(ranks[0], 4, [0], bye=False)
    records = [r.state_dict() for r in ranks]
    puts = [r.samples_put for r in ranks]
    # the stop's account from rank 0's records alone: simulation 3 ended, nothing of a rerun
    account, _ = study_account(outcomes(study), ranks[0].samples_of(), n)
    assert account[0].startswith("study account: 4 simulations ended")
    resumed = the_resume(study, records, puts, n)
    assert "1 run again" not in resumed[0]  # (2: 3 and 4)
    assert "; 2 run again (3-4: " in resumed[0], resumed
    # what each rank's SavedAccount gathers at the save, then rank 0's words at the stop
    checkpoint = tmp_path / "checkpoint-7"
    accounts = [SavedAccount() for _ in ranks]
    saved_outcomes = outcomes(study)  # (`LauncherRecord.saved_outcomes`, at the save)
    sets = []
    for rank, account_of_rank in enumerate(accounts):
        account_of_rank.taken(records[rank])
        write_buffer_meta(checkpoint, rank, puts[rank])
        sets.append(account_of_rank.complete_here(checkpoint, rank))
    assert sets == [[0, 1, 2, 3], [0, 1, 2]]
    accounts[0].said(sets, saved_outcomes, n, checkpoint)
    (line,) = accounts[0].lines()
    assert line.startswith(f"a run resumed from {checkpoint}: ")
    assert body(line) == body(resumed[0])  # the stop's words are the resume's
    assert accounts[0].lines() == []  # (once)


def test_a_step_recorded_after_the_buffers_snapshot_is_not_counted(tmp_path: Path) -> None:
    # one rank: simulation 1's last step was recorded after the buffer's snapshot (the
    # checkpoint's put count is one short): the resume forgets it and runs 1 again
    n = 2
    study = make(n)
    ingest = small_ingest(0, 1, recent_size=64)
    for sid in range(n):
        study.take(0.0)
        stream(ingest, sid, list(range(STEPS)), bye=True)
        study.process_ended(sid, 1.0, 0)
        assert study.data_complete(sid)
    record, put = ingest.state_dict(), ingest.samples_put - 1
    resumed = the_resume(study, [record], [put], n)
    assert "; 1 run again (1: " in resumed[0], resumed
    account = SavedAccount()
    account.taken(record)
    write_buffer_meta(tmp_path, 0, put)
    # (world 1: `saved` gathers without a process group)
    account.saved(tmp_path, 0, outcomes(study), n)
    (line,) = account.lines()
    assert body(line) == body(resumed[0])


def test_a_rank_that_cannot_tell_is_said_not_guessed(tmp_path: Path) -> None:
    account = SavedAccount()
    account.taken({"recent": "", "rank": 0, "world_size": 1})  # (no buffer file: cannot tell)
    assert account.complete_here(tmp_path, 0) is None
    account.said([None, [0]], [], 1, tmp_path)
    (line,) = account.lines()
    assert "a rank could not tell which" in line
    account.said([[0]], None, 1, tmp_path)  # (no launcher record saved: no words)
    assert account.lines() == []


STATUSES = ("pending", "running", "complete", "exited", "finished", "failed", "abandoned")


@pytest.mark.parametrize("seed", range(20))
def test_the_stop_rule_is_the_resumes_for_any_status(seed: int) -> None:
    # `stop_resume_lines` against a real load and reconcile, every status mixed
    rng = random.Random(seed)
    n = rng.randint(1, 12)
    saved = [
        SimulationOutcome(sid, rng.choice(STATUSES), (), "", {"a": 0.5}, rng.randint(0, 2))
        for sid in range(n)
    ]
    complete = {o.simulation_id for o in saved if rng.random() < 0.5}
    study = make(n)
    for o in saved:
        study.take(0.0)
        study.records[o.simulation_id].attempts = o.attempts
        study._move(o.simulation_id, o.status)
    again = make(n)
    again.load_state_dict(json.loads(json.dumps(study.state_dict())))
    again.reconcile(complete)
    (want,) = resume_lines(outcomes(again), n)
    got = stop_resume_lines(outcomes(study), complete, n, "ckpt")
    if "; 0 run again; 0 not started yet" in want:  # (nothing to resume: no words)
        assert got == []
    else:
        assert len(got) == 1 and body(got[0]) == body(want)


def test_a_study_that_ended_says_nothing_of_a_resume() -> None:
    study = make(2)
    for sid in range(2):
        study.take(0.0)
        study.process_ended(sid, 1.0, 0)
        study.data_complete(sid)
    assert stop_resume_lines(outcomes(study), {0, 1}, 2, "ckpt") == []
    (line,) = stop_resume_lines(outcomes(study), {0}, 2, "ckpt")  # (1 lacking somewhere)
    assert body(line).startswith("1 of its 2 simulations are done") and "1 run again (1: " in line
