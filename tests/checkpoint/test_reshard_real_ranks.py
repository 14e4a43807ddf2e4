"""Real gloo ranks resumed 1 -> 2 -> 3 -> 2 -> 1 (tests/scripts/reshard_run.py under
`accelerate launch`), each rank's loaded state checked against the checkpoint's files
read here."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from checkpoint_samples import held
from safetensors.numpy import load_file

from melissa_trainer.checkpoint.reshard import reshard_seed

pytestmark = pytest.mark.timeout(60)


SCRIPT = Path(__file__).parents[1] / "scripts" / "reshard_run.py"


# -- real ranks (gloo): 1 -> 2 -> 3 -> 2 -> 1 ---------------------------------------------


def launch(out: Path, ranks: int, tag: str, *flags: str) -> None:
    """One run of `SCRIPT` on `ranks` ranks (one: plain `python`, as a user may)."""
    import os
    import sys

    from held_ports import held_port
    from process_tree import run_group

    if ranks == 1:
        cmd = [sys.executable, str(SCRIPT)]
    else:
        accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
        cmd = [
            accelerate or "accelerate", "launch", "--multi_gpu", "--num_processes", str(ranks),
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_port", str(held_port()), str(SCRIPT),
        ]  # fmt: skip
    cmd += [
        "--output_dir", str(out), "--batch_size", "4", "--buffer", "fifo", "--buffer_size",
        "16", "--watermark", "4", "--report_to", "none", "--disable_progress_bar",
        "--logging_steps", "3", "--stop_sync_steps", "4", "--save_steps", "5",
        "--simulation_loss_steps", "6", "--max_to_keep", "10", "--tag", tag,
        "--offset", str(ord(tag) * 1_000_000),
        *flags,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    if ranks > 1:  # gloo on CPU on any machine; one rank takes a GPU where there is one
        env["CUDA_VISIBLE_DEVICES"] = ""
    env["PYTHONFAULTHANDLER"] = "1"  # every thread's Python stack on a fatal signal
    proc = run_group(cmd, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def digest_file(path: Path) -> str:
    from safetensors.torch import load_file as load_tensors

    tensors = load_tensors(str(path))
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(tensors[name].contiguous().numpy().tobytes())
    return h.hexdigest()


def check_share(checkpoint: Path, loaded: list[dict[str, Any]]) -> None:
    """Each new rank's loaded state against the old ranks' files of `checkpoint`."""
    old = sorted(int(p.name.split("_")[1]) for p in checkpoint.glob("rank_*"))
    m = len(loaded)
    assert old != list(range(m)), "not a resize"
    assert [d["world_size"] for d in loaded] == [m] * m

    def per_rank(name: str) -> list[Any]:
        return [checkpoint / f"rank_{r}" / name for r in old]

    samples = [i for f in per_rank("buffer.safetensors") for i in held(load_file(str(f)))]
    pending = [i for f in per_rank("pending.safetensors") for i in held(load_file(str(f)))]
    assert pending, "a checkpoint with pending batches"
    assert sorted(i for d in loaded for i in d["held"]) == sorted(samples + pending)
    assert all(d["pending"] == 0 for d in loaded)
    figures = [json.loads(f.read_text()) for f in per_rank("trainer_rank.json")]
    assert sum(d["samples_seen"] for d in loaded) == sum(f["samples_seen"] for f in figures)
    assert sum(d["loss_count"] for d in loaded) == sum(f["loss_count"] for f in figures)
    assert sum(d["loss_sum"] for d in loaded) == pytest.approx(sum(f["loss_sum"] for f in figures))
    losses = [load_file(str(f)) for f in per_rank("simulation_losses.safetensors")]
    unreduced = [i for s in losses for i in s["unreduced_ids"].tolist()]
    assert unreduced, "a checkpoint with unreduced per-simulation losses"
    assert sorted(i for d in loaded for i in d["unreduced_ids"]) == sorted(unreduced)
    for d in loaded:
        assert d["loss_ids"] == losses[0]["ids"].tolist()
        assert d["loss_draws"] == losses[0]["draws"].tolist()
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert {d["global_step"] for d in loaded} == {state["global_step"]}
    assert {d["total_samples_seen"] for d in loaded} == {state["total_samples_seen"]}
    assert {d["model"] for d in loaded} == {digest_file(checkpoint / "model.safetensors")}
    rng = torch.load(checkpoint / "random_states_0.pkl", weights_only=False)
    assert {d["accelerate_step"] for d in loaded} == {rng["step"]}
    torch_state = rng["torch_manual_seed"].numpy().tobytes()
    for r, d in enumerate(loaded):
        torch.manual_seed(reshard_seed(torch_state, m, r))
        expected = hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest()
        assert d["torch_rng"] == expected, f"rank {r}'s RNG"
        if d.get("cuda_rng") is not None:  # a one-rank run on a GPU: seeded alike
            cuda = hashlib.sha256(torch.cuda.get_rng_state().numpy().tobytes()).hexdigest()
            assert d["cuda_rng"] == cuda, f"rank {r}'s CUDA RNG"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_real_ranks_resume_on_another_number_of_ranks(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    checkpoints = out / "checkpoints"
    # (ranks, its run's last step, the mid-window checkpoint the next run resumes from)
    chain = [(1, 7, 5), (2, 12, 10), (3, 17, 15), (2, 22, 20), (1, 25, None)]
    resume_from: int | None = None
    for n, (ranks, last, saved) in enumerate(chain):
        tag = "abcde"[n]
        flags = ["--max_steps", str(last)]
        if resume_from is not None:
            flags += ["--resume_from_checkpoint", str(checkpoints / f"checkpoint-{resume_from}")]
        launch(out, ranks, tag, *flags)
        ends = [json.loads((out / f"{tag}end_rank_{r}.json").read_text()) for r in range(ranks)]
        assert {e["global_step"] for e in ends} == {last}  # it trained on, to its end
        assert {e["total_samples_seen"] for e in ends} == {sum(e["samples_seen"] for e in ends)}
        if resume_from is not None:
            loaded = [json.loads((out / f"{tag}load_rank_{r}.json").read_text())
                      for r in range(ranks)]  # fmt: skip
            check_share(checkpoints / f"checkpoint-{resume_from}", loaded)
        resume_from = saved
