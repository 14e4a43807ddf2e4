"""`LauncherTuning.final_exit_codes` (systemd's ``RestartPreventExitStatus=``): a
simulation that exits with one of them is not restarted, `on_failure` applies at once,
and its record, the failure line and the study's error say why. Before, every failure
was restarted `max_restarts` times (a deterministic blow-up cost three attempts).
The field's checks, the record's policy and its checkpoint, the advice's words, and real
processes on the local backend and under MPICH's mpiexec (hydra exits with the highest
of the ranks' codes: a rank's 3 survives)."""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

import pytest
from launcher_runs import failure, launcher, run_study

from melissa_trainer.launcher import LauncherTuning, make_sampler
from melissa_trainer.launcher.account import study_account
from melissa_trainer.launcher.advice import Advice
from melissa_trainer.launcher.backends import MpiexecBackend
from melissa_trainer.launcher.simulation_record import records_of
from melissa_trainer.launcher.study_record import StudyRecord

SAID = "exit 3 is one of LauncherTuning.final_exit_codes: not restarted"


@pytest.mark.parametrize("bad", [(0,), (256,), (-1,), ("3",), (True,), 3, "3"])
def test_a_code_outside_1_to_255_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ValueError, match="LauncherTuning.final_exit_codes must"):
        LauncherTuning(final_exit_codes=bad)  # type: ignore[arg-type]


def test_zero_is_refused_as_success() -> None:
    with pytest.raises(ValueError, match="0 is success"):
        LauncherTuning(final_exit_codes=(3, 0))


def test_the_codes_are_kept_as_a_sorted_tuple_and_hash() -> None:
    tuning = LauncherTuning(final_exit_codes=[4, 3, 4])  # type: ignore[arg-type]
    assert tuning.final_exit_codes == (3, 4)
    assert tuning == LauncherTuning(final_exit_codes=(3, 4)) and hash(tuning)
    assert LauncherTuning().final_exit_codes == ()


def make(final: tuple[int, ...] = (3,), on_failure: str = "redraw") -> StudyRecord:
    sampler = make_sampler("uniform", {"x": (0, 1)}, seed=0)
    return StudyRecord(
        sampler, 4, max_restarts=2, on_failure=on_failure, max_redraws=4,
        first_simulation_id=0, final_exit_codes=final,
    )  # fmt: skip


def start(study: StudyRecord) -> int:
    """Take the next simulation to run (there is one)."""
    sid = study.take(0.0)
    assert sid is not None
    return sid


def test_a_final_code_skips_the_restarts_and_others_are_restarted() -> None:
    study = make()
    sid = study.take(0.0)
    assert sid == 0
    assert study.process_ended(0, 1.0, 3) == "redraw"  # before: "restart" (twice)
    record = study.records[0]
    assert record.status == "failed" and record.restarts == 0 and record.reason == SAID
    assert SAID in study.describe(0)
    other = study.take(2.0)
    assert other is not None
    assert study.process_ended(other, 3.0, 1) == "restart"  # not a final code
    assert study.process_ended(start(study), 5.0, 3) == "redraw"  # a restart's 3


def test_abandon_and_raise_apply_at_once() -> None:
    abandon = make(on_failure="abandon")
    assert abandon.process_ended(start(abandon), 1.0, 3) == "abandon"
    fail = make(on_failure="raise")
    assert fail.process_ended(start(fail), 1.0, 3) == "raise"
    assert fail.failure == "with LauncherTuning.on_failure='raise'"


def test_a_resumed_record_keeps_the_verdict_and_the_policy() -> None:
    """The checkpoint keeps the given-up simulation and its reason; a resumed study
    (its record rebuilt from the tuning, then loaded) still gives a 3 up at once."""
    study = make()
    study.process_ended(start(study), 1.0, 3)
    state = study.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    assert resumed.records[0].status == "failed" and resumed.records[0].reason == SAID
    assert records_of(state)[0]["reason"] == SAID
    sid = resumed.take(2.0)
    assert sid is not None and sid != 0  # never run again
    assert resumed.process_ended(sid, 3.0, 3) == "redraw"


#: srun's lines in the job's log for a 2-task step whose task 1 exited 3 (its status
#: 143: task 0's SIGTERM), as written on the one-node test cluster (Slurm 22.05)
SRUN_143 = """rank 0 running
srun: error: vm: task 1: Exited with exit code 3
srun: launch/slurm: _step_signal: Terminating StepId=34549165.0
slurmstepd-vm: error: *** STEP 34549165.0 ON vm CANCELLED AT 2026-12-04T16:28:11 ***
srun: error: vm: task 0: Terminated
srun: Force Terminated StepId=34549165.0
"""
#: the same step scancelled (or preempted): a signal first, no task's own code
SRUN_CANCELLED = """srun: error: vm: tasks 0-1: Terminated
srun: Force Terminated StepId=34549165.3
"""


def test_a_tasks_own_code_under_srun_is_the_one_looked_up(tmp_path: Path) -> None:
    """srun's 143 (its --kill-on-bad-exit SIGTERM of task 0) after task 1's exit 3: the
    3 is read from srun's lines and looked up (test_srun_final_exit_codes.py runs it on
    the test cluster). Failed before: own_exit did not exist and process_ended took no
    `own` (143 looked up: restarted)."""
    from melissa_trainer.launcher.exit_cause import own_exit

    log = tmp_path / "sim-0.log"
    log.write_text(SRUN_143)
    first = own_exit(143, log)
    assert first is not None and (first.code, str(first)) == (3, "task 1: Exited with exit code 3")
    assert own_exit(3, log) is None  # (the lines do not account for a 3: not this attempt's)
    log.write_text(SRUN_CANCELLED)
    assert own_exit(143, log) is None  # (a scancel: nobody's own code)
    assert own_exit(143, tmp_path / "none.log") is None
    study = make()
    own = (3, f"srun: {first}")
    assert study.process_ended(start(study), 1.0, 143, own) == "redraw"
    reason = study.records[0].reason
    assert reason == (
        f"{SAID} (srun: task 1: Exited with exit code 3, first; srun's status 143: it "
        "ended the others)"
    )
    assert study.process_ended(start(study), 2.0, 143, (1, "srun: task 1: ...")) == "restart"


def test_the_advice_names_the_field_for_an_exit_code(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    Advice(worker_mode=False).failed(0, [3, 3])
    said = caplog.records[-1].getMessage()
    assert "LauncherTuning(final_exit_codes=(3,))" in said and "max_restarts=0" in said
    Advice(worker_mode=False).failed(1, ["timeout", "timeout"])  # no code to name
    said = caplog.records[-1].getMessage()
    assert "final_exit_codes" not in said and "max_restarts=0" in said
    Advice(worker_mode=False).failed(2, [143, 143])  # a SIGTERM: no choice of the solver's
    assert "final_exit_codes" not in caplog.records[-1].getMessage()


#: exits with the code its id maps to (every attempt), else 0; appends "id attempt" to runs
SOLVER = """
import json, os, sys
sid = os.environ["MELISSA_TRAINER_SIMULATION_ID"]
with open(sys.argv[2], "a") as f:
    f.write(sid + " " + os.environ["MELISSA_TRAINER_ATTEMPT"] + "\\n")
sys.exit(json.loads(sys.argv[1]).get(sid, 0))
"""


def attempts(path: Path) -> dict[int, int]:
    """How many attempts each simulation id ran."""
    counts: dict[int, int] = {}
    for line in path.read_text().splitlines():
        sid = int(line.split()[0])
        counts[sid] = counts.get(sid, 0) + 1
    return counts


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_process_exiting_a_final_code_is_redrawn_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Simulation 1 exits 3 (final): redrawn after one attempt; simulation 2 exits 1:
    restarted twice, as before. Before: simulation 1 ran three times, codes [3, 3, 3]."""
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    (tmp_path / "solver.py").write_text(SOLVER)
    sim = [
        sys.executable,
        str(tmp_path / "solver.py"),
        '{{"1": 3, "2": 1}}',
        str(tmp_path / "runs"),
    ]
    tuning = {"final_exit_codes": (3,), "systematic_failures": None, "min_finished_fraction": 0.1}
    launch = launcher(sim, 3, tuning=tuning, job_limit=2, log_dir=tmp_path / "logs")
    launch.start(tmp_path / "rendezvous")
    try:
        run_study(launch)
    finally:
        launch.stop()
    records = records_of(launch.state_dict())
    assert records[1]["exit_codes"] == [3] and records[1]["status"] == "failed"
    assert records[1]["reason"] == SAID
    assert records[2]["exit_codes"] == [1, 1, 1] and "reason" not in records[2]
    assert attempts(tmp_path / "runs") == {0: 1, 1: 1, 2: 3, 3: 1, 4: 1}
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("simulation 1 failed once") and SAID in m for m in said), said
    # the end-of-study account (no data here: every given-up one sent no sample)
    lines, _ = study_account(launch.outcomes(), {0: (1, 0), 3: (1, 0), 4: (1, 0)})
    assert any("exit codes [3]" in line and SAID in line for line in lines), lines


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_study_error_says_the_code_was_final(tmp_path: Path) -> None:
    """on_failure='raise': the study fails at the first 3, its error saying why."""
    (tmp_path / "solver.py").write_text(SOLVER)
    sim = [sys.executable, str(tmp_path / "solver.py"), '{{"0": 3}}', str(tmp_path / "runs")]
    tuning = {"final_exit_codes": (3,), "on_failure": "raise"}
    launch = launcher(sim, 1, tuning=tuning, log_dir=tmp_path / "logs")
    launch.start(tmp_path / "rendezvous")
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
    assert "simulation 0 failed once" in message and SAID in message, message
    assert attempts(tmp_path / "runs") == {0: 1}


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_rank_final_code_survives_mpiexec(tmp_path: Path) -> None:
    """Rank 1 of 2 exits 3, rank 0 exits 0: hydra exits 3, the highest of the ranks'
    codes, and the simulation is not restarted. (A rank that exits 3 while the others
    run on is waited for: hydra ends when they do, as a solver's collective exit does.)"""
    if shutil.which("mpiexec") is None and not (Path(sys.executable).parent / "mpiexec").exists():
        pytest.skip("no mpiexec (pip install mpich)")
    (tmp_path / "solver.py").write_text(
        "import os, sys\n"
        "if os.environ['PMI_RANK'] == '1':\n"
        "    with open(sys.argv[1], 'a') as f:\n"
        "        f.write('0 0\\n')\n"
        "    sys.exit(3)\n"
    )
    sim = [sys.executable, str(tmp_path / "solver.py"), str(tmp_path / "runs")]
    tuning = {"final_exit_codes": (3,), "on_failure": "abandon", "systematic_failures": None}
    launch = launcher(
        sim, 1, [{"a": 0.0}], tuning=tuning, backend=MpiexecBackend(), ranks_per_simulation=2,
        log_dir=tmp_path / "logs",
    )  # fmt: skip
    launch.start(tmp_path / "rendezvous")
    try:
        failure(launch, timeout=60)
    finally:
        launch.stop()
    records = records_of(launch.state_dict())
    assert records[0]["exit_codes"] == [3] and records[0]["status"] == "abandoned"
    assert attempts(tmp_path / "runs") == {0: 1}


#: prints srun's lines of SRUN_143 as its own output, then exits 143 (its own SIGTERM's
#: code): not srun's account of anything; appends "id attempt" to runs
NOT_SRUN = f"""
import os, sys
sid, attempt = os.environ["MELISSA_TRAINER_SIMULATION_ID"], os.environ["MELISSA_TRAINER_ATTEMPT"]
with open(sys.argv[1], "a") as f:
    f.write(sid + " " + attempt + "\\n")
sys.stdout.write({SRUN_143!r})
sys.exit(143)
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_srun_like_lines_of_a_local_solver_are_not_read_as_its_tasks_code(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A local solver whose log ends in srun-form lines ("task 1: Exited with exit code
    3", then srun terminating the step) and that exits 143 is a 143: restarted, its
    record saying no final code, its end said as a SIGTERM. Only the Slurm backend runs
    ranks under srun (`Backend.srun_tasks`). Failed before: own_exit was asked for every
    backend, the 3 was looked up and the simulation given up after one attempt (exit
    codes [143]); and exit_text was (until hsrun5) too: the end was said as "exit 143
    (srun: task 1: Exited with exit code 3 first, ...)"."""
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    (tmp_path / "solver.py").write_text(NOT_SRUN)
    sim = [sys.executable, str(tmp_path / "solver.py"), str(tmp_path / "runs")]
    tuning = {
        "final_exit_codes": (3,), "on_failure": "abandon", "systematic_failures": None,
        "max_restarts": 1,
    }  # fmt: skip
    launch = launcher(sim, 1, [{"a": 0.0}], tuning=tuning, log_dir=tmp_path / "logs")
    launch.start(tmp_path / "rendezvous")
    try:
        failure(launch)  # its simulation given up: the study of 1 fails
    finally:
        launch.stop()
    records = records_of(launch.state_dict())
    assert records[0]["exit_codes"] == [143, 143] and "reason" not in records[0], records
    assert attempts(tmp_path / "runs") == {0: 2}
    assert "exit 143 (SIGTERM" in caplog.text, caplog.text
    assert "srun: task 1" not in caplog.text, caplog.text


#: a worker that reports each simulation's code on its next request (no data: without a
#: receiver a simulation reported 0 is finished); 1 -> 3 (final), 2 -> 1
WORKER = """
import sys
from melissa_trainer.client.worker import next_simulation

code = 0
while (work := next_simulation(timeout=30, exit_code=code)) is not None:
    with open(sys.argv[1], "a") as f:
        f.write(f"{work[0]} 0\\n")
    code = {1: 3, 2: 1}.get(work[0], 0)
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_worker_reporting_a_final_code_is_not_given_the_simulation_again(
    tmp_path: Path,
) -> None:
    """Worker mode: ``next_simulation(exit_code=3)`` gives simulation 1 up at once (the
    worker lives on); ``exit_code=1`` is restarted twice, as before."""
    (tmp_path / "worker.py").write_text(WORKER)
    sim = [sys.executable, str(tmp_path / "worker.py"), str(tmp_path / "runs")]
    tuning = {"final_exit_codes": (3,), "systematic_failures": None, "min_finished_fraction": 0.1}
    launch = launcher(sim, 3, tuning=tuning, job_limit=1, worker=True, log_dir=tmp_path / "logs")
    launch.start(tmp_path / "rendezvous")
    try:
        run_study(launch)
    finally:
        launch.stop()
    records = records_of(launch.state_dict())
    assert records[1]["exit_codes"] == [3] and records[1]["reason"] == SAID
    assert records[2]["exit_codes"] == [1, 1, 1]
    assert attempts(tmp_path / "runs") == {0: 1, 1: 1, 2: 3, 3: 1, 4: 1}
