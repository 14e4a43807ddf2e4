"""A late SIGTERM's words of the end's checkpoint under two ranks (`trainer.late_end`):
every rank says the same decided thing, and a failed save says it failed.

Found in review (hguess2): the words were read from each rank's flags as its line was
said. A hook's save asked on rank 0 alone, kept for the ranks' agreement, made rank 0
say nothing of the end's checkpoint while rank 1 said "save_at_end is off: no checkpoint
is written at the end", and the agreement then wrote checkpoint-4 on both; and a save
that failed after it had started (its step recorded as it starts) left the denial out.
The oracle: the checkpoint folder on disk. Real ranks (``accelerate launch``, gloo on
CPU); each rank signals itself at step 4, after the last stop synchronisation
(tests/scripts/last_window_asked_save.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from two_ranks import launch_two_ranks

from melissa_trainer.checkpoint import paths as ckpt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "last_window_asked_save.py"


def late_lines(said: str) -> dict[str, list[str]]:
    """Each rank's WARNING lines of the signal after its first, by rank."""
    lines: dict[str, list[str]] = {"0": [], "1": []}
    for rank, line in re.findall(r"^rank (\d) WARNING [\w.]+: (.*)$", said, re.MULTILINE):
        if not line.startswith("SIGTERM received: stopping"):
            lines[rank].append(line)
    return lines


def test_every_rank_says_the_checkpoint_the_agreement_wrote(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = launch_two_ranks(SCRIPT, str(out))
    said = proc.stdout[-4000:] + proc.stderr[-12000:]
    assert [p.name for p in ckpt.list_checkpoints(out / "checkpoints")] == ["checkpoint-4"]
    lines = late_lines(proc.stderr)
    assert lines["0"] and lines["0"] == lines["1"], said  # (the same words, said alike)
    text = "\n".join(lines["0"])
    assert "came after the last stop synchronisation" in text, said
    assert f"a checkpoint of the end is on disk: {out / 'checkpoints' / 'checkpoint-4'}" in text
    assert "no checkpoint" not in text, said
    assert "script end" not in proc.stdout, said  # (the signal ends each rank: 143)


def test_every_rank_says_that_the_end_save_failed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = launch_two_ranks(SCRIPT, str(out), "fail")
    said = proc.stdout[-4000:] + proc.stderr[-12000:]
    assert "FinalCheckpointSaveError" in proc.stderr, said
    assert ckpt.list_checkpoints(out / "checkpoints") == []
    lines = late_lines(proc.stderr)
    assert lines["0"] and lines["0"] == lines["1"], said
    text = "\n".join(lines["0"])
    assert "no checkpoint of the end is written, its save failed" in text, said
    assert "on disk:" not in text, said
