"""Features at ingest (`OnlineTrainer(..., ingest_sample=...)` / ``ingest_block=...``):
the user's function runs once per sample, where the source puts it, and the buffer
holds its result (issue 42).

The oracle: a run that transforms at ingest trains on exactly what a run without the
transform trains on when its `process_sample` applies the same function at each draw
(same draws, same bits), and the function runs once per sample put (a reservoir draws
each several times)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import Recorder, linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, SampleBlock, TrainingArguments
from melissa_trainer.sources.ingest_transform import IngestTransform, IngestTransformError
from melissa_trainer.sources.iterable import IterableSource
from melissa_trainer.sources.source import Source, SourceError

pytestmark = pytest.mark.timeout(60)


def features(sample: dict[str, np.ndarray]) -> dict[str, Any]:
    """Not idempotent (applied twice, a sample changes): a second application shows."""
    x = sample["x"]
    return {"x": np.concatenate([x[:2] * 2 + 1, x[2:] ** 2]), "y": sample["y"] - 1}


def features_block(block: SampleBlock) -> dict[str, Any]:
    """`features` for a block at once (the same bits per row)."""
    x = block.fields["x"]
    return {"x": np.concatenate([x[:, :2] * 2 + 1, x[:, 2:] ** 2], 1), "y": block.fields["y"] - 1}


class Counted:
    """Wraps a transform and counts the samples it transforms."""

    def __init__(self, fn: Any, block: bool = False) -> None:
        self.fn, self.block, self.samples = fn, block, 0

    def __call__(self, item: Any) -> Any:
        self.samples += len(item) if self.block else 1
        return self.fn(item)


def args_for(tmp_path: Path, name: str, **kw: Any) -> TrainingArguments:
    defaults: dict[str, Any] = dict(
        output_dir=str(tmp_path / name),
        batch_size=8,
        buffer="reservoir",
        buffer_size=32,
        watermark=16,
        max_steps=60,
        logging_steps=10,
        report_to="none",
        disable_progress_bar=True,
        seed=5,
    )
    return TrainingArguments(**{**defaults, **kw})


def train(tmp_path: Path, name: str, n: int = 150, **trainer_kw: Any) -> dict[str, Any]:
    """Train on `n` linear samples; returns the losses, the weights and the counters."""
    recorder = Recorder()
    model = small_model(0)
    trainer = OnlineTrainer(
        model,
        args_for(tmp_path, name, **trainer_kw.pop("args", {})),
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=linear_samples(n, seed=4),
        hooks=[recorder],
        **trainer_kw,
    )
    state = trainer.train()
    params = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
    stats = trainer.buffer.stats()
    return {
        "losses": recorder.losses,  # every step's
        "params": params.numpy().tobytes(),
        "steps": state.global_step,
        "put": stats.put,
        "got": stats.got,
    }


# -- the transform alone -----------------------------------------------------------------


def test_each_form_takes_a_sample_or_a_block_with_the_same_bits() -> None:
    samples = list(linear_samples(20, seed=1))
    block = SampleBlock.from_samples(samples)
    per_sample, per_block = IngestTransform(features), IngestTransform(ingest_block=features_block)
    expected = [features(s) for s in samples]
    for transform in (per_sample, per_block):
        one = [transform.sample(s) for s in samples]
        many = transform.block(block)
        assert isinstance(many, SampleBlock) and len(many) == 20
        for i, want in enumerate(expected):
            for key, value in want.items():
                assert one[i][key].tobytes() == value.tobytes(), (transform, key)
                assert many[i][key].tobytes() == value.tobytes(), (transform, key)
            assert "index" not in one[i]  # the result replaces the sample
        assert transform.many(samples[:3])[2]["y"] == expected[2]["y"]  # a list stays a list


def test_no_sample_is_passed_through_without_calling_the_function() -> None:
    """A receiver may put a block of none (a BATCH whose steps were all received
    before: a simulation re-sending after a resume); a function that reshapes by the
    block's length raised on it (the heat example's resume test found it)."""

    def refuse(item: Any) -> Any:
        raise AssertionError("called on no sample")

    empty = SampleBlock({"x": np.zeros((0, 3), np.float32), "time_step": np.zeros(0, np.int64)})
    for transform in (IngestTransform(refuse), IngestTransform(ingest_block=refuse)):
        assert transform.many(empty) is empty and transform.block(empty) is empty
        assert transform.many([]) == []


def test_simulation_id_and_time_step_are_kept_and_may_not_change() -> None:
    sample = {
        "u": np.ones(4, np.float32),
        "simulation_id": np.array(7, np.int64),
        "time_step": np.array(3, np.int64),
    }
    out = IngestTransform(lambda s: {"v": s["u"].sum(keepdims=True)}).sample(sample)
    assert set(out) == {"v", "simulation_id", "time_step"}
    assert int(out["simulation_id"]) == 7 and int(out["time_step"]) == 3
    same = IngestTransform(lambda s: {"v": s["u"], "time_step": np.array(3)}).sample(sample)
    assert int(same["time_step"]) == 3  # returned unchanged: accepted
    changed = IngestTransform(lambda s: {"v": s["u"], "time_step": s["time_step"] + 1})
    refused = "changed field 'time_step'.*simulation 7, time step 3"
    with pytest.raises(IngestTransformError, match=refused):
        changed.sample(sample)
    block = SampleBlock.from_samples([sample, {**sample, "time_step": np.array(4, np.int64)}])
    out_block = IngestTransform(ingest_block=lambda b: {"v": b.fields["u"][:, :1]}).block(block)
    assert out_block.fields["time_step"].tolist() == [3, 4]
    assert out_block.fields["v"].shape == (2, 1)


def test_bad_transforms_are_refused_with_the_function_and_the_samples_named() -> None:
    sample = {"x": np.zeros(3, np.float32), "simulation_id": np.array(2), "time_step": np.array(9)}
    block = SampleBlock.from_samples([sample, sample])

    def boom(s: Any) -> Any:
        return 1 / 0

    with pytest.raises(IngestTransformError) as info:
        IngestTransform(boom).sample(sample)
    assert "the ingest transform ingest_sample=test_bad_transforms" in str(info.value)
    assert "<locals>.boom raised ZeroDivisionError" in str(info.value)
    assert "simulation 2, time step 9" in str(info.value)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    with pytest.raises(IngestTransformError, match="ingest_block=.*boom.*block of 2 samples"):
        IngestTransform(ingest_block=boom).block(block)
    with pytest.raises(IngestTransformError, match="returned list, not a mapping"):
        IngestTransform(lambda s: [s["x"]]).sample(sample)
    with pytest.raises(IngestTransformError, match=r"field 'x' of shape \(3,\) for a block of 2"):
        IngestTransform(ingest_block=lambda b: {"x": b.fields["x"][0]}).block(block)
    with pytest.raises(IngestTransformError, match="returned no field"):
        IngestTransform(lambda s: {}).sample({"x": np.zeros(1)})
    with pytest.raises(IngestTransformError, match="samples that differ"):
        IngestTransform(lambda s: {"x": np.zeros(int(s["time_step"]))}).block(
            SampleBlock.from_samples([sample, {**sample, "time_step": np.array(8)}])
        )
    with pytest.raises(ValueError, match="got both"):
        IngestTransform(features, features_block)
    with pytest.raises(ValueError, match="got neither"):
        IngestTransform()
    with pytest.raises(TypeError, match="ingest_block must be callable"):
        IngestTransform(ingest_block=3)  # type: ignore[arg-type]


# -- in a trainer --------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["sample", "block"])
def test_features_at_ingest_train_exactly_as_features_at_each_draw_computed_once_each(
    tmp_path: Path, form: str
) -> None:
    """The same losses and weights, bit for bit, as `process_sample` computing them at
    every draw; the function ran once per sample put (plus one held back: taken from
    the iterable, refused by the full buffer), not once per draw."""

    def at_draw(sample: dict[str, np.ndarray]) -> Any:
        return xy(features(sample))

    baseline = train(tmp_path, "draw", process_sample=at_draw)
    counted = Counted(features if form == "sample" else features_block, block=form == "block")
    kw = {"ingest_sample": counted} if form == "sample" else {"ingest_block": counted}
    ours = train(tmp_path, "ingest", process_sample=xy, **kw)
    assert ours == baseline
    assert ours["got"] == 60 * 8 and ours["put"] < ours["got"]  # drawn more than put
    assert ours["put"] <= counted.samples <= ours["put"] + 1


def test_columnar_batches_read_the_transformed_fields(tmp_path: Path) -> None:
    """`process_batch` (blocks gathered from the buffer) gets the transformed columns,
    with the shapes and dtypes the transform gave (here a float64 field of another
    shape)."""
    seen: list[tuple[tuple[int, ...], np.dtype]] = []

    def widen(block: SampleBlock) -> dict[str, Any]:
        x = block.fields["x"].astype(np.float64)
        return {"x": np.concatenate([x, x**2], 1), "y": block.fields["y"]}

    def batch(block: SampleBlock) -> Any:
        seen.append((block.fields["x"].shape, block.fields["x"].dtype))
        return torch.from_numpy(block.fields["x"][:, :3]).float(), torch.from_numpy(
            block.fields["y"]
        )

    out = train(tmp_path, "wide", ingest_block=widen, process_batch=batch)
    assert out["steps"] == 60
    assert set(seen) == {((8, 6), np.dtype(np.float64))}


def test_eval_dataset_is_transformed_once_at_construction(tmp_path: Path) -> None:
    calls = Counted(features)
    samples = list(linear_samples(10, seed=9))
    model = small_model(0)
    trainer = OnlineTrainer(
        model,
        args_for(tmp_path, "eval", max_steps=4, eval_steps=2),
        torch.optim.Adam(model.parameters()),
        train_source=linear_samples(60, seed=4),
        process_sample=xy,
        ingest_sample=calls,
        eval_dataset=samples,
    )
    assert calls.samples == 10
    assert [s["x"].tobytes() for s in trainer.eval_dataset] == [
        features(s)["x"].tobytes() for s in samples
    ]
    assert "index" in samples[0]  # the user's list is left as it was
    trainer.train()
    evaluated = [log for log in trainer.state.log_history if "eval_loss" in log]
    assert len(evaluated) >= 2  # validation ran on the transformed samples
    assert calls.samples <= 10 + trainer.buffer.stats().put + 1  # none transformed again


def test_a_failing_transform_stops_training_naming_it(tmp_path: Path) -> None:
    def fragile(sample: dict[str, np.ndarray]) -> dict[str, Any]:
        if int(sample["index"]) == 40:
            raise KeyError("no field 'grad_u' in this sample")
        return dict(sample)

    model = small_model(0)
    trainer = OnlineTrainer(
        model,
        args_for(tmp_path, "fail"),
        torch.optim.Adam(model.parameters()),
        train_source=linear_samples(150, seed=4),
        process_sample=xy,
        ingest_sample=fragile,
    )
    with pytest.raises(SourceError) as info:
        trainer.train()
    message = str(info.value)
    assert "ingest_sample=" in message and "fragile" in message and "grad_u" in message
    cause = info.value.__cause__
    assert isinstance(cause, IngestTransformError) and isinstance(cause.__cause__, KeyError)
    assert trainer.state.global_step < 60


def test_a_source_that_cannot_apply_a_transform_is_refused_at_construction(
    tmp_path: Path,
) -> None:
    class Own(Source):
        def start(self, buffer: Any, rank: int, world_size: int) -> None:
            buffer.close()

        def wait_for(self, n_samples: int, timeout: float) -> None:
            pass

        def stop(self) -> None:
            pass

    model = small_model(0)
    with pytest.raises(ValueError, match="Own does not apply an ingest transform"):
        OnlineTrainer(
            model,
            args_for(tmp_path, "own"),
            torch.optim.Adam(model.parameters()),
            train_source=Own(),
            ingest_sample=features,
        )
    assert IterableSource([]).set_ingest_transform(IngestTransform(features)) is None
