"""With two training ranks, the study's end-of-run account names the first time step a
simulation had refused for NaN or Inf over every rank's receiver (`stream.rank_activity`:
each other rank hands its first refused step to rank 0 with its heartbeat), not rank 0's.

The study of tests/launcher/test_silence_heard_on_every_rank_e2e.py (its `run_study`):
two simulations of tests/launcher/rank_one_solver.py, every step of simulation 1 (time
steps 0, 2, 4, ...) routed to receiver 1. Simulation 1 sends NaN from its `NAN_FROM`-th
step on (time step ``2 * NAN_FROM``), which every receiver refuses (``nonfinite="refuse"``,
the default) and the run goes on. Before, the account read rank 0's first refused steps
only: rank 0 refused none of simulation 1's, so its "turned NaN or Inf part-way" line
named no time step. The oracle: the solver's own log (the steps it sent, its client's
word on the first that held NaN); the account's line names that step."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_silence_heard_on_every_rank_e2e import STEP_S, STEPS, run_study

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(480)]

#: simulation 1 sends NaN from this step of its on (its time step 2 * NAN_FROM)
NAN_FROM = 6


def test_the_account_names_the_first_step_rank_1_refused(tmp_path: Path) -> None:
    code, text = run_study(
        tmp_path, RS_STEPS=str(STEPS), RS_STEP_S=str(STEP_S), RS_TIMEOUT="60",
        RS_NAN_SIM="1", RS_NAN_FROM=str(NAN_FROM),
    )  # fmt: skip
    solver = (tmp_path / "out" / "study" / "logs" / "sim-1.log").read_text()
    sent = [line for line in solver.splitlines() if line.startswith("step ")]
    assert sent == [f"step {2 * i} sent" for i in range(STEPS)], solver
    assert f"of time step {2 * NAN_FROM} holds NaN or Inf" in solver, solver  # (its client's)
    lines = text.splitlines()
    partway = [i for i, line in enumerate(lines) if "turned NaN or Inf part-way (" in line]
    assert len(partway) == 1, text[-4000:]
    said = " ".join(lines[partway[0] : partway[0] + 3])  # (the account's line, wrapped)
    refused = STEPS - NAN_FROM
    assert f"{refused} of its {STEPS} samples refused" in said, said
    assert f"from time step {2 * NAN_FROM} (simulation 1)" in said, said
    assert code == 0, text[-4000:]
