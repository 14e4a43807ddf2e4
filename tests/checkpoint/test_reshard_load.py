"""A checkpoint written by k ranks resumes on m != k ranks (`checkpoint_reshard`):
each owner's share function (sums over ranks kept, nothing lost or counted twice), the
RNG seeds, the manifest's verification on another number of ranks, what is refused;
then real gloo ranks resumed 1 -> 2 -> 3 -> 2 -> 1, each rank's loaded state checked
against the checkpoint's files read here."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from melissa_trainer import Source
from melissa_trainer.checkpoint.manifest import HASH, MANIFEST, hash_file, owned_by
from melissa_trainer.checkpoint.manifest import write as write_manifest
from melissa_trainer.checkpoint.reshard import RESHARD_SEED_TAG, reshard_seed, seed_everything
from melissa_trainer.core.figures import LogFigures
from melissa_trainer.core.loss_per_simulation import SimulationLosses
from melissa_trainer.core.state import share_samples_seen

pytestmark = pytest.mark.timeout(60)

SCRIPT = Path(__file__).parents[1] / "scripts" / "reshard_run.py"
CHANGES = [(1, 2), (2, 1), (2, 3), (3, 2), (3, 1), (1, 3), (4, 3)]


# -- each owner's share: pure functions ---------------------------------------------------


@pytest.mark.parametrize(("old", "new"), CHANGES)
def test_samples_seen_are_dealt_out_their_sum_kept(old: int, new: int) -> None:
    counts = [83 + 5 * r for r in range(old)]
    shares = [share_samples_seen(counts, r, new) for r in range(new)]
    assert sum(shares) == sum(counts)
    assert max(shares) - min(shares) <= 1
    assert shares == sorted(shares, reverse=True)  # the lower ranks take the remainder
    with pytest.raises(ValueError, match="rank 3 is not one of 3"):
        share_samples_seen(counts, 3, 3)


def test_the_loss_since_the_last_log_is_held_by_rank_0() -> None:
    states = [{"loss_sum": 1.5, "loss_count": 3}, {"loss_sum": 0.25, "loss_count": 1}]
    assert LogFigures.reshard_state(states, 0) == {"loss_sum": 1.75, "loss_count": 4}
    assert LogFigures.reshard_state(states, 1) == {"loss_sum": 0.0, "loss_count": 0}
    figures = LogFigures(torch.device("cpu"))
    figures.load_state_dict(LogFigures.reshard_state(states, 0))
    assert (float(figures.loss_sum), figures.loss_count) == (1.75, 4)


def losses_state(rank: int, unreduced: int) -> dict[str, np.ndarray]:
    """A `SimulationLosses.state_dict()` of old rank `rank`: shared statistics, and
    `unreduced` samples of its own (ids and losses unique to it)."""
    ids = np.arange(unreduced, dtype=np.int64) + 1000 * rank
    return {
        "ids": np.array([3, 5], np.int64),
        "draws": np.array([4, 2], np.int64),
        "loss_sum": np.array([1.0, 0.5]),
        "relative_sum": np.array([4.2, 1.9]),
        "step": np.array([6, 6], np.int64),
        "reference_sums": np.array([1.5]),
        "reference_counts": np.array([6], np.int64),
        "unreduced_ids": ids,
        "unreduced_losses": ids.astype(np.float64) / 7,
    }


@pytest.mark.parametrize(("old", "new"), CHANGES)
def test_simulation_losses_keep_the_statistics_and_every_unreduced_sample_once(
    old: int, new: int
) -> None:
    states = [losses_state(r, 3 + r) for r in range(old)]
    shares = [SimulationLosses.reshard_state(states, r, new) for r in range(new)]
    for shared in shares:
        for name in ("ids", "draws", "loss_sum", "relative_sum", "step", "reference_sums"):
            assert np.array_equal(shared[name], states[0][name])

    def pairs(shares: list[dict[str, np.ndarray]]) -> list[tuple[int, float]]:
        ids = np.concatenate([s["unreduced_ids"] for s in shares]).tolist()
        values = np.concatenate([s["unreduced_losses"] for s in shares]).tolist()
        return sorted(zip(ids, values, strict=True))

    before, after = pairs(states), pairs(shares)
    assert after == before  # none lost, none twice, each with its own loss
    # and a trainer loads its share
    losses = SimulationLosses(torch.device("cpu"), distributed=False)
    losses.load_state_dict(shares[0])
    assert losses.unreduced == len(shares[0]["unreduced_ids"])
    assert losses[3].draws == 4


def test_simulation_losses_that_differ_between_ranks_are_refused() -> None:
    states = [losses_state(0, 2), {**losses_state(1, 2), "draws": np.array([4, 3])}]
    with pytest.raises(ValueError, match="old ranks 0 and 1 differ in 'draws'"):
        SimulationLosses.reshard_state(states, 0, 1)


def test_the_seed_of_a_resharded_rank_is_the_documented_hash() -> None:
    state = torch.get_rng_state().numpy().tobytes()
    seeds = {(m, r): reshard_seed(state, m, r) for m in (1, 2, 3) for r in range(m)}
    assert len(set(seeds.values())) == len(seeds)  # every rank of every world size its own
    assert reshard_seed(state, 2, 1) == seeds[(2, 1)]  # deterministic
    expected = hashlib.sha256(RESHARD_SEED_TAG + state + b"2:1").digest()
    assert seeds[(2, 1)] == int.from_bytes(expected[:8], "big") & (2**63 - 1)
    other = bytearray(state)
    other[100] ^= 1
    assert reshard_seed(bytes(other), 2, 1) != seeds[(2, 1)]  # another checkpoint
    seed_everything(seeds[(2, 1)])
    drawn = (torch.rand(3), np.random.rand(3))
    torch.manual_seed(seeds[(2, 1)])
    np.random.seed(seeds[(2, 1)] % 2**32)
    assert torch.equal(drawn[0], torch.rand(3)) and np.array_equal(drawn[1], np.random.rand(3))


@pytest.mark.parametrize(("old", "new"), [*CHANGES, (2, 2), (1, 1)])
def test_every_file_is_verified_by_exactly_one_rank(old: int, new: int) -> None:
    entries = {f"rank_{r}/{name}": {"rank": r} for r in range(old) for name in ("a", "b")}
    entries |= {"model.safetensors": {"rank": 0}, f"random_states_{old - 1}.pkl": {"rank": old - 1}}
    shares = [owned_by(entries, r, new) for r in range(new)]
    verified = [rel for share in shares for rel in share]
    assert sorted(verified) == sorted(entries)  # each once
    if old == new:  # each rank its own files, as before
        assert all(e["rank"] == r for r, share in enumerate(shares) for e in share.values())


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


def held(arrays: dict[str, np.ndarray]) -> list[int]:
    """The ``index`` of every sample of a buffer snapshot's (or pending file's) arrays."""
    return [int(v) for k, v in arrays.items() if k.endswith("/index")]


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
    with pytest.raises(ConfigError, match="hold 16 samples per rank, this run's 24.*"
                       r"resume with --buffer_size 16$"):  # fmt: skip
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


# -- real ranks (gloo): 1 -> 2 -> 3 -> 2 -> 1 ---------------------------------------------


def launch(out: Path, ranks: int, tag: str, *flags: str) -> None:
    """One run of `SCRIPT` on `ranks` ranks (one: plain `python`, as a user may)."""
    import os
    import sys

    from held_ports import held_port
    from helpers import run_group

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
