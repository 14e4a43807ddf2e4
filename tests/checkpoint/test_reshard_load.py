"""A checkpoint written by k ranks resumes on m != k ranks (`checkpoint_reshard`), in
process: a checkpoint of two ranks loaded on one, every sample once, and what is refused
before anything is loaded. Each owner's share as pure functions:
test_reshard_shares.py; real gloo ranks resumed 1 -> 2 -> 3 -> 2 -> 1:
test_reshard_real_ranks.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from checkpoint_samples import held
from safetensors.numpy import load_file

from melissa_trainer import Source
from melissa_trainer.checkpoint.manifest import HASH, MANIFEST, hash_file
from melissa_trainer.checkpoint.manifest import write as write_manifest
from melissa_trainer.checkpoint.reshard import reshard_seed

pytestmark = pytest.mark.timeout(60)


# -- in process: a checkpoint of two ranks loaded on one ---------------------------------


def stream(n: int, offset: int) -> Any:
    """`n` samples whose ``index`` starts at `offset` (unique across the runs here)."""
    rng = np.random.default_rng(offset)
    for i in range(n):
        x = rng.standard_normal(3).astype(np.float32)
        yield {"x": x, "y": x[:1].copy(), "index": np.asarray(offset + i, dtype=np.int64)}


def make(out: Path, offset: int, source: Any = None, **overrides: Any) -> Any:
    from helpers import small_model

    from melissa_trainer import OnlineTrainer, TrainingArguments

    settings: dict[str, Any] = dict(
        output_dir=str(out), batch_size=4, buffer="fifo", buffer_size=16, watermark=4,
        report_to="none", disable_progress_bar=True, stop_sync_steps=4, save_steps=5,
        logging_steps=3,
    )  # fmt: skip
    model = small_model(0, dropout=0.2)
    return OnlineTrainer(
        model,
        TrainingArguments(**{**settings, **overrides}),
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=source if source is not None else (lambda r, w: stream(200, offset)),
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
    )


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint of two ranks at step 5 (mid-window: pending batches on each; a loss
    since the last log, at step 3), put
    together from two one-rank runs of other data: rank 1's per-rank files and RNG file
    are the second run's rank 0's (the global parts are the first run's)."""
    base = tmp_path_factory.mktemp("two_ranks")
    for name, offset in (("a", 0), ("b", 10_000)):
        make(base / name, offset, max_steps=7).train()
    path = base / "checkpoints" / "checkpoint-5"
    shutil.copytree(base / "a" / "checkpoints" / "checkpoint-5", path)
    other = base / "b" / "checkpoints" / "checkpoint-5"
    shutil.copytree(other / "rank_0", path / "rank_1")
    shutil.copy(other / "random_states_0.pkl", path / "random_states_1.pkl")
    entries = {}  # the manifest of the checkpoint put together, each file by its rank
    for file in sorted(f for f in path.rglob("*") if f.is_file() and f.name != MANIFEST):
        rel = file.relative_to(path).as_posix()
        size, digest = hash_file(file)
        writer = 1 if rel.startswith("rank_1/") or rel == "random_states_1.pkl" else 0
        entries[rel] = {"size": size, HASH: digest, "rank": writer}
    write_manifest(path, entries, 5)
    return path


def test_two_ranks_load_on_one_with_every_sample_once(two_ranks: Path, tmp_path: Path) -> None:
    trainer = make(tmp_path, 50_000, max_steps=12)
    trainer.load_checkpoint(two_ranks)
    rng_after_load = torch.get_rng_state()
    cuda_after_load = torch.cuda.get_rng_state() if torch.cuda.is_available() else None
    old = [json.loads((two_ranks / f"rank_{r}" / "trainer_rank.json").read_text()) for r in (0, 1)]
    assert trainer.state.global_step == 5
    assert trainer.state.samples_seen == old[0]["samples_seen"] + old[1]["samples_seen"]
    assert trainer.log_figures.loss_count == old[0]["loss_count"] + old[1]["loss_count"] > 0
    assert float(trainer.log_figures.loss_sum) == pytest.approx(
        old[0]["loss_sum"] + old[1]["loss_sum"], rel=1e-6
    )
    # the samples: each old rank's buffer and pending batches, once, in the one buffer
    expected: list[int] = []
    for r in (0, 1):
        expected += held(load_file(str(two_ranks / f"rank_{r}" / "buffer.safetensors")))
        pending = held(load_file(str(two_ranks / f"rank_{r}" / "pending.safetensors")))
        assert pending, "the checkpoint should hold pending batches"
        expected += pending
    arrays, _ = trainer.buffer.state_dict()
    assert sorted(held(arrays)) == sorted(expected)
    assert len(set(expected)) == len(expected)
    assert trainer.dataset.num_pending == 0
    # the global parts are the checkpoint's; the RNG is the documented fresh seed
    from safetensors.torch import load_file as load_tensors

    model = trainer.accelerator.unwrap_model(trainer.model)
    for name, value in load_tensors(str(two_ranks / "model.safetensors")).items():
        assert torch.equal(model.state_dict()[name].cpu(), value)
    saved = torch.load(two_ranks / "random_states_0.pkl", weights_only=False)
    torch.manual_seed(reshard_seed(saved["torch_manual_seed"].numpy().tobytes(), 1, 0))
    assert torch.equal(rng_after_load, torch.get_rng_state())
    assert not torch.equal(rng_after_load, saved["torch_manual_seed"])
    if cuda_after_load is not None:  # on a GPU, the CUDA generator seeded alike
        assert torch.equal(cuda_after_load, torch.cuda.get_rng_state())
        assert not torch.equal(cuda_after_load, saved["torch_cuda_manual_seed"][0])
    optimizer = torch.load(two_ranks / "optimizer.bin", weights_only=False)
    loaded = trainer.optimizer.state_dict()
    assert loaded["state"].keys() == optimizer["state"].keys()
    for key, moments in optimizer["state"].items():
        assert all(torch.equal(loaded["state"][key][n].cpu(), v.cpu()) for n, v in moments.items())
    state = json.loads((two_ranks / "trainer_state.json").read_text())
    assert trainer.state.total_samples_seen == state["total_samples_seen"]
    assert trainer.state.last_log_step == state["last_log_step"] == 3


def test_a_run_resumed_on_one_rank_from_two_trains_on(two_ranks: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(two_ranks, out / "checkpoints" / two_ranks.name)
    trainer = make(out, 50_000, max_steps=12, resume_from_checkpoint="latest")  # verified
    state = trainer.train()
    assert state.global_step == 12
    old = sum(
        json.loads((two_ranks / f"rank_{r}" / "trainer_rank.json").read_text())["samples_seen"]
        for r in (0, 1)
    )
    assert state.samples_seen == old + 7 * 4  # 7 more steps of 4


def test_a_damaged_file_of_a_rank_this_run_lacks_is_found(two_ranks: Path, tmp_path: Path) -> None:
    from melissa_trainer import CheckpointError

    path = tmp_path / "out" / "checkpoints" / two_ranks.name
    shutil.copytree(two_ranks, path)
    damaged = path / "rank_1" / "trainer_rank.json"
    text = damaged.read_text()
    damaged.write_text(text.replace('"samples_seen": 2', '"samples_seen": 9', 1))
    assert damaged.read_text() != text and len(damaged.read_text()) == len(text)
    trainer = make(tmp_path / "out", 0, resume_from_checkpoint=str(path))
    with pytest.raises(CheckpointError, match="rank_1/trainer_rank.json: hash mismatch"):
        trainer.train()


# -- refused, before anything is loaded ---------------------------------------------------


def nothing_loaded(trainer: Any, model_before: list[torch.Tensor]) -> None:
    assert trainer.state.global_step == 0
    assert len(trainer.buffer) == 0
    model = trainer.accelerator.unwrap_model(trainer.model)
    assert all(torch.equal(a, b) for a, b in zip(model_before, model.parameters(), strict=True))


def parameters(trainer: Any) -> list[torch.Tensor]:
    return [
        p.detach().clone() for p in trainer.accelerator.unwrap_model(trainer.model).parameters()
    ]


def test_another_buffer_kind_is_refused_before_anything_is_loaded(
    two_ranks: Path, tmp_path: Path
) -> None:
    trainer = make(tmp_path, 0, buffer="firo")
    before = parameters(trainer)
    with pytest.raises(ValueError, match="the checkpoint's buffers are 'fifo', this run's 'firo'"):
        trainer.load_checkpoint(two_ranks)
    nothing_loaded(trainer, before)


def test_another_buffer_size_is_taken_on_another_number_of_ranks(
    two_ranks: Path, tmp_path: Path
) -> None:
    """2 -> 1 with --buffer_size 40 (the checkpoint's 16): the one buffer holds every
    sample of both ranks' buffers and pending batches, under this run's size."""
    trainer = make(tmp_path, 0, buffer_size=40)
    trainer.load_checkpoint(two_ranks)
    expected: list[int] = []
    for r in (0, 1):
        for name in ("buffer", "pending"):
            expected += held(load_file(str(two_ranks / f"rank_{r}" / f"{name}.safetensors")))
    arrays, meta = trainer.buffer.state_dict()
    assert sorted(held(arrays)) == sorted(expected) and meta["capacity"] == 40


def test_another_buffer_size_on_the_same_number_of_ranks_is_refused_naming_the_fix(
    two_ranks: Path, tmp_path: Path
) -> None:
    """One rank's checkpoint on one rank with another --buffer_size: refused before
    anything is loaded, naming the flag and the value that resume it; that value does."""
    from melissa_trainer import ConfigError

    one_rank = two_ranks.parents[1] / "a" / "checkpoints" / "checkpoint-5"  # (the fixture's)
    trainer = make(tmp_path / "refused", 0, buffer_size=24)
    before = parameters(trainer)
    # (their room, not what they held: "hold 16" read as the samples held, trial 37)
    room = r"have room for 16 samples per rank \(its --buffer_size\), this run's for 24"
    with pytest.raises(ConfigError, match=room + r".*resume with --buffer_size 16$"):
        trainer.load_checkpoint(one_rank)
    nothing_loaded(trainer, before)
    trainer = make(tmp_path / "advised", 0, buffer_size=16)
    trainer.load_checkpoint(one_rank)
    assert trainer.state.global_step == 5


def test_a_per_rank_part_without_reshard_is_refused_naming_it(
    two_ranks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from melissa_trainer.checkpoint import registry

    listed = registry.parts

    def without(trainer: Any) -> list[registry.Part]:
        return [
            dataclasses.replace(p, reshard=None) if p.name == "pending" else p
            for p in listed(trainer)
        ]

    monkeypatch.setattr(registry, "parts", without)
    trainer = make(tmp_path, 0)
    before = parameters(trainer)
    with pytest.raises(ValueError, match=r"2 training ranks .* 1.*\['pending'\] cannot be split"):
        trainer.load_checkpoint(two_ranks)
    nothing_loaded(trainer, before)


class KeepsCount(Source):
    """A user source with per-rank state and no `reshard_state` of its own."""

    def __init__(self) -> None:
        self.count = 0

    def start(self, buffer: Any, rank: int, world_size: int) -> None:
        self.buffer = buffer

    def wait_for(self, n_samples: int, timeout: float) -> None:
        self.buffer.close()

    def stop(self) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = int(state["count"])


def with_counts(two_ranks: Path, tmp_path: Path) -> Path:
    """A copy of the two-rank checkpoint whose sources kept counts 3 and 4."""
    path = tmp_path / two_ranks.name
    shutil.copytree(two_ranks, path)
    for r in (0, 1):
        (path / f"rank_{r}" / "source.json").write_text(json.dumps({"count": 3 + r}))
    return path


def test_a_source_that_cannot_reshard_is_refused_before_anything_is_loaded(
    two_ranks: Path, tmp_path: Path
) -> None:
    path = with_counts(two_ranks, tmp_path)
    trainer = make(tmp_path / "out", 0, source=KeepsCount())
    before = parameters(trainer)
    with pytest.raises(
        ValueError, match=r"KeepsCount cannot be resumed on another number of ranks \(2 -> 1\)"
    ):
        trainer.load_checkpoint(path)
    nothing_loaded(trainer, before)
    assert trainer.source.count == 0


class RefusesOnLoad(KeepsCount):
    """Reshards, but refuses the merged state on load (as a changed study does)."""

    def reshard_state(self, states: Any, puts: Any, rank: int, world: int, put: int) -> Any:
        return {"count": sum(s["count"] for s in states)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise ValueError(f"the study changed: {state['count']} simulations drawn")


def test_the_sources_refusal_comes_before_anything_is_loaded(
    two_ranks: Path, tmp_path: Path
) -> None:
    path = with_counts(two_ranks, tmp_path)
    trainer = make(tmp_path / "out", 0, source=RefusesOnLoad())
    before = parameters(trainer)
    with pytest.raises(ValueError, match="the study changed: 7 simulations drawn"):
        trainer.load_checkpoint(path)
    nothing_loaded(trainer, before)
