"""A collective of the user's own in a hook, called on rank 0 alone (two real gloo
ranks under ``accelerate launch``): gloo aborts one rank (SIGABRT, no Python runs
there), and the rank that survives names the hook method and the rule, where it said
only "another rank is gone and left no note of why (... killed by a signal?)" (both
cases failed before: `trainer.hook_mark`). The script:
tests/scripts/hook_collective_one_rank.py (rank 0's ``OwnCollective.on_step_end``
all-reduces at step 3).

Which rank aborts depends on the sizes: the one that receives more than it expects.
With one float, rank 0 (in the hook) receives rank 1's next collective and aborts:
rank 1 reads rank 0's mark. With 1000 floats, rank 1 (in DDP's backward) aborts, and
rank 0's own collective broke in the hook: rank 0 says so."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="accelerate launch with gloo"),
]

SCRIPT = Path(__file__).parents[1] / "scripts" / "hook_collective_one_rank.py"
RULE = (
    "a collective in a hook (torch.distributed's, accelerator.gather / reduce) must be "
    "called by every rank at the same step"
)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("size", "survivor", "words"),
    [
        ("1", 1, "rank 0 died in the hook method OwnCollective.on_step_end (step 3, pid "),
        (
            "1000",
            0,
            "this rank's own collective broke in the hook method OwnCollective.on_step_end: ",
        ),
    ],
)
def test_a_hooks_collective_on_one_rank_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: str, survivor: int, words: str
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "trainer"))
    from two_ranks import launch_two_ranks

    out = tmp_path / "out"
    done = launch_two_ranks(SCRIPT, str(out), "0", size)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said[-3000:]
    assert "Received data size doesn't match expected size" in said, said[-3000:]
    # the aborted rank wrote nothing (no Python ran); the survivor's end names the hook
    assert not (out / f"exit-{1 - survivor}.txt").exists(), said[-3000:]
    ended = (out / f"exit-{survivor}.txt").read_text()
    assert ended.startswith(f"RankGone: rank {survivor} stopped at step 3: "), ended
    # (the gone rank's pid, which the test does not know, between the words and the rule)
    hook = re.search(re.escape(words) + r"(\d+\): )?" + re.escape(RULE), ended)
    assert hook is not None, ended
    assert hook[0] in said  # (its ERROR line, which the launch's output shows)
