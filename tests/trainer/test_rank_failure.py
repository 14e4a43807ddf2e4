"""Two real training ranks (``accelerate launch --multi_gpu --num_processes 2``, gloo on
CPU) where rank 1 alone fails: in its training step (its loss function), in a hook's
``on_step_end`` or ``on_log`` (tests/scripts/rank_fails.py), or in its stream (a
simulation's data it lacks at the study's end: tests/scripts/study_end_gap.py). Rank 0
says, in one line, which rank failed and its error's first line
(`melissa_trainer.trainer.rank_failure`), and exits with status 1 by itself, without
gloo's traceback; no process is left. Before, rank 0 printed only gloo's ``RuntimeError:
... Connection closed by peer ... typically caused by a remote worker crashing``, which
names neither. A hook's error names the hook's method there, and in rank 1's traceback
(`melissa_trainer.hooks.raised`): before, only rank 1's traceback said which, by the
function's name alone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from two_ranks import launch_two_ranks

SCRIPTS = Path(__file__).parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import study_end_gap  # noqa: E402

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="/proc, and the local backend uses it"),
]

#: rank_fails.py's error on rank 1 (two lines: the first travels, " ..." says more),
#: after the hook method that raised it when a hook did (`melissa_trainer.hooks.raised`)
ERROR = "ValueError: rank one's own failure at step 3 ... (see rank 1's log)"
SAID = {
    "loss": f"rank 1 failed: {ERROR}",
    "step_end": f"rank 1 failed: FailOnRankOne.on_step_end raised {ERROR}",
    "log": f"rank 1 failed: FailOnRankOne.on_log raised {ERROR}",
}


def left_running(marker: str) -> list[int]:
    """Pids of live processes whose command line mentions `marker` (the run's folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:  # gone, or not ours
            continue
    return found


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["loss", "step_end", "log"])
def test_rank_zero_names_the_rank_that_failed_and_its_error(tmp_path: Path, where: str) -> None:
    out = tmp_path / "out"
    proc = launch_two_ranks(SCRIPTS / "rank_fails.py", str(out), where, timeout=90)
    said = proc.stdout[-3000:] + proc.stderr[-8000:]
    assert proc.returncode != 0, said
    assert "training ended" not in proc.stdout, said
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("rank 1 failed:")]
    assert line.startswith(SAID[where] + "; rank 0 stops at step "), said
    if where != "loss":  # rank 1's traceback names the hook too (a PEP 678 note)
        note = f"(raised by the hook method FailOnRankOne.on_{where}, at step 3)"
        assert note in proc.stderr, said
    assert "once the cause is fixed" in line, line  # (what a resume does: failed before)
    # nothing saved at the failure (docs/how-to/hooks.md, "Errors"): none here before it
    assert "; no checkpoint was written (a checkpoint is written by every rank" in line, line
    rank0 = [x for x in proc.stderr.splitlines() if x.startswith("[rank0]")]
    assert rank0 == [], said  # no traceback on rank 0: gloo's words say nothing
    assert "Connection closed by peer" not in proc.stderr, said
    assert "its second line" in proc.stderr  # rank 1's own traceback, whole
    # rank 0 exited by itself with status 1 (RankFailed), not killed by the launcher
    assert (out / "exit-0.txt").read_text() == "RankFailed 1\n", said
    assert (out / "exit-1.txt").read_text().startswith("ValueError "), said
    assert left_running(str(tmp_path)) == []


@pytest.mark.timeout(120)
def test_rank_zero_names_rank_one_whose_stream_failed(tmp_path: Path) -> None:
    solver = tmp_path / "solver.py"
    solver.write_text(study_end_gap.SOLVER)
    proc = launch_two_ranks(
        SCRIPTS / "study_end_gap.py", str(tmp_path / "out"), str(solver), timeout=90
    )
    said = proc.stdout[-3000:] + proc.stderr[-8000:]
    assert proc.returncode != 0, said
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("rank 1 failed:")]
    assert line.startswith(
        "rank 1 failed: SourceError: the stream receiver of rank 1 failed: the study has "
        "ended, and rank 1 lacks the data of 1 of the 3 simulations"
    ), said
    assert "(see rank 1's log); rank 0 stops at step " in line, said
    assert "Connection closed by peer" not in proc.stderr, said
    assert left_running(str(tmp_path)) == []
