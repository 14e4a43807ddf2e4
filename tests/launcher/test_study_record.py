"""`StudyRecord`: the one record of a study's simulations, its state machine and failure budget."""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from data_reports import Quiet

from melissa_trainer.launcher import LauncherTuning, UniformSampler, make_sampler
from melissa_trainer.launcher.backends.base import Backend, Handle, Job
from melissa_trainer.launcher.jobs import Settings
from melissa_trainer.launcher.simulation_record import STATUSES, records_of
from melissa_trainer.launcher.study_record import StudyRecord
from melissa_trainer.launcher.supervisor import Supervisor
from melissa_trainer.launcher.worker_mode import RETRY, WorkerSupervisor


def make(n: int = 4, *, data: bool = True, **policy: object) -> StudyRecord:
    options: dict = dict(max_restarts=1, on_failure="redraw", max_redraws=n, first_simulation_id=0)
    options.update(policy)
    study = StudyRecord(UniformSampler({"a": (0.0, 1.0)}, seed=0), n, **options)
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
    state["simulations"] = {str(k): v for k, v in records_of(study.state_dict()).items()}
    resumed = make(1)
    resumed.load_state_dict(state)
    assert resumed.reconcile(set()) == [0]


CORRUPT_COLUMNS = {
    "columns differ in length": lambda s: s["status"].pop(),
    "unknown simulation status 'done'": lambda s: s["status"].__setitem__(1, "done"),
    "has parameters \\[\\], not \\['a'\\]": lambda s: s["parameters"].pop("a"),
    "not finite values": lambda s: s["parameters"]["a"].__setitem__(1, float("nan")),
    "simulation 0 is listed twice": lambda s: s["ids"].__setitem__(1, 0),
    "simulation -1 .* a negative id": lambda s: s["ids"].__setitem__(0, -1),
}


@pytest.mark.parametrize("error", list(CORRUPT_COLUMNS))
def test_a_corrupt_launcher_state_is_refused_naming_what_is_wrong(error: str) -> None:
    """Before, an id listed twice loaded as one fewer simulation (the study then ran one
    again and trained on its samples twice), and a negative id crashed the launcher's
    thread once training had started."""
    study = make(3)
    for _ in range(3):
        study.take(0.0)
    state = json.loads(json.dumps(study.state_dict()))
    CORRUPT_COLUMNS[error](state["simulations"])
    with pytest.raises(ValueError, match=f"invalid launcher state: .*{error}"):
        make(3).load_state_dict(state)


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
    def zig() -> StudyRecord:
        sampler = UniformSampler({"z": (0.0, 1.0), "a": (0.0, 1.0)}, seed=0)
        return StudyRecord(sampler, 1, max_restarts=0, on_failure="redraw", max_redraws=1,
                     first_simulation_id=0)  # fmt: skip

    study = zig()
    study.take(0.0)
    state = json.loads(json.dumps(study.state_dict(), sort_keys=True))
    resumed = zig()
    resumed.load_state_dict(state)
    assert list(resumed.records[0].parameters) == ["z", "a"]  # what the solver is given


# -- the index by status: what a tick reads is O(running), not O(study) -----------------


def recount(study: StudyRecord) -> tuple[dict[str, int], int, float]:
    """Counts, restarts and seconds recomputed from every record (the slow way)."""
    counts = Counter(r.status for r in study.records.values())
    restarts = sum(r.restarts for r in study.records.values())
    seconds = sum(r.seconds for r in study.records.values())
    return {s: counts[s] for s in STATUSES}, restarts, seconds


def check_index(study: StudyRecord, now: float) -> None:
    summary = study.summary(now)
    counts, restarts, seconds = recount(study)
    assert {s: study.counts()[s] for s in STATUSES} == counts
    assert sorted(study.ids("exited")) == sorted(
        sid for sid, r in study.records.items() if r.status == "exited"
    )
    running = sum(now - r.started for r in study.records.values() if r.started is not None)
    assert summary["restarts"] == restarts
    assert summary["simulation_seconds"] == pytest.approx(seconds + running)


@pytest.mark.parametrize("seed", range(6))
def test_the_status_index_matches_the_records_through_any_history(seed: int) -> None:
    """Random events (every transition, resume included): the counts, ids and totals
    the study keeps equal those recomputed from its records after each one."""
    rng = random.Random(seed)
    study = make(12, max_restarts=1, on_failure=rng.choice(["redraw", "abandon"]))
    study.max_given_up = 100  # explore failures without the study failing
    now = 0.0
    for step in range(300):
        now += 1.0
        alive = [s for s, r in study.records.items() if r.status in ("running", "complete")]
        exited = study.ids("exited")
        event = rng.randrange(6)
        if event == 0 or not (alive or exited):
            study.take(now)
        elif event == 1 and alive:
            study.process_ended(rng.choice(alive), now, rng.choice([0, 0, 1, "timeout"]))
        elif event == 2 and alive:
            study.interrupted(rng.choice(alive), now)
        elif event == 3 and study.records:
            study.data_complete(rng.choice(list(study.records)))
        elif event == 4 and exited:
            study.incomplete(rng.choice(exited), "lost")
        elif event == 5 and step % 50 == 0:  # a checkpoint and a resume
            state = json.loads(json.dumps(study.state_dict()))
            resumed = make(12, max_restarts=1, on_failure=study.on_failure)
            resumed.max_given_up = 100
            resumed.load_state_dict(state)
            check_index(resumed, now)
            resumed.reconcile(rng.sample(list(resumed.records), len(resumed.records) // 2))
            study = resumed
        check_index(study, now)
        if study.done:
            break


class NoScan(dict):  # type: ignore[type-arg]
    """The records of a big study, which a tick must not walk through."""

    def _scan(self, *args: object) -> None:
        raise AssertionError("every record was scanned")

    values = items = keys = __iter__ = _scan  # type: ignore[assignment]


def test_a_launcher_tick_does_not_scan_every_record(tmp_path: Path) -> None:
    """10^4 finished simulations, 4 running: the supervisor's tick, `done` and
    `summary` (each under the launcher's lock) read only the running ones."""
    n, job_limit = 10_000, 4
    study = make(n + 2 * job_limit)
    for _ in range(n):
        sid = study.take(0.0)
        assert sid is not None
        study.process_ended(sid, 1.0, 0)
        study.data_complete(sid)
    study.records = NoScan(study.records)
    settings = Settings(
        job_limit=job_limit,
        ranks=1,
        tuning=LauncherTuning(simulation_timeout=60.0),
        env={},
        log_dir=tmp_path,  # (its jobs' logs get the launcher's start lines)
        rendezvous_dir=str(tmp_path),
    )
    beats: dict[int, int] = {}
    supervisor = Supervisor(
        settings, study, threading.Lock(), Silent(), lambda s, p: ["sim"], lambda: beats, None
    )
    supervisor.data = Quiet()
    for _ in range(3):
        supervisor.tick()
        assert not supervisor.finished()
    assert len(supervisor.jobs) == job_limit
    summary = study.summary(2.0)
    assert (summary["finished"], summary["running"], summary["pending"]) == (n, job_limit, 4)


@dataclass(eq=False)
class SilentHandle(Handle):
    job: Job


class Silent(Backend):
    """Jobs that never end."""

    name = "silent"

    def launch(self, job: Job) -> Handle:
        return SilentHandle(job)

    def poll(self, handle: Handle) -> int | None:
        return None

    def kill(self, handle: Handle, grace: float = 5.0, reason: str | None = None) -> None:
        pass

    def close(self) -> None:
        pass


class Ending(Silent):
    """Jobs that end at their first poll: simulation 3 with exit code 1, others 0."""

    def poll(self, handle: Handle) -> int | None:
        assert isinstance(handle, SilentHandle)
        return 1 if handle.job.name.startswith("sim-3") else 0


class Reporting(Quiet):
    """The receivers' report: every simulation in `complete` has all its data."""

    def __init__(self) -> None:
        self.complete: list[int] = []

    def completed(self, start: int = 0) -> list[int]:
        return self.complete[start:]


def test_the_supervisor_keeps_the_logs_of_unfinished_simulations_only(tmp_path: Path) -> None:
    """A finished simulation's log path is dropped (a study of 10^5 would keep 10^5
    paths): only the failed one's stays, to be quoted in the study's error."""
    study = make(8, max_restarts=0, on_failure="abandon", min_finished_fraction=0.5)
    settings = Settings(
        job_limit=8, ranks=1, tuning=LauncherTuning(), env={}, log_dir=tmp_path,
        rendezvous_dir="unused",
    )  # fmt: skip
    report = Reporting()
    supervisor = Supervisor(
        settings, study, threading.Lock(), Ending(), lambda s, p: ["sim"], None, None, data=report
    )
    supervisor.tick()  # launched
    report.complete.extend([0, 1])  # complete before their process ended
    supervisor.tick()  # ended: 0, 1 finished; 2, 4.. exited; 3 failed
    report.complete.extend([2, 4, 5, 6, 7])
    supervisor.tick()  # the exited ones' data reported: finished
    assert study.counts()["finished"] == 7 and study.counts()["abandoned"] == 1
    assert set(supervisor.log_paths) == {3}


def test_ended_simulations_hold_their_slot_until_their_data_is_in(tmp_path: Path) -> None:
    """Short simulations end before the trainer has their data: once more than
    `job_limit` of them await it, no more start, so the data in flight (queued in
    ZeroMQ, run again after a resume) stays bounded (found by a user: 1,477 of 1,500
    simulations "exited" with 857 samples put, the study's data in the trainer's
    memory)."""
    study = make(20, max_restarts=0, on_failure="abandon", min_finished_fraction=0.1)
    settings = Settings(
        job_limit=3, ranks=1, tuning=LauncherTuning(), env={}, log_dir=tmp_path,
        rendezvous_dir="unused",
    )  # fmt: skip
    report = Reporting()
    supervisor = Supervisor(
        settings, study, threading.Lock(), Ending(), lambda s, p: ["sim"], None, None, data=report
    )
    for _ in range(10):
        supervisor.tick()  # start, end (3 fails: Ending's exit code 1), await the data
    waiting = study.ids("exited")
    assert len(waiting) == 5 and study.summary(0.0)["pending"] == 14  # 6 launched, no more
    report.complete.extend(waiting[:3])
    for _ in range(10):
        supervisor.tick()
    assert study.counts()["finished"] == 3 and study.counts()["exited"] == 5
    assert study.summary(0.0)["pending"] == 11  # 3 more: as many as completed


def test_a_worker_waits_while_ended_simulations_await_their_data(tmp_path: Path) -> None:
    """Worker mode: a worker asking for its next simulation while more than `job_limit`
    ended simulations await their data is told to ask again, not given one."""
    study = make(10, max_restarts=0, on_failure="abandon")
    settings = Settings(
        job_limit=2, ranks=1, tuning=LauncherTuning(poll_interval=0.05), env={},
        log_dir=tmp_path, rendezvous_dir="unused",
    )  # fmt: skip
    report = Reporting()
    supervisor = WorkerSupervisor(
        settings, study, threading.Lock(), Silent(), lambda s, p: ["sim"], None, None,
        data=report, argv=["worker"],
    )  # fmt: skip
    try:
        supervisor.launch_jobs(0.0)  # two workers
        assert sorted(supervisor.jobs) == ["worker-0", "worker-1"]

        def ask(name: str, finished: int | None) -> dict:
            return supervisor.answer(
                json.dumps({"version": 1, "worker": name, "finished": finished}).encode()
            )

        assert ask("worker-0", None)["simulation_id"] == 0
        assert ask("worker-1", None)["simulation_id"] == 1
        assert ask("worker-0", 0)["simulation_id"] == 2  # 0 awaits its data: 1 of 2
        assert study.records[0].status == "exited"  # reported done, its data not in
        assert ask("worker-1", 1)["simulation_id"] == 3  # 2 of 2
        assert ask("worker-0", 2) == {"version": 1, "simulation_id": None, "retry": RETRY}
        assert ask("worker-0", None)["retry"] == RETRY  # still: 0, 1, 2 await their data
        report.complete.append(0)  # (read by the answer itself, not only at a tick)
        assert ask("worker-0", None)["simulation_id"] == 4
        assert "worker-0" not in supervisor.told_none
    finally:
        supervisor.close_socket()


def test_losses_reported_between_draws_reach_the_sampler_once_each_as_if_at_once() -> None:
    # issue 46: a study's trainer reports every simulation's loss every few steps,
    # hundreds of times per draw; the record notes them and the sampler observes each
    # simulation's newest loss once before the next draw, in the order of the newest
    # reports (window 5 < simulations: the order decides which are kept), so that its
    # state and draws are those of a sampler fed every report at once
    def sampler() -> Any:
        return make_sampler("breed", {"a": (0.0, 1.0), "b": (0.0, 1.0)}, seed=4,
                            exploration=0.3, min_observations=3, window=5)  # fmt: skip

    study = StudyRecord(sampler(), 14, max_restarts=0, on_failure="raise", max_redraws=0,
                        first_simulation_id=0)  # fmt: skip
    calls = Counter[int]()
    observe = study.sampler.observe

    def counted(sid: int, parameters: Any, loss: float) -> None:
        calls[sid] += 1
        observe(sid, parameters, loss)

    study.sampler.observe = counted  # type: ignore[method-assign]
    direct = sampler()  # fed every report at once
    rng = random.Random(7)
    for draw in range(14):
        sid = study.take(0.0)
        assert sid is not None
        parameters = study.records[sid].parameters
        assert parameters == direct.draw()
        study.process_ended(sid, 0.0, 0)
        for _ in range(30):  # reports of random subsets of the simulations drawn so far
            ids = rng.sample(range(draw + 1), rng.randint(1, draw + 1))
            report = {s: rng.random() for s in ids}
            assert study.observe(report) == (len(report), [])
            for s, loss in report.items():
                direct.observe(s, study.records[s].parameters, loss)
        assert sum(calls.values()) <= draw + 1  # at most once each before the next draw
        calls.clear()
        if draw == 9:  # a checkpoint holds every report, applied
            assert study.state_dict()["sampler"] == direct.state_dict()
    assert study.observe({99: 1.0, 0: float("nan")}) == (0, [99, 0])
    with pytest.raises(ValueError, match="simulation 0 is not a number"):
        study.observe({0: "high"})  # type: ignore[dict-item]
    assert study.state_dict()["sampler"] == direct.state_dict()


def test_losses_noted_for_simulations_a_shrunk_resume_cancels_are_forgotten() -> None:
    # a loss noted (Launcher.observe) between a resume and its start, for a simulation
    # that the start then cancels (fewer simulations than the record): its record is
    # gone, so the sampler's next draw (or checkpoint) must not look it up (it raised
    # KeyError), and the losses of the simulations kept still reach the sampler
    def sampler() -> Any:
        return make_sampler("breed", {"a": (0.0, 1.0)}, seed=3, min_observations=1)

    def record(n: int) -> StudyRecord:
        return StudyRecord(sampler(), n, max_restarts=0, on_failure="raise", max_redraws=0,
                           first_simulation_id=0)  # fmt: skip

    study = record(4)
    for _ in range(3):
        study.take(0.0)  # 0, 1, 2 running: pending again after the resume
    resumed = record(1)
    resumed.load_state_dict(json.loads(json.dumps(study.state_dict())))
    assert resumed.observe({0: 0.5, 2: 0.25}) == (2, [])
    assert resumed.cancel_past_the_end() == [1, 2]
    state = resumed.state_dict()  # the noted losses applied
    assert [o["simulation_id"] for o in state["sampler"]["observations"]] == [0]
