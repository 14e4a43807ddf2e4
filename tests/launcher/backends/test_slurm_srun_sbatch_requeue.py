"""The trainer of a mode="srun" study as an ``sbatch -N2`` job on the two-node test
cluster (tests/slurm_two_nodes.py), n1 vanishing mid-study once a checkpoint exists and
3 of its samples were trained on. The trainer (`TRAIN`: an `OnlineTrainer` on a `Study`
whose simulations are steps of the job's allocation, `SlurmBackend(mode="srun")`, with a
`SampleLedger`) runs on the node ``--batch`` picks: this host or n1.

* With ``--requeue`` (and ``--open-mode=append``, ``--resume_from_checkpoint latest``:
  the requeueable script's pattern, docs/how-to/preemption.md): Slurm requeues the job
  as it marks n1 down (`Restarts=1`); the job needs both nodes, so it waits for n1
  (`TwoNodeCluster.revive`: the node back after its power loss); the requeued run
  resumes from the latest checkpoint and completes (exit 0), and the ledger passes the
  exactly-once check (`lineage_check.check`, the oracle) across the two runs, its
  second run starting at the checkpoint the log says was resumed. With the trainer on
  this host, Slurm's SIGTERM gave it a stop's checkpoint; on n1 it died with the node.
* Without it (``--no-requeue``): the job ends NODE_FAIL, the trainer does not exit 0,
  and the log says the node's failure and how to resume. Failed before (the first run's
  log, the only one before the fix): Slurm's SIGKILL, KillWait (2 s) after its SIGTERM,
  came before the stop's checkpoint (3 runs of 3), and the trainer's last line named no
  resume (`trainer.term_words` now does).

Times are printed, never asserted; waits are on files, scontrol and squeue."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest
from slurm_two_nodes import HERE_FEATURE, OTHER, OTHER_FEATURE, TwoNodeCluster, two_node_cluster
from test_slurm_two_nodes import SIMULATION
from waiting import wait_until

from melissa_trainer.hooks.lineage_check import check

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: the study: simulations (one per CPU of the two nodes), steps of each, the solver's
#: pause between two steps
STEPS, PAUSE = 30, 0.3
#: seconds for each phase (the first run's checkpoint, the requeue, the job's end):
#: generous, as CI's machine is loaded (one run hit a 120 s deadline)
DEADLINE = 300.0

#: the trainer: argv directory, this host's and n1's addresses on their link, simulations,
#: steps, pause, then the resume flag. A linear model on the samples of a Study whose
#: simulations are steps of the job's allocation; a SampleLedger; a checkpoint every 4
#: steps; the file "n1-sent" once 3 samples from n1 were trained on
TRAIN = """
import os, sys
from pathlib import Path
import torch
from melissa_trainer import OnlineTrainer, StreamSource, Study, TrainingArguments
from melissa_trainer.hooks import SampleLedger
from melissa_trainer.launcher import Launcher
from melissa_trainer.launcher.backends import SlurmBackend
from melissa_trainer.launcher.tuning import LauncherTuning
from melissa_trainer.stream.receiver_config import ReceiverConfig

here, n, steps, pause = Path(sys.argv[1]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
# the receiver published at the address of the node the trainer runs on (the batch
# host): this host's or n1's on their link
host = sys.argv[2].split(",")[os.environ["SLURMD_NODENAME"] == "n1"]
resume = sys.argv[sys.argv.index("--resume_from_checkpoint") + 1]
from_n1 = 0


def xy(sample):
    global from_n1
    if sample["node"][0] == 1.0:
        from_n1 += 1
        if from_n1 == 3:
            (here / "n1-sent").touch()
    return torch.as_tensor(sample["u"][:3] / 100).float(), torch.as_tensor(sample["node"]).float()


argv = [sys.executable, str(here / "sim.py"), str(here / "started"), str(n), "n1", steps, pause]
launcher = Launcher(
    argv,
    [{"a": 10.0 * i} for i in range(n)],
    n,
    job_limit=n,
    backend=SlurmBackend(mode="srun", poll_every=0.2, time_limit=10),
    log_dir=here / "logs",
    tuning=LauncherTuning(max_restarts=2),
)
config = ReceiverConfig(rendezvous_dir=here / "rdv", bind="tcp://*:*", advertise_host=host)
torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
args = TrainingArguments(
    output_dir=str(here / "out"), batch_size=2, buffer="fifo", buffer_size=20, watermark=1,
    save_steps=4, logging_steps=5, disable_progress_bar=True, report_to="none",
    resume_from_checkpoint=resume,
)
trainer = OnlineTrainer(
    model, args, torch.optim.SGD(model.parameters(), lr=1e-3),
    train_source=Study(launcher, StreamSource(config)), process_sample=xy,
    hooks=[SampleLedger()],
)
trainer.train()
print("the trainer's end", flush=True)
"""

#: the job script: `{options}` (#SBATCH lines), the trainer's command
SCRIPT = """#!/bin/bash
#SBATCH --job-name=trainer
#SBATCH --nodes=2
#SBATCH --ntasks={n}
#SBATCH --time=10
#SBATCH --output={log}
#SBATCH --open-mode=append
{options}
echo "run ${{SLURM_RESTART_COUNT:-0}} of job $SLURM_JOB_ID (batch host $SLURMD_NODENAME)"
{python} {train} {here} {host} {n} {steps} {pause} --resume_from_checkpoint latest
status=$?
echo "the trainer exited $status"
exit $status
"""


def submit(cluster: TwoNodeCluster, tmp_path: Path, *options: str) -> str:
    """The trainer's job script submitted with `options` (#SBATCH lines); its job id."""
    (tmp_path / "sim.py").write_text(SIMULATION)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "started").mkdir()
    script = SCRIPT.format(
        n=2 * cluster.cpus,
        log=tmp_path / "job.log",
        options="\n".join(f"#SBATCH {option}" for option in options),
        python=sys.executable,
        train=tmp_path / "train.py",
        here=tmp_path,
        host=f"{cluster.host_addr},{cluster.node_addr}",
        steps=STEPS,
        pause=PAUSE,
    )
    (tmp_path / "job.sh").write_text(script)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = str(Path(__file__).parents[3])
    return cluster.run("sbatch", "--parsable", str(tmp_path / "job.sh"), env=env).strip()


def log(tmp_path: Path) -> str:
    file = tmp_path / "job.log"
    return file.read_text(errors="replace") if file.exists() else ""


def job(cluster: TwoNodeCluster, job_id: str) -> str:
    return cluster.run("scontrol", "show", "job", job_id)


def vanish_after_a_checkpoint(cluster: TwoNodeCluster, tmp_path: Path) -> None:
    """n1 vanishes once the trainer has trained on 3 of its samples and written a
    checkpoint."""
    wait_until(
        lambda: (
            (tmp_path / "n1-sent").exists()
            and list((tmp_path / "out" / "checkpoints").glob("checkpoint-*"))
        ),
        what=lambda: f"a checkpoint and 3 samples from n1; the job's log:\n{log(tmp_path)}",
        timeout=DEADLINE,
    )
    cluster.vanish()


def ended(cluster: TwoNodeCluster, tmp_path: Path, job_id: str) -> str:
    """Wait until squeue no longer lists the job; scontrol's account of it."""
    wait_until(
        lambda: not cluster.run("squeue", "-h", "-j", job_id).strip(),
        what=lambda: f"the job's end: {job(cluster, job_id)}\n{log(tmp_path)}",
        timeout=DEADLINE,
    )
    details = job(cluster, job_id)
    print(log(tmp_path))
    print(details)
    return details


#: the constraint that lets ``--batch`` choose the trainer's node (sbatch refuses a
#: --batch feature outside the job's --constraint)
EITHER = f"--constraint={HERE_FEATURE}|{OTHER_FEATURE}"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("trainer_on", [HERE_FEATURE, OTHER_FEATURE])
def test_a_requeued_sbatch_trainer_resumes_after_a_node_loss_exactly_once(
    tmp_path: Path, trainer_on: str
) -> None:
    """n1 vanishes with the trainer on this host (Slurm ends the job: SIGTERM, KillWait,
    SIGKILL) or on n1 itself (the trainer dies with its node): either way Slurm requeues
    the job, which starts again once n1 is back, resumes from the latest checkpoint and
    completes; the ledger passes the exactly-once check across the two runs."""
    with two_node_cluster() as cluster:
        job_id = submit(cluster, tmp_path, "--requeue", EITHER, f"--batch={trainer_on}")
        vanish_after_a_checkpoint(cluster, tmp_path)
        vanished = time.monotonic()
        wait_until(
            lambda: "Restarts=1" in job(cluster, job_id),
            what=lambda: f"the job's requeue: {job(cluster, job_id)}\n{log(tmp_path)}",
            timeout=DEADLINE,
        )
        requeued = time.monotonic() - vanished
        cluster.revive()  # (the requeued job needs two nodes: it waits for n1)
        revived = time.monotonic()
        details = ended(cluster, tmp_path, job_id)
        back = time.monotonic() - revived
        print(f"requeued {requeued:.1f} s after n1 vanished; ended {back:.1f} s after n1 was back")
    host = cluster.node if trainer_on == HERE_FEATURE else OTHER
    assert f"BatchHost={host}" in details, details
    assert "JobState=COMPLETED" in details and "Restarts=1" in details, details
    assert "ExitCode=0:0" in details, details
    said = log(tmp_path)
    first, _, second = said.partition(f"run 1 of job {job_id}")
    assert f"run 0 of job {job_id}" in first and second, said
    assert "the trainer exited" not in first, first  # (ended with its allocation)
    resumed = re.search(r"resumed from \S+/checkpoint-(\d+)", second)
    assert resumed, second
    assert second.rstrip().endswith("the trainer exited 0"), second
    report = check(tmp_path / "out", 2 * cluster.cpus, STEPS)
    print(report)
    assert report.ok and len(report.runs) == 2, report
    # (the ledger's second run started at the checkpoint the requeued run resumed from)
    assert report.runs[1].start_step == int(resumed.group(1)) > 0, report


@pytest.mark.timeout(900)
def test_a_trainer_not_requeued_says_its_node_loss_and_how_to_resume(tmp_path: Path) -> None:
    """Without a requeue, the job ends NODE_FAIL, the trainer does not exit 0, and the
    log says the node's failure (Slurm's line, the steps' words) and how to resume
    (failed before: Slurm's SIGKILL cut the stop short and its last line, "SIGTERM
    received: stopping ...", named no checkpoint and no resume flag)."""
    with two_node_cluster() as cluster:
        job_id = submit(cluster, tmp_path, "--no-requeue", EITHER, f"--batch={HERE_FEATURE}")
        vanish_after_a_checkpoint(cluster, tmp_path)
        details = ended(cluster, tmp_path, job_id)
    assert "JobState=NODE_FAIL" in details and "Restarts=0" in details, details
    assert "ExitCode=0:0" not in details, details
    said = log(tmp_path)
    assert "the trainer exited 0" not in said, said
    assert "DUE TO NODE FAILURE" in said, said  # (Slurm's own line)
    assert "SIGTERM received" in said, said
    # (the SIGTERM line's words, or the stop's last line where it had the time: "resume
    # with"; not the start's "resume_from_checkpoint='latest': no checkpoint ...")
    resume = r"resume (from \S+/checkpoint-\d+ )?with resume_from_checkpoint='latest'"
    assert re.search(resume, said), said
