"""A Slurm controller that is briefly unreachable (slurmctld restarted: an upgrade, a
configuration change, a fail-over) is ridden out: sbatch's "Unable to contact slurm
controller" is retried for up to `controller_wait` seconds (htrial30: it failed the whole
study at its next submission, the running simulations cancelled, exit 1), while a refusal
(an invalid partition) still fails at once, and a bad `controller_wait` fails early.

Stand-in commands (as tests/launcher/backends/test_slurm_stand_ins.py): an sbatch that
cannot reach the controller at its first call and submits at the next.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from launcher_said import one_line

from melissa_trainer.launcher.backends import Job, LaunchError, SlurmBackend

SBATCH = """#!/bin/bash
n=$(cat "$FAKE/sbatch.calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$FAKE/sbatch.calls"
WHY="Unable to contact slurm controller (connect failure)"
if [ "$n" = 0 ]; then
    echo "sbatch: error: Batch job submission failed: $WHY" >&2
    exit 1
fi
echo "4242;testcluster"
"""
OTHERS = {
    "squeue": "#!/bin/bash\nexit 0\n",
    "scancel": "#!/bin/bash\nexit 0\n",
    "sacct": "#!/bin/bash\nexit 1\n",
    "scontrol": "#!/bin/bash\nexit 1\n",
    "srun": '#!/bin/bash\nwhile [[ "$1" == -* ]]; do shift; done\nexec "$@"\n',
}


def _stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sbatch: str) -> Path:
    bin_dir, state = tmp_path / "bin", tmp_path / "fake"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in {"sbatch": sbatch, **OTHERS}.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("FAKE", str(state))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return state


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_submission_during_a_controller_restart_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    state = _stand_ins(tmp_path, monkeypatch, SBATCH)
    backend = SlurmBackend()
    try:
        backend.launch(Job("sim-10", ["/bin/true"], cwd=tmp_path))
    finally:
        backend.close()
    assert (state / "sbatch.calls").read_text().strip() == "2"
    said = [
        one_line(r.getMessage())
        for r in caplog.records
        if "Slurm controller" in one_line(r.getMessage())
    ]
    assert len(said) == 2, said  # a summary: the outage, then its end
    assert "retrying for up to 300 s (controller_wait)" in said[0]
    assert said[1].startswith("the Slurm controller answered sbatch again after")


REFUSING = """#!/bin/bash
n=$(cat "$FAKE/sbatch.calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$FAKE/sbatch.calls"
echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2
exit 1
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_refusal_fails_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = _stand_ins(tmp_path, monkeypatch, REFUSING)
    backend = SlurmBackend()
    try:
        with pytest.raises(LaunchError, match="Invalid partition name"):
            backend.launch(Job("sim-10", ["/bin/true"], cwd=tmp_path))
    finally:
        backend.close()
    assert (state / "sbatch.calls").read_text().strip() == "1"


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_an_outage_longer_than_controller_wait_fails_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = SBATCH.replace('if [ "$n" = 0 ]; then', "if true; then")
    _stand_ins(tmp_path, monkeypatch, down)
    backend = SlurmBackend(controller_wait=1.5)
    try:
        with pytest.raises(LaunchError, match="unreachable for .* controller_wait sets"):
            backend.launch(Job("sim-10", ["/bin/true"], cwd=tmp_path))
    finally:
        backend.close()


@pytest.mark.parametrize("bad", [-1, float("nan"), "5", True])
def test_a_bad_controller_wait_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(ValueError, match="controller_wait must be"):
        SlurmBackend(controller_wait=bad)  # type: ignore[arg-type]


def _fake_clock(backend: SlurmBackend) -> list[float]:
    """The retries of `backend`'s Slurm commands on a fake clock that their sleeps
    advance (no real waiting); [now] in fake seconds."""
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    backend._commands.clock = lambda: now[0]
    backend._commands.sleep = sleep
    return now


NUMBERED_SBATCH = """#!/bin/bash
n=$(cat "$FAKE/sbatch.calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$FAKE/sbatch.calls"
echo "$((4242 + n));testcluster"
"""
#: lists 4242 RUNNING and 4243 PENDING at its first call (the close's look before its
#: scancels), nothing after (both ended)
SQUEUE_ONCE = """#!/bin/bash
n=$(cat "$FAKE/squeue.calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$FAKE/squeue.calls"
if [ "$n" = 0 ]; then printf '4242|RUNNING|None\\n4243|PENDING|Priority\\n'; fi
"""
UNREACHABLE_SCANCEL = """#!/bin/bash
echo "$@" >> "$FAKE/scancel.calls"
echo "scancel: error: Kill job error: Unable to contact slurm controller (connect failure)" >&2
exit 1
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_the_scancels_of_a_close_share_one_controller_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A close during an outage is held `controller_wait` s in all, not that long for
    each of its scancels (failed before: 200 fake s, the second scancel tried 11 times).
    Once the wait is spent, the other scancels are not sent (each would wait out its own
    timeout: test_slurm_controller_frozen_close.py); the warning names their jobs."""
    state = _stand_ins(tmp_path, monkeypatch, NUMBERED_SBATCH)
    for name, body in (("squeue", SQUEUE_ONCE), ("scancel", UNREACHABLE_SCANCEL)):
        (tmp_path / "bin" / name).write_text(body)
    backend = SlurmBackend(controller_wait=100)
    now = _fake_clock(backend)
    try:
        backend.launch(Job("sim-1", ["/bin/true"], cwd=tmp_path))
        backend.launch(Job("sim-2", ["/bin/true"], cwd=tmp_path))
    finally:
        backend.close()  # scancel --signal=TERM 4242, then scancel 4243
    calls = (state / "scancel.calls").read_text().splitlines()
    assert now[0] <= 100, (now, calls)
    assert calls[0].endswith("4242") and "TERM" in calls[0], calls
    assert not [c for c in calls if "4243" in c], calls  # no wait left: not sent
    said = [
        one_line(r.getMessage())
        for r in caplog.records
        if "within controller_wait" in one_line(r.getMessage())
    ]
    assert len(said) == 1 and "sim-2" in said[0] and "scancel the jobs by name" in said[0], said


#: its first try's request reached the controller (job 4242 queued), its reply was lost
LOST_REPLY_SBATCH = """#!/bin/bash
n=$(cat "$FAKE/sbatch.calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$FAKE/sbatch.calls"
echo "$((4242 + n))|PENDING|$JOB_NAME" >> "$FAKE/queue"
if [ "$n" = 0 ]; then
    echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation" >&2
    exit 1
fi
echo "$((4242 + n));testcluster"
"""
#: a squeue that a frozen controller leaves unanswered at its first two calls (counted
#: in $FAKE/squeue.calls); what it does once answered follows
SQUEUE_UNANSWERED_TWICE = """#!/bin/bash
n=$(cat "$FAKE/squeue.calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$FAKE/squeue.calls"
if [ "$n" -lt 2 ]; then
    echo "squeue: error: slurm_load_jobs error: Socket timed out on send/recv operation" >&2
    exit 1
fi
"""
#: a controller that answers nobody at the first two calls, then lists the queue
FROZEN_SQUEUE = SQUEUE_UNANSWERED_TWICE + 'cat "$FAKE/queue"\n'
#: ends every job (the close's)
EMPTYING_SCANCEL = '#!/bin/bash\n: > "$FAKE/queue"\n'


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_after_a_lost_reply_sbatch_waits_for_squeue_to_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After sbatch's lost reply, nothing is submitted again while squeue cannot answer
    either: the job the lost try queued is found once it can (failed before: sbatch ran
    again at the first failing squeue, a second job of the same name)."""
    state = _stand_ins(tmp_path, monkeypatch, LOST_REPLY_SBATCH)
    for name, body in (("squeue", FROZEN_SQUEUE), ("scancel", EMPTYING_SCANCEL)):
        (tmp_path / "bin" / name).write_text(body)
    monkeypatch.setenv("JOB_NAME", "mt-sim-10")
    backend = SlurmBackend(controller_wait=100)
    _fake_clock(backend)
    try:
        handle = backend.launch(Job("sim-10", ["/bin/true"], cwd=tmp_path))
        assert handle.job_id == "4242"  # type: ignore[attr-defined]
    finally:
        backend.close()
    assert (state / "sbatch.calls").read_text().strip() == "1"
    assert int((state / "squeue.calls").read_text()) >= 3  # 2 unanswered, then the job


#: its first try's request reaches the frozen controller, which queues it (the script
#: kept as $FAKE/backlog) and loses the reply; a later try is job 4243, run at once
BACKLOG_SBATCH = """#!/bin/bash
n=$(cat "$FAKE/sbatch.calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$FAKE/sbatch.calls"
if [ "$n" = 0 ]; then
    cp "${@: -1}" "$FAKE/backlog"
    echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation" >&2
    exit 1
fi
SLURM_JOB_ID=$((4242 + n)) bash "${@: -1}" > /dev/null 2>&1
echo "$((4242 + n));testcluster"
"""
#: unanswered at its first two calls; when it answers again, the controller has taken
#: the backlog: job 4242 ran, ended and left the queue (a job shorter than the freeze's
#: tail), so nothing is listed
RESUMING_SQUEUE = (
    SQUEUE_UNANSWERED_TWICE
    + """if [ -e "$FAKE/backlog" ]; then
    SLURM_JOB_ID=4242 bash "$FAKE/backlog" > /dev/null 2>&1
    rm -f "$FAKE/backlog"
fi
"""
)


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_lost_submission_that_ran_and_ended_before_squeue_answers_is_not_sent_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lost try's job ran and ended before squeue answered again (the frozen
    controller's backlog, a short simulation): squeue lists no job of its name, and the
    file its script wrote when it began says it was submitted; its exit file gives its
    code (failed before: sbatch ran again, the simulation ran twice, jobs 4242 and 4243)."""
    state = _stand_ins(tmp_path, monkeypatch, BACKLOG_SBATCH)
    for name, body in (("squeue", RESUMING_SQUEUE), ("scancel", EMPTYING_SCANCEL)):
        (tmp_path / "bin" / name).write_text(body)
    backend = SlurmBackend(controller_wait=100, poll_every=0, script_dir=tmp_path / "scripts")
    _fake_clock(backend)
    runs = state / "runs"
    try:
        backend.begin_study("outage")  # (squeue's first, unanswered, call)
        handle = backend.launch(
            Job("sim-0", ["/bin/sh", "-c", f"echo ran >> {runs}"], cwd=tmp_path)
        )
        assert backend.poll(handle) == 0
    finally:
        backend.close()
    assert runs.read_text().splitlines() == ["ran"], "the simulation ran twice"
    assert (state / "sbatch.calls").read_text().strip() == "1"
    assert handle.job_id == "4242"  # type: ignore[attr-defined]
    assert not list((tmp_path / "scripts").glob("*.began")), "its began file is left"
