"""The ledger checker on a real study in which a simulation was given up: its steps
after its last one trained on are expected (the study's record in the checkpoint says it
gave it up), said on a GIVEN UP line, and the check passes; a gap before that step, or
the same ledger without the study's record, still fails (a user trial's check printed
"MISSING: time steps 3-19 of simulation 2", then VIOLATED, for a simulation the study
had given up, and did not say why)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch
from helpers import Keys

from melissa_trainer import OnlineTrainer, ReceiverConfig, StreamSource, Study, TrainingArguments
from melissa_trainer.hooks import SampleLedger
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend, UniformSampler
from melissa_trainer.lineage import check

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

STEPS, FAILS_AT = 6, 3

#: simulation 1 exits 3 (a final exit code: given up at once) after sending steps 0-2
SIMULATION = r"""
import json, os, sys
import numpy as np
from melissa_trainer.client import Client

sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
params = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in range(STEPS):
        if sid == 1 and t == FAILS_AT:
            sys.exit(3)  # (inside the client: an exception, no BYE; its steps delivered)
        x = np.array([params["a"], params["b"], t / 10], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
"""


@pytest.mark.timeout(180)
def test_a_given_up_simulations_last_steps_are_said_and_expected(tmp_path: Path) -> None:
    script = tmp_path / "sim.py"
    script.write_text(f"STEPS, FAILS_AT = {STEPS}, {FAILS_AT}\n" + SIMULATION)
    launcher = Launcher(
        [sys.executable, str(script)],
        UniformSampler({"a": (0.0, 1.0), "b": (-1.0, 1.0)}, seed=3),
        3,
        job_limit=3,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, final_exit_codes=(3,)),
    )
    model = torch.nn.Linear(3, 1)
    out = tmp_path / "out"
    keys = Keys()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(out),
            batch_size=1,
            buffer="fifo",
            buffer_size=64,
            logging_steps=1000,
            disable_progress_bar=True,
            stop_sync_steps=2,
        ),  # fmt: skip
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource(ReceiverConfig())),
        process_sample=keys,
        hooks=[SampleLedger()],
    )
    trainer.train()
    # the oracle: what the trainer was given (simulation 1 redrawn as simulation 3)
    assert sorted(t for s, t in keys.seen if s == 1) == list(range(FAILS_AT))
    assert {s for s, _ in keys.seen} == {0, 1, 2, 3}

    report = check(out, simulations=4, steps=STEPS)
    text = str(report)
    assert report.ok, text
    given_up = [line for line in report.lines if line.startswith("GIVEN UP")]
    assert len(given_up) == 1, text
    assert given_up[0].startswith("GIVEN UP: simulation 1 was given up by the study"), text
    assert "failed 1 attempt, exit codes [3]" in given_up[0]
    assert f"its missing time steps {FAILS_AT}-{STEPS - 1} are expected" in given_up[0]
    assert "--steps FILE" in given_up[0] and "EXACTLY ONCE: OK" in text

    # a gap before its last step trained on is still missing (its step 0 taken out)
    ledger = out / "lineage" / "rank-0.log"
    lines = ledger.read_text().splitlines(keepends=True)
    (gap,) = [
        i for i, line in enumerate(lines) if line.startswith("B ") and line.split()[4:] == ["1:0"]
    ]
    ledger.write_text("".join(lines[:gap] + lines[gap + 1 :]))
    doctored = check(out, simulations=4, steps=STEPS)
    assert (
        not doctored.ok
        and "MISSING: 1 sample never trained on: simulation 1 time step 0" in str(doctored)
    )
    ledger.write_text("".join(lines))

    # the ledger without the study's record: missing, with the way to --steps FILE
    alone = tmp_path / "alone"
    shutil.copytree(out / "lineage", alone / "lineage")
    bare = check(alone, simulations=4, steps=STEPS)
    assert not bare.ok and "GIVEN UP" not in str(bare)
    assert any(line.startswith("note: a simulation the study gave up") for line in bare.lines)
