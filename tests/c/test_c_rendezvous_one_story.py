"""A C solver on a finished trainer's rendezvous (every file marked stopped) read
"rank_0.json: its trainer ended: ..." and "no rank_{r}.json file yet" in one message, as
the Python client did: two stories, the second false (a user trial). Both now say the
first only, and "no rank_{r}.json file yet" only of a directory with no rank file
(clients/c/src/rendezvous.c, endpoints.py `_read_rendezvous`; the Python side:
tests/client/test_rendezvous_words_final.py). Failed before."""

from __future__ import annotations

from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (script_exe's fixture)
from test_c_late_solver import ENDED, ENDPOINTS, ingest, start, stopped_study

from melissa_trainer.stream.stop_record import StopReason, build_record

pytestmark = pytest.mark.e2e  # every test here starts a process


@pytest.mark.timeout(120)
def test_a_finished_trainer_is_one_story_in_c_and_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "ended"
    record = build_record(ingest(2, 2), "run-a", StopReason("end", "end of stream"))
    python = stopped_study(rv, record)
    code, message, _ = start(script_exe, rv, tmp_path, 0.2)
    assert code != 0, message
    for said in (python, message):
        for rank in range(len(ENDPOINTS)):
            assert f"rank_{rank}.json: {ENDED.format(n=2)}" in said, said
        assert "no rank_{r}.json file yet" not in said, said  # (before: both, each)
    empty = tmp_path / "empty"  # (the guard: a directory with no rank file says so)
    empty.mkdir()
    code, message, _ = start(script_exe, empty, tmp_path, 0.2)
    assert code != 0 and "no rank_{r}.json file yet" in message, message
