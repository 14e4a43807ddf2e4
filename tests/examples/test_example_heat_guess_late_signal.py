"""The heat_guess example signalled as its training ends (after its last stop
synchronisation, before the end's save: a scheduler's time limit, ``scancel``, a Ctrl-C
as the study finishes): the process ends as the signal asks (143), its report unprinted,
and the same command with ``--resume_from_checkpoint latest``, as the example's docs say
to continue a stopped run, prints the report of the same simulations, none run again.

Before (2026-12-07), the example kept no checkpoint at its end (``save_at_end`` off):
the resume found none, started afresh and ran every simulation again (their records
written anew). It now saves at the end, as the library's default and the other examples
do. Failed before: the records were rewritten by the resume.

Real processes (the example, its solvers); the signal waits on an event (a hook at the
end of the loop writes a marker and holds until the test's file), never on a sleep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from process_tree import run_group
from waiting import wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups, SIGTERM"),
]

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "heat_guess" / "train.py"
HELD = ROOT / "tests" / "scripts" / "heat_guess_held_end.py"
SIMS = 3


def records(out: Path) -> dict[str, tuple[int, int, str]]:
    """Each simulation record: (inode, mtime in ns, text): written again, it differs."""
    return {
        p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_text())
        for p in sorted((out / "records").glob("sim*.json"))
    }


@pytest.mark.timeout(600)
def test_a_sigterm_as_training_ends_is_resumed_without_running_the_study_again(
    tmp_path: Path,
) -> None:
    out, hold = tmp_path / "out", tmp_path / "hold"
    hold.mkdir()
    args = ["--num_simulations", str(SIMS), "--job_limit", "1", "--time_steps", "20",
            "--grid_size", "16", "--output_dir", str(out), "--json"]  # fmt: skip
    log = tmp_path / "log"
    with open(log, "w") as sink:
        first = subprocess.Popen(
            [sys.executable, str(HELD), str(hold), *args], stdout=sink,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_until((hold / "marker").exists, "the end of the loop", 400, procs=[first])
        first.send_signal(signal.SIGTERM)
        said = "SIGTERM received after the end of training"
        wait_until(lambda: said in log.read_text(), said, 60, procs=[first])
        (hold / "go").touch()
        assert first.wait(timeout=120) == -signal.SIGTERM, log.read_text()[-3000:]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    text = log.read_text()
    assert "second half of the study" not in text, text[-3000:]  # (the report: unprinted)
    done = records(out)
    assert len(done) == SIMS, text[-3000:]

    resumed = run_group([sys.executable, str(EXAMPLE), *args,
                         "--resume_from_checkpoint", "latest"], timeout=400)  # fmt: skip
    said = (resumed.stdout + resumed.stderr)[-3000:]
    assert resumed.returncode == 0, said
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert [r["simulation"] for r in summary["simulations"]] == list(range(SIMS)), said
    assert records(out) == done, said  # (no simulation ran again)
    assert "second half of the study" in resumed.stdout, said
    assert "save_at_end is off" not in text, text[-3000:]  # (its end's checkpoint came)
