"""Non-finite data and losses are caught: a study where one simulation sends NaN from
step 100 on, under each `ReceiverConfig.nonfinite` policy, with real simulation
processes streaming to an `OnlineTrainer` (as tests/trainer/test_study.py does).

Oracles, independent of the receiver: the simulation script decides which steps hold
NaN (its options), so the expected refusals, the keys trained on and the first step
trained on a NaN sample (from the order `process_sample` saw the samples in, one
sample per step) are known; checkpoints are read back from disk with safetensors.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import Keys
from safetensors.numpy import load_file

from melissa_trainer import (
    NonFiniteLossError,
    OnlineTrainer,
    ReceiverConfig,
    SourceError,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend, UniformSampler
from melissa_trainer.launcher.simulation_record import records_of

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
]

SIMULATIONS, STEPS, NAN_SIM, NAN_FROM = 3, 130, 1, 100

SIMULATION = r"""
import json, os, sys, time
import numpy as np
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.stream.endpoints import fetch_rendezvous

options = json.loads(os.environ["SIM_OPTIONS"])
sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
params = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])
# one record per message when the test counts records from messages (see its oracle)
tuning = ClientTuning(batch_bytes=0) if options.get("crash_at_end") else None
# A restart given its endpoints, not the rendezvous, cannot ask its receivers which steps
# they hold (HELD, docs/protocol.md section 17): it sends every step again, as a solver
# started with MELISSA_TRAINER_ENDPOINTS or one of an older trainer does.
endpoints = None
if attempt > 0 and options.get("crash_at_end"):
    rendezvous = fetch_rendezvous(os.environ["MELISSA_TRAINER_RENDEZVOUS"])
    endpoints = [str(e["endpoint"]) for e in rendezvous]
fields = {"x": ((3,), "float32"), "y": ((1,), "float32")}
with Client(fields, endpoints=endpoints, tuning=tuning) as client:
    for t in range(options["steps"]):
        x = np.array([params["a"], params["b"], t / 100], np.float32)
        if sid == options["nan_sim"] and t >= options["nan_from"]:
            x[1] = np.nan  # the solver diverged
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
    if sid == options["nan_sim"] and options.get("linger"):
        time.sleep(60)  # still running when the launcher hears of its NaN (then killed)
    if sid == options["nan_sim"] and attempt == 0 and options.get("crash_at_end"):
        client.close(bye=False)  # dies before BYE: restarted, it sends every step again
        sys.exit(1)
"""


def study(tmp_path: Path, **tuning: Any) -> Launcher:
    script = tmp_path / "sim.py"
    script.write_text(SIMULATION)
    options = {"steps": STEPS, "nan_sim": NAN_SIM, "nan_from": NAN_FROM}
    options.update(
        crash_at_end=tuning.pop("crash_at_end", False), linger=tuning.pop("linger", False)
    )
    return Launcher(
        [sys.executable, str(script)],
        UniformSampler({"a": (0.0, 1.0), "b": (-1.0, 1.0)}, seed=3),
        SIMULATIONS,
        job_limit=SIMULATIONS,
        backend=LocalBackend(),
        env={"SIM_OPTIONS": json.dumps(options)},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, **tuning),
    )


def trainer(tmp_path: Path, launcher: Launcher, keys: Keys, nonfinite: str) -> OnlineTrainer:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    return OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=1,
            buffer="fifo",  # each sample once: what the counts check
            buffer_size=64,
            logging_steps=20,
            save_steps=10,
            max_to_keep=100,
            disable_progress_bar=True,
            report_to="none",
            stop_sync_steps=4,
        ),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource(ReceiverConfig(nonfinite=nonfinite))),
        process_sample=keys,
    )


def checkpoint_weights(out: Path) -> dict[int, dict[str, np.ndarray]]:
    """Each checkpoint's model weights, read back from disk, by step."""
    found = {}
    for path in (out / "checkpoints").glob("checkpoint-*"):
        found[int(path.name.split("-")[1])] = load_file(str(path / "model.safetensors"))
    return found


def assert_all_finite(weights: dict[int, dict[str, np.ndarray]]) -> None:
    assert weights, "no checkpoint was written"
    for step, tensors in weights.items():
        for name, value in tensors.items():
            assert np.isfinite(value).all(), f"checkpoint-{step} {name} holds NaN or Inf"


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_refuse_drops_counts_and_logs_nan_samples_once_even_when_resent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Default policy: the NaN samples never reach training, are counted once (the
    simulation dies before BYE and its restart sends every step again: the refused
    steps count as received, so they are duplicates then), the run completes and no
    checkpoint holds NaN. On main the NaN reached the loss and every weight.

    The restart is given its endpoints (the script), so it cannot ask which steps its
    receiver holds and resends them all: a restart that can ask skips the held ones
    (the NaN steps among them), and nothing would be resent to refuse twice
    (tests/client/test_held_rerun_skips.py tests that skip)."""
    launcher, keys = study(tmp_path, crash_at_end=True, max_restarts=1), Keys()
    t = trainer(tmp_path, launcher, keys, ReceiverConfig().nonfinite)  # the default
    with caplog.at_level(logging.INFO, logger="melissa_trainer.stream.receiver"):
        t.train()
    assert "its rerun skipped" not in caplog.text  # (every step was resent: none skipped)
    nan_steps = STEPS - NAN_FROM
    expected = [
        (s, k) for s in range(SIMULATIONS) for k in range(STEPS) if s != NAN_SIM or k < NAN_FROM
    ]
    assert sorted(keys.seen) == expected  # every finite sample once, no NaN one
    tel = t.source.telemetry()
    assert tel["nonfinite_refused"] == nan_steps  # once, though sent twice
    assert tel["samples_put"] == len(expected)
    # Each step's second copy (of the refused steps too), two records a step (x and
    # y), is dropped once: as a duplicate, or unread (ignored_after_end) where ZeroMQ,
    # fair-queuing the connections, delivered the failed attempt's last messages after
    # the restart's BYE had ended the stream (tests/stream/test_restart_order.py forces
    # that order). Only attempt 0's messages can come after the end (the others end
    # with a BYE, and attempt 0 sends none), and each of its messages is one record
    # (batch_bytes=0, no MPI parts): every second copy is counted once, one way or the
    # other, exactly.
    assert tel["duplicates"] + tel["ignored_after_end"] == 2 * STEPS, tel
    summary = launcher.summary()
    assert (summary["finished"], summary["restarts"], summary["failed"]) == (SIMULATIONS, 1, 0)
    # the run's figures and the receiver's log say so
    assert t.state.log_history[-1]["source_nonfinite_refused"] == nan_steps
    assert f"simulation {NAN_SIM} time step {NAN_FROM}: field 'x' holds NaN or Inf" in caplog.text
    assert "refused" in caplog.text and "samples holding NaN or Inf" in caplog.text  # summary
    assert all(np.isfinite(log.get("loss", 0.0)) for log in t.state.log_history)
    assert_all_finite(checkpoint_weights(tmp_path / "out"))


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_fail_fails_the_simulation_through_the_launcher_and_the_study_raises(
    tmp_path: Path,
) -> None:
    """nonfinite="fail": the simulation is killed at its first NaN step and counts a
    failed attempt ("refused"), as a simulation that errors; with on_failure="raise"
    the study fails and training stops with an error (a script exits non-zero)."""
    launcher, keys = study(tmp_path, max_restarts=1, on_failure="raise", linger=True), Keys()
    t = trainer(tmp_path, launcher, keys, "fail")
    with pytest.raises(SourceError, match=f"simulation {NAN_SIM}"):
        t.train()
    record = records_of(launcher.state_dict())[NAN_SIM]
    assert record["status"] == "failed"
    assert record["exit_codes"] == ["refused", "refused"]  # the first try and its restart
    assert f"time step {NAN_FROM}: field 'x' holds NaN or Inf" in record["reason"]
    assert not [k for k in keys.seen if k[0] == NAN_SIM and k[1] >= NAN_FROM]
    assert_all_finite(checkpoint_weights(tmp_path / "out"))


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_accept_lets_nan_reach_the_loss_which_stops_training_at_its_step(
    tmp_path: Path,
) -> None:
    """nonfinite="accept": the NaN sample reaches the loss; training stops with an
    error naming the step and the simulation of its batch, no checkpoint is written
    from that step on, and every checkpoint on disk holds finite weights."""
    launcher, keys = study(tmp_path), Keys()
    t = trainer(tmp_path, launcher, keys, "accept")
    with pytest.raises(NonFiniteLossError) as info:
        t.train()
    first_nan = next(i for i, (s, k) in enumerate(keys.seen) if s == NAN_SIM and k >= NAN_FROM)
    step = first_nan + 1  # one sample per step, in the order process_sample saw them
    assert info.value.step == step and info.value.simulations == [NAN_SIM]
    assert f"at step {step} " in str(info.value)
    weights = checkpoint_weights(tmp_path / "out")
    assert_all_finite(weights)
    assert max(weights) == (step - 1) // 10 * 10  # the last save before the NaN step
    assert t.source.telemetry()["nonfinite_refused"] == 0  # accepted: not checked


def test_an_unknown_policy_is_refused_early_naming_the_field_and_the_choices() -> None:
    with pytest.raises(ValueError, match="nonfinite must be one of 'refuse', 'accept', 'fail'"):
        ReceiverConfig(nonfinite="drop")


@pytest.mark.timeout(60)
def test_a_non_finite_gradient_with_finite_losses_is_never_saved(tmp_path: Path) -> None:
    """The loss is finite (0) but its gradient is NaN (d|x|/dx at 0 times d sqrt/dx at
    0): the update makes the weight NaN; the checkpoint asked for at that step is not
    written and training stops with an error, although no loss was ever NaN."""

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.w * x

    class Trainer(OnlineTrainer):
        def compute_loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
            x, step = batch
            out = model(x).sum()
            if int(step[0]) < 3:
                return (out - 1.0) ** 2
            return (out - out.detach()).abs().sqrt()  # 0, with a NaN gradient

    samples = [{"x": np.ones(1, np.float32), "t": np.array(i)} for i in range(20)]
    model = Model()
    t = Trainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=1,
            buffer="fifo",
            save_steps=1,
            report_to="none",
            disable_progress_bar=True,
            logging_steps=100,
        ),  # fmt: skip
        torch.optim.SGD(model.parameters(), lr=0.1),
        train_source=samples,
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["t"])),
    )
    with pytest.raises(NonFiniteLossError, match="a weight of the model is NaN or infinite"):
        t.train()
    weights = checkpoint_weights(tmp_path / "out")
    assert sorted(weights) == [1, 2, 3]  # step 4's update (the NaN gradient) is not saved
    assert_all_finite(weights)


def _strict(line: str) -> Any:
    """`json.loads` refusing NaN and Infinity, which Python's reader would accept."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(line, parse_constant=refuse)


def test_json_output_is_valid_json_when_a_figure_is_nan() -> None:
    """The examples' --json summary line, the benchmarks' --json output and the
    trainer state go through `to_json`: NaN and Inf become null (on main the heat
    example printed ``"val_mse": NaN``, which no JSON parser but Python's reads)."""
    from melissa_trainer import TrainerState
    from melissa_trainer.common.json_output import to_json

    summary = {"val_mse": float("nan"), "study": {"x": np.float32("inf")}, "rows": [-np.inf, 1]}
    assert _strict(to_json(summary)) == {"val_mse": None, "study": {"x": None}, "rows": [None, 1]}
    state = TrainerState()
    state.log_history.append({"loss": float("nan"), "step": 1})
    assert _strict(state.to_json())["log_history"] == [{"loss": None, "step": 1}]


def test_every_json_line_of_the_examples_and_benchmarks_is_strict() -> None:
    """No example or benchmark prints or writes its JSON output with a bare json.dumps
    (which writes NaN): they use `to_json` (allow_nan=False)."""
    root = Path(__file__).parents[2]
    offenders = []
    for path in [*root.glob("examples/**/*.py"), *root.glob("benchmarks/*.py")]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if "json.dumps(" in line and ("print(" in line or "write_text(" in line):
                offenders.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    allowed = {  # a child's record read back by its parent (json.loads takes NaN)
        "benchmarks/active_sampling.py",
        "benchmarks/client_send.py",
        "benchmarks/closed_loop.py",
        "benchmarks/ingest_arms.py",
        "benchmarks/sampler_parts.py",
        "benchmarks/trainer_overhead.py",
    }
    assert [o for o in offenders if o.split(":")[0] not in allowed] == []
