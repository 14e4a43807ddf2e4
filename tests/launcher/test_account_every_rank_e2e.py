"""With two training ranks, the study's end-of-run account counts the samples every rank's
receiver took in (`stream.rank_activity`: the other ranks' steps handed to rank 0 with
their heartbeat), not rank 0's alone.

The study of tests/launcher/test_silence_heard_on_every_rank_e2e.py (its `run_study`):
two simulations of tests/launcher/rank_one_solver.py, every step of simulation 1 routed
to receiver 1. Simulation 1 hangs after `HANG_AFTER` steps, is killed as silent, and,
with ``max_restarts=0, on_failure="abandon"``, given up. Before, the account read rank
0's counts only: simulation 1 had sent nothing there, so the account said "1 failed with
no sample received", though its steps had reached rank 1's buffer. The oracle: the
solver's own log (it printed "step t sent" for each of its steps before "hanging"), the
kill's words (silent since its last message: the trainer heard it), and the account's
words: given up part-way, after sending some samples, never "no sample received"."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_silence_heard_on_every_rank_e2e import STEP_S, STEPS, run_study

from melissa_trainer.launcher.log_lines import LAUNCHER

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(480)]

#: simulation 1 hangs after this many steps, all sent to receiver 1; the silence bound
#: between two messages, and the start-up's (a loaded machine's start-up is no hang)
HANG_AFTER, TIMEOUT, STARTUP = 3, 4.0, 60.0


def test_a_simulation_given_up_after_sending_to_rank_1_only_is_said_part_way(
    tmp_path: Path,
) -> None:
    code, text = run_study(
        tmp_path, RS_STEPS=str(STEPS), RS_STEP_S=str(STEP_S), RS_TIMEOUT=str(TIMEOUT),
        RS_STARTUP=str(STARTUP), RS_HANG_SIM="1", RS_HANG_AFTER=str(HANG_AFTER),
        RS_MAX_RESTARTS="0", RS_ON_FAILURE="abandon",
    )  # fmt: skip
    solver = (tmp_path / "out" / "study" / "logs" / "sim-1.log").read_text()
    sent = [f"step {2 * i} sent" for i in range(HANG_AFTER)]
    own = [line for line in solver.splitlines() if not line.startswith(LAUNCHER)]
    assert own == [*sent, "hanging"], solver  # (no restart: abandoned; the launcher's lines out)
    kills = [line for line in text.splitlines() if " silent for " in line]
    assert len(kills) == 1 and kills[0].startswith("simulation 1 (attempt 0,"), text[-4000:]
    assert "(since its last message;" in kills[0], kills[0]  # (heard: rank 1 took them in)
    assert "no sample received" not in text, text[-4000:]
    given_up = [line for line in text.splitlines() if "given up part-way" in line]
    assert len(given_up) == 1, text[-4000:]
    assert "after sending some samples: simulation 1," in given_up[0], given_up[0]
    assert "1 contributed samples" not in text and "2 contributed samples" in text, text[-4000:]
    assert code == 0, text[-4000:]
