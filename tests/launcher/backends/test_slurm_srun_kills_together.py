"""mode="srun": a kill of several steps signals every srun before it waits for any
(`SrunSteps.kill_all`), as the batch mode's one scancel and the local backend do
(tests/launcher/test_stop_kills_together.py; the oracle: tests/kill_order.py). Before,
each step was killed after the one before had ended: with a real srun, which turns the
SIGTERM into a SIGKILL of its tasks and waits up to KillWait + 2 s for their end, a stop
of N steps took up to N of those waits.

The srun here is test_slurm_srun_outage.py's stand-in (FAILS=0: it execs the task), so
that the solver itself gets the SIGTERM and can tell the order (no step is listed: the
sruns themselves are signalled). With a real srun the tasks get theirs from scancel:
test_slurm_srun_grace.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from kill_order import expected, launch_solvers
from test_slurm_srun_outage import fake  # noqa: F401 - the fixture (stand-in commands)

from melissa_trainer.launcher.backends import SlurmBackend

pytestmark = pytest.mark.e2e  # it starts processes

N = 2


@pytest.mark.timeout(120)
def test_srun_steps_are_signalled_together(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAILS", "0")  # (the stand-in srun runs its task at once)
    backend = SlurmBackend(mode="srun")
    try:
        handles = launch_solvers(backend, tmp_path, N)
        codes = backend.kill_all(handles, grace=20.0)
    finally:
        backend.close()
    assert codes == [None] * N  # (killed: none ended on its own)
    said = (tmp_path / "said.txt").read_text().splitlines()
    assert sorted(said) == expected(N), said
