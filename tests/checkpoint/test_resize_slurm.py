"""The job script of docs/how-to/resize.md on a real (one-node) Slurm cluster: signalled
at its "time limit", it checkpoints and requeues itself, and the requeued run starts
with another number of training ranks (2, then 3), resumes the checkpoint of 2 and
finishes the study.

The cluster has one node, so the node count cannot change; the script's ranks per node
(``GPUS_PER_NODE``) are read from a file that the test changes before the requeue, the
way the script's ``SLURM_JOB_NUM_NODES`` changes on a cluster. What is tested is the
rest: the requeue path, and `accelerate launch` resuming on another ``--num_processes``
from the script's command line.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from held_ports import held_port
from preemption_runs import (
    HEAT,
    HEAT_FLAGS,
    HEAT_SIMULATIONS,
    HEAT_STEPS,
    requeued_on_a_test_cluster,
)

pytestmark = pytest.mark.e2e  # every test here starts a process

PAGE = Path(__file__).parents[2] / "docs" / "how-to" / "resize.md"


def resize_job_script(out: Path, ranks_file: Path) -> str:
    """The page's job script, for this cluster: one node, no GPU, the heat example for
    `train.py`, its ranks per node read from `ranks_file`, its log in `out`."""
    page = PAGE.read_text()
    section = page[page.index("## A Slurm requeue with another node count") :]
    script = section[section.index("```bash\n") + 8 :]
    script = script[: script.index("```")]
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    flags = " ".join([*HEAT_FLAGS, "--output_dir", str(out)])
    edits = [
        (r"^#SBATCH --gpus-per-node=.*\n", ""),
        (r"^#SBATCH --nodes=.*$", "#SBATCH --nodes=1"),
        (r"^#!/bin/bash\n", f"#!/bin/bash\n#SBATCH --output={out}/job.log\n"),
        (r"^export GPUS_PER_NODE=.*$", f"export GPUS_PER_NODE=$(cat {ranks_file})"),
        (r"accelerate launch --multi_gpu",
         f"{accelerate or 'accelerate'} launch --multi_gpu --mixed_precision no "
         "--dynamo_backend no"),
        (r"--main_process_port 29500", f"--main_process_port {held_port()}"),
        (r'train\.py --output_dir "\$SCRATCH/surrogate"', f"{HEAT} {flags}"),
    ]  # fmt: skip
    for pattern, replacement in edits:  # each once: a change of the page shows here
        script, n = re.subn(pattern, lambda _, r=replacement: r, script, flags=re.M)
        assert n == 1, (pattern, script)
    return script


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.xdist_group("slurm")
def test_the_resize_job_script_requeued_on_another_number_of_ranks_completes(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    ranks = tmp_path / "ranks"
    ranks.write_text("2\n")
    step, summary, text = requeued_on_a_test_cluster(
        tmp_path,
        resize_job_script(out, ranks),
        lambda: ranks.write_text("3\n"),  # the requeued run's allocation
        420,
    )
    # the first run (2 ranks) started afresh, said by its main rank alone; the requeued
    # run resumed, on 3 ranks
    assert text.count("no checkpoint under") == 1, text[-4000:]
    ranks_of = {c.name: sorted(p.name for p in c.glob("rank_*"))
                for c in (out / "checkpoints").glob("checkpoint-*")}  # fmt: skip
    assert ranks_of[f"checkpoint-{step}"] == ["rank_0", "rank_1"], ranks_of
    assert ranks_of[f"checkpoint-{summary['steps']}"] == ["rank_0", "rank_1", "rank_2"]
    # each (simulation, step) once
    # (every rank trains until the last rank's data ran out: a rank whose receiver was
    # behind at the end lost its last samples before ranks padded, 186 and 194 of 200)
    assert summary["samples_received"] == HEAT_SIMULATIONS * HEAT_STEPS, (summary, text[-6000:])
