"""The neural-operator how-to's "Predict with the trained model" runs as written (a user
trial, htrial12: the page trained the FNO and served it while training, but never said
how to use the trained model afterwards; htrial13: the run's folder did not record the
model's flags, which the block repeated by hand).

The block is taken from the page and run, from a folder where a tiny run of the example
wrote `outputs/navier_stokes` with flags other than the defaults, against its last
checkpoint: it names none of them, its record (`model_flags.json`) has them. The oracle
is the trained model itself (kept by a hook at the end of training): its predictions on
the same inputs, built by the example's `features`. The block builds its own model, from
another random initialisation, so only the loaded weights can make them equal."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch

# examples/ is on the tests' sys.path (pyproject)
from navier_stokes import train

from melissa_trainer.hooks.hook import Hook

PAGE = Path(__file__).parents[2] / "docs" / "how-to" / "neural-operator.md"
HEADING = "## Predict with the trained model"
TINY = [
    "--num_simulations", "6", "--time_steps", "10", "--grid_size", "32", "--dt", "0.05",
    "--width", "8", "--modes", "6", "--layers", "2",
    "--num_validation", "1", "--buffer_size", "60", "--watermark", "16", "--batch_size", "8",
    "--eval_steps", "none", "--logging_steps", "100", "--job_limit", "2",
    "--disable_progress_bar", "--no_plot", "--output_dir", "outputs/navier_stokes",
]  # fmt: skip


class KeepModel(Hook):
    """Keeps the trained model as training ends (the trainer's, after its last step)."""

    model: torch.nn.Module

    def on_train_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.model = trainer.model


def snippet() -> str:
    """The section's python block, as the page has it."""
    section = PAGE.read_text(encoding="utf-8").split(HEADING, 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None, f"no python block under {HEADING!r}"
    return found[1]


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_page_s_block_predicts_what_the_trained_model_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the block's paths are relative to where it runs
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    kept = KeepModel()
    summary = train.main(TINY, hooks=[kept])
    trained = kept.model.eval()
    record = tmp_path / "outputs" / "navier_stokes" / "checkpoints" / "model_flags.json"
    assert json.loads(record.read_text()) == {
        "model": "fno", "width": 8, "modes": 6, "layers": 2, "grid_size": 32,
        "time_steps": 10, "interval": 0.5, "channels": train.CHANNELS,
    }  # fmt: skip

    torch.manual_seed(1)  # the block's own model starts from other weights
    namespace: dict = {"__name__": "predict"}
    exec(compile(snippet(), str(PAGE), "exec"), namespace)

    assert namespace["path"].name == f"checkpoint-{summary['steps']}"
    parameters, initial = namespace["parameters"], namespace["initial"]
    n, time_steps = namespace["n"], namespace["time_steps"]
    assert (n, time_steps) == (32, 10)  # the run's, read from its record
    assert initial.shape == (1, n, n) and len(namespace["omega"]) == time_steps
    with torch.no_grad():
        for s, predicted in enumerate(namespace["omega"]):
            expected = trained(train.features(parameters, torch.tensor([s]), initial, time_steps))
            assert predicted.shape == (1, 1, n, n)
            assert torch.equal(predicted, expected), f"time step {s}"
