"""A study interrupted on k training ranks and resumed from `latest` on m ranks (issue 33:
"Resume on any number of ranks") keeps every sample exactly once, whole runs, seen as a
user sees them: the heat example, gloo ranks under `accelerate launch` on CPU.

Each case runs the study on k ranks, interrupts it after a checkpoint (SIGKILL of every
process, or SIGTERM to one rank: the preemption path, which checkpoints the step every
rank stops at), resumes it with ``--resume_from_checkpoint latest`` on m ranks, and runs
it to its end. The oracle is built from the records of both runs
(`scripts/heat_resize.py`), not from the library's counters:

* **put once**: every ``(simulation, time step)`` of the study is put into a buffer
  exactly once across both runs: the first run's puts that its checkpoint holds (on each
  rank, the first ``put`` lines of its put log, ``put`` read from the checkpoint's
  ``rank_R/buffer.json``), then every put of the resumed run;
* **nothing lost or duplicated by the resize**: the samples held by the k ranks'
  buffers and pending batches in the checkpoint are those the m ranks hold right after
  loading it, each held by one rank once;
* **trained**: in the lineage of the final state (the first run's steps up to the
  checkpoint, then the resumed run's), FIFO, FIRO: every ``(simulation, time step)``
  trained exactly once; reservoir: every one at least once (a reservoir evicts only
  samples already drawn, and serves every undrawn one after its close), and the resumed
  run trains only samples it loaded or was put. On several ranks, but for those left
  untrained at the end: the ranks stop together when the first runs out of data
  (`melissa_trainer.core.stop_sync`), so what the others still hold then (a batch or so: their
  totals differ after a resize) is never trained. Those are read from each rank's
  buffer and pending batches after `train()` returned, and the test prints them;
* the summary's ``samples_received`` counts each sample once, and the study finished
  every simulation, each with one parameter vector (an adaptive study's too).

The runs are tests/checkpoint/resize_runs.py's, the oracle resize_oracle.py's; a study
whose `accelerate launch` is killed -9, then resumed: test_resume_launcher_killed.py.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
from pathlib import Path

import pytest
from process_tree import processes_with
from resize_oracle import check_resumed, held, rank_dirs
from resize_runs import SOLVERS_GONE, Case, Run, checkpoints
from waiting import wait_until

from melissa_trainer.common.checkpoint_names import latest_checkpoint

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
    pytest.mark.e2e,
]


BREED = ("--sampler", "breed", "--simulation_loss_steps", "4")
CASES = {
    "1to2-fifo-sigkill": Case(1, 2, ("--buffer", "fifo"), signal.SIGKILL),
    "2to1-reservoir-sigkill": Case(
        2, 1, ("--buffer", "reservoir", "--sample_to_insert_ratio", "none"), signal.SIGKILL
    ),
    "2to3-firo-adaptive-sigterm": Case(2, 3, ("--buffer", "firo"), signal.SIGTERM, True),
    "3to2-reservoir-ratio-sigterm": Case(
        3, 2, ("--buffer", "reservoir", "--sample_to_insert_ratio", "2"), signal.SIGTERM
    ),
}


def interrupt(run: Run, case: Case) -> None:
    """After a checkpoint, while simulations still run (so that the resumed run receives
    again, routed to its own ranks): SIGKILL two steps after it, or SIGTERM."""

    def ready() -> bool:
        saved = checkpoints(run.out)
        trained = max((s for s, _ in run.steps()), default=0)
        return bool(saved) and trained >= saved[-1] + 2 and bool(processes_with(rendezvous))

    rendezvous = str(run.out / "rendezvous")
    try:
        wait_until(
            ready,
            lambda: f"the interruption: {run.output()}",
            150,
            procs=[run.proc],
            interval=0.05,
        )
        if case.signal == signal.SIGKILL:
            run.kill()
        else:
            run.terminate_one_rank()
        code = run.wait(90)
    finally:
        run.wait(10)
    if case.signal == signal.SIGTERM:  # `accelerate launch` exits 1 when a rank exits non-zero
        assert code == (143 if case.before == 1 else 1), run.output()
        assert re.search(r"preempted by SIGTERM at step \d+", run.output()), run.output()
    # local solvers die with their rank (PR_SET_PDEATHSIG); the bound is a hang's, not a
    # speed's
    wait_until(lambda: not processes_with(rendezvous), SOLVERS_GONE, 60, interval=0.1)


@pytest.mark.timeout(420)
@pytest.mark.parametrize("name", list(CASES))
def test_a_study_resumed_on_another_number_of_ranks_keeps_every_sample_once(
    tmp_path: Path, name: str
) -> None:
    case = CASES[name]
    extra = (*case.buffer, *(BREED if case.adaptive else ()))
    first = Run(tmp_path, "first", case.before, *extra, paced=True)
    interrupt(first, case)
    checkpoint = latest_checkpoint(first.out / "checkpoints")
    assert checkpoint is not None, first.output()
    saved = int(checkpoint.name.split("-")[1])
    if case.signal == signal.SIGTERM:
        assert f"preempted by SIGTERM at step {saved}" in first.output(), first.output()
    # aside: the resumed run's own checkpoints rotate it away (--max_to_keep)
    resumed_from = shutil.copytree(checkpoint, tmp_path / "resumed-from")
    second = Run(tmp_path, "second", case.after, *extra, "--resume_from_checkpoint", "latest",
                 paced=False)  # fmt: skip
    assert second.wait(300) == 0, second.output()
    check_resumed(name, case, first, second, resumed_from, saved)


@pytest.mark.timeout(420)
def test_a_resume_on_fewer_ranks_refused_for_buffer_size_succeeds_as_its_error_advises(
    tmp_path: Path,
) -> None:
    """2 -> 1 ranks with reservoirs full of never-drawn samples (training starts only
    once each rank's 32 are in, and is killed -9 after its first checkpoint): they do
    not fit one rank of the same --buffer_size, so the resume is refused, before
    anything is loaded or launched, by one error line naming the --buffer_size that
    fits; resumed with it (a user's report: any other size was refused, with advice that
    did not work), the study finishes and keeps every sample once (the oracle above)."""
    buffer = ("--buffer", "reservoir", "--sample_to_insert_ratio", "none", "--buffer_size", "32",
              "--watermark", "32", "--batch_size", "2")  # fmt: skip
    case = Case(2, 1, buffer, signal.SIGKILL)
    first = Run(tmp_path, "first", 2, *buffer, paced=True)
    try:
        wait_until(
            lambda: checkpoints(first.out),
            lambda: f"a checkpoint: {first.output()}",
            150,
            procs=[first.proc],
            interval=0.05,
        )
        first.kill()
    finally:
        first.wait(90)
    rendezvous = str(first.out / "rendezvous")
    wait_until(lambda: not processes_with(rendezvous), SOLVERS_GONE, 60, interval=0.1)
    checkpoint = latest_checkpoint(first.out / "checkpoints")
    assert checkpoint is not None, first.output()
    saved = int(checkpoint.name.split("-")[1])
    resumed_from = shutil.copytree(checkpoint, tmp_path / "resumed-from")
    # read here: the samples the two ranks never drew, what one rank of 32 cannot hold
    undrawn = 0
    for directory in rank_dirs(resumed_from):
        draws = json.loads((directory / "buffer.json").read_text())["contents"]["draws"]
        undrawn += sum(1 for n in draws if n == 0)
    assert undrawn > 32, f"the reservoirs hold {undrawn} never-drawn samples"

    refused = Run(tmp_path, "refused", 1, *buffer, "--resume_from_checkpoint", "latest",
                  paced=False)  # fmt: skip
    assert refused.wait(120) == 2, refused.output()
    text = Path(refused.log.name).read_text()
    assert "Traceback" not in text, text[-3000:]
    advice = r"; resume with --buffer_size (\d+) or more \(per rank; this run's is 32\), or on"
    advised = re.findall(advice, text)
    assert len(advised) == 1, text[-3000:]
    size = int(advised[0])
    held_in_checkpoint = sum(len(held(d)) for d in rank_dirs(resumed_from))
    assert undrawn <= size <= held_in_checkpoint, (undrawn, size, held_in_checkpoint)
    assert not refused.put_log(0) and not refused.dump.exists()  # nothing loaded, none put
    assert latest_checkpoint(first.out / "checkpoints") == checkpoint  # nothing written

    second = Run(tmp_path, "second", 1, *buffer, "--buffer_size", str(size),
                 "--resume_from_checkpoint", "latest", paced=False)  # fmt: skip
    assert second.wait(300) == 0, second.output()
    loaded = json.loads((second.dump / "rank_0" / "buffer.json").read_text())
    assert loaded["capacity"] == size
    check_resumed("2to1-undrawn-over-size", case, first, second, resumed_from, saved, size)
