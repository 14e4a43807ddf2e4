"""A run that stops on a solver's NaN (``nonfinite="fail"``: a ``nonfinite`` stop, final by
design) under ``accelerate launch --multi_gpu --num_processes 2 --max_restarts 1`` (gloo
on CPU: tests/scripts/restart_ranks.py, ``FAIL_AT=0``: no rank fails of its own). The
launcher restarts it (the trainer exited 1); the restarted attempt reads the failed
attempt's records before its set-up and ends (`trainer.final_restart`): one ERROR line
per rank at most, no step trained, the final record left as it was (a peer's promise of
the restart undone: a `Predictor` is told no resume follows), the launch's exit status
nonzero. Failed before: the restarted attempt formed its group, resumed the last
checkpoint, republished its receivers over the final records and waited for a stream
its solver, told the stop is final, never sends again (the launch killed at its
timeout).

With ``--max_restarts 2`` the launcher restarts the refused attempt once more (any
failure is restarted while restarts are left): the ERROR paragraph is said by restart 1
alone, restart 2 says a short line naming it (`trainer.final_said`). Failed before
(task hrestart4): restart 2 said the whole paragraph again.

The oracles: the lineage log of each attempt and rank (tests/lineage_trainer.py), the
copy of each rank's record the restarted rank made before its set-up
(`keep_first_record`), the files' bytes after the launch, what the launch printed.
Waits on the launch's end and the solver's, never on sleeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from two_ranks import ROOT, launch_two_ranks

from melissa_trainer.client.predict_lookup import stopped_story
from melissa_trainer.stream.serving_rendezvous import NO_SERVER

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups"),
]

SCRIPT = ROOT / "tests" / "scripts" / "restart_ranks.py"
STEPS, NAN_AT = 24, 12  # steps sent; the one holding NaN
WORDS = "does not train: the failed run stopped for good (nonfinite: "
SOLVER = r"""
import json, sys
import numpy as np
from melissa_trainer.client import Client, ClientTuning

steps, nan_at = int(sys.argv[1]), int(sys.argv[2])
tuning = ClientTuning(rendezvous_timeout=120, disconnected_timeout=120, follow_timeout=120,
                      close_timeout=120)
fields = {"x": ((3,), "float32"), "y": ((1,), "float32")}
try:
    with Client(fields, simulation_id=0, tuning=tuning) as client:
        for t in range(steps):
            x = np.array([0.5, -0.25, np.nan if t == nan_at else t / 100], np.float32)
            client.send(t, x=x, y=np.array([0.25], np.float32))
    print(json.dumps({"closed": True}), flush=True)
except Exception as exc:  # (the trainer stopped on this simulation's NaN: told at once)
    print(json.dumps({"failed": type(exc).__name__, "words": str(exc)[:300]}), flush=True)
"""


@pytest.mark.timeout(600)
@pytest.mark.parametrize("most", [1, 2], ids=["max_restarts 1", "max_restarts 2"])
def test_a_restart_after_a_nonfinite_stop_does_not_train(tmp_path: Path, most: int) -> None:
    out, rendezvous, lineage = tmp_path / "out", tmp_path / "rv", tmp_path / "lineage"
    (tmp_path / "solver.py").write_text(SOLVER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
           "MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)}  # fmt: skip
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        env.pop(name, None)
    with open(tmp_path / "solver.err", "w") as err:
        solver = subprocess.Popen(
            [sys.executable, str(tmp_path / "solver.py"), str(STEPS), str(NAN_AT)], env=env,
            stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True,
        )  # fmt: skip
    try:
        args = ["--output_dir", str(out), "--rendezvous", str(rendezvous), "--batch_size", "1",
                "--buffer", "fifo", "--buffer_size", "64", "--watermark", "1",
                "--save_steps", "2", "--resume_from_checkpoint", "latest", "--logging_steps",
                "1000", "--report_to", "none", "--disable_progress_bar", "--stop_sync_steps",
                "1", "--nonfinite", "fail"]  # fmt: skip
        proc = launch_two_ranks(
            SCRIPT, *args, env={"LINEAGE_LOG": str(lineage), "FAIL_AT": "0"}, timeout=240,
            launch=["--max_restarts", str(most)],
        )  # fmt: skip
        solved, _ = solver.communicate(timeout=240)
    finally:
        solver.kill()
        solver.wait()
    told = proc.stdout[-3000:] + proc.stderr[-8000:] + (tmp_path / "solver.err").read_text()[-2000:]
    assert proc.returncode not in (0, None), told
    first = [Path(f"{lineage}.0.{rank}").read_text() for rank in range(2)]
    assert any(first), told  # (the first attempt trained before the NaN stopped it)
    kept = [Path(f"{lineage}.record.{rank}") for rank in range(2)]
    assert all(path.exists() for path in kept), told  # (the restart reached its script)
    for attempt in range(1, most + 1):  # (no restart trained)
        later = [Path(f"{lineage}.{attempt}.{rank}") for rank in range(2)]
        assert [path.read_text() if path.exists() else "" for path in later] == ["", ""], told
    codes = [json.loads(p.read_bytes())["stop_record"]["reason"]["code"] for p in kept]
    assert "nonfinite" in codes, codes
    for rank in range(2):  # the final record as it was; a peer's promise of this restart undone
        now = (rendezvous / f"rank_{rank}.json").read_bytes()
        if codes[rank] == "nonfinite":
            assert now == kept[rank].read_bytes(), (rank, told)
        else:
            reason = json.loads(now)["stop_record"]["reason"]
            assert reason["code"] == "error" and reason["restarts_left"] == 0, (rank, reason)
            assert "RestartAfterFinalStop" in reason["message"], (rank, reason)
    run_id = json.loads(kept[0].read_bytes())["stop_record"]["run_id"]
    story = stopped_story(rendezvous, run_id, NO_SERVER, False)  # (what a Predictor reads)
    assert story is not None and story[1] is True, story  # (no resume follows)
    said = proc.stdout.count(WORDS) + proc.stderr.count(WORDS)
    assert 1 <= said <= 2, told  # (once per rank at most, whatever the restarts)
    assert f"restart 1 of {most} by the launcher {WORDS}" in proc.stderr, told
    again = (
        "restart 2 of 2 by the launcher does not train either: the failed run stopped for "
        "good, as restart 1 said above"
    )
    assert (again in proc.stderr) == (most == 2), told
    assert "resume by hand with --resume_from_checkpoint latest" in proc.stderr, told
    assert json.loads(solved.splitlines()[-1]).get("failed"), solved  # (told: final)
