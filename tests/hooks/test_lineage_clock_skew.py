"""The ledger checker under clock skew: a run resumed on a node whose clock is behind the
node of the run before it (a requeue after a kill -9 starts at once, on whatever node
Slurm gives it) writes a run header whose wall-clock `time` is earlier than its
predecessor's. The checker ordered runs by that time, so it applied the resume rule the
wrong way round and reported a correct run as violated; it now orders them by their
headers' order in the (append-only) rank files, across ranks (`order_runs`).

Seen by hand (htrial28, 2026-12-02): the heat example, 10 simulations of 40 steps,
SIGKILLed after checkpoint-15 and resumed at once with the ledger's clock 120 s behind
(/tmp/htrial28/skew_repro.sh): "run 1 ... started at step 15 ... kept up to step 0",
"MISSING: 8 simulations never trained on", "EXACTLY ONCE: VIOLATED", exit status 1,
though every (simulation, time step) was trained on once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from melissa_trainer.lineage import check


def _run(
    run: str,
    start: int,
    batches: list[tuple[int, list[tuple[int, int]]]],
    time: float,
    rank: int = 0,
    ranks: int = 1,
) -> str:
    head = {"format": 1, "run": run, "rank": rank, "ranks": ranks, "start_step": start,
            "pseudo_epoch": 0, "buffer": "fifo", "time": time}  # fmt: skip
    lines = [f"R {json.dumps(head)}"]
    lines += [f"B {s} 0 0 " + " ".join(f"{a}:{b}" for a, b in keys) for s, keys in batches]
    return "\n".join(lines) + "\n"


@pytest.mark.timeout(60)
def test_a_resume_on_a_node_whose_clock_is_behind_still_passes(tmp_path: Path) -> None:
    keys = [(s, t) for t in range(8) for s in range(2)]
    batches = [keys[i : i + 2] for i in range(0, len(keys), 2)]  # 8 steps of 2 samples
    folder = tmp_path / "lineage"
    folder.mkdir()
    # run a: steps 1-6, killed; run b resumed from checkpoint 4, its node's clock 120 s behind
    text = _run("a.1", 0, [(i + 1, b) for i, b in enumerate(batches[:6])], time=1000.0)
    text += _run("b.1", 4, [(i + 5, b) for i, b in enumerate(batches[4:])], time=880.0)
    (folder / "rank-0.log").write_text(text)
    report = check(tmp_path, simulations=2, steps=8)
    assert report.ok, report


@pytest.mark.timeout(60)
def test_runs_line_up_across_rank_files_whatever_their_clocks(tmp_path: Path) -> None:
    """Run a (2 ranks) killed after step 4, run b (1 rank, clock 300 s behind) resumed
    from 2 and killed after step 5, run c (2 ranks, clock 200 s behind a's) resumed from
    4: rank-1's file holds a and c only, rank-0's all three; the checker lines them up."""
    folder = tmp_path / "lineage"
    folder.mkdir()
    sims = {0: [0, 1], 1: [2, 3]}  # rank -> its simulations; 6 steps of one time step each
    r0 = _run("a.1", 0, [(t + 1, [(s, t) for s in sims[0]]) for t in range(4)], 1000.0, 0, 2)
    r1 = _run("a.1", 0, [(t + 1, [(s, t) for s in sims[1]]) for t in range(4)], 1000.0, 1, 2)
    r0 += _run("b.1", 2, [(t + 1, [(s, t) for s in range(4)]) for t in range(2, 5)], 700.0)
    r0 += _run("c.1", 4, [(t + 1, [(s, t) for s in sims[0]]) for t in range(4, 6)], 800.0, 0, 2)
    r1 += _run("c.1", 4, [(t + 1, [(s, t) for s in sims[1]]) for t in range(4, 6)], 800.0, 1, 2)
    (folder / "rank-0.log").write_text(r0)
    (folder / "rank-1.log").write_text(r1)
    report = check(tmp_path, simulations=4, steps=6)
    assert [r.run for r in report.runs] == ["a.1", "b.1", "c.1"], report
    assert report.ok, report


@pytest.mark.timeout(60)
def test_rank_files_that_disagree_are_said_and_ordered_by_time(tmp_path: Path) -> None:
    folder = tmp_path / "lineage"
    folder.mkdir()
    one = [(1, [(0, 0)])]
    (folder / "rank-0.log").write_text(_run("a.1", 0, one, 1.0) + _run("b.1", 0, one, 2.0))
    (folder / "rank-1.log").write_text(
        _run("b.1", 0, one, 2.0, 1, 2) + _run("a.1", 0, one, 1.0, 1, 2)
    )
    report = check(tmp_path)
    assert [r.run for r in report.runs] == ["a.1", "b.1"]
    assert any("order the runs differently" in line for line in report.lines), report
