"""The ledger checker's counts read as words (`common.words.plural`): "1 sample",
"2 samples", never "1 sample(s)" (`melissa_trainer.hooks.lineage_check`)."""

from __future__ import annotations

import json
from pathlib import Path

from melissa_trainer.lineage import check


def _ledger(folder: Path, duplicated: int) -> None:
    """One run on one rank of simulations 0 and 1: simulation 0's steps 0-1 and
    simulation 1's step 0 trained, the first `duplicated` of them again, a stray line
    before the run header and a line cut by a kill at the end."""
    head = {"format": 1, "run": "a.1", "rank": 0, "ranks": 1, "start_step": 0,
            "pseudo_epoch": 0, "buffer": "fifo", "time": 0.0}  # fmt: skip
    again = " ".join(f"{s}:{t}" for s, t in [(0, 0), (1, 0)][:duplicated])
    lines = ["stray", f"R {json.dumps(head)}", "B 1 0 0 0:0 1:0", "B 2 0 0 0:1",
             f"B 3 0 0 {again}", "B 4 0 0 0:3 1:"]  # fmt: skip
    folder.mkdir(parents=True)
    (folder / "rank-0.log").write_text("\n".join(lines) + "\n")


def test_every_count_of_one_reads_singular(tmp_path: Path) -> None:
    _ledger(tmp_path / "lineage", duplicated=1)
    # simulation 0 has 3 steps (step 2 missing); simulation 1 is not named; 3 expected
    said = str(check(tmp_path, simulations=3, steps={0: 3}))
    assert "(s)" not in said, said
    for words in [
        ": 1 run\n",
        "run 1 (a.1, 1 rank, buffer fifo)",
        "  1 line cut by a kill or damaged: skipped",
        "rank-0.log: 1 line outside a readable run",
        "DUPLICATES: 1 sample trained more than once",
        "MISSING: 1 sample never trained on: simulation 0 time step 2",
        "MISSING: 1 simulation never trained on",
        "warning: 1 simulation seen that --steps does not name",
    ]:
        assert words in said, (words, said)


def test_counts_of_two_read_plural(tmp_path: Path) -> None:
    _ledger(tmp_path / "lineage", duplicated=2)
    said = str(check(tmp_path, simulations=4, steps={0: 4}))
    assert "(s)" not in said, said
    for words in [
        "DUPLICATES: 2 samples trained more than once",
        "MISSING: 2 samples never trained on: simulation 0 time step 2",
        "MISSING: 2 simulations never trained on",
    ]:
        assert words in said, (words, said)
