"""A hand-started solver that sent every step to a trainer whose run then ended
(``max_steps`` reached) before it read the solver's BYE: nothing was lost, and both
clients' closes return (as confirmed) with one warning saying so and what a resume of
that run would need, in the same words. Before, both failed (`TrainerStopped`,
MT_ETIMEDOUT) with "the rest of this simulation was not needed, and not taken ... run
this simulation again": the stop record (docs/protocol.md, section 17b) kept the BYEs
but not the steps held of a simulation without one; it now does (``unfinished``).

Real parts: an `OnlineTrainer` on a `StreamSource` (external mode, a rendezvous
directory), a Python `Client` (a thread) and the C client (mt_script), each sending
`STEPS` steps. The trainer's FIFO buffer gives each sample once and its batch is one
sample, so ``max_steps`` = every step sent: it ends only once it took them all (the
oracle: the samples its `process_sample` saw), and the clients close only after it
returned (its rendezvous files marked stopped with the record). The words are compared
word for word (the Python warning, the C line on stderr), as
tests/c/test_c_predict_unserved.py compares its."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import Script

from melissa_trainer import OnlineTrainer, ReceiverConfig, StreamSource, TrainingArguments
from melissa_trainer.client import Client

pytestmark = pytest.mark.e2e  # (a trainer, and a C process)

STEPS = 5
PY_SID, C_SID = 5, 7
MT_INT32 = 6  # (melissa_trainer.h; integers: no sample refused as non-finite)
PREFIX = "melissa_trainer: mt_client_close: "


class Seen:
    """`process_sample` recording the (simulation, time step) of each sample trained on."""

    def __init__(self) -> None:
        self.keys: list[tuple[int, int]] = []

    def __call__(self, s: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        self.keys.append((int(s["simulation_id"]), int(s["time_step"])))
        return torch.zeros(4), torch.zeros(1)


def trainer_of(tmp_path: Path, seen: Seen) -> OnlineTrainer:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    return OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=1,
            buffer="fifo",
            buffer_size=4 * STEPS,
            watermark=1,
            max_steps=2 * STEPS,  # (the steps of both solvers: each sample once)
            save_steps=1000,
            disable_progress_bar=True,
            report_to="none",
        ),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=StreamSource(ReceiverConfig(rendezvous_dir=str(tmp_path / "rv"))),
        process_sample=seen,
    )


def python_solver(ended: threading.Event, out: dict[str, Any]) -> None:
    """Sends every step, waits for the trainer's end, closes: what the close raised."""
    try:
        client = Client({"u": ((4,), "int32")}, simulation_id=PY_SID)
        for t in range(STEPS):
            client.send(t, u=np.full(4, t, np.int32))
        client.flush()
        ended.wait()
        client.close()
        out["error"] = None
    except BaseException as exc:  # (the test's verdict, on the main thread)
        out["error"] = exc


@pytest.mark.timeout(300)
def test_both_closes_return_with_one_warning_when_every_step_was_taken(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rv = tmp_path / "rv"
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rv))
    seen = Seen()
    trainer = trainer_of(tmp_path, seen)
    ended, out = threading.Event(), {}
    solver = threading.Thread(target=python_solver, args=(ended, out), daemon=True)
    script = Script(script_exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rv)})
    try:
        sends = [f"send {t} u {MT_INT32} 4 {t}" for t in range(STEPS)]
        sent = script.send(f"id {C_SID}", f"field u {MT_INT32} 1 4", "start", *sends, "flush")
        solver.start()
        with caplog.at_level(logging.WARNING):
            state = trainer.train()
            assert state.global_step == 2 * STEPS
            assert script.wait(sent)[-1].split(" ", 1)[0] == "0", script.seen
            ended.set()
            closed = script.send("close")
            lines, err = script.finish(120)
            solver.join(120)
    finally:
        ended.set()
        script.kill()
    # the oracle: every step of both was trained on, once
    expected = {(sid, t) for sid in (PY_SID, C_SID) for t in range(STEPS)}
    assert sorted(seen.keys) == sorted(expected), seen.keys
    record = json.loads((rv / "rank_0.json").read_text())["stop_record"]
    assert record["reason"]["code"] == "end", record
    assert out["error"] is None, out["error"]  # (before: TrainerStopped, "not taken")
    code, _, message = lines[closed][-1].partition(" ")
    assert code == "0", (message, err)  # (before: 8, MT_ETIMEDOUT)
    said = [r.getMessage() for r in caplog.records if "having taken every" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    python = said[0]
    assert python.startswith(f"simulation {PY_SID} rank 0: the trainer's receiver 0 ("), python
    assert f"({STEPS}): nothing was lost. If that run is resumed" in python, python
    assert "not needed, and not taken" not in python, python
    c_lines = [line for line in err.splitlines() if "having taken every" in line]
    assert len(c_lines) == 1, err
    mine = python.replace(f"simulation {PY_SID} rank 0", f"simulation {C_SID} rank 0")
    mine = mine.replace(f"SIMULATION_ID={PY_SID})", f"SIMULATION_ID={C_SID})")
    assert c_lines[0] == PREFIX + mine  # (the same words)
