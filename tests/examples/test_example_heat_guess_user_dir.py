"""The heat_guess example names the --output_dir the user typed, not the trainer's
folder inside it (``.../run``), in its lock refusal and in its line of a resume from
"latest" that finds no checkpoint (as its rerun refusal does: `cli.rerun_words`).
Failed before: ``output_dir '/tmp/.../run' is in use by another trainer`` and
``resume_from_checkpoint='latest': no checkpoint under /tmp/.../run/checkpoints,
starting afresh``: folders the user never typed. The filter that says that WARNING in
the user's words is the run's alone: none is left once `run_study` returns or raises
(failed before, task hwords: it stayed installed, and each run noted its folder in it).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))
from heat_guess.solver import GuessConfig  # noqa: E402
from heat_guess.train import run_study  # noqa: E402

from melissa_trainer.checkpoint import paths  # noqa: E402
from melissa_trainer.trainer.lock_holder import OutputDirLocked  # noqa: E402

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="flock, processes"),
]

TINY = GuessConfig(grid_size=8, time_steps=10)
#: holds the lock of the trainer's folder (argv[1]) until its stdin closes
HOLDER = """
import sys
from melissa_trainer.trainer.output_lock import OutputDirLock
lock = OutputDirLock(sys.argv[1], "another-run")
lock.acquire()
print("held", flush=True)
sys.stdin.read()
"""


def examples_filters() -> list[object]:
    """The filters of the checkpoint paths' logger that the example installed (its
    module's: `heat_guess.user_dir`), whatever pytest or another test added there."""
    logger = logging.getLogger(paths.__name__)
    return [f for f in logger.filters if type(f).__module__.endswith("user_dir")]


def hold(folder: Path) -> subprocess.Popen[str]:
    """Another trainer's lock of `folder` (`HOLDER`), held once this returns."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


@pytest.mark.timeout(120)
def test_a_refused_run_leaves_no_filter(tmp_path: Path) -> None:
    """Two runs from "latest" refused at their trainer (another holds the folder):
    neither leaves its filter, nor its folder in it."""
    holder = hold(tmp_path / "run")
    try:
        for _ in range(2):
            with pytest.raises(OutputDirLocked):
                run_study(tmp_path, TINY, num_simulations=1, resume_from_checkpoint="latest")
            assert examples_filters() == []
    finally:
        holder.communicate("", timeout=30)


@pytest.mark.timeout(120)
def test_the_lock_refusal_names_the_users_output_dir(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "run")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(OutputDirLocked) as refused:
            run_study(tmp_path, TINY, num_simulations=1, job_limit=1)
    finally:
        holder.communicate("", timeout=30)  # (its stdin closed: it ends, the lock freed)
    said = str(refused.value)
    assert said.startswith(f"--output_dir {tmp_path} is in use by another trainer ("), said
    assert f"{tmp_path / 'run'}'" not in said, said  # (the trainer's folder, quoted)
    assert refused.value.output_dir == str(tmp_path / "run")  # (attributes kept)


@pytest.mark.timeout(300)
def test_a_resume_from_latest_with_no_checkpoint_names_the_users_output_dir(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    result = run_study(
        tmp_path, TINY, num_simulations=2, job_limit=1, held_out_simulations=1,
        resume_from_checkpoint="latest",
    )  # fmt: skip
    assert [r["simulation_id"] for r in result["simulations"]] == [0, 1]
    assert examples_filters() == []  # (the run's alone: none left once it returned)
    afresh = [r.getMessage() for r in caplog.records if "afresh" in r.getMessage()]
    assert afresh == [
        f"--resume_from_checkpoint latest: --output_dir {tmp_path} holds no checkpoint "
        f"(none in {tmp_path / 'run' / 'checkpoints'}), starting afresh"
    ], afresh


@pytest.mark.timeout(300)
def test_a_resume_from_latest_with_no_checkpoint_drops_an_earlier_runs_records(
    tmp_path: Path,
) -> None:
    """An earlier run killed before its first checkpoint (kill -9, an OOM) left the
    records of the simulations it finished; ``--resume_from_checkpoint latest`` finds no
    checkpoint, so the trainer starts afresh and those records are no simulation of this
    run. Failed before (95575a14 passed "latest" through, and the example kept its
    records as a resumed run's): a run of 2 simulations reported 3, the third the killed
    run's (its work in the report's second half). The oracle: the simulations this run
    launched (`num_simulations`)."""
    records = tmp_path / "records"
    records.mkdir()
    stale = {"simulation_id": 2, "parameters": {}, "products": [1], "iterations": [1],
             "used": [True], "first_version": 7}  # fmt: skip
    (records / "sim2.json").write_text(json.dumps(stale))
    result = run_study(
        tmp_path, TINY, num_simulations=2, job_limit=1, held_out_simulations=1,
        resume_from_checkpoint="latest",
    )  # fmt: skip
    assert [r["simulation_id"] for r in result["simulations"]] == [0, 1]
    assert not (records / "sim2.json").exists()
