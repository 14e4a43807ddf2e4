"""docs/how-to/multi-gpu.md: on a machine without GPUs, `accelerate launch --num_processes
2` without `--multi_gpu` starts one process, silently (Accelerate's behaviour: a user
trial's two-rank run trained on one rank, its log printed once); `--multi_gpu` starts
two. The oracle: the processes the launch started, each printing its RANK and
WORLD_SIZE, with no GPU visible and no `accelerate config` file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).parents[2] / "docs" / "how-to" / "multi-gpu.md"


def launched(tmp_path: Path, *flags: str) -> list[str]:
    """What each process the launch started said: "rank RANK WORLD_SIZE", one file each
    (their prints into one pipe interleaved mid-line, unbuffered: "rankrank 1 2")."""
    said = tmp_path / f"said{len(list(tmp_path.glob('said*')))}"
    said.mkdir()
    script = tmp_path / "ranks.py"
    script.write_text(
        "import os, sys\n"
        "with open(os.path.join(sys.argv[1], str(os.getpid())), 'w') as f:\n"
        "    f.write(f\"rank {os.environ.get('RANK')} {os.environ.get('WORLD_SIZE')}\")\n"
    )
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    command = [accelerate] if accelerate else [sys.executable, "-m", "accelerate.commands.launch"]
    if accelerate:
        command.append("launch")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HOME": str(tmp_path / "hf")}
    env.pop("ACCELERATE_CONFIG_FILE", None)
    subprocess.run(
        [*command, *flags, "--num_processes", "2", "--num_machines", "1",
         "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
         str(script), str(said)],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return sorted(p.read_text() for p in said.iterdir())


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_num_processes_without_multi_gpu_runs_one_process_on_a_cpu_machine(
    tmp_path: Path,
) -> None:
    assert launched(tmp_path) == ["rank None None"]  # one process, not told of any other
    assert launched(tmp_path, "--multi_gpu") == ["rank 0 2", "rank 1 2"]


def test_the_page_warns_and_gives_the_command() -> None:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert "without `--multi_gpu`" in text and "starts one process" in text
    assert "accelerate launch --multi_gpu --num_processes 2 train.py" in text
