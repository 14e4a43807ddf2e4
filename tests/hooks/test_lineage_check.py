"""The ledger checker (`melissa_trainer.lineage`) on ledgers written here line by line,
and the `SampleLedger` hook on an in-process trainer: the resume rule, duplicates,
missing samples, padding and replays, rank counts, a line cut by a kill."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.hooks import SampleLedger
from melissa_trainer.lineage import check, main

Keys = list[tuple[int, int]]


def run_lines(
    run: str, start: int, batches: list[tuple[int, Keys]], *, rank: int = 0, ranks: int = 1,
    buffer: str = "fifo", time: float = 0.0, epoch: int = 0, pad: int = 0, end: int | None = None,
) -> str:  # fmt: skip
    """A run's lines of one rank file, as `SampleLedger` writes them."""
    head = {"format": 1, "run": run, "rank": rank, "ranks": ranks, "start_step": start,
            "pseudo_epoch": 0, "buffer": buffer, "time": time}  # fmt: skip
    lines = [f"R {json.dumps(head)}"]
    for step, keys in batches:
        lines.append(f"B {step} {epoch} {pad} " + " ".join(f"{s}:{t}" for s, t in keys))
    if end is not None:
        lines.append(f"E {json.dumps({'run': run, 'step': end, 'ended_by': 'end of stream'})}")
    return "\n".join(lines) + "\n"


def study(simulations: int, steps: int, batch: int) -> list[Keys]:
    """The samples of a study, in order, cut into batches (step i trains batch i-1)."""
    keys = [(s, t) for t in range(steps) for s in range(simulations)]
    return [keys[i : i + batch] for i in range(0, len(keys), batch)]


def write(folder: Path, rank: int, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"rank-{rank}.log").open("a") as f:
        f.write(text)


def numbered(batches: list[Keys], first: int = 1) -> list[tuple[int, Keys]]:
    return [(first + i, keys) for i, keys in enumerate(batches)]


def test_one_run_every_sample_once_passes(tmp_path: Path, capsys: Any) -> None:
    folder = tmp_path / "lineage"
    write(folder, 0, run_lines("a.1", 0, numbered(study(2, 4, 2)), end=4))
    assert main(["check", str(tmp_path), "--simulations", "2", "--steps", "4"]) == 0
    out = capsys.readouterr().out
    assert "EXACTLY ONCE: OK" in out and "distinct 8" in out


def test_a_duplicate_fails_naming_the_sample_and_where(tmp_path: Path, capsys: Any) -> None:
    batches = numbered(study(2, 4, 2))
    batches.append((5, [(1, 2), (0, 0)]))  # two samples trained a second time
    write(tmp_path / "lineage", 0, run_lines("a.1", 0, batches, end=5))
    assert main(["check", str(tmp_path), "--simulations", "2", "--steps", "4"]) == 1
    out = capsys.readouterr().out
    assert "DUPLICATES: 2 samples trained more than once" in out
    assert "simulation 1 time step 2 at step 3 (run 1, rank 0), step 5 (run 1, rank 0)" in out
    assert "EXACTLY ONCE: VIOLATED" in out


def test_a_missing_step_and_a_missing_simulation_fail(tmp_path: Path) -> None:
    batches = numbered(study(2, 4, 2))
    del batches[1]  # (0, 1) and (1, 1)
    write(tmp_path / "lineage", 0, run_lines("a.1", 0, batches))
    report = check(tmp_path, simulations=2, steps=4)
    assert not report.ok and report.missing == [(0, 1), (1, 1)]
    assert "MISSING: 2 samples never trained on: simulation 0 time step 1" in str(report)
    report = check(tmp_path, simulations=3, steps=4)  # one simulation never seen
    assert not report.ok and "MISSING: 1 simulation never trained on" in str(report)
    assert check(tmp_path).ok  # without the study's size: duplicates only


def test_steps_after_the_resumed_checkpoint_are_discarded(tmp_path: Path) -> None:
    """Run 1 trained steps 1-6 and was killed; run 2 resumed from checkpoint 4 and
    trained steps 5-8 (5 and 6 again, as a resume does): the ledger passes. Had run 2
    resumed from step 6 with the same records, steps 5-6 count twice."""
    batches = study(2, 8, 2)  # 8 steps
    folder = tmp_path / "lineage"
    write(folder, 0, run_lines("a.1", 0, numbered(batches[:6]), time=1.0))  # no E: killed
    write(folder, 0, run_lines("b.1", 4, numbered(batches[4:], 5), time=2.0, end=8))
    report = check(tmp_path, simulations=2, steps=8)
    assert report.ok, report
    assert "kept up to step 4, where a later run resumed (after: redone)" in str(report)
    bad = tmp_path / "bad"
    write(bad, 0, run_lines("a.1", 0, numbered(batches[:6]), time=1.0))
    write(bad, 0, run_lines("b.1", 6, numbered(batches[4:], 5), time=2.0, end=8))
    report = check(bad, simulations=2, steps=8)
    assert not report.ok and len(report.duplicates) == 4, report


def test_a_run_started_afresh_discards_every_run_before(tmp_path: Path) -> None:
    batches = numbered(study(2, 4, 2))
    folder = tmp_path / "lineage"
    write(folder, 0, run_lines("a.1", 0, batches[:3], time=1.0))
    write(folder, 0, run_lines("b.1", 0, batches, time=2.0, end=4))
    assert check(tmp_path, simulations=2, steps=4).ok


def test_a_later_run_from_an_older_checkpoint_discards_two_runs_work(tmp_path: Path) -> None:
    """Run 2 resumed from 4 and reached 8 without a checkpoint it kept; run 3 resumed
    from 2 (the newer ones corrupt): everything after step 2 is run 3's."""
    batches = numbered(study(2, 8, 2))
    folder = tmp_path / "lineage"
    write(folder, 0, run_lines("a.1", 0, batches[:6], time=1.0))
    write(folder, 0, run_lines("b.1", 4, batches[4:], time=2.0))
    write(folder, 0, run_lines("c.1", 2, batches[2:], time=3.0, end=8))
    assert check(tmp_path, simulations=2, steps=8).ok


def test_two_ranks_then_one(tmp_path: Path) -> None:
    """Run 1 on two ranks (each its half of every step), killed after step 3, its
    checkpoint at 2; run 2 on one rank from step 2. Files are per rank index: rank 0's
    holds both runs."""
    halves = study(2, 6, 2)  # 6 batches: steps 1-3 on two ranks, 4-6 ... on one
    folder = tmp_path / "lineage"
    write(folder, 0, run_lines("a.1", 0, [(1, halves[0]), (2, halves[2]), (3, halves[4])],
                               ranks=2, time=1.0))  # fmt: skip
    write(folder, 1, run_lines("a.1", 0, [(1, halves[1]), (2, halves[3]), (3, halves[5][:1])],
                               rank=1, ranks=2, time=1.0))  # fmt: skip
    write(folder, 0, run_lines("b.1", 2, [(3, halves[4]), (4, halves[5])], time=2.0, end=4))
    report = check(tmp_path, simulations=2, steps=6)
    assert report.ok, report
    assert "run 1 (a.1, 2 ranks," in str(report) and "run 2 (b.1, 1 rank," in str(report)


def test_padding_and_replays_are_not_counted_but_a_reservoir_is_not_judged(
    tmp_path: Path,
) -> None:
    batches = numbered(study(2, 2, 2))
    folder = tmp_path / "lineage"
    write(folder, 0, run_lines("a.1", 0, batches, time=1.0))
    folder_text = run_lines("a.1", 0, [(3, batches[-1][1])], pad=1, time=1.0).split("\n", 1)[1]
    write(folder, 0, folder_text)  # a pad batch: the same samples again
    write(folder, 0, run_lines("a.1", 0, [(4, batches[0][1])], epoch=1).split("\n", 1)[1])
    report = check(tmp_path, simulations=2, steps=2)
    assert report.ok, report
    assert "not counted: 2 padding draws, 2 replay draws" in str(report)
    reservoir = tmp_path / "reservoir"
    write(reservoir, 0, run_lines("a.1", 0, [*batches, (3, batches[0][1])], buffer="reservoir"))
    report = check(reservoir, simulations=2, steps=2)
    assert report.ok and report.duplicates and "EXACTLY ONCE: n/a" in str(report)


def test_a_line_cut_by_a_kill_is_skipped_and_said(tmp_path: Path, capsys: Any) -> None:
    batches = numbered(study(2, 4, 2))
    folder = tmp_path / "lineage"
    cut = run_lines("a.1", 0, batches[:3], time=1.0) + "B 4 0 0 0:3 1:"  # no newline
    write(folder, 0, cut + "\n")
    write(folder, 0, run_lines("b.1", 3, batches[3:], time=2.0, end=4))
    assert main(["check", str(tmp_path / "lineage"), "--simulations", "2", "--steps", "4"]) == 0
    assert "1 line cut by a kill or damaged: skipped" in capsys.readouterr().out


def test_a_stray_file_is_skipped_with_a_warning(tmp_path: Path, capsys: Any) -> None:
    folder = tmp_path / "lineage"
    write(folder, 0, run_lines("a.1", 0, numbered(study(2, 4, 2)), end=4))
    (folder / "rank-old.log").write_text("anything\n")  # (a copy kept by hand)
    assert main(["check", str(tmp_path), "--simulations", "2", "--steps", "4"]) == 0
    out = capsys.readouterr().out
    assert "rank-old.log: not a rank file (rank-N.log): skipped" in out, out
    assert "EXACTLY ONCE: OK" in out


def test_the_records_after_a_damaged_run_header_are_not_the_run_before(
    tmp_path: Path, capsys: Any
) -> None:
    # run a.1 trained steps 1-4 and was killed; run b.1 resumed from step 2 and trained
    # steps 3-4 again, but its header is damaged: its records belong to no readable run
    batches = numbered(study(2, 4, 2))
    text = run_lines("a.1", 0, batches, time=1.0)
    damaged = run_lines("b.1", 2, batches[2:], time=2.0, end=4).replace('"run"', '"ru', 1)
    write(tmp_path / "lineage", 0, text + damaged)
    assert main(["check", str(tmp_path), "--simulations", "2", "--steps", "4"]) == 0
    out = capsys.readouterr().out
    assert "rank-0.log: 4 lines outside a readable run (a damaged run header): skipped" in out
    assert "duplicates: none" in out  # (not added to a.1: they were counted twice)


def test_no_ledger_is_exit_status_2_naming_the_hook(tmp_path: Path, capsys: Any) -> None:
    assert main(["check", str(tmp_path)]) == 2
    assert "hooks=[melissa_trainer.hooks.SampleLedger()]" in capsys.readouterr().err


# -- the hook, on an in-process trainer -------------------------------------------------


def samples(simulations: int, steps: int, time_step: bool = True) -> Iterator[dict[str, Any]]:
    for t in range(steps):
        for s in range(simulations):
            sample = {"x": np.full(3, s + t, np.float32), "simulation_id": np.array(s)}
            if time_step:
                sample["time_step"] = np.array(t)
            yield sample


def trainer(
    tmp_path: Path, data: Any, hook: SampleLedger, model: torch.nn.Module | None = None, **args: Any
) -> OnlineTrainer:
    torch.manual_seed(0)
    model = model or torch.nn.Linear(3, 1)
    options: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"), "batch_size": 4, "buffer": "fifo",
        "buffer_size": 16, "report_to": "none", "disable_progress_bar": True,
        "save_at_end": False, "simulation_loss_steps": 0, **args,
    }  # fmt: skip
    return OnlineTrainer(
        model,
        TrainingArguments(**options),
        torch.optim.SGD(model.parameters(), lr=0.01),
        train_source=data,
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["x"][:1])),
        hooks=[hook],
    )


@pytest.mark.timeout(120)
def test_the_hook_records_every_micro_batch_of_a_run(tmp_path: Path) -> None:
    hook = SampleLedger()
    run = trainer(tmp_path, samples(3, 8), hook, gradient_accumulation_steps=2)
    run.train()
    text = (tmp_path / "out" / "lineage" / "rank-0.log").read_text()
    records = [line.split() for line in text.splitlines() if line[0] == "B"]
    assert [r[1] for r in records] == ["1", "1", "2", "2", "3", "3"]  # 24 samples, 2 x 4 a step
    assert text.splitlines()[-1].startswith("E ")
    report = check(tmp_path / "out", simulations=3, steps=8)
    assert report.ok, report


@pytest.mark.timeout(120)
def test_a_resumed_run_opens_a_line_of_its_own_after_a_cut_one(tmp_path: Path) -> None:
    folder = tmp_path / "out" / "lineage"
    write(folder, 0, "B 1 0 0 0:0 1:")  # a cut line, left by a killed run
    trainer(tmp_path, samples(2, 4), SampleLedger()).train()
    lines = (folder / "rank-0.log").read_text().splitlines()
    assert lines[0] == "B 1 0 0 0:0 1:" and lines[1].startswith("R {")


@pytest.mark.timeout(120)
def test_samples_without_a_time_step_are_refused_naming_the_field(tmp_path: Path) -> None:
    run = trainer(tmp_path, samples(2, 4, time_step=False), SampleLedger())
    with pytest.raises(ValueError, match="no 'time_step' field"):
        run.train()


class FailsAtCall(torch.nn.Linear):
    """A model whose forward raises at its `fail_at`-th call (1-based)."""

    def __init__(self, fail_at: int) -> None:
        super().__init__(3, 1)
        self.calls, self.fail_at = 0, fail_at

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("the model failed")
        return super().forward(x)


@pytest.mark.timeout(120)
def test_an_exception_drops_the_micro_batches_of_its_unfinished_step(tmp_path: Path) -> None:
    # step 2's first micro-batch is drawn (on_batch_ready), then its forward raises: the
    # optimizer never stepped on it, so the ledger must not record it as trained
    hook, model = SampleLedger(), FailsAtCall(fail_at=3)
    run = trainer(tmp_path, samples(3, 8), hook, model, gradient_accumulation_steps=2)
    with pytest.raises(RuntimeError, match="the model failed"):
        run.train()
    text = (tmp_path / "out" / "lineage" / "rank-0.log").read_text()
    records = [line.split() for line in text.splitlines() if line[0] == "B"]
    assert [r[1] for r in records] == ["1", "1"]  # (step 1's two; none of step 2)


def test_a_reservoir_ledger_is_summed_up_in_a_line_after_the_fifo_hint(
    tmp_path: Path, capsys: Any
) -> None:
    """A reservoir's records are draws: the check says so, and how to check exactly-once
    (--buffer fifo), before anything else, and counts its duplicates in one line instead
    of listing them (12 simulations of 5 steps drawn 16 times each listed ~15 KB)."""
    keys = [key for batch in study(12, 5, 4) for key in batch]
    draws = numbered([keys[i : i + 4] for i in range(0, len(keys), 4)] * 16)
    write(tmp_path / "lineage", 0, run_lines("a.1", 0, draws, buffer="reservoir", end=240))
    assert main(["check", str(tmp_path), "--simulations", "13", "--steps", "6"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "train the study once with --buffer fifo" in lines[1], out
    assert "draws: 60 samples drawn more than once (up to 16 times)" in out, out
    assert "12 samples and 1 simulation never drawn: draws, not violations" in out, out
    assert "DUPLICATES" not in out and lines[-1] == "EXACTLY ONCE: n/a"
    assert len(out) < 1500, out


def test_a_sample_trained_many_times_is_listed_with_its_first_three(tmp_path: Path) -> None:
    keys = study(2, 2, 2)
    write(tmp_path / "lineage", 0, run_lines("a.1", 0, numbered(keys * 6), end=12))
    report = check(tmp_path, simulations=2, steps=2)
    assert not report.ok
    assert "simulation 0 time step 0 at step 1 (run 1, rank 0), step 3 (run 1, rank 0), " in str(
        report
    )
    assert "step 5 (run 1, rank 0) and 3 more; simulation 0 time step 1" in str(report), report
