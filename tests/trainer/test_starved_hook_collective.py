"""A user's collective in a hook on every rank (an all-reduce in ``on_step_start``,
its result read) does not delay the deadlock's report under gloo: rank 1 starves in a
window taken ahead, and rank 0, which holds that window's batches, blocks in the start
of the ranks' agreement on it (on CPU it waits for every rank), before the steps of the
window in hand and their hooks: it is in no hook, and rank 1 says the deadlock by the
grace, not after ``stall_timeout`` (600 s here). The script:
tests/scripts/starved_rank_hook_collective.py.

On CUDA that start does not block the host, and rank 0 runs on into those steps, where
the hook's collective waits for rank 1: rank 0 is then in work of its own, which no
longer excuses it once it holds the batches of the window rank 1 waits for
(`study.starvation.ahead`; tests/study/test_starvation_ahead.py). Two NCCL ranks need
two GPUs: that run is not made here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from two_ranks import run_study_script

SCRIPT = Path(__file__).parents[1] / "scripts" / "starved_rank_hook_collective.py"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="accelerate launch with gloo"),
]


@pytest.mark.timeout(300)
def test_a_hooks_collective_does_not_hold_the_deadlocks_report_under_gloo(
    tmp_path: Path,
) -> None:
    proc, ends, said = run_study_script(SCRIPT, tmp_path, "48", timeout=240)
    assert proc.returncode != 0, said
    # rank 1 holds its failure (`trainer.source_failure`): both run the window agreed
    # before it (steps 2-3, their hooks' collectives included), learn it at the next
    # agreement, save step 4 together and fail (before, rank 1 raised at once: step 2)
    assert ends == [{"ended": "RankFailed", "steps": 4}, {"ended": "SourceError", "steps": 4}]
    hooks = [json.loads((tmp_path / f"hook-{r}.json").read_text()) for r in range(2)]
    assert hooks == [{"done": 4}, {"done": 4}], said
    assert (tmp_path / "out" / "checkpoints" / "checkpoint-4").is_dir(), said
    (full,) = [x for x in proc.stderr.splitlines() if x.startswith("training stopped at step 4")]
    assert "rank 1 of 2 cannot train, and nothing can change that" in full, said
    assert "its buffer holds 0 samples, 16 received in all" in full, said
    assert "A deadlock, stopped now rather than after stall_timeout" in full, said
