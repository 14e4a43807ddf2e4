"""A study resumed with another number of simulations, or other study settings
(docs/resume.md, "Changing the study on resume"; `launcher.study_change`).

Each test resumes the same mid-stream checkpoint of a real study: 4 simulations of 6
steps, two at a time; simulation 0 streams all its steps, 1 and 2 stream 3 steps and
stall on their first attempt, so the run stops (``max_steps=12``, batch 1) with 0
finished, 1 and 2 half trained on, 3 not drawn yet. Growing or shrinking continues
the study exactly (the parameters an uninterrupted study would have drawn, nothing
failed, every step trained on once, nothing launched past the new end); what cannot
be continued exactly is refused before any simulation is launched and before the
checkpoint is loaded, by an error naming the setting.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import Keys

from melissa_trainer import OnlineTrainer, ReceiverConfig, StreamSource, Study, TrainingArguments
from melissa_trainer.launcher import (
    CallableSampler,
    Launcher,
    LauncherTuning,
    ListSampler,
    LocalBackend,
    make_sampler,
)
from melissa_trainer.launcher.simulation_record import records_of

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

STEPS, FIRST_N, SEED = 6, 4, 5
BOUNDS = {"a": (0.0, 1.0), "b": (-1.0, 1.0)}
SIMULATION = r"""
import json, os, sys, time
import numpy as np
from melissa_trainer.client import Client

out = os.environ["SIM_OUT"]
sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
params = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])
with open(os.path.join(out, "launches.txt"), "a") as f:
    f.write(f"{sid} {attempt}\n")
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in range(STEPS):
        if attempt == 0 and str(sid) in os.environ["SIM_STALL"].split(",") and t == STEPS // 2:
            client.flush()
            time.sleep(600)  # stalled: the first run stops and kills it
        x = np.array([params["a"], params["b"], t / 10], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
""".replace("STEPS", str(STEPS))
#: samples the first run can train on: all of 0's steps, half of 1's and 2's
FIRST_STEPS = STEPS + 2 * (STEPS // 2)


def sampler(kind: str, seed: int = SEED, bounds: Any = BOUNDS) -> Any:
    """ "lhs-batch": a Latin hypercube of batch 2, whatever the study's size; "lhs" takes
    its size from the study; "breed-decaying" decays its exploration over the study."""
    if kind == "lhs-batch":
        return make_sampler("lhs", bounds, seed=seed, batch=2)
    if kind == "breed-decaying":
        return make_sampler("breed", bounds, seed=seed, exploration_final=0.1)
    if kind == "list":  # 8 sets: enough for the largest study here
        return ListSampler([{"a": i / 8, "b": -i / 8} for i in range(8)])
    if kind == "callable":
        return CallableSampler(_corner, list(bounds), seed)
    return make_sampler(kind, bounds, seed=seed)


def _corner(index: int, rng: np.random.Generator) -> dict[str, float]:
    """A `CallableSampler`'s function: draw `index` from its own generator."""
    return {"a": float(rng.random()), "b": -float(rng.random())}


def trainer(out: Path, kind: str, n: int, keys: Keys, **overrides: Any) -> OnlineTrainer:
    seed, bounds = overrides.pop("sampler_seed", SEED), overrides.pop("bounds", BOUNDS)
    stall = overrides.pop("stall", "1,2")
    (out / "sim.py").write_text(SIMULATION)
    launcher = Launcher(
        [sys.executable, str(out / "sim.py")],
        sampler(kind, seed, bounds),
        n,
        job_limit=2,
        backend=LocalBackend(),
        env={"SIM_OUT": str(out), "SIM_STALL": stall},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    args = TrainingArguments(
        output_dir=str(out / "run"),
        buffer="fifo",
        buffer_size=16,
        watermark=1,
        batch_size=1,
        logging_steps=5,
        stop_sync_steps=2,
        disable_progress_bar=True,
        report_to="none",
        **overrides,
    )
    return OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource(ReceiverConfig())),
        process_sample=keys,
    )


def launches(out: Path) -> list[tuple[int, int]]:
    path = out / "launches.txt"
    lines = path.read_text().split("\n")[:-1] if path.exists() else []
    return [(int(s), int(a)) for s, a in (line.split() for line in lines)]


_FIRST_RUNS: dict[str, tuple[Path, list[tuple[int, int]]]] = {}


@pytest.fixture
def checkpointed(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """`checkpointed(kind)`: a copy of the first run of a study of that sampler, stopped
    mid-stream (module docstring), and the keys it trained on."""

    def make(kind: str) -> tuple[Path, list[tuple[int, int]]]:
        if kind not in _FIRST_RUNS:
            out = tmp_path_factory.mktemp(f"first-{kind}")
            keys = Keys()
            first = trainer(out, kind, FIRST_N, keys, max_steps=FIRST_STEPS)
            first.train()
            assert sorted(keys.seen) == sorted(
                [(0, t) for t in range(STEPS)] + [(s, t) for s in (1, 2) for t in range(3)]
            )
            assert sorted(launches(out)) == [(0, 0), (1, 0), (2, 0)]
            _FIRST_RUNS[kind] = out, keys.seen
        source, seen = _FIRST_RUNS[kind]
        copy = tmp_path / f"study-{kind}"
        shutil.copytree(source, copy, symlinks=True)
        return copy, list(seen)

    return make


def uninterrupted(kind: str, n: int) -> list[dict[str, float]]:
    """The parameters a study of `n` simulations started afresh draws."""
    fresh = sampler(kind)
    fresh.plan(n)
    return [fresh.draw() for _ in range(n)]


def final_records(t: OnlineTrainer) -> dict[int, dict[str, Any]]:
    return records_of(t.source.launcher.state_dict())  # type: ignore[attr-defined]


@pytest.mark.e2e
@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["uniform", "halton", "sobol", "lhs-batch", "list", "callable"])
def test_more_simulations_continue_the_study_exactly(checkpointed: Any, kind: str) -> None:
    out, before = checkpointed(kind)
    keys = Keys()
    resumed = trainer(out, kind, 6, keys, resume_from_checkpoint="latest")
    resumed.train()
    lineage = Counter(before + keys.seen)
    assert lineage == Counter({(s, t): 1 for s in range(6) for t in range(STEPS)})
    summary = resumed.source.launcher.summary()  # type: ignore[attr-defined]
    assert (summary["finished"], summary["failed"], summary["redraws"]) == (6, 0, 0)
    records = final_records(resumed)
    assert [records[i]["parameters"] for i in range(6)] == uninterrupted(kind, 6)
    # 1 and 2 ran again (their second attempt), 3 to 5 once each
    assert sorted(launches(out)) == [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (4, 0),
                                     (5, 0)]  # fmt: skip
    if kind == "uniform":  # the draws themselves: draw i of seed s is rng([s, i])
        low, high = np.array([0.0, -1.0]), np.array([1.0, 1.0])
        for i in range(6):
            unit = np.random.default_rng([SEED, i]).random(2)
            assert list(records[i]["parameters"].values()) == list(low + unit * (high - low))


@pytest.mark.e2e
@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["uniform", "lhs-batch"])
def test_fewer_simulations_cancel_the_unfinished_ones_past_the_new_end(
    checkpointed: Any, kind: str
) -> None:
    """Shrunk to 2: 0 is finished, 1 goes on (the lowest unfinished id), 2 is cancelled:
    not launched again, not counted as failed; its half trained on stays so."""
    out, before = checkpointed(kind)
    keys = Keys()
    resumed = trainer(out, kind, 2, keys, resume_from_checkpoint="latest")
    resumed.train()
    lineage = Counter(before + keys.seen)
    expected = {(s, t): 1 for s in (0, 1) for t in range(STEPS)}
    expected.update({(2, t): 1 for t in range(STEPS // 2)})  # trained on before the resume
    assert lineage == Counter(expected)
    assert all(s != 2 for s, _ in keys.seen)
    summary = resumed.source.launcher.summary()  # type: ignore[attr-defined]
    assert (summary["finished"], summary["failed"], summary["pending"]) == (2, 0, 0)
    records = final_records(resumed)
    assert sorted(records) == [0, 1]
    assert [records[i]["parameters"] for i in range(2)] == uninterrupted(kind, 4)[:2]
    assert sorted(launches(out)) == [(0, 0), (1, 0), (1, 1), (2, 0)]  # 2 not again


def refused(out: Path, kind: str, n: int, caplog: pytest.LogCaptureFixture, **kw: Any) -> str:
    """Resume and expect a refusal before anything starts; returns its message."""
    launched = launches(out)
    t = trainer(out, kind, n, Keys(), resume_from_checkpoint="latest", **kw)
    with caplog.at_level(logging.INFO), pytest.raises(ValueError) as info:
        t.train()
    assert launches(out) == launched  # no simulation launched
    assert "resumed from" not in caplog.text
    assert t.state.global_step == 0  # the checkpoint's state was not loaded
    return str(info.value)


@pytest.mark.e2e
@pytest.mark.timeout(180)
@pytest.mark.parametrize("n", [6, 2])
def test_a_latin_hypercube_sized_by_the_study_refuses_another_size(
    checkpointed: Any, caplog: pytest.LogCaptureFixture, n: int
) -> None:
    out, _ = checkpointed("lhs")
    message = refused(out, "lhs", n, caplog)
    assert f"n_simulations changed from 4 to {n}, but the LHS design depends on it" in message
    assert (
        "resume with the study's n_simulations=4 (Launcher(n_simulations=4)" in message
        and "new output_dir" in message
    )


@pytest.mark.e2e
@pytest.mark.timeout(180)
@pytest.mark.parametrize("n", [6, 2])
def test_the_density_sampler_refuses_another_size(
    checkpointed: Any, caplog: pytest.LogCaptureFixture, n: int
) -> None:
    """Its draws are the optimised Latin hypercube of the study's size: resumed with
    another size, it went on with the old design (then a second one), silently."""
    out, _ = checkpointed("density")
    message = refused(out, "density", n, caplog)
    assert f"n_simulations changed from 4 to {n}, but the density sampler draws a Latin" in (
        message
    )
    assert (
        "resume with the study's n_simulations=4 (Launcher(n_simulations=4)" in message
        and "new output_dir" in message
    )


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_decaying_breed_refuses_another_size_a_fixed_one_grows(
    checkpointed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    out, _ = checkpointed("breed-decaying")
    message = refused(out, "breed-decaying", 6, caplog)
    assert "n_simulations changed from 4 to 6, but Breed's exploration share decays" in message
    out, before = checkpointed("breed")
    keys = Keys()
    resumed = trainer(out, "breed", 6, keys, resume_from_checkpoint="latest")
    resumed.train()
    assert Counter(before + keys.seen) == Counter(
        {(s, t): 1 for s in range(6) for t in range(STEPS)}
    )
    saved = json.loads(next((out / "run" / "checkpoints").glob("checkpoint-12/rank_0/source.json"))
                       .read_text())["launcher"]  # fmt: skip
    records = final_records(resumed)
    for sid, record in records_of(saved).items():  # the simulations drawn before: the same
        assert records[sid]["parameters"] == record["parameters"]
    summary = resumed.source.launcher.summary()  # type: ignore[attr-defined]
    assert (summary["finished"], summary["failed"]) == (6, 0)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"sampler_seed": 6}, "the study's sampler seed changed from 5 to 6"),
        ({"bounds": {"a": (0.0, 2.0), "b": (-1.0, 1.0)}},
         "the study's parameter ranges changed (a from (0.0, 1.0) to (0.0, 2.0))"),
    ],
)  # fmt: skip
def test_another_seed_or_other_ranges_are_refused(
    checkpointed: Any, caplog: pytest.LogCaptureFixture, change: dict[str, Any], words: str
) -> None:
    out, _ = checkpointed("uniform")
    message = refused(out, "uniform", FIRST_N, caplog, **change)
    assert words in message and "new output_dir" in message


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_study_that_had_ended_cannot_grow(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its checkpoint was written after the end of its stream (its buffers closed)."""
    out = tmp_path / "study"
    out.mkdir()
    keys = Keys()
    trainer(out, "uniform", 3, keys, stall="").train()
    assert sorted(keys.seen) == [(s, t) for s in range(3) for t in range(STEPS)]
    message = refused(out, "uniform", 5, caplog)
    assert "n_simulations changed from 3 to 5, but the study of the checkpoint had ended" in (
        message
    )
