"""The directory a C solver's rendezvous typo hint names ("did you mean DIR?",
clients/c/src/missing_dir.c) is chosen as the Python client's
(`rendezvous_words.missing_note`; tests/client/test_rendezvous_meant.py): a running
trainer's when one of the close names leads to one, the most recently modified of them;
else the closest, said to be a stopped run's when its rank files are of no running
trainer. Before, the closest name alone chose: an older run's directory, its trainer
stopped, past the running one's.

A running trainer's files are a real `Receiver`'s; a stopped one's are marked as a
trainer marks them; the solver is mt_script (`mt_client_start`'s final error)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (script_exe's fixture)
from helpers import running
from test_c_late_solver import start

from melissa_trainer.client.rendezvous_words import STOPPED_RUN, missing_note
from melissa_trainer.stream.endpoints import mark_stopped, write_rendezvous

pytestmark = pytest.mark.e2e  # every test here starts a process

SOURCE = "mt_set_rendezvous"  # (where mt_script's path comes from, in the words)


def stopped_run(rendezvous: Path) -> None:
    write_rendezvous(rendezvous, 0, 1, "tcp://127.0.0.1:9", {"run_id": "old"})
    mark_stopped(rendezvous, 0, "tcp://127.0.0.1:9")


@pytest.mark.timeout(120)
def test_the_running_trainers_directory_is_meant_as_in_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """study_b (closer to study_c: stopped, then running but an hour older) and
    study_new (running): study_new; study_b alone, stopped: it, said so."""
    stopped_run(tmp_path / "study_b" / "rendezvous")
    typo = tmp_path / "study_c" / "rendezvous"
    new = tmp_path / "study_new" / "rendezvous"
    with running(rendezvous_dir=str(new), run_id="new"):
        _, message, _ = start(script_exe, typo, tmp_path, 0.2)
        python = missing_note(typo, SOURCE)
    assert python.endswith(f"; did you mean {new}?"), python
    assert message.endswith(python), (message, python)  # (before: study_b)

    older = tmp_path / "study_b" / "rendezvous"
    with running(rendezvous_dir=str(older), run_id="old2"), running(rendezvous_dir=str(new)):
        then = os.stat(older).st_mtime_ns - 3600 * 10**9
        os.utime(older, ns=(then, then))
        _, message, _ = start(script_exe, typo, tmp_path, 0.2)
        python = missing_note(typo, SOURCE)
    assert python.endswith(f"; did you mean {new}?"), python
    assert message.endswith(python), (message, python)

    # (both stopped now, their files marked: the closest, said to be a stopped run's)
    _, message, _ = start(script_exe, typo, tmp_path, 0.2)
    python = missing_note(typo, SOURCE)
    assert python.endswith(f"; did you mean {older}?{STOPPED_RUN}"), python
    assert message.endswith(python), (message, python)
