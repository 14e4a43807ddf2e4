"""Gradient clipping, ``max_grad_norm`` (user trial 5, F5: there was none, nor a logged
grad norm). Each update clips the gradients as ``torch.nn.utils.clip_grad_norm_`` does
(the oracle here: a copy of the model trained by hand on the same batch), in both train
steps; the logs hold ``grad_norm``, the mean norm before clipping, read with the other
figures (no host wait per step, counted as tests/trainer/test_sync_count.py does);
unset, nothing changes."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType
from held_ports import held_port
from helpers import Recorder, linear_samples, small_model, xy
from process_tree import run_group
from sync_counter import StepSyncs, SyncCounter

from melissa_trainer import ArgumentParser, Hook, OnlineTrainer, TrainerState, TrainingArguments
from melissa_trainer.config.reading import ConfigError
from melissa_trainer.core.accelerated import AcceleratedStep, PlainStep, make_train_step

pytestmark = pytest.mark.timeout(120)

CLIP = 0.05  # well under the first steps' norms (about 1 to 10): every step clips


class Batches(Hook):
    """Keeps a copy of every batch the trainer trains on, in order."""

    def __init__(self) -> None:
        self.batches: list[tuple[torch.Tensor, torch.Tensor]] = []

    def on_batch_ready(self, trainer: Any, state: TrainerState, control: Any, batch: Any) -> None:
        self.batches.append((batch[0].clone(), batch[1].clone()))


def _train(tmp_path: Path, steps: int, **overrides: Any) -> tuple[OnlineTrainer, Batches, Recorder]:
    values: dict[str, Any] = dict(
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        report_to="none",
        disable_progress_bar=True,
        save_at_end=False,
        max_steps=steps,
        logging_steps=2,
    )
    values.update(overrides)
    model = small_model(0)
    batches, rec = Batches(), Recorder()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(**values),
        torch.optim.SGD(model.parameters(), lr=0.1),
        train_source=list(linear_samples(8 * steps * values.get("gradient_accumulation_steps", 1))),
        process_sample=xy,
        hooks=[batches, rec],
    )
    trainer.train()
    return trainer, batches, rec


def _oracle(batches: list[tuple[torch.Tensor, torch.Tensor]], micro: int, clip: float | None):
    """small_model(0) trained by hand on `batches` (`micro` per step), clipped with
    torch's `clip_grad_norm_` when `clip` is set; its weights and each step's norm."""
    model = small_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    norms = []
    for start in range(0, len(batches), micro):
        for x, y in batches[start : start + micro]:
            loss = torch.nn.functional.mse_loss(model(x), y)
            (loss / micro if micro > 1 else loss).backward()
        if clip is not None:
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip)))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return [p.detach() for p in model.parameters()], norms


def _weights(trainer: OnlineTrainer) -> list[torch.Tensor]:
    return [p.detach() for p in trainer.accelerator.unwrap_model(trainer.model).parameters()]


@pytest.mark.parametrize("micro", [1, 2])
def test_clipping_is_torch_s_and_its_norm_is_logged(tmp_path: Path, micro: int) -> None:
    trainer, batches, rec = _train(
        tmp_path, 4, max_grad_norm=CLIP, gradient_accumulation_steps=micro
    )
    assert isinstance(trainer._step, PlainStep)
    assert len(batches.batches) == 4 * micro
    weights, norms = _oracle(batches.batches, micro, CLIP)
    for mine, theirs in zip(_weights(trainer), weights, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-6, atol=1e-7)
    assert min(norms) > CLIP  # every step clipped: the option did something
    unclipped, _ = _oracle(batches.batches, micro, None)
    assert not all(torch.allclose(a, b) for a, b in zip(_weights(trainer), unclipped, strict=True))
    logged = [log["grad_norm"] for log in rec.logs]
    assert len(logged) == 2  # logs at steps 2 and 4, each the mean of its two steps
    for got, pair in zip(logged, (norms[:2], norms[2:]), strict=True):
        assert math.isclose(got, sum(pair) / 2, rel_tol=1e-5)
    assert [log["grad_norm"] for log in trainer.state.log_history if "grad_norm" in log] == logged


def test_unset_clips_nothing_and_logs_no_norm(tmp_path: Path) -> None:
    trainer, batches, rec = _train(tmp_path, 4)
    assert trainer._step.grad_norms is None
    weights, _ = _oracle(batches.batches, 1, None)
    for mine, theirs in zip(_weights(trainer), weights, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-6, atol=1e-7)
    assert rec.logs and not any("grad_norm" in log for log in rec.logs)


def test_accelerate_s_step_clips_as_torch_does() -> None:
    """`AcceleratedStep` (Accelerate's accumulate, autocast, backward and
    `clip_grad_norm_`), driven directly: the same gradients as the oracle's."""
    acc = Accelerator(cpu=True, gradient_accumulation_steps=2)
    model = small_model(0)
    prepared, optimizer = acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    step = AcceleratedStep(
        acc,
        prepared,
        optimizer,
        None,
        lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1]),
        max_grad_norm=CLIP,
    )
    batches = [xy(s) for s in linear_samples(16)]
    batches = [
        (torch.stack([b[0] for b in batches[i::2]]), torch.stack([b[1] for b in batches[i::2]]))
        for i in range(2)
    ]
    for batch in batches:
        step.backward(batch)
    step.update()
    weights, norms = _oracle(batches, 2, CLIP)
    for mine, theirs in zip(prepared.parameters(), weights, strict=True):
        torch.testing.assert_close(mine.detach(), theirs, rtol=1e-6, atol=1e-7)
    assert step.grad_norms is not None and step.grad_norms.count == 1
    assert math.isclose(float(step.grad_norms.sum), norms[0], rel_tol=1e-5)


def test_clipping_adds_no_host_wait_per_step(tmp_path: Path) -> None:
    """The budget of test_sync_count.py's one-process test, with clipping on: nothing
    inside a step or between steps; each log its two reads, the norm read with them."""
    counter = SyncCounter()
    steps = StepSyncs(counter)
    model = small_model(0)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), batch_size=8, buffer="fifo", buffer_size=64,
        logging_steps=6, report_to="none", save_at_end=False, stop_sync_steps=4,
        max_steps=16, max_grad_norm=1.0, disable_progress_bar=True,
    )  # fmt: skip
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(16 * 8 * 2)),
        process_sample=xy,
        hooks=[steps],
    )
    with counter:
        trainer.train()
    assert steps.inside == dict.fromkeys(range(1, 17), 0), counter.describe()
    expected = {s: 2 if s in (6, 12) else 0 for s in range(1, 16)}
    assert steps.between == expected, counter.describe()
    assert all("grad_norm" in log for log in trainer.state.log_history if "loss" in log)


def test_clipping_with_a_compiled_step(tmp_path: Path) -> None:
    """The compiled model (its forward and backward) gives the gradients; the update,
    clipping included, stays eager: the same weights as the eager run's, closely."""
    eager, batches, _ = _train(tmp_path / "eager", 2, max_grad_norm=CLIP)
    compiled, batches_c, rec = _train(
        tmp_path / "compiled", 2, max_grad_norm=CLIP, torch_compile_backend="aot_eager"
    )
    assert compiled.args.torch_compile
    for a, b in zip(_weights(eager), _weights(compiled), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert math.isfinite(rec.logs[-1]["grad_norm"])


def test_a_hook_figure_named_grad_norm_is_refused_while_clipping(tmp_path: Path) -> None:
    class Mine(Hook):
        def log_figures(self, trainer: Any) -> dict[str, float]:
            return {"grad_norm": 1.0}

    model = small_model(0)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), batch_size=8, buffer="fifo", report_to="none",
        disable_progress_bar=True, save_at_end=False, max_steps=2, logging_steps=1,
        max_grad_norm=1.0,
    )  # fmt: skip
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.1),
        train_source=list(linear_samples(32)),
        process_sample=xy,
        hooks=[Mine()],
    )
    with pytest.raises(ValueError, match="'grad_norm' is one of the trainer's own"):
        trainer.train()


def test_deepspeed_is_refused_naming_its_own_setting() -> None:
    acc = SimpleNamespace(
        mixed_precision="no", device=torch.device("cpu"), distributed_type=DistributedType.DEEPSPEED
    )
    with pytest.raises(ConfigError, match="set gradient_clipping in the DeepSpeed config"):
        make_train_step(acc, torch.nn.Linear(2, 1), None, None, lambda m, b: b, max_grad_norm=1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("0", "max_grad_norm=0.0 must be > 0"),
        ("-1", "max_grad_norm=-1.0 must be > 0"),
        ("inf", "'inf' is not finite"),
    ],
)
def test_a_bad_max_grad_norm_is_a_usage_error_naming_it(
    value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(["--max_grad_norm", value])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --max_grad_norm: {said}" in err, err


def test_the_flag_and_its_default() -> None:
    parser = ArgumentParser(TrainingArguments)
    (args,) = parser.parse_args_into_dataclasses(["--max_grad_norm", "1"])
    assert args.max_grad_norm == 1.0
    (args,) = parser.parse_args_into_dataclasses(["--max_grad_norm", "none"])
    assert args.max_grad_norm is None and TrainingArguments().max_grad_norm is None


TWO_RANKS = """
import json, sys
import torch
sys.path.insert(0, {tests!r})
from helpers import linear_samples, small_model, xy
from melissa_trainer import ArgumentParser, OnlineTrainer, TrainingArguments
(args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
torch.set_num_threads(1)
model = small_model(0)
trainer = OnlineTrainer(model, args, torch.optim.SGD(model.parameters(), lr=0.1),
                        train_source=lambda rank, world: list(linear_samples(64, seed=rank)),
                        process_sample=xy)
trainer.train()
weights = [p.detach().flatten().tolist() for p in trainer.model.parameters()]
norms = [log["grad_norm"] for log in trainer.state.log_history if "grad_norm" in log]
out = {{"norms": norms, "weights": weights, "step": trainer.state.global_step}}
with open(f"{{args.output_dir}}/rank_{{trainer.process_index}}.json", "w") as f:
    json.dump(out, f)
"""


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_two_ranks_clip_the_same_synced_gradients(tmp_path: Path) -> None:
    """Two ranks (gloo), each on its own data: the norm each logs is the synced
    gradients' (the same on both), and the weights stay the same on both."""
    script = tmp_path / "two.py"
    script.write_text(TWO_RANKS.format(tests=str(Path(__file__).parents[1])))
    out = tmp_path / "out"
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    cmd = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    cmd += ["--mixed_precision", "no", "--dynamo_backend", "no"]
    cmd += ["--main_process_port", str(held_port())]
    cmd += [str(script), "--output_dir", str(out), "--batch_size", "8", "--buffer", "fifo"]
    cmd += ["--report_to", "none", "--disable_progress_bar", "--max_steps", "6"]
    cmd += ["--logging_steps", "2", "--save_at_end", "false", "--max_grad_norm", str(CLIP)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU on any machine
    proc = run_group(cmd, timeout=200, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads((out / f"rank_{r}.json").read_text()) for r in range(2)]
    assert [r["step"] for r in ranks] == [6, 6]
    assert len(ranks[0]["norms"]) == 3 and all(n > CLIP for n in ranks[0]["norms"])
    assert ranks[0]["norms"] == ranks[1]["norms"]  # (the logs are reduced: the same dict)
    assert ranks[0]["weights"] == ranks[1]["weights"]
