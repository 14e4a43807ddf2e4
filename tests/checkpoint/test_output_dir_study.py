"""Two trainers on one output directory, with the heat example
(tests/checkpoint/test_crash_resume.py's `Run`): the second is refused at once with the
holder named, writes nothing there, and the first trains on every (simulation, step)
exactly once, each simulation with its own parameters; a run requeued after a SIGKILL of
the holder starts at once.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from test_crash_resume import SIMULATIONS, STEPS, Run, checkpoints, solvers_alive
from waiting import wait_until

from melissa_trainer.trainer.lock_holder import LOCK_FILE, OutputDirLocked
from melissa_trainer.trainer.output_lock import OutputDirLock

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
    pytest.mark.e2e,
]


def _holder(out: Path) -> dict[str, object]:
    text = (out / LOCK_FILE).read_text() if (out / LOCK_FILE).exists() else ""
    return json.loads(text) if text.strip() else {}


def _exactly_once(runs: list[tuple[Run, int | None]]) -> collections.Counter[tuple[int, int]]:
    """The (simulation, step) keys trained on by `runs`, each up to its step (None: all)."""
    lineage: collections.Counter[tuple[int, int]] = collections.Counter()
    for run, upto in runs:
        for step, keys in run.steps():
            if upto is None or step <= upto:
                lineage.update(keys)
    twice = {k: n for k, n in lineage.items() if n > 1}
    missing = {(s, t) for s in range(SIMULATIONS) for t in range(STEPS)} - set(lineage)
    assert not twice and not missing, (sorted(twice)[:10], sorted(missing)[:10])
    return lineage


@pytest.mark.timeout(240)
def test_a_second_trainer_on_the_same_output_dir_is_refused(tmp_path: Path) -> None:
    # The first waits at its first step while its hold file exists (`Run.hold`, up to
    # 10 minutes), until the test lets it go: unheld, it finished on a loaded machine
    # while the second trainer started, and the second then met its checkpoints, not
    # its lock. (The hold must be `Run`'s own: `Run` sets $LINEAGE_HOLD to it, so a
    # hold of the test's own in the environment was overridden and never held.)
    hold = tmp_path / "first.hold"
    hold.touch()
    first = Run(tmp_path, "first")
    assert first.hold == hold
    out = first.out
    second: Run | None = None
    try:
        wait_until(
            lambda: _holder(out).get("state") == "running" and first.steps(),
            lambda: f"the first's training: {first.output()}",
            90,
            procs=[first.proc],
        )
        published = json.loads((out / "rendezvous" / "rank_0.json").read_text())
        assert published["run_id"] == _holder(out)["run_id"]

        # (what any second trainer does first: the lock; refused at once, a running
        # holder is not waited for: a wait would outlast this test's timeout)
        with pytest.raises(OutputDirLocked, match=f"pid {first.proc.pid}"):
            OutputDirLock(out, "probe").acquire(stopping_wait=3600.0)

        second = Run(tmp_path, "second", paced=False)
        code = second.wait(120)
        text = Path(second.stderr.name).read_text()
        assert code != 0, text
        assert f"pid {first.proc.pid}" in text and "is in use by another trainer" in text, text
        # it launched nothing and rewrote nothing
        assert json.loads((out / "rendezvous" / "rank_0.json").read_text()) == published
        assert not second.steps()
        assert _holder(out)["pid"] == first.proc.pid
        # the first was held at its first step all along (its lock, not its finish, was
        # what the second met)
        assert [step for step, _ in first.steps()] == [1], first.steps()[-1:]
        hold.unlink()
        assert first.wait(180) == 0, first.output()
    finally:
        hold.unlink(missing_ok=True)
        if first.proc.poll() is None:
            first.wait(1)
    lineage = _exactly_once([(first, None)])
    assert sum(lineage.values()) == SIMULATIONS * STEPS
    assert all(len(p) == 1 for p in first.parameters.values()), first.parameters
    assert not solvers_alive(out)


@pytest.mark.timeout(300)
def test_a_requeue_after_the_holder_was_sigkilled_starts_at_once(tmp_path: Path) -> None:
    first = Run(tmp_path, "first")
    try:
        wait_until(
            lambda: checkpoints(first.out),
            lambda: f"a checkpoint: {first.output()}",
            90,
            procs=[first.proc],
        )
        first.kill()
    finally:
        first.wait(30)
    assert _holder(first.out)["pid"] == first.proc.pid  # the dead holder's record stays
    saved = max(checkpoints(first.out))  # (the first is dead: what the requeue resumes)
    requeued = Run(tmp_path, "requeued", "--resume_from_checkpoint", "latest", paced=False)
    code = requeued.wait(200)
    text = Path(requeued.stderr.name).read_text()
    assert code == 0, text
    assert "waiting up to" not in text  # a dead holder is not waited for
    lineage = _exactly_once([(first, saved), (requeued, None)])
    assert sum(lineage.values()) == SIMULATIONS * STEPS
