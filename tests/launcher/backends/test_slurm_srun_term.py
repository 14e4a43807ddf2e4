"""mode="srun", stand-in commands (test_slurm_srun_outage.py's; their srun execs the
task, so the solver is the "srun" process the backend signals): how a stop names the
steps (`steps.step_stop`). The real tasks' SIGTERM and grace: test_slurm_srun_grace.py.

- The steps squeue lists get one ``scancel --signal=TERM`` naming them all, before their
  sruns are signalled.
- A controller that does not answer that scancel: the sruns are signalled at once, not
  after a grace in which nothing reached the solvers (with a grace of 600 s the test
  would time out; before step_stop no such scancel was sent at all).
- A frozen controller: that scancel given up after `step_stop.TERM_WAIT`, and no cancel
  by name after it."""

from __future__ import annotations

from pathlib import Path

import pytest
from kill_order import expected, launch_solvers
from test_slurm_srun_outage import fake  # noqa: F401 - the fixture (stand-in commands)
from waiting import wait_until

from melissa_trainer.launcher.backends import SlurmBackend
from melissa_trainer.launcher.backends.slurm import step_stop, step_tasks

pytestmark = pytest.mark.e2e  # it starts processes

N = 2
#: a scancel that cannot reach the controller when asked to signal
DOWN_FOR_SIGNALS = """#!/bin/bash
echo "$@" >> "$FAKE/scancel.calls"
if [[ "$1" == --signal=* ]]; then
    echo "scancel: error: Unable to contact slurm controller (connect failure)" >&2
    exit 1
fi
"""


def _stop(state: Path, tmp_path: Path, grace: float) -> list[int | None]:
    """Start N kill_order solvers as steps listed by squeue as 77.5, 77.6; kill them."""
    (state / "steps").write_text("".join(f"77.{5 + i}|mt-sim-{i}\n" for i in range(N)))
    backend = SlurmBackend(mode="srun")
    try:
        handles = launch_solvers(backend, tmp_path, N)
        return backend.kill_all(handles, grace=grace)
    finally:
        backend.close()


@pytest.mark.timeout(120)
def test_the_listed_steps_get_one_scancel_signal_term(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAILS", "0")  # (the stand-in srun runs its task at once)
    codes = _stop(fake, tmp_path, grace=0.5)
    assert codes == [None] * N
    calls = (fake / "scancel.calls").read_text().splitlines()
    assert calls[0] == "--signal=TERM 77.5 77.6", calls
    # the stand-in signalled nothing: the solvers got their SIGTERM from the sruns' kill,
    # together
    assert sorted(set((tmp_path / "said.txt").read_text().splitlines())) == expected(N)


@pytest.mark.timeout(120)
def test_sruns_are_signalled_at_once_when_the_controller_does_not_answer(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAILS", "0")
    scancel = Path(fake.parent / "bin" / "scancel")
    scancel.write_text(DOWN_FOR_SIGNALS)
    codes = _stop(fake, tmp_path, grace=600.0)  # (the solvers exit on SIGTERM: no wait)
    assert codes == [None] * N
    assert (fake / "scancel.calls").read_text().splitlines()[0] == "--signal=TERM 77.5 77.6"
    assert sorted(set((tmp_path / "said.txt").read_text().splitlines())) == expected(N)


#: a scancel whose signals never get an answer (a frozen controller)
FROZEN_FOR_SIGNALS = """#!/bin/bash
echo "$@" >> "$FAKE/scancel.calls"
if [[ "$1" == --signal=* ]]; then exec sleep 600; fi
"""
#: squeue as test_slurm_srun_outage's, its calls counted; never answers once
#: $FAKE/frozen exists
COUNTED_SQUEUE = """#!/bin/bash
echo "$@" >> "$FAKE/squeue.calls"
if [ -e "$FAKE/frozen" ]; then exec sleep 600; fi
cat "$FAKE/steps" 2>/dev/null; exit 0
"""


@pytest.mark.timeout(120)
def test_a_frozen_controller_holds_the_stop_term_wait_at_most(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scancel --signal=TERM that does not answer is given up after TERM_WAIT (here
    0.5 s), one squeue of the allocation asks whether the controller answers (given up
    after PROBE_WAIT, here 0.5 s: it does not), the sruns are signalled, and no other
    squeue nor scancel follows (each would wait out its own timeout on a frozen
    controller). Failed before: the steps were then cancelled by name, a squeue asked
    after the kill (on the test cluster, slurmctld SIGSTOPped: the stop took 40.1 s with
    stop_bound 17 s; 15.0 s then, within 22 s)."""
    monkeypatch.setenv("FAILS", "0")
    monkeypatch.setattr(step_stop, "TERM_WAIT", 0.5)
    monkeypatch.setattr(step_stop, "PROBE_WAIT", 0.5)
    (fake.parent / "bin" / "scancel").write_text(FROZEN_FOR_SIGNALS)
    (fake.parent / "bin" / "squeue").write_text(COUNTED_SQUEUE)
    (fake / "steps").write_text("".join(f"77.{5 + i}|mt-sim-{i}\n" for i in range(N)))
    backend = SlurmBackend(mode="srun")
    try:
        handles = launch_solvers(backend, tmp_path, N)
        wait_until(
            lambda: (
                [backend.poll(h) for h in handles] and all(h.step_id is not None for h in handles)
            ),
            "the steps' ids listed",
            30.0,
        )
        asked = len((fake / "squeue.calls").read_text().splitlines())
        (fake / "frozen").touch()  # (squeue's; scancel --signal never answers)
        codes = backend.kill_all(handles, grace=600.0)  # (the solvers exit on SIGTERM)
        after = (fake / "squeue.calls").read_text().splitlines()[asked:]
    finally:
        (fake / "frozen").unlink(missing_ok=True)
        backend.close()
    assert codes == [None] * N
    assert (fake / "scancel.calls").read_text().splitlines() == ["--signal=TERM 77.5 77.6"]
    # (the probe alone after the kill: no cancel by name)
    assert after == ["-h -j 77 -o %i"], after
    assert sorted(set((tmp_path / "said.txt").read_text().splitlines())) == expected(N)


def test_the_stop_bound_of_srun_mode_counts_its_commands_waits(fake: Path) -> None:  # noqa: F811
    """No command of an srun stop is retried (controller_wait): its squeues and scancels
    are given up after TERM_WAIT each (test_slurm_srun_stop_bound.py measures it)."""
    backend = SlurmBackend(mode="srun", controller_wait=40.0)
    waits = 4 * step_stop.TERM_WAIT + step_stop.PROBE_WAIT + step_tasks.GONE_WAIT
    assert backend.stop_bound(5.0) == 5.0 + step_stop.SRUN_END + waits
