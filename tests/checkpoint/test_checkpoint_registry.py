"""A checkpoint is a registry of named parts (`checkpoint_registry`): its format file,
each file owned by one part, one owner of `samples_seen`, and the formats it reads."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import Keys, drain, linear_samples, send_all, small_model, xy
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import CheckpointError, OnlineTrainer, TrainingArguments, wire
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.checkpoint import registry
from melissa_trainer.checkpoint.format import FORMAT_FILE, FORMAT_VERSION
from melissa_trainer.checkpoint.manifest import MANIFEST
from melissa_trainer.common.checkpoint_names import latest_checkpoint
from melissa_trainer.sources.source import STATE_FILE as SOURCE_FILE
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.stream.stream_source import StreamSource

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
from make_old_checkpoint import build_trainer  # noqa: E402

pytestmark = pytest.mark.timeout(120)

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "checkpoint_v1"


def make(out: Path, **overrides: Any) -> OnlineTrainer:
    args = TrainingArguments(
        output_dir=str(out),
        batch_size=4,
        buffer="fifo",
        buffer_size=16,
        watermark=4,
        report_to="none",
        disable_progress_bar=True,
        stop_sync_steps=2,
        **overrides,
    )
    model = small_model(0)
    return OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: linear_samples(64, seed=1),
        process_sample=xy,
    )


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint of this code: 6 steps of 4 samples."""
    out = tmp_path_factory.mktemp("registry")
    make(out, max_steps=6).train()
    path = latest_checkpoint(out / "checkpoints")
    assert path is not None
    return path


def test_the_format_file_names_the_version_and_every_part(written: Path) -> None:
    described = json.loads((written / FORMAT_FILE).read_text())
    assert described["format_version"] == FORMAT_VERSION == 2
    assert described["parts"] == {
        "source": "per_rank",
        "rng": "per_rank",
        "accelerate": "global",
        "trainer_state": "global",
        "hooks": "global",
        "buffer": "per_rank",
        "pending": "per_rank",
        "trainer_rank": "per_rank",
        "simulation_losses": "per_rank",
        "training_args": "global",
        "lr_scheduler": "global",
    }


def test_every_file_belongs_to_one_part(written: Path, tmp_path: Path) -> None:
    trainer = make(tmp_path / "other")
    owned: list[str] = []
    for part in registry.parts(trainer):
        owned += part.files(written, 0)
    on_disk = {p.relative_to(written).as_posix() for p in written.rglob("*") if p.is_file()}
    assert set(owned) == on_disk - {MANIFEST, FORMAT_FILE}


def test_each_file_name_is_declared_once_in_the_package(written: Path) -> None:
    """A checkpoint's file names (every file of a real checkpoint, the RNG's and
    Accelerate's aside: theirs) are each written as a literal in one place of the
    package: their owner's, which the registry and the reshard import."""
    import ast

    import melissa_trainer

    package = Path(melissa_trainer.__file__).parent
    literals: dict[str, list[str]] = {}
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                literals.setdefault(node.value, []).append(path.relative_to(package).as_posix())
    names = {p.name for p in written.rglob("*") if p.is_file()}
    ours = {n for n in names if not n.startswith(("random_states_", "model", "optimizer"))}
    assert {"trainer_state.json", "hooks.json", "source.json", "buffer.json"} <= ours
    declared = {n: literals.get(n, []) for n in ours}
    assert all(len(where) == 1 for where in declared.values()), declared


def test_the_checkpoint_knows_no_particular_hook() -> None:
    """The checkpoint layer imports nothing of the hooks but the file name of their
    state: what it saves of a hook comes through the trainer's view
    (`TrainerView.tracked_losses`, `hooks.state_dict`)."""
    import ast

    import melissa_trainer.checkpoint

    for path in Path(melissa_trainer.checkpoint.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "melissa_trainer.hooks"
            ):
                assert node.module == "melissa_trainer.hooks.base", (path.name, node.module)
                assert [a.name for a in node.names] == ["STATE_FILE"], path.name


def test_samples_seen_has_one_owner_the_rank_part(written: Path) -> None:
    state = json.loads((written / "trainer_state.json").read_text())
    assert "samples_seen" not in state
    assert state["global_step"] == 6 and state["total_samples_seen"] == 24
    rank = json.loads((written / "rank_0" / registry.RANK_STATE).read_text())
    assert rank["samples_seen"] == 24


def test_format_1_without_the_rank_part_takes_rank_0s_count(tmp_path: Path) -> None:
    """A checkpoint of a version before ``trainer_rank.json``: `samples_seen` is the one
    of its trainer state, and the loss since the last log starts afresh."""
    old = tmp_path / "checkpoint-12"
    shutil.copytree(FIXTURE, old)
    (old / "rank_0" / registry.RANK_STATE).unlink()
    state = json.loads((old / "trainer_state.json").read_text())
    (old / "trainer_state.json").write_text(json.dumps(dict(state, samples_seen=5)))
    trainer = build_trainer(tmp_path, Keys())  # the fixture's study
    with torch.no_grad():
        trainer.log_figures.loss_sum.fill_(3.0)
    trainer.log_figures.loss_count = 2
    trainer.load_checkpoint(old)
    assert trainer.state.samples_seen == 5
    assert trainer.state.global_step == 12
    assert (trainer.log_figures.loss_count, float(trainer.log_figures.loss_sum)) == (0, 0.0)


def test_a_newer_format_is_refused_naming_it(written: Path, tmp_path: Path) -> None:
    newer = tmp_path / "checkpoint-6"
    shutil.copytree(written, newer)
    (newer / FORMAT_FILE).write_text(json.dumps({"format_version": 3, "parts": {}}))
    trainer = make(tmp_path / "out")
    with pytest.raises(CheckpointError, match="checkpoint format 3.*formats 1 to 2"):
        trainer.load_checkpoint(newer)


U = wire.FieldSpec("u", np.dtype("<f4"), (3,))
STREAM_STEPS, BEFORE = 8, 5


def step_message(t: int) -> list[bytes]:
    head = wire.encode_data_header(1, t, 0, 1, b"u", wire.dtype_code(U.dtype), U.shape, 0, 3, True)
    return [head + np.full(3, t, np.float32).tobytes()]


def send(endpoint: str, frames: list[list[bytes]]) -> None:
    """Deliver `frames` to `endpoint` (one PUSH socket, lingering until they are out)."""
    send_all(endpoint, frames).term()


def test_a_sample_put_while_a_checkpoint_is_written_is_put_once_across_the_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver's thread puts on while a checkpoint is written (the training thread
    no longer pumps: a preempted save waits for the other ranks, Accelerate writes the
    model): here it puts one sample right after its record is taken. The checkpoint must
    take the buffer's snapshot before the source's record, which at load forgets what it
    recorded after that snapshot (the sample is accepted again when re-sent). Written the
    other way round (a registry that wrote the source first), that sample was in the
    buffer and not in the record: put twice after the resume (seen once under load in
    test_resume_resize's 3to2 reservoir SIGTERM case, as (simulation 3, step 11) put
    twice). The oracle: the simulation's `STREAM_STEPS` steps, each read once from the
    resumed buffer."""
    stream = StreamSource(ReceiverConfig(expected_simulations=1))
    args = TrainingArguments(output_dir=str(tmp_path / "out"), batch_size=4, buffer="fifo",
                             buffer_size=16, watermark=1, report_to="none",
                             disable_progress_bar=True)  # fmt: skip
    model = small_model(0)
    trainer = OnlineTrainer(model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
                            train_source=stream, process_sample=xy)  # fmt: skip
    staging = tmp_path / "staging"
    stream.start(trainer.buffer, 0, 1)
    try:
        receiver, endpoint = stream.receiver, stream.endpoint
        assert receiver is not None and endpoint is not None
        send(endpoint, [[wire.encode_hello(1, 0, 1, [U])], *map(step_message, range(BEFORE))])
        wait_until(
            lambda: len(trainer.buffer) == BEFORE,
            "the first steps in the buffer",
            UNTIL_TEST_TIMEOUT,
        )
        record = receiver.state_dict

        def record_then_put() -> dict[str, Any]:
            state = record()
            send(endpoint, [step_message(BEFORE)])  # the thread puts on, after its record
            wait_until(
                lambda: len(trainer.buffer) == BEFORE + 1,
                "the put after the record",
                UNTIL_TEST_TIMEOUT,
            )
            return state

        monkeypatch.setattr(receiver, "state_dict", record_then_put)
        registry.write(trainer, staging)
    finally:
        stream.stop()

    restored = FIFOBuffer(16)
    restored.load(staging / "rank_0")
    resumed = Receiver(restored, config=ReceiverConfig(expected_simulations=1))
    resumed.load_state_dict(json.loads((staging / "rank_0" / SOURCE_FILE).read_text()))
    resumed.start()
    try:  # the simulation runs again: all of it
        steps = [[wire.encode_hello(1, 0, 1, [U])], *map(step_message, range(STREAM_STEPS))]
        send(resumed.endpoint, [*steps, [wire.encode_bye(1, 0, 1, STREAM_STEPS)]])
        read = sorted(int(s["time_step"]) for s in drain(restored))
    finally:
        resumed.stop()
    assert read == list(range(STREAM_STEPS))
