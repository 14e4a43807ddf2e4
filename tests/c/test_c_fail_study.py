"""A launched C solver that fails with `mt_client_fail` and exits non-zero: the study
counts the simulation failed (its launcher's outcome, its account) and trains on the
steps it had sent, batched in its client when it failed (clients/c/src/fail.c).

Before (`mt_client_abort`, linger 0, the only way to fail): those steps never arrived;
the same study with ``abort`` in place of ``fail`` received step 0 of simulation 1 only
(its first, which leaves unbatched), not steps 1 to 3. The oracle: the samples the
study's stream yields (simulation id, time step) and the launcher's outcome of each
simulation."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from study_runs import study_to_its_end

from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.backends.local import LocalBackend

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
]

STEPS = 4


@pytest.mark.timeout(180)
def test_a_launched_c_solver_that_fails_is_counted_failed_and_its_steps_trained(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    sends = "".join(f"send {t} u 1 4 {t}\n" for t in range(STEPS))
    # batches held 60 s: only the end of the client sends them
    head = f"batching 65536 60\nfield u 1 1 4\nstart\n{sends}"
    (tmp_path / "good.txt").write_text(head + "close\n")
    (tmp_path / "fail.txt").write_text(head + "fail the solver diverged\n")
    # simulation 1 fails on its first attempt (exit 1 after mt_client_fail), not again
    solver = (
        f'if [ "$MELISSA_TRAINER_SIMULATION_ID" = 1 ]; then {script_exe} {tmp_path}/fail.txt; '
        f"exit 1; else exec {script_exe} {tmp_path}/good.txt; fi"
    )
    launch = Launcher(
        ["sh", "-c", solver],
        [{"x": 0.1}, {"x": 0.2}, {"x": 0.3}, {"x": 0.4}],
        3,
        job_limit=3,
        backend=LocalBackend(),
        log_dir=str(tmp_path / "logs"),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=0),
    )
    end = study_to_its_end(launch, tmp_path / "rdv", fields={"u": ((4,), "float32")})
    assert end.outcomes[1].status == "failed", end.outcomes[1]
    assert list(end.outcomes[1].exit_codes) == [1], end.outcomes[1]
    got = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in end.samples)
    # the failed one's steps, sent before it failed, trained on; the other three's too
    assert [t for sid, t in got if sid == 1] == list(range(STEPS)), got
    finished = [sid for sid, o in end.outcomes.items() if o.status == "finished"]
    assert len(finished) == 3 and 1 not in finished, end.outcomes
    assert len(got) == 4 * STEPS, got
    # why it failed, in its log (what a failure report quotes)
    log = (tmp_path / "logs" / "sim-1.log").read_text()
    assert "mt_client_fail: simulation 1 rank 0 failed: the solver diverged" in log, log
