"""A training `ServingHook` whose `process_outputs` gives what the wire cannot carry as
it is: a real trainer process serving a client (the test) over its serving socket.

* A strided output (``out[:, ::2]``: each request's row is not contiguous) used to
  raise ``array 'y' is not C-contiguous`` in the answer, outside the hook's handling of
  the user's failures: in the idle thread (which died: no more idle serving) and at the
  next STEP_END (the run ended with the traceback). The client timed out. It is now
  answered: the row, copied into C order.
* An output the PREDICTION cannot carry at all (a name over 255 bytes) ended the run
  the same way; it is now refused ``failed`` (the detail names the output), every
  time, while training goes on and ends normally.

Oracle: the model is built from a seed and trained with a learning rate of 0, so the
test evaluates the same weights itself. The test waits on events (the serve file, the
answers, the trainer's exit), never on sleeps.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from waiting import wait_until

from melissa_trainer.client import Predictor, PredictRefused

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).parents[2]

TRAINER = r"""
import sys
from pathlib import Path

import numpy as np
import torch

from melissa_trainer import Hook, OnlineTrainer, ServingHook, TrainingArguments

out_dir, rendezvous, mode = sys.argv[1:4]
OUTPUTS = {
    "strided": lambda out: {"y": out[:, ::2]},  # rows of stride 2: not contiguous
    "long_name": lambda out: {"y" * 256: out},  # a name the wire cannot carry
}


class StopOnFile(Hook):
    # training runs until the test says stop (a file), then ends normally
    def on_step_end(self, trainer, state, control):
        if Path(out_dir, "stop").exists():
            control.should_stop = True


def samples():
    rng = np.random.default_rng(0)
    for _ in range(1_000_000):
        yield {"x": rng.standard_normal(3).astype(np.float32)}


torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Linear(3, 8)
serving = ServingHook(
    {"x": ((3,), "float32")},
    process_outputs=OUTPUTS[mode],
    bind="tcp://127.0.0.1:*",
    rendezvous_dir=rendezvous,
)
args = TrainingArguments(
    output_dir=out_dir, batch_size=4, buffer="fifo", report_to="none",
    disable_progress_bar=True, save_at_end=False, stop_sync_steps=1,
)
trainer = OnlineTrainer(
    model, args, torch.optim.SGD(model.parameters(), lr=0.0),  # the weights stay the seed's
    train_source=samples(),
    process_sample=lambda s: (torch.from_numpy(s["x"]), torch.zeros(8)),
    hooks=[serving, StopOnFile()],
)
state = trainer.train()
print("trained", state.global_step, "steps;", serving.telemetry(), flush=True)
"""


def start_trainer(tmp_path: Path, mode: str) -> subprocess.Popen[str]:
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "out"), str(tmp_path / "rv"), mode],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip


def serving(proc: subprocess.Popen[str], tmp_path: Path) -> None:
    """Return once the trainer has published its endpoint in the rendezvous directory.
    Its start-up (torch's import) is waited for here, not in the first request's
    `timeout` (60 s at load 24 was not enough: the directory did not exist yet)."""
    rendezvous = tmp_path / "rv"
    wait_until(
        lambda: rendezvous.is_dir() and any(rendezvous.iterdir()),
        "the trainer's serving entry",
        timeout=180,
        procs=[proc],
    )


def served(client: Predictor, inputs: dict[str, np.ndarray]) -> Any:
    """`client.predict(inputs)` once the trainer serves: a request refused as
    ``not_serving`` (before its first step: the trainer publishes its endpoint at its
    start) is sent again, for 120 s at most. Under load the first request came before
    the first step, and its refusal was taken for the test's."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return client.predict(inputs, timeout=60)
        except PredictRefused as refused:
            if refused.reason != "not_serving" or time.monotonic() > deadline:
                raise
        time.sleep(0.05)  # (a poll: nothing tells a client of the first step)


def finish(proc: subprocess.Popen[str], tmp_path: Path) -> str:
    """Ask the trainer to stop, and return its output once it exited (killed if it
    does not within the bound: the test then fails on its output)."""
    # (made if the trainer has not yet: a failure before it started then reads as itself)
    (tmp_path / "out").mkdir(parents=True, exist_ok=True)
    (tmp_path / "out" / "stop").touch()
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


def expected(x: np.ndarray) -> np.ndarray:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 8)
    with torch.no_grad():
        return model(torch.from_numpy(x)[None])[0].numpy()


@pytest.mark.timeout(300)
def test_a_strided_output_is_answered_and_training_goes_on(tmp_path: Path) -> None:
    trainer = start_trainer(tmp_path, "strided")
    answers = []
    try:
        serving(trainer, tmp_path)
        with Predictor(0, rendezvous_dir=tmp_path / "rv") as client:
            for i in range(5):  # (the idle thread and the step ends answer alike)
                x = np.array([i, -1.0, 0.5], np.float32)
                answers.append((x, served(client, {"x": x})))
    finally:
        out = finish(trainer, tmp_path)
    assert trainer.returncode == 0, out
    assert "not C-contiguous" not in out
    for x, (outputs, _version) in answers:
        np.testing.assert_allclose(outputs["y"], expected(x)[::2], rtol=1e-6)


@pytest.mark.timeout(300)
def test_an_output_the_wire_cannot_carry_is_refused_failed_and_training_goes_on(
    tmp_path: Path,
) -> None:
    trainer = start_trainer(tmp_path, "long_name")
    refusals = []
    try:
        serving(trainer, tmp_path)
        with Predictor(0, rendezvous_dir=tmp_path / "rv") as client:
            for _ in range(3):
                with pytest.raises(PredictRefused) as refused:
                    served(client, {"x": np.ones(3, np.float32)})
                refusals.append(refused.value)
    finally:
        out = finish(trainer, tmp_path)
    assert trainer.returncode == 0, out
    for exc in refusals:
        assert exc.reason == "failed", (exc.reason, exc.detail)
        assert "process_outputs: the outputs cannot be sent" in exc.detail
        assert "name of 1 to 255 bytes" in exc.detail
    assert "'refused_failed': 3" in out
    # the first failure is logged in full, the others counted: in the summary of their
    # period, which counts the one in full too (a period lasts 30 s: a loaded machine may
    # start a second one, whose first failure is in full again)
    full = out.count("serving: the inference of")
    summaries = [int(n) for n in re.findall(r"failed (\d+) inferences? \(ValueError: ", out)]
    assert full >= 1 and sum(summaries) + full - len(summaries) == 3, out
