"""`torch_compile`, `torch_compile_backend`, `torch_compile_mode` (`melissa_trainer.core.compiled`).

The oracle is the eager run of the same seed and samples. With the ``aot_eager`` backend
(dynamo and AOTAutograd, then ATen's own kernels; it compiles in seconds) a compiled run
must give the eager run's losses and weights bit for bit, dropout's random draws included:
the compiled step changes how the step is run, not what it computes. With inductor (its
own generated kernels) it is held to a tolerance, stated at its test.

Compiling takes seconds to a minute on a busy 2-core machine: few tests compile, on a
3-16-1 MLP; the inductor one is ``slow``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import Recorder, linear_samples, small_model, xy
from safetensors import safe_open

from melissa_trainer import ArgumentParser, ConfigError, OnlineTrainer, TrainingArguments
from melissa_trainer.common.checkpoint_names import latest_checkpoint
from melissa_trainer.config.compile_options import CompileOptions
from melissa_trainer.core.accelerated import AcceleratedStep, PlainStep

pytestmark = pytest.mark.timeout(180)

BATCH = 8
N = 83  # ten full batches, then one of 3: a second batch size, a recompilation


def make_args(out: Path, **over: Any) -> TrainingArguments:
    base: dict[str, Any] = dict(
        output_dir=str(out),
        batch_size=BATCH,
        buffer="fifo",  # each sample once, in order: the same batches in every run
        buffer_size=64,
        watermark=1,
        logging_steps=4,
        stop_sync_steps=3,
        report_to="none",
        disable_progress_bar=True,
        save_at_end=False,
    )
    base.update(over)
    return TrainingArguments(**base)


class SampleLosses(Recorder):
    """Listens to SAMPLE_LOSSES: the step's loss is then the mean of
    `compute_sample_losses`, which runs on the compiled model too."""

    def __init__(self) -> None:
        super().__init__()
        self.sample_losses: list[list[float]] = []

    def on_sample_losses(self, trainer, state, control, losses, simulation_ids) -> None:  # type: ignore[no-untyped-def]
        self.sample_losses.append(losses.tolist())


def run(
    out: Path,
    *,
    dropout: float = 0.2,
    accelerated: bool = False,
    sample_losses: bool = False,
    **over: Any,
) -> tuple[OnlineTrainer, Recorder]:
    """A run on `N` samples (or what `max_steps` allows), with validation at the end."""
    args = make_args(out, **over)
    model = small_model(0, dropout=dropout)  # dropout: the RNG's draws must match too
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = SampleLosses() if sample_losses else Recorder()
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        train_source=lambda rank, world: linear_samples(N),
        process_sample=xy,
        eval_dataset=list(linear_samples(20, seed=9)),
        hooks=[rec],
    )
    if accelerated:  # Accelerate's step (what fp16 or DDP with accumulation take)
        step = trainer._step
        assert isinstance(step, PlainStep)
        trainer._step = AcceleratedStep(
            trainer.accelerator, trainer.model, trainer.optimizer, None,
            trainer.compute_loss, forward=step.model,
        )  # fmt: skip
    trainer.train()
    return trainer, rec


def weights(trainer: OnlineTrainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def is_compiled(module: torch.nn.Module) -> bool:
    return isinstance(module, torch._dynamo.eval_frame.OptimizedModule)


# -- the options -----------------------------------------------------------------------


def test_the_options_follow_transformers() -> None:
    """A backend or a mode turns compilation on, inductor by default; off by default."""
    assert TrainingArguments().compile_options() is None
    on = TrainingArguments(torch_compile=True)
    assert on.torch_compile_backend == "inductor"
    assert on.compile_options() == CompileOptions("inductor", None)
    mode = TrainingArguments(torch_compile_mode=" Reduce-Overhead ")
    assert mode.torch_compile and mode.compile_options() == CompileOptions(
        "inductor", "reduce-overhead"
    )
    assert mode.compile_options().cuda_graphs  # type: ignore[union-attr]
    backend = TrainingArguments(torch_compile_backend="aot_eager")
    assert backend.torch_compile and not backend.compile_options().cuda_graphs  # type: ignore[union-attr]
    assert TrainingArguments.from_dict(mode.to_dict()) == mode  # a config file round trip
    (parsed,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses(
        ["--torch_compile_mode", "max-autotune-no-cudagraphs"]
    )
    assert parsed.compile_options() == CompileOptions("inductor", "max-autotune-no-cudagraphs")


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"torch_compile_backend": "inductr"}, "torch_compile_backend='inductr' is not a backend"),
        ({"torch_compile_backend": "inductr"}, "did you mean 'inductor'?"),
        ({"torch_compile_mode": "fast"}, "torch_compile_mode='fast' is not supported: choose"),
        (
            {"torch_compile_backend": "aot_eager", "torch_compile_mode": "reduce-overhead"},
            "is a mode of the inductor backend, not of torch_compile_backend='aot_eager'",
        ),
        ({"torch_compile": "maybe"}, "torch_compile='maybe' is not a boolean"),
        (
            {"torch_compile_mode": "reduce-overhead", "gradient_accumulation_steps": 2},
            "torch_compile_mode='reduce-overhead' (CUDA graphs) with "
            "gradient_accumulation_steps=2: a CUDA graph's next replay overwrites",
        ),
        (
            {"torch_compile_backend": "cudagraphs", "gradient_accumulation_steps": 4},
            "use gradient_accumulation_steps=1 with a larger batch_size",
        ),
    ],
)
def test_bad_options_are_refused_naming_the_field(over: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError, match="TrainingArguments") as err:
        TrainingArguments(**over)
    assert expected in str(err.value)


def test_a_torch_that_cannot_compile_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(torch, "compile")
    with pytest.raises(ConfigError) as err:
        TrainingArguments(torch_compile=True)
    assert "torch_compile=True: torch" in str(err.value)
    assert "has no torch.compile" in str(err.value) and "set torch_compile=False" in str(err.value)
    TrainingArguments()  # not asked for: not checked
    monkeypatch.undo()
    monkeypatch.setattr(torch._dynamo.eval_frame, "is_dynamo_supported", lambda: False)
    with pytest.raises(ConfigError, match="cannot compile on this Python or platform"):
        TrainingArguments(torch_compile_mode="default")


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"torch_compile_mode": "reduce-overhead"}, "torch_compile_mode='reduce-overhead'"),
        ({"torch_compile_mode": "max-autotune"}, "torch_compile_mode='max-autotune'"),
        ({"torch_compile_backend": "cudagraphs"}, "torch_compile_backend='cudagraphs'"),
    ],
)
def test_cuda_graphs_off_cuda_are_refused_before_anything_starts(
    tmp_path: Path, over: dict[str, Any], field: str
) -> None:
    args = make_args(tmp_path / "out", **over)
    model = small_model(0)
    with pytest.raises(ValueError) as err:
        OnlineTrainer(
            model, args, torch.optim.Adam(model.parameters()),
            train_source=list(linear_samples(8)), process_sample=xy,
        )  # fmt: skip
    if "max-autotune" in field:  # (trial 29: its search runs on a CPU; CUDA graphs do not)
        assert f"{field} is inductor's kernel search plus CUDA graphs" in str(err.value)
        assert "this run trains on cpu" in str(err.value)
        assert "set torch_compile_mode='max-autotune-no-cudagraphs'" in str(err.value)
        assert "for the same kernel search without CUDA graphs" in str(err.value)
    else:
        assert f"{field} captures CUDA graphs, but this run trains on cpu" in str(err.value)
        assert "to compile without CUDA graphs, or train on a CUDA device" in str(err.value)
    # nothing started: output_dir is not held, a trainer of it can be made at once
    OnlineTrainer(
        model, make_args(tmp_path / "out"), torch.optim.Adam(model.parameters()),
        train_source=list(linear_samples(8)), process_sample=xy,
    )  # fmt: skip


def test_a_model_compiled_beforehand(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Compiled twice: refused; compiled by the user without `torch_compile`: a warning
    (its checkpoints carry ``_orig_mod.`` names, which an eager run cannot load)."""
    model = torch.compile(small_model(0), backend="aot_eager")

    def make(**over: Any) -> OnlineTrainer:
        return OnlineTrainer(
            model, make_args(tmp_path / str(len(over)), **over),  # type: ignore[arg-type]
            torch.optim.Adam(model.parameters()),
            train_source=list(linear_samples(8)), process_sample=xy,
        )  # fmt: skip

    with pytest.raises(ValueError, match="already compiled .* pass the eager model"):
        make(torch_compile_backend="aot_eager")
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.core.compiled"):
        make()
    assert "give the eager model and set torch_compile=True instead" in caplog.text


# -- what a compiled run computes ------------------------------------------------------


@pytest.mark.parametrize(
    ("precision", "accumulation", "accelerated", "sample_losses"),
    [("no", 1, False, False), ("bf16", 2, False, False), ("no", 2, True, False),
     ("no", 1, False, True)],
)  # fmt: skip
def test_aot_eager_gives_the_eager_run_bit_for_bit(
    tmp_path: Path, precision: str, accumulation: int, accelerated: bool, sample_losses: bool
) -> None:
    kw: dict[str, Any] = dict(
        mixed_precision=precision, gradient_accumulation_steps=accumulation,
        accelerated=accelerated, sample_losses=sample_losses,
    )  # fmt: skip
    eager, eager_rec = run(tmp_path / "eager", **kw)
    compiled, compiled_rec = run(tmp_path / "compiled", torch_compile_backend="aot_eager", **kw)
    step = compiled._step
    forward = step.forward if isinstance(step, AcceleratedStep) else step.model  # type: ignore[attr-defined]
    assert is_compiled(forward) and not is_compiled(compiled.model)
    assert not is_compiled(compiled.accelerator.unwrap_model(compiled.model))
    assert compiled.state.global_step == eager.state.global_step == (N // BATCH + 1) // accumulation
    assert compiled_rec.losses == eager_rec.losses  # the last batch of 3 included
    assert len(compiled_rec.losses) == N // BATCH + (accumulation == 1)
    if sample_losses:  # per-sample losses from the compiled model, as eager's
        got_samples = compiled_rec.sample_losses  # type: ignore[attr-defined]
        assert got_samples == eager_rec.sample_losses  # type: ignore[attr-defined]
        assert [len(x) for x in got_samples] == [BATCH] * (N // BATCH) + [N % BATCH]
    got, want = weights(compiled), weights(eager)
    assert list(got) == list(want)  # the same names: no "_orig_mod."
    assert all(torch.equal(got[k], want[k]) for k in want)
    # validation runs the eager module: the same weights, the same figure
    assert compiled.state.best_metric == eager.state.best_metric is not None


@pytest.mark.parametrize(
    "saved_compiled", [True, False], ids=["compiled-then-eager", "eager-then-compiled"]
)
def test_a_checkpoint_resumes_with_or_without_compilation(
    tmp_path: Path, saved_compiled: bool
) -> None:
    """Saved at step 5 with compilation and resumed without it, and the other way: the
    run ends where an uninterrupted eager run does, bit for bit (aot_eager)."""
    eager_full, full = run(tmp_path / "full", max_steps=10)
    first = {"torch_compile_backend": "aot_eager"} if saved_compiled else {}
    second = {} if saved_compiled else {"torch_compile_backend": "aot_eager"}
    out = tmp_path / "split"
    _, before = run(out, max_steps=5, save_at_end=True, **first)
    saved = latest_checkpoint(out / "checkpoints")
    assert saved is not None and saved.name == "checkpoint-5"
    with safe_open(str(saved / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    assert names == set(small_model(0, dropout=0.2).state_dict())  # no "_orig_mod."
    resumed, after = run(out, max_steps=10, resume_from_checkpoint="latest", **second)
    assert resumed.state.global_step == 10
    assert before.losses + after.losses == full.losses
    got, want = weights(resumed), weights(eager_full)
    assert all(torch.equal(got[k], want[k]) for k in want)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_inductor_stays_within_tolerance_of_eager(tmp_path: Path) -> None:
    """Inductor's generated C++ kernels (vectorised tanh, fused and reordered pointwise
    arithmetic) differ from ATen's by a few float32 ulps an operation, so losses and
    weights are compared with a tolerance: 1e-5 relative on each loss and 1e-5 absolute
    on each weight after 11 Adam steps at lr 1e-2. Adam moves a weight by about the
    learning rate a step, so a step lost, repeated or computed on a wrong gradient
    shows a thousand times over it; on this machine the gap was about 3e-8. No dropout:
    inductor draws its own random numbers, not ATen's."""
    eager, eager_rec = run(tmp_path / "eager", dropout=0.0)
    compiled, compiled_rec = run(tmp_path / "inductor", dropout=0.0, torch_compile=True)
    assert compiled.args.torch_compile_backend == "inductor"
    assert compiled.state.global_step == eager.state.global_step == N // BATCH + 1
    assert compiled_rec.losses == pytest.approx(eager_rec.losses, rel=1e-5)
    got, want = weights(compiled), weights(eager)
    assert list(got) == list(want)
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=0, atol=1e-5)
