"""mode="srun" on the one-node test cluster: a step that Slurm ends, not the study, is
said in words (`steps.step_end`), as a batch job is (test_slurm_ended_by_slurm.py): its
time limit (the step's ``--time``, `time_limit`), and someone's ``scancel`` of the step.
Failed before: the step read only as srun's exit code, nothing said, nothing in the log
but slurmstepd's own line. The study's own kill is not said."""

from __future__ import annotations

from pathlib import Path

import pytest
from launcher_said import said_in_log
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from test_slurm_srun_segments import in_allocation

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: run by salloc in an allocation of 2 tasks: step "limited" with time_limit=1 (Slurm
#: checks limits every 30 s: it ends 60 to about 100 s in), meanwhile step "theirs"
#: scancelled by hand and step "ours" killed by the backend; prints their codes
DRIVER = """
import json, logging, os, subprocess, sys, time
from pathlib import Path
from melissa_trainer.launcher.backends import Job, SlurmBackend

logging.basicConfig(level=logging.WARNING, format="SAID %(message)s")


def until(condition, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while (value := condition()) is None:
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


def step_id(name):
    listing = ["squeue", "-h", "-s", "-j", os.environ["SLURM_JOB_ID"], "-o", "%i|%j"]
    out = subprocess.run(listing, capture_output=True, text=True, check=True).stdout
    return next((i for i, n in (l.split("|") for l in out.splitlines()) if n.endswith(name)), None)


backend = SlurmBackend(mode="srun", time_limit=1)
backend.begin_study("srunend")
here = Path.cwd()
# (each task says it runs: a step scancelled as it launches is "aborted before step
# completely launched" by srun, with no slurmstepd line: not the running step's case)
started = ["sh", "-c", 'touch "$0.up"; exec sleep 600']
handles = {
    name: backend.launch(Job(name, [*started, name], cwd=here, log_path=here / f"{name}.log"))
    for name in ("limited", "theirs")
}
theirs = until(lambda: step_id("-theirs"), "step theirs listed")
until(lambda: True if (here / "theirs.up").exists() else None, "step theirs's task to run")
subprocess.run(["scancel", theirs], check=True)
out = {"theirs": until(lambda: backend.poll(handles["theirs"]), "theirs to end")}
ours = backend.launch(Job("ours", ["sleep", "600"], cwd=here, log_path=here / "ours.log"))
until(lambda: step_id("-ours"), "step ours listed")
out["ours"] = backend.kill(ours, grace=1.0)
out["limited"] = until(lambda: backend.poll(handles["limited"]), "the time limit", 200.0)
backend.close()
print(json.dumps(out))
"""


@pytest.mark.timeout(300)
def test_a_steps_time_limit_and_a_strangers_scancel_are_said(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    if slurm_cluster.cpus < 2:
        pytest.skip(f"the node has {slurm_cluster.cpus} CPU; 2 steps together need 2")
    out, stderr = in_allocation(tmp_path, DRIVER, 2, timeout=280)
    said: list[str] = []  # (each WARNING cut into lines of 100 columns, as one line)
    for line in stderr.splitlines():
        if line.startswith("SAID "):
            said.append(line[5:])
        elif line.startswith("  ") and said:
            said[-1] += " " + line[2:]
    texts = {name: (tmp_path / f"{name}.log").read_text() for name in ("limited", "theirs", "ours")}
    logs = {name: "\n".join(said_in_log(text)) for name, text in texts.items()}
    assert out["limited"] not in (None, 0) and out["theirs"] not in (None, 0), (out, logs)
    assert out["ours"] is None
    limited = [line for line in said if "reached its time limit" in line]
    assert len(limited) == 1, (said, logs)
    assert limited[0].startswith("limited (pid "), limited
    assert (
        "(--time=1, SlurmBackend's time_limit; slurmstepd: CANCELLED DUE TO TIME LIMIT)"
        in (limited[0])
    )
    assert limited[0] in logs["limited"]
    cancelled = [line for line in said if "was cancelled while running" in line]
    assert len(cancelled) == 1 and cancelled[0].startswith("theirs (pid "), (said, logs)
    assert cancelled[0] in logs["theirs"]
    assert "melissa-trainer" not in texts["ours"], texts["ours"]
