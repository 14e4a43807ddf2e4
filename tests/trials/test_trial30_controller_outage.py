"""Trial htrial30: a Slurm controller that is briefly unreachable (slurmctld restarted:
an upgrade, a configuration change, a fail-over) fails the whole study at its next
submission, although the backend rides out the same outage for squeue ("squeue failed
(jobs are kept as they were)").

Seen on the one-node test cluster (2026-12-02, 24 simulations of 2 ranks, slurmctld
stopped at 12:23:33 and started again, with its state, 60 s later): "training stopped
at step 1: the simulation study failed: the slurm backend could not start job sim-10
(...): sbatch refused job sim-10 (script .../sim-10.sbatch): sbatch: error: Batch job
submission failed: Unable to contact slurm controller (connect failure)", the running
simulations cancelled, exit 1. docs/how-to/slurm.md keeps "the study stops at its first
submission" for a partition the cluster lacks (a refusal that will not change); a
connection failure is not a refusal.

Here, stand-in commands (as tests/launcher/backends/test_slurm_stand_ins.py): an sbatch
that cannot reach the controller at its first call and submits at the next. The launch
should succeed (retried, within a bound), not raise.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from melissa_trainer.launcher.backends import Job, SlurmBackend

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


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.xfail(
    strict=True,
    reason="htrial30: sbatch's 'Unable to contact slurm controller' (a controller "
    "restart) is a LaunchError that fails the study; it is not retried",
)
def test_a_submission_during_a_controller_restart_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, state = tmp_path / "bin", tmp_path / "fake"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in {"sbatch": SBATCH, **OTHERS}.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("FAKE", str(state))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    backend = SlurmBackend()
    try:
        backend.launch(Job("sim-10", ["/bin/true"], cwd=tmp_path))
    finally:
        backend.close()
    assert (state / "sbatch.calls").read_text().strip() == "2"
