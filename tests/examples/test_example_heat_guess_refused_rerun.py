"""The heat_guess example run again in an --output_dir, and refused: the records of the
simulations already done there are kept (18eae7d0 kept them for a resumed run and for
one refused over a checkpoint; these are the other refusals).

* A bad flag (exit 2) and a resume the trainer refuses (a checkpoint that is not there)
  leave them as they were.
* The same command started again while the first run is still running (another
  terminal, a job submitted twice) is refused by the output_dir's lock (`OutputDirLocked`).
  It deleted the running study's records before its trainer was built, so the first
  run's report lacked the simulations finished before the second command (seen by hand;
  this test failed before: ``records`` empty after the refusal). Now the records are
  cleared only once the trainer holds the lock.

Real processes; the first run is held by SIGSTOP (its lock stays held) once its first
record is written, so the second command meets it running whatever the machine's load.
"""

from __future__ import annotations

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
    pytest.mark.skipif(sys.platform != "linux", reason="process groups, SIGSTOP"),
]

EXAMPLE = Path(__file__).parents[2] / "examples" / "heat_guess" / "train.py"
SMALL = ["--num_simulations", "4", "--time_steps", "20", "--grid_size", "16"]


def records(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "records").glob("sim*.json"))


@pytest.mark.timeout(300)
def test_refused_reruns_keep_the_records(tmp_path: Path) -> None:
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "sim0.json").write_text("{}")
    cmd = [sys.executable, str(EXAMPLE), *SMALL, "--output_dir", str(tmp_path)]

    bad = run_group([*cmd, "--kernel", "4"], timeout=120)
    assert bad.returncode == 2, bad.stderr
    assert records(tmp_path) == ["sim0.json"]

    missing = str(tmp_path / "run" / "checkpoints" / "checkpoint-7")
    refused = run_group([*cmd, "--resume_from_checkpoint", missing], timeout=240)
    assert refused.returncode != 0, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert "checkpoint-7" in refused.stderr, refused.stderr[-3000:]
    assert records(tmp_path) == ["sim0.json"]


@pytest.mark.timeout(400)
def test_a_rerun_refused_by_a_running_study_keeps_its_records(tmp_path: Path) -> None:
    cmd = [sys.executable, str(EXAMPLE), *SMALL, "--job_limit", "1", "--output_dir",
           str(tmp_path)]  # fmt: skip
    first = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        wait_until(lambda: records(tmp_path), "the first simulation's record", 300,
                   procs=[first])  # fmt: skip
        os.killpg(first.pid, signal.SIGSTOP)  # its lock held, nothing written meanwhile
        done = records(tmp_path)
        # (the example checkpoints every 600 s: none yet, else the earlier fix kept them)
        assert not any((tmp_path / "run" / "checkpoints").glob("checkpoint-*"))
        second = run_group(cmd, timeout=240)
        said = second.stderr[-3000:]
        assert second.returncode == 2, second.stdout[-2000:] + said  # (a refusal's status)
        assert "is in use by another trainer" in said and "Traceback" not in said, said
        assert records(tmp_path) == done, said
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()


@pytest.mark.timeout(300)
def test_a_plain_rerun_over_a_checkpoint_is_refused_naming_the_folder_given(
    tmp_path: Path,
) -> None:
    """The refusal of the same command over an earlier run's checkpoint names the
    --output_dir typed and the example's flags: it named the trainer's folder inside
    it, ``output_dir='.../run'`` (a folder the user never gave)."""
    (tmp_path / "run" / "checkpoints" / "checkpoint-3").mkdir(parents=True)
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "sim0.json").write_text("{}")
    cmd = [sys.executable, str(EXAMPLE), *SMALL, "--output_dir", str(tmp_path)]
    refused = run_group(cmd, timeout=240)
    said = refused.stderr[-3000:]
    assert refused.returncode == 2, refused.stdout[-2000:] + said
    assert f"--output_dir {tmp_path} holds checkpoints of an earlier run (checkpoint-3" in said
    assert "output_dir=" not in said, said  # (the library's words, of its own folder)
    for flag in ("--resume_from_checkpoint latest", "--overwrite_output_dir"):
        assert flag in said, said
    assert records(tmp_path) == ["sim0.json"]  # (still the earlier run's)
