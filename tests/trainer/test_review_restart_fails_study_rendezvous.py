"""Review finding (hrev10): a `Study`'s receivers write their rendezvous files (and stop
records) in ``{output_dir}/rendezvous`` by default, a directory the study learns in
`Study.configure` (`StreamSource.fill_in`), which the trainer calls after
`claim_output_dir`, that is after `make_accelerator`. ae1f1b11's set-up path
(`starting.setup_failed` -> `StreamSource.note_start_failed`) finds ``rendezvous_dir``
None then and rewrites nothing: for a study on the default directory (the documented,
usual set-up) a last restart whose process group does not form leaves the failed run's
record promising a restart, and its clients wait out ``follow_timeout``. The tests of
ae1f1b11 give the `StreamSource` an explicit ``rendezvous_dir`` (tests/stop_records.py),
so they cannot see it.

Oracle: the failed run's record (``error``, 1 restart left: what the first attempt wrote)
put by hand in ``{output_dir}/rendezvous/rank_0.json``; torchrun's variables for restart
1 of 1; `make_accelerator` replaced by one raising torch's error, as in
tests/trainer/test_restart_failed_early.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from stop_records import record_trainer
from test_restart_failed_early import attempt

from melissa_trainer import StreamSource, Study
from melissa_trainer.launcher import Launcher, LocalBackend

pytestmark = pytest.mark.timeout(120)

ENDPOINT = "tcp://127.0.0.1:9"


@pytest.mark.xfail(
    strict=True,
    reason="hrev10: a Study's default rendezvous_dir is filled in after make_accelerator, "
    "so a restart failing there does not rewrite the record",
)
def test_a_studys_last_restart_whose_set_up_fails_says_none_is_left(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import melissa_trainer.trainer.loop as loop

    rendezvous = tmp_path / "out" / "rendezvous"
    rendezvous.mkdir(parents=True)
    reason = {"code": "error", "message": "training failed", "restarts_left": 1}
    record = {"version": 1, "run_id": "run-a", "reason": reason, "finished": [], "byes": [],
              "complete": True}  # fmt: skip
    entry = {"stopped": True, "endpoint": ENDPOINT, "stop_record": record}
    (rendezvous / "rank_0.json").write_text(json.dumps(entry))
    attempt(monkeypatch, 1, 1)

    def no_group(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Gloo connectFullMesh failed: Connection refused")

    monkeypatch.setattr(loop, "make_accelerator", no_group)
    launcher = Launcher([sys.executable, "-c", "pass"], [{"a": 0.0}], 1, backend=LocalBackend())
    with pytest.raises(RuntimeError, match="connectFullMesh"):
        record_trainer(tmp_path, Study(launcher, StreamSource()))
    said = json.loads((rendezvous / "rank_0.json").read_text())["stop_record"]["reason"]
    assert said["restarts_left"] == 0, said  # today 1: the restart still promised
