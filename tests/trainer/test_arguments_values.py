"""`TrainingArguments`' defaults and value checks: every field documented, the defaults
valid (a reservoir training each sample several times), counts and steps positive,
choices listed and normalised, watermark and batch size within the buffer, the
reservoir's options (ratio, tolerance, reuse, draw choices), `on_save_error`."""

from __future__ import annotations

import dataclasses
import os

import pytest
from config_errors import config_error

from melissa_trainer.buffers import BufferConfig
from melissa_trainer.buffers.config import DEFAULT_SAMPLE_TO_INSERT_RATIO as DEFAULT_RATIO
from melissa_trainer.config.arguments import TrainingArguments
from melissa_trainer.config.reading import ConfigError


def test_defaults_are_valid() -> None:
    args = TrainingArguments()
    assert args.batch_size == 32 and args.buffer == "reservoir" and args.max_steps is None
    assert args.resolved_logging_dir == os.path.join("outputs", "runs")
    assert TrainingArguments(logging_dir="tb").resolved_logging_dir == "tb"
    config = args.buffer_config()
    assert (config.watermark, config.capacity, config.sample_to_insert_ratio) == (1, 10_000, 16.0)
    # max(4 * 32, 16 * 1 + 32, 16 * (32 - 1))
    assert config.resolved_tolerance == 496.0
    assert issubclass(ConfigError, ValueError)


def test_the_defaults_train_each_sample_several_times() -> None:
    """Issue 30: a reservoir with a sample-to-insert ratio by default (FIFO trained on
    each sample once), the defaults of `TrainingArguments` and `BufferConfig` one."""
    config = TrainingArguments().buffer_config()
    assert (config.kind, config.sample_to_insert_ratio) == ("reservoir", DEFAULT_RATIO)
    assert DEFAULT_RATIO == 16.0
    plain = BufferConfig()
    assert (plain.kind, plain.capacity, plain.watermark) == (
        config.kind, config.capacity, config.watermark
    )  # fmt: skip
    # FIFO / FIRO get no ratio; 0 turns a reservoir's off; a ratio given is kept
    for kind in ("fifo", "firo"):
        assert TrainingArguments(buffer=kind).buffer_config().sample_to_insert_ratio is None
        assert TrainingArguments(buffer=kind, sample_to_insert_ratio=0).buffer_config(
        ).sample_to_insert_ratio is None  # fmt: skip
    off = TrainingArguments(sample_to_insert_ratio=0).buffer_config()
    assert off.sample_to_insert_ratio is None and off.resolved_tolerance is None
    assert TrainingArguments(sample_to_insert_ratio=4).buffer_config().sample_to_insert_ratio == 4
    # the default never exceeds max_sample_reuse (a ratio above it is an error)
    assert TrainingArguments(max_sample_reuse=3).buffer_config().sample_to_insert_ratio == 3.0
    assert TrainingArguments(max_sample_reuse=64).buffer_config().sample_to_insert_ratio == 16.0
    # the unset ratio is kept unset: a configuration file written from it stays portable
    assert TrainingArguments().to_dict()["sample_to_insert_ratio"] is None


def test_every_field_is_documented() -> None:
    doc = TrainingArguments.__doc__ or ""
    for f in dataclasses.fields(TrainingArguments):
        assert f.metadata.get("help"), f.name
        assert f"{f.name}:" in doc, f.name


@pytest.mark.parametrize(
    "name",
    [
        "batch_size",
        "gradient_accumulation_steps",
        "logging_steps",
        "buffer_size",
        "stop_sync_steps",
        "max_to_keep",
        "pseudo_epochs",
        "watermark",
    ],
)
@pytest.mark.parametrize("value", [0, -3])
def test_non_positive_values(name: str, value: int) -> None:
    err = config_error(**{name: value})
    assert f"{name}={value}" in str(err)
    assert f"set {name} >= 1" in str(err)
    assert len(err.problems) == 1


@pytest.mark.parametrize(
    "name", ["max_steps", "eval_steps", "save_steps", "early_stopping_patience"]
)
def test_optional_steps_must_be_positive_when_set(name: str) -> None:
    err = config_error(**{name: 0})
    assert f"{name}=0" in str(err) and "leave it unset (None)" in str(err)
    assert getattr(TrainingArguments(**{name: 5}), name) == 5  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "value", "choices"),
    [
        ("buffer", "lifo", "fifo, firo, reservoir"),
        ("mixed_precision", "fp8", "no, fp16, bf16"),
        ("report_to", "wandb", "tensorboard, none"),
    ],
)
def test_unknown_choices_list_the_valid_ones(name: str, value: str, choices: str) -> None:
    err = config_error(**{name: value})
    assert f"{name}={value!r}" in str(err) and choices in str(err)


def test_choices_are_normalised_to_lower_case() -> None:
    args = TrainingArguments(buffer=" Reservoir", mixed_precision="BF16", report_to="None")
    assert (args.buffer, args.mixed_precision, args.report_to) == ("reservoir", "bf16", "none")


def test_watermark_and_batch_size_against_buffer_size() -> None:
    err = config_error(watermark=200, buffer_size=100, batch_size=8)
    assert str(err).endswith(
        "watermark=200 is larger than buffer_size=100: lower watermark or raise buffer_size"
    )
    err = config_error(batch_size=128, buffer_size=100)
    assert "batch_size=128 is larger than buffer_size=100" in str(err)
    assert "lower batch_size or raise buffer_size" in str(err)
    TrainingArguments(watermark=100, buffer_size=100, batch_size=100)  # equal is fine


@pytest.mark.parametrize(
    ("name", "value"),
    [("max_sample_reuse", 2), ("sample_to_insert_ratio", 1.0), ("sample_to_insert_tolerance", 9.0)],
)
@pytest.mark.parametrize("buffer", ["fifo", "firo"])
def test_reservoir_only_options(name: str, value: float, buffer: str) -> None:
    err = config_error(buffer=buffer, **{name: value})
    assert f"{name}={value!r} only applies to buffer='reservoir'" in str(err)
    assert "set buffer='reservoir'" in str(err)
    assert f"{name}=None (on a command line: --{name} None)" in str(err)  # the fix, exactly


def test_reservoir_options_and_resolved_tolerance() -> None:
    args = TrainingArguments(
        buffer="reservoir", max_sample_reuse=3, sample_to_insert_ratio=2.0, watermark=100
    )
    # max(4 * 32 * 1, 2.0 * 100 + 32)
    assert args.buffer_config().resolved_tolerance == 232.0
    args = TrainingArguments(buffer="reservoir", sample_to_insert_ratio=1.0, batch_size=8,
                             gradient_accumulation_steps=4)  # fmt: skip
    assert args.buffer_config().resolved_tolerance == 128.0
    args = TrainingArguments(
        buffer="reservoir", sample_to_insert_ratio=1.0, sample_to_insert_tolerance=33
    )
    assert args.buffer_config().resolved_tolerance == 33.0
    # pseudo-epochs with a reservoir are allowed (it replays its retained subset)
    assert TrainingArguments(buffer="reservoir", pseudo_epochs=3).pseudo_epochs == 3


def test_ratio_and_tolerance_errors() -> None:
    for ratio in (-1e-3, -1.5):
        err = config_error(buffer="reservoir", sample_to_insert_ratio=ratio)
        assert f"sample_to_insert_ratio={float(ratio)!r} must be >= 0" in str(err)
        assert "0 for no rate limit" in str(err)
    err = config_error(
        buffer="reservoir", sample_to_insert_ratio=2.0, sample_to_insert_tolerance=10
    )
    assert "sample_to_insert_tolerance=10.0 is too small" in str(err)
    # batch 32 and watermark 1: the first read needs 2 * (32 - 1) = 62 > 2 + 32
    assert ">= max(ratio + batch_size, ratio * (batch_size - watermark)) = 62" in str(err)
    err = config_error(buffer="reservoir", sample_to_insert_ratio=2.0, watermark=32,
                       buffer_size=64, sample_to_insert_tolerance=10)  # fmt: skip
    assert "= 34, raise watermark" in str(err)
    err = config_error(buffer="reservoir", sample_to_insert_ratio=0, sample_to_insert_tolerance=50)
    assert "has no effect without sample_to_insert_ratio" in str(err)
    # unset, the reservoir's default ratio is there for the tolerance to apply to
    tolerant = TrainingArguments(sample_to_insert_tolerance=600)
    assert tolerant.buffer_config().resolved_tolerance == 600.0
    err = config_error(buffer="reservoir", sample_to_insert_ratio=3, max_sample_reuse=2)
    assert "sample_to_insert_ratio=3.0 is larger than max_sample_reuse=2" in str(err)
    assert "raise max_sample_reuse" in str(err)
    err = config_error(buffer="reservoir", max_sample_reuse=0)
    assert "max_sample_reuse=0 must be a positive integer" in str(err)


def test_misc_checks() -> None:
    assert "seed=-1" in str(config_error(seed=-1))
    assert "output_dir=''" in str(config_error(output_dir=""))
    assert "metric_for_best_model" in str(config_error(metric_for_best_model=" "))
    assert "resume_from_checkpoint=''" in str(config_error(resume_from_checkpoint=""))
    assert TrainingArguments(early_stopping_patience=2).early_stopping_patience == 2


def test_on_save_error_is_checked_early() -> None:
    assert TrainingArguments().on_save_error == "stop"
    assert TrainingArguments(on_save_error="Continue").on_save_error == "continue"
    with pytest.raises(
        ConfigError, match="on_save_error='ignore' is not supported: choose one of stop, continue"
    ):
        TrainingArguments(on_save_error="ignore")


def test_draw_choices_reach_the_buffer_and_are_checked() -> None:
    assert TrainingArguments().buffer_config().draw_choices == 1  # uniform draws
    assert TrainingArguments(draw_choices=2).buffer_config().draw_choices == 2
    assert "draw_choices=0 must be a positive integer" in str(config_error(draw_choices=0))
    err = config_error(buffer="fifo", draw_choices=2)
    assert "draw_choices=2 only applies to buffer='reservoir'" in str(err)
    assert "or draw_choices=1" in str(err)
