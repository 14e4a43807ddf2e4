"""`MpiexecBackend.kill_all` reads the process table (a scan of /proc: every process's
stat file) once for all its jobs, not once per job: a stop of 64 jobs on a busy node
made 64 scans before its first SIGTERM. Each job's ranks are still found and ended:
here under a stand-in mpiexec that ignores SIGTERM and starts its ranks in sessions of
their own (as hydra does), out of reach of its process group's signal."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from slurm_jobs import pgrep
from waiting import wait_until

from melissa_trainer.launcher.backends import Job, MpiexecBackend
from melissa_trainer.launcher.backends import mpiexec as mpiexec_module


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the ranks are read from /proc")
@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_kill_all_scans_the_process_table_once_and_ends_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = f"melissa-scan-once-{os.getpid()}"
    fake = tmp_path / "fake-mpiexec"
    fake.write_text(
        "#!/bin/bash\n"
        "trap '' TERM\n"
        "shift 2  # -n RANKS\n"
        'for _ in 1 2; do setsid "$@" & done\n'
        "wait\n"
    )
    fake.chmod(stat.S_IRWXU)
    backend = MpiexecBackend(str(fake))
    ranks = [sys.executable, "-c", "import signal, time; signal.signal(15, 1); time.sleep(60)"]
    handles = [backend.launch(Job(f"job-{i}", [*ranks, marker], ranks=2)) for i in range(3)]
    try:
        wait_until(lambda: len(pgrep(marker)) == 9, "3 launchers and their 6 ranks", 60)
        scans = []
        real = mpiexec_module.process_table

        def counted() -> Any:
            scans.append(1)
            return real()

        monkeypatch.setattr(mpiexec_module, "process_table", counted)
        codes = backend.kill_all(handles, grace=0.5)
        assert codes == [None, None, None]
        assert len(scans) == 1, scans
        wait_until(lambda: not pgrep(marker), "no rank left", 60)
    finally:
        backend.close()
    assert not pgrep(marker)
