"""A solver of your own (external mode, a `Client`) streaming across a run that fails
and that torchrun restarts (``accelerate launch --multi_gpu --num_processes 2
--max_restarts 1``, gloo on CPU: tests/scripts/restart_ranks.py, whose rank 1 raises
before its step 7 on the first attempt; the restarted run resumes from its last
checkpoint, ``--resume_from_checkpoint latest``).

The failed rank's stop record says ``error`` with ``restarts_left`` 1 (the launcher's
``--max_restarts`` less the restarts so far); the solver waits for the restarted run
and follows it, as after ``preempted``, rather than give up ("run this simulation
again": failed before, the solver's send gave up on the ``error``). The invariant: every
(simulation, time step) trained on exactly once across the restart (the steps the
first attempt trained after the checkpoint the restart resumed from are not in the
resumed model: they are counted in the second attempt only), the solver's close
confirmed, the launch's exit status 0. Rank 0's ERROR line says torchrun restarts the
run, and from which checkpoint (`resume_words.restart_words`), not a person's resume.

Waits on events (the solver's reports, the failed rank's stop record, as the restarted
rank 1 copied it before republishing its file), never on sleeps.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from two_ranks import ROOT, launch_two_ranks
from waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups"),
]

SCRIPT = ROOT / "tests" / "scripts" / "restart_ranks.py"
FIRST, STEPS = 20, 40  # steps sent before the failure; in all
SOLVER = r"""
import json, sys
import numpy as np
from melissa_trainer.client import Client, ClientTuning

def say(**what):
    print(json.dumps(what), flush=True)

fields = {"x": ((3,), "float32"), "y": ((1,), "float32")}
# (a replay window: it follows a restarted trainer; waits that outlast a restart)
tuning = ClientTuning(replay_bytes=1 << 20, rendezvous_timeout=300, disconnected_timeout=300,
                      follow_timeout=300, close_timeout=300)
with Client(fields, simulation_id=0, tuning=tuning) as client:
    say(ready=client.run_id)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "send":  # send a..b-1
            for t in range(int(args[0]), int(args[1])):
                x = np.array([0.5, -0.25, t / 100], np.float32)
                client.send(t, x=x, y=np.array([x.sum()], np.float32))
            client.flush()
            say(sent=int(args[1]), run=client.run_id)
        elif command == "close":
            break
say(closed=True)
"""


def failed_record(lineage: Path) -> dict[str, Any] | None:
    """Rank 1's first stop record's reason, from the copy the restarted rank 1 made of its
    rendezvous file (restart_ranks.py `keep_first_record`: the file itself is rewritten
    by the restarted run, and a poll could miss the record), once it says ``error``."""
    try:
        entry = json.loads(Path(f"{lineage}.record.1").read_text())
    except (OSError, ValueError):
        return None
    reason = (entry.get("stop_record") or {}).get("reason") or {}
    return reason if entry.get("stopped") is True and reason.get("code") == "error" else None


def trained(lineage: Path) -> collections.Counter[str]:
    """Each ``simulation:time_step`` trained on in the lineage the resumed model holds:
    per rank, the first attempt's steps before the second attempt's first, and all of
    the second's."""
    counts: collections.Counter[str] = collections.Counter()
    for rank in range(2):
        second = [line.split() for line in Path(f"{lineage}.1.{rank}").read_text().splitlines()]
        resumed_at = int(second[0][0]) if second else 1 << 30
        first_path = Path(f"{lineage}.0.{rank}")
        first = [line.split() for line in first_path.read_text().splitlines()]
        for _step, *keys in [row for row in first if int(row[0]) < resumed_at] + second:
            counts.update(keys)
    return counts


@pytest.mark.timeout(600)
def test_a_solver_follows_a_run_torchrun_restarts(tmp_path: Path) -> None:
    out, rendezvous, lineage = tmp_path / "out", tmp_path / "rv", tmp_path / "lineage"
    args = ["--output_dir", str(out), "--rendezvous", str(rendezvous), "--batch_size", "1",
            "--buffer", "fifo", "--buffer_size", "64", "--watermark", "1", "--save_steps", "2",
            "--resume_from_checkpoint", "latest", "--logging_steps", "1000", "--report_to",
            "none", "--disable_progress_bar", "--stop_sync_steps", "1"]  # fmt: skip
    launched: list[subprocess.CompletedProcess[str]] = []
    launch = threading.Thread(
        target=lambda: launched.append(
            launch_two_ranks(
                SCRIPT,
                *args,
                env={"LINEAGE_LOG": str(lineage)},
                timeout=480,
                launch=["--max_restarts", "1"],
            )  # fmt: skip
        ),
        daemon=True,
    )
    launch.start()
    (tmp_path / "solver.py").write_text(SOLVER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
           "MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)}  # fmt: skip
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        env.pop(name, None)
    with open(tmp_path / "solver.err", "w") as err:
        solver = subprocess.Popen(
            [sys.executable, str(tmp_path / "solver.py")], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True,
        )  # fmt: skip
    assert solver.stdin is not None and solver.stdout is not None

    def tell(line: str | None) -> dict[str, Any]:
        if line is not None:
            solver.stdin.write(line + "\n")  # type: ignore[union-attr]
            solver.stdin.flush()  # type: ignore[union-attr]
        said = solver.stdout.readline()  # type: ignore[union-attr]
        assert said, f"the solver exited: {(tmp_path / 'solver.err').read_text()[-3000:]}"
        return json.loads(said)

    try:
        assert "ready" in tell(None)
        assert tell(f"send 0 {FIRST}")["sent"] == FIRST
        wait_until(lambda: failed_record(lineage) is not None, "rank 1's error", timeout=300)
        assert failed_record(lineage)["restarts_left"] == 1  # type: ignore[index]
        assert tell(f"send {FIRST} {STEPS}")["sent"] == STEPS
        assert tell("close") == {"closed": True}
        assert solver.wait(60) == 0
        launch.join(480)
    finally:
        solver.kill()
        solver.wait()
    said = (tmp_path / "solver.err").read_text()
    assert launched, "the launch did not end"
    proc = launched[0]
    told = proc.stdout[-3000:] + proc.stderr[-6000:] + said[-3000:]
    assert proc.returncode == 0, told
    assert "rank 1 fails before step 7 on the first attempt" in proc.stderr, told
    # rank 0's ERROR line says the restart that follows, not a person's resume (task
    # hwords: "once the cause is fixed, resume from ..." read as a call to act)
    stopped = [line for line in proc.stderr.splitlines() if "rank 0 stops at step" in line]
    assert len(stopped) == 1, told
    restart = "torchrun restarts it (1 of 1 restarts left): it resumes from checkpoint "
    assert restart in stopped[0], told
    assert "once the cause is fixed, resume from" not in stopped[0], told
    counts = trained(lineage)
    want = {f"0:{t}" for t in range(STEPS)}
    assert set(counts) == want and set(counts.values()) == {1}, (counts, told)
