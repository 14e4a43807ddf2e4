"""A second `SlurmBackend.close` while the controller is frozen (its scancels unanswered,
the jobs still listed as running) writes no second close line in a job's log: the
launcher's line says the job's kill once (`base.kill_line`). Failed before: the close
line twice (each close wrote it for every job still live). Stand-in Slurm commands (as
test_slurm_stand_ins.py): squeue lists the job running, scancel cannot reach the
controller."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.base import CLOSE_REASON

#: the launcher's prefix, written out (the oracle: users grep for it)
PREFIX = "[melissa-trainer launcher] "

FAKE = {
    "sbatch": '#!/bin/bash\necho "4242;testcluster"\n',
    "squeue": '#!/bin/bash\ncat "$FAKE/state" 2>/dev/null\n',
    # the frozen controller: every scancel fails as Slurm's does when it gets no answer
    "scancel": """#!/bin/bash
echo "$@" >> "$FAKE/scancel.calls"
echo "scancel: error: Unable to contact slurm controller (connect failure)" >&2
exit 1
""",
    "sacct": "#!/bin/bash\nexit 1\n",
    "scontrol": "#!/bin/bash\nexit 1\n",
}


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_second_close_with_the_controller_frozen_says_the_kill_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, state = tmp_path / "bin", tmp_path / "fake"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in FAKE.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("FAKE", str(state))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    (state / "state").write_text("4242|RUNNING|None|vm|2026-12-07T10:00:00\n")
    log = tmp_path / "logs" / "sim-0.log"
    backend = SlurmBackend(poll_every=0.1, controller_wait=0.5, script_dir=tmp_path / "s")
    backend.launch(Job("sim-0", ["sleep", "600"], cwd=tmp_path, log_path=log))
    backend.close()
    assert (state / "scancel.calls").exists()  # (the first close tried, and failed)
    backend.close()  # (the job is still listed running: the controller never answered)
    said = [line for line in log.read_text().splitlines() if line.startswith(PREFIX)]
    closes = [line for line in said if "killing this job" in line]
    assert len(closes) == 1, said
    assert CLOSE_REASON.split(":")[0] in " ".join(said), said
