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
    said = [r.getMessage() for r in caplog.records if "Slurm controller" in r.getMessage()]
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
