"""The Navier–Stokes example records the flags that rebuild its model beside its
checkpoints (``OUTPUT_DIR/checkpoints/model_flags.json``), refuses a resume whose
command line says otherwise, naming each flag and both values, and rebuilds the
trained model from the record (`model_flags.load_trained`). A user trial (htrial13):
the run's folder did not record them, and the how-to's predict block repeated them by
hand. The whole path on a tiny run: tests/docs/test_neural_operator_predict.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

# examples/ is on the tests' sys.path (pyproject)
from navier_stokes import model_flags, train
from navier_stokes.models import make_model
from safetensors.torch import load_model, save_model

from melissa_trainer.config.reading import ConfigError

pytestmark = pytest.mark.timeout(120)

FLAGS = ["--grid_size", "16", "--modes", "4", "--width", "8", "--layers", "2",
         "--time_steps", "5", "--interval", "0.25"]  # fmt: skip


def record(flags: list[str], model: str | None = None) -> dict:
    _, opts = train.parser(flags).parse_args_into_dataclasses(flags)
    own = model is not None
    return model_flags.record_of(opts, model or opts.model, own, train.CHANNELS)


def a_run(tmp_path: Path, flags: list[str]) -> Path:
    """An output folder as a run of `flags` leaves it: a checkpoint of its model's
    weights and the record."""
    root = model_flags.checkpoint_folder(tmp_path / "out")
    (root / "checkpoint-5").mkdir(parents=True)
    r = record(flags)
    model = make_model(r["model"], r["channels"], r.get("width", 1), r.get("modes", 1),
                       r.get("layers", 1))  # fmt: skip
    save_model(model, str(root / "checkpoint-5" / "model.safetensors"))
    model_flags.write_flags(root, r)
    return root


def test_the_record_holds_each_model_s_flags_and_the_inputs() -> None:
    assert record(FLAGS) == {
        "model": "fno", "width": 8, "modes": 4, "layers": 2,
        "grid_size": 16, "time_steps": 5, "interval": 0.25, "channels": 4,
    }  # fmt: skip
    assert record([*FLAGS, "--model", "unet"]) == {
        "model": "unet", "width": 8, "grid_size": 16, "time_steps": 5, "interval": 0.25,
        "channels": 4,
    }  # fmt: skip
    assert record(FLAGS, model="MyOperator") == {
        "model": "MyOperator", "own_model": True, "grid_size": 16, "time_steps": 5,
        "interval": 0.25, "channels": 4,
    }  # fmt: skip


def test_it_is_written_aside_and_renamed(tmp_path: Path) -> None:
    path = model_flags.write_flags(tmp_path / "checkpoints", {"model": "fno"})
    assert json.loads(path.read_text()) == {"model": "fno"}
    assert sorted(p.name for p in path.parent.iterdir()) == [model_flags.FILE]
    model_flags.write_flags(tmp_path / "checkpoints", {"model": "unet"})  # replaced whole
    assert model_flags.read_flags(tmp_path / "checkpoints") == {"model": "unet"}


@pytest.mark.parametrize(
    ("changed", "said"),
    [
        (["--width", "12"], "--width 8 in the run, 12 in this command"),
        (["--time_steps", "10"], "--time_steps 5 in the run, 10 in this command"),
        (["--grid_size", "32"], "--grid_size 16 in the run, 32 in this command"),
        (
            ["--model", "unet"],
            "--model fno in the run, unet in this command; --modes 4 in the "
            "run, unset in this command",
        ),
    ],  # fmt: skip
    ids=["width", "time_steps", "grid_size", "model"],
)
def test_a_resume_with_other_flags_is_refused_naming_each_and_both_values(
    tmp_path: Path, changed: list[str], said: str
) -> None:
    root = a_run(tmp_path, FLAGS)
    with pytest.raises(ConfigError) as info:
        model_flags.check_resume("latest", root, record([*FLAGS, *changed]))
    assert said in str(info.value), str(info.value)
    assert str(root / model_flags.FILE) in str(info.value)
    # a checkpoint named by its path: the record beside it
    with pytest.raises(ConfigError):
        model_flags.check_resume(str(root / "checkpoint-5"), tmp_path, record([*FLAGS, *changed]))


def test_what_is_not_refused(tmp_path: Path) -> None:
    root = a_run(tmp_path, FLAGS)
    model_flags.check_resume("latest", root, record(FLAGS))  # the same flags
    model_flags.check_resume(None, root, record([*FLAGS, "--width", "12"]))  # no resume
    # "latest" where there is no checkpoint yet starts afresh: a record alone is no run
    for child in root.iterdir():
        if child.is_dir():
            (child / "model.safetensors").unlink()
            child.rmdir()
    model_flags.check_resume("latest", root, record([*FLAGS, "--width", "12"]))
    model_flags.check_resume("latest", tmp_path / "none", record(FLAGS))  # no record


def test_the_example_refuses_such_a_resume_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    root = a_run(tmp_path, FLAGS)
    argv = [*FLAGS, "--width", "12", "--output_dir", str(root.parent), "--no_plot",
            "--resume_from_checkpoint", "latest"]  # fmt: skip
    with pytest.raises(ConfigError, match="--width 8 in the run, 12 in this command"):
        train.main(argv)
    assert sorted(p.name for p in root.parent.iterdir()) == ["checkpoints"]  # nothing started


def test_load_trained_rebuilds_the_model_from_the_record(tmp_path: Path) -> None:
    root = a_run(tmp_path, [*FLAGS, "--model", "unet"])
    trained = model_flags.load_trained(root.parent)
    assert trained.checkpoint == root / "checkpoint-5" and trained.flags["model"] == "unet"
    assert not trained.model.training
    expected = make_model("unet", 4, 8, 1, 1)
    load_model(expected, str(root / "checkpoint-5" / "model.safetensors"))
    x = torch.randn(1, 4, 16, 16)
    with torch.no_grad():
        assert torch.equal(trained.model(x), expected.eval()(x))


def test_load_trained_says_what_it_cannot_rebuild(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no record of the run's model flags"):
        model_flags.load_trained(tmp_path)
    model_flags.write_flags(model_flags.checkpoint_folder(tmp_path), record(FLAGS, "MyOperator"))
    with pytest.raises(ValueError, match="a model of your own, MyOperator"):
        model_flags.load_trained(tmp_path)
