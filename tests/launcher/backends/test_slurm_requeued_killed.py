"""A batch job the study killed that Slurm puts back in the queue (PENDING: "launch
failed requeued held") is cancelled again at the backend's next squeue, though nobody
polls that job any more.

8067546b cancels such a job again, but only from `poll` of that very job, and the
launcher never polls a job it killed (`Supervisor` forgets it at its kill): the job sat
held in the queue until the study's close. Now the squeue that a poll of any job runs
finds it. Stand-in commands (tests/launcher/backends/test_slurm_controller_outage.py):
squeue prints a state file the test writes, scancel records its calls and changes
nothing. Failed before: no second scancel of the killed job."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_slurm_controller_outage import _stand_ins

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm import batch

pytestmark = pytest.mark.e2e  # (stand-in commands are processes)

SBATCH = """#!/bin/bash
n=$(cat "$FAKE/sbatch.calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$FAKE/sbatch.calls"
echo "$((4242 + n));testcluster"
"""
SQUEUE = '#!/bin/bash\ncat "$FAKE/state"\n'
SCANCEL = '#!/bin/bash\necho "$@" >> "$FAKE/scancel.calls"\n'


@pytest.mark.timeout(120)
def test_a_killed_job_requeued_by_slurm_is_cancelled_at_the_next_squeue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _stand_ins(tmp_path, monkeypatch, SBATCH)
    for name, body in (("squeue", SQUEUE), ("scancel", SCANCEL)):
        (tmp_path / "bin" / name).write_text(body)
    monkeypatch.setattr(batch, "FORCE_WAIT", 0.0)  # (the kill's waits: none, no clock)
    monkeypatch.setattr(batch, "CLOSE_GRACE", 0.0)  # (the close's)
    (state / "state").write_text("4242|RUNNING|None\n4243|RUNNING|None\n")
    backend = SlurmBackend(poll_every=0, script_dir=tmp_path / "scripts", lease_timeout=None)
    try:
        killed = backend.launch(Job("sim-0", ["/bin/true"], cwd=tmp_path))
        other = backend.launch(Job("sim-1", ["/bin/true"], cwd=tmp_path))
        assert backend.poll(killed) is None and backend.poll(other) is None
        assert backend.kill(killed, grace=0) is None  # (still listed: Slurm ends it later)
        calls = (state / "scancel.calls").read_text().splitlines()
        assert all(call.endswith("4242") for call in calls), calls
        # Slurm undid the cancel: the job is back in the queue, held
        (state / "state").write_text(
            "4242|PENDING|launch failed requeued held\n4243|RUNNING|None\n"
        )
        assert backend.poll(other) is None  # the launcher polls the jobs it runs
        again = (state / "scancel.calls").read_text().splitlines()[len(calls) :]
        assert again == ["4242"], again  # cancelled (not signalled: it is pending)
        assert backend.poll(other) is None
        assert (state / "scancel.calls").read_text().splitlines()[len(calls) + 1 :] == []
    finally:
        backend.close()
