"""Two real training ranks (``accelerate launch --multi_gpu --num_processes 2``, gloo on
CPU) whose output directory is removed (``rm -rf``) while they train
(tests/scripts/remove_output_dir_ranks.py): both ranks exit non-zero (rank 0 with
`OutputDirLost`, rank 1 with its quiet copy), one ERROR paragraph says it (rank 0's),
nothing makes the directory again, no rank hangs and no rank prints a traceback.

Before: rank 0's failure note (``OUTPUT_DIR/.rank-failures/rank-0``) made the removed
directory again, and rank 1 repeated rank 0's paragraph as "rank 0 failed: ..."."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from melissa_trainer.trainer.dir_lost import gone_under
from melissa_trainer.trainer.hook_mark import HookMark
from melissa_trainer.trainer.rank_failure import NOTES_DIR

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the host lock is Linux's")

SCRIPT = Path(__file__).parents[1] / "scripts" / "remove_output_dir_ranks.py"


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_two_ranks_whose_output_dir_was_removed_stop_saying_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "trainer"))
    from test_rank_failure import left_running
    from two_ranks import launch_two_ranks

    out, records = tmp_path / "out", tmp_path / "records"
    records.mkdir()
    proc = launch_two_ranks(SCRIPT, str(out), str(records), timeout=150)
    said = proc.stdout[-3000:] + proc.stderr[-8000:]
    assert proc.returncode != 0 and "training ended" not in proc.stdout, said
    ends = [(records / f"exit-{r}.txt").read_text() for r in range(2)]
    assert ends == ["OutputDirLost 1\n", "OutputDirLost 1\n"], said
    assert proc.stderr.count("is gone: output_dir") == 1, said
    assert "this run stops now" in proc.stderr and "failed:" not in proc.stderr, said
    # no rank's traceback (torchrun's own, of its ChildFailedError, is the launcher's)
    assert "[rank0]" not in proc.stderr and "[rank1]" not in proc.stderr, said
    assert "killed by a signal" not in proc.stderr, said
    assert not out.exists(), sorted(out.rglob("*"))
    assert left_running(str(tmp_path)) == []


@pytest.mark.timeout(30)
def test_a_rank_tells_its_directory_gone_by_its_hook_mark(tmp_path: Path) -> None:
    """Gone: removed, or removed and made again (by another run, its own mark there);
    kept: the mark of this run where it was made."""
    out = tmp_path / "out"
    mark = HookMark(out / NOTES_DIR / "in-hook-1", "run-a")
    assert not gone_under(str(out), NOTES_DIR, 1, "run-a")
    assert gone_under(str(out), NOTES_DIR, 1, "run-b")  # (another run's mark)
    mark.close()
    shutil.rmtree(out)
    assert gone_under(str(out), NOTES_DIR, 1, "run-a")
    HookMark(out / NOTES_DIR / "in-hook-1", "run-b").close()  # another trainer's, same path
    assert gone_under(str(out), NOTES_DIR, 1, "run-a")
