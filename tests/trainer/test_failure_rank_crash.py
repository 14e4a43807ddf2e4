"""A rank that crashes (an error of its own, not a held source failure: a hook's, the
user's `process_sample`) while another rank holds its source's failure for the stop
agreement (`trainer.source_failure`): nothing hangs, each rank exits non-zero with a
line that says what happened. The crashed rank raises its own error (noted for the
others, `rank_failure.write_note`); the holding rank's agreement breaks at once (gloo:
the peer's connections closed as its process ended), and it says both: which rank
failed and why (its note), then its own source's failure, with no checkpoint (a save is
collective: the ranks could not agree on a step) and the latest one to resume from, in
one line (its own failure's: `SourceFailure.unagreed`). So too when the other rank is
killed by a signal and leaves no note.

The same when the crashed rank's error is a source's failure not held (one with a
`__cause__`: a study wraps its stream's errors so, `Study.wait_for`): raised at once, its
traceback the user's, while the other rank holds its own. Under NCCL the holding rank's
all-reduce would not break at once (the launcher's SIGTERM, then SIGKILL 30 s later,
ends it on one node; across nodes, NCCL's timeout), as any rank's collective does when
a peer raised: see docs/multi-gpu.md.

Two real processes, a gloo group on CPU (the agreement's real all-reduce), each with
what `SourceFailure` reads of a trainer at step 7."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RANK = r"""
import logging, sys
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
import torch, torch.distributed as dist
from melissa_trainer.core.stop_sync import StopSync
from melissa_trainer.sources.source import SourceError
from melissa_trainer.trainer.failing import failed
from melissa_trainer.trainer.source_failure import SourceFailure

rank, crashes, init, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
# (argv[5]: "hook", its hook fails; "source", its source's error with a cause)
logging.basicConfig(level=logging.ERROR, format=f"[rank {rank}] %(message)s")
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2,
                        timeout=timedelta(seconds=90))
fails = {"now": False}

def prefetch(n, interrupted=None):
    if fails["now"]:
        raise SourceError("the simulation study failed: simulation 1 failed")
    return n

trainer = SimpleNamespace(
    num_processes=2, process_index=rank, run_id="run", is_main_process=rank == 0,
    args=SimpleNamespace(output_dir=str(out)), checkpoint_root=out / "checkpoints",
    hooks=SimpleNamespace(marker=None),
    state=SimpleNamespace(global_step=7, last_save_step=0),
    stop_sync=SimpleNamespace(distributed=True),
    dataset=SimpleNamespace(prefetch=prefetch, num_pending=1),
    source=SimpleNamespace(note_stop=lambda *a: None),
    save_checkpoint=lambda: sys.exit("a collective save the ranks did not agree on"),
)
sync, failure = StopSync(torch.device("cpu"), 2), SourceFailure(trainer)
sync.agree(False, failure.prefetch(1))  # (one agreement together: the group works)
if rank == crashes and sys.argv[5] == "kill":  # gone with no note (the OOM killer)
    import os, signal
    os.kill(os.getpid(), signal.SIGKILL)
if rank == crashes and sys.argv[5] == "hook":  # the loop's `failed`, then it propagates
    try:
        raise RuntimeError("a hook's bug")
    except RuntimeError as exc:
        failed(trainer, exc)
        raise
if rank == crashes:  # its source's error has a cause: not held, raised at once
    def unheld(n, interrupted=None):
        raise SourceError("the receiver's thread failed") from ValueError("a bug")
    trainer.dataset.prefetch = unheld
    try:
        failure.prefetch(1)
    except SourceError as exc:  # the loop's `except SourceError`
        raise failure.said(exc, lambda: None) from exc.__cause__
fails["now"] = True
in_hand = failure.prefetch(1)  # held, for the agreement
try:
    sync.agree(False, in_hand, source_failed=failure.code)
except Exception as exc:  # the loop's `except`: `unagreed`, else `failed`
    own = failure.unagreed(exc)
    if own is None:
        failed(trainer, exc)
        raise
    raise own from None
raise AssertionError("the agreement did not break")
"""


@pytest.mark.e2e
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("crashes", "error"), [(1, "hook"), (0, "hook"), (0, "source"), (1, "kill")]
)
def test_a_rank_crashing_while_another_holds_a_failure_ends_both_with_their_lines(
    tmp_path: Path, crashes: int, error: str
) -> None:
    holds = 1 - crashes
    init = f"file://{tmp_path / 'group'}"
    env = {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, str(r), str(crashes), init, str(tmp_path / "out"), error],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )  # fmt: skip
        for r in range(2)
    ]
    try:
        said = [p.communicate(timeout=200)[1] for p in ranks]  # (nothing hangs)
    finally:
        for p in ranks:
            p.kill()
    codes = [p.returncode for p in ranks]
    assert codes[crashes] != 0 and codes[holds] == 1, (codes, said)
    holding = [line for line in said[holds].splitlines() if line.startswith(f"[rank {holds}]")]
    line = f"[rank {holds}] training stopped at step 7: the simulation study failed"
    if error == "kill":
        assert codes[crashes] == -9, (codes, said)
        # (no hook marks made here: the peer's pid is not checked, its end not guessed)
        peer = (
            f"meanwhile another rank is gone and left no note of why (rank {crashes}, the "
            f"only other: not checked from here: killed by a signal, or a network error?"
        )
    else:
        # the crashed rank: its own error, its traceback
        why = "RuntimeError: a hook's bug" if error == "hook" else "SourceError: the receiver's"
        assert why in said[crashes] and "Traceback" in said[crashes], said[crashes]
        peer = f"meanwhile rank {crashes} failed: {why}"
    # the holding rank: one line, its own failure, which rank failed and why (or that it
    # is gone), no checkpoint and the resume (before: the peer's ERROR line, with a
    # resume of its own, then the failure's)
    assert len(holding) == 1, said[holds]
    assert holding[0].startswith(line), said[holds]
    assert peer in holding[0], said[holds]
    assert "no checkpoint was written (the ranks could not agree on a step" in holding[0], said
    assert "Traceback" not in said[holds], said[holds]  # (said in its lines: exit 1, quiet)
