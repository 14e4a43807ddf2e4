"""Preemption on a real (single-node) Slurm cluster: the user guide's requeueable job
script (docs/how-to/preemption.md), signalled as before its time limit, checkpoints, is
requeued once, and the job completes.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from held_ports import held_port
from preemption_runs import HEAT, HEAT_FLAGS, requeued_on_a_test_cluster


def readme_job_script(out: Path, command: str) -> str:
    """The user guide's requeueable job script (docs/how-to/preemption.md), with
    `command` for its srun line, no GPU request, and its log in `out`."""
    page = (Path(__file__).parents[2] / "docs" / "how-to" / "preemption.md").read_text()
    section = page[page.index("## A requeueable Slurm job") :]
    script = section[section.index("```bash\n") + 8 :]
    script = script[: script.index("```")]
    script = re.sub(r"^#SBATCH --gpus-per-node=.*\n", "", script, flags=re.M)
    script = script.replace("#!/bin/bash\n", f"#!/bin/bash\n#SBATCH --output={out}/job.log\n")
    srun = re.compile(r"^srun .*?&$", re.M | re.S)
    assert srun.search(script), script
    return srun.sub(lambda m: f"srun {command} &", script)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.xdist_group("slurm")
def test_the_readme_slurm_script_requeues_at_the_time_limit_and_the_job_completes(
    tmp_path: Path,
) -> None:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    out = tmp_path / "out"
    out.mkdir()
    command = " ".join(
        [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
         "--mixed_precision", "no", "--dynamo_backend", "no",
         "--main_process_port", str(held_port()), str(HEAT), *HEAT_FLAGS,
         # HEAT_FLAGS' 10 simulations: the signal follows the first logged step (about
         # 3 simulations in), the requeued run has the other 7 or so to resume
         "--output_dir", str(out), "--resume_from_checkpoint", "latest"]
    )  # fmt: skip
    requeued_on_a_test_cluster(tmp_path, readme_job_script(out, command), lambda: None, 400)
