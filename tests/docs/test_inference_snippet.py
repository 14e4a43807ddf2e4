"""The recipe "Loading the trained model for inference" (docs/resume.md) runs as written:
a user trial found the only way to load a final model shown inside the scheduler
recipe. The block is taken from the page and run against the checkpoint of a tiny run;
the oracle is the trained model itself, its predictions on the same inputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments

PAGE = Path(__file__).parents[2] / "docs" / "resume.md"
HEADING = "## Loading the trained model for inference"


def snippet() -> str:
    """The section's first python block, as the page has it."""
    section = PAGE.read_text(encoding="utf-8").split(HEADING, 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None, f"no python block under {HEADING!r}"
    return found[1]


@pytest.mark.timeout(120)
def test_the_page_s_snippet_loads_the_last_checkpoint_s_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the snippet's "out/checkpoints" is relative
    args = TrainingArguments(
        output_dir="out", report_to="none", disable_progress_bar=True, batch_size=8, seed=0
    )
    trained = small_model(0)
    trainer = OnlineTrainer(
        trained, args, torch.optim.Adam(trained.parameters(), lr=1e-2),
        train_source=list(linear_samples(64)), process_sample=xy,
    )  # fmt: skip
    state = trainer.train()
    inputs = torch.linspace(-1, 1, 12).reshape(4, 3)
    with torch.no_grad():
        expected = trained(inputs)
    fresh = small_model(1)  # another initialisation: only the loaded weights can match
    with torch.no_grad():
        assert not torch.allclose(fresh(inputs), expected)
    namespace = {"build_model": lambda: fresh, "inputs": inputs}
    exec(compile(snippet(), str(PAGE), "exec"), namespace)
    assert namespace["path"] == Path("out/checkpoints") / f"checkpoint-{state.global_step}"
    assert torch.equal(namespace["prediction"], expected)
    assert not namespace["model"].training  # put in eval mode
