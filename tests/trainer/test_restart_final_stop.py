"""A torchrun restart whose failed attempt stopped for good (``nonfinite``) ends in
`OnlineTrainer.__init__`, before its `Accelerator` (`trainer.final_restart`,
`stream.final_stop`): one ERROR line, `RestartAfterFinalStop` (a silent exit 1), the
final record left as it is, a peer's promising the restart made to promise none (what a
`Predictor` reads, ``rank_0.json``, says so). A first attempt, a run not under
torchrun, and records of another run are unaffected. The run end to end:
tests/trainer/test_restart_after_nonfinite.py.

The oracles: torchrun's variables set by the test, hand-written records (as
tests/client/test_nonfinite_final_under_restarts.py writes them), the files' bytes."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from stop_records import failing_trainer

from melissa_trainer.client.predict_lookup import stopped_story
from melissa_trainer.common.refusal import SaidOnRankZero
from melissa_trainer.hooks import Hook
from melissa_trainer.launcher.launcher import Launcher
from melissa_trainer.launcher.samplers import make_sampler
from melissa_trainer.stream.serving_rendezvous import NO_SERVER
from melissa_trainer.study.study import Study
from melissa_trainer.trainer.final_restart import RestartAfterFinalStop

pytestmark = pytest.mark.timeout(60)

RESTART = {"TORCHELASTIC_RUN_ID": "r", "TORCHELASTIC_MAX_RESTARTS": "1",
           "TORCHELASTIC_RESTART_COUNT": "1", "WORLD_SIZE": "2"}  # fmt: skip


def write_records(rendezvous: Path, codes: tuple[str, str], runs: tuple[str, str]) -> list[bytes]:
    """Stopped files of ranks 0 and 1 with records of `codes`, of runs `runs`; their bytes."""
    rendezvous.mkdir(parents=True, exist_ok=True)
    for rank, (code, run) in enumerate(zip(codes, runs, strict=True)):
        reason: dict[str, Any] = {"code": code, "message": f"{code} on rank {rank}\nmore"}
        if code == "nonfinite":
            reason.update(simulation_id=0, time_step=7)
        if code == "error":  # (its trainer failed on the peer's stop: a restart promised)
            reason.update(restarts_left=1)
        record = {"version": 1, "run_id": run, "reason": reason, "finished": [], "byes": [],
                  "complete": True}  # fmt: skip
        entry = {"endpoint": f"tcp://127.0.0.1:{9 + rank}", "run_id": run, "stopped": True,
                 "stop_record": record}  # fmt: skip
        (rendezvous / f"rank_{rank}.json").write_text(json.dumps(entry))
    return [(rendezvous / f"rank_{r}.json").read_bytes() for r in (0, 1)]


def no_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The set-up's first cost made to fail loudly: the refusal comes before it."""
    import melissa_trainer.trainer.loop as loop

    def built(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the Accelerator was built")

    monkeypatch.setattr(loop, "make_accelerator", built)


def test_a_restart_after_a_nonfinite_stop_does_not_set_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name, value in RESTART.items():
        monkeypatch.setenv(name, value)
    before = write_records(tmp_path / "rendezvous", ("error", "nonfinite"), ("run-a", "run-a"))
    no_accelerator(monkeypatch)
    with caplog.at_level(logging.ERROR), pytest.raises(RestartAfterFinalStop) as refused:
        failing_trainer(tmp_path, Hook(), resume_from_checkpoint="latest")
    assert isinstance(refused.value, SaidOnRankZero) and refused.value.code == 1
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert said == [str(refused.value)], said
    assert said[0].startswith(
        "restart 1 of 1 by the launcher does not train: the failed run stopped for good "
        "(nonfinite: nonfinite on rank 1; the stop record of rank 1 in "
    ), said
    assert "--resume_from_checkpoint latest" in said[0] and "\n" not in said[0]
    rendezvous = tmp_path / "rendezvous"
    assert (rendezvous / "rank_1.json").read_bytes() == before[1]  # (the final record)
    reason = json.loads((rendezvous / "rank_0.json").read_text())["stop_record"]["reason"]
    assert reason["code"] == "error" and reason["restarts_left"] == 0, reason
    assert reason["message"].startswith(
        "the restarted run (restart 1 of 1) failed before its receiver of rank 0 started; "
        "no restart left: the launcher gave up, the run is not coming back on its own "
        "(RestartAfterFinalStop: restart 1 of 1 by the launcher does not train"
    ), reason
    # what a Predictor reads (rank_0.json alone): no resume follows (before: one awaited)
    story = stopped_story(rendezvous, "run-a", NO_SERVER, False)
    assert story is not None and story[1] is True, story
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_with_restarts_left_no_restart_is_promised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2 of 3 restarts left: none resumes the run, said so (not "the launcher gave up")."""
    for name, value in {**RESTART, "TORCHELASTIC_MAX_RESTARTS": "3"}.items():
        monkeypatch.setenv(name, value)
    write_records(tmp_path / "rendezvous", ("error", "nonfinite"), ("run-a", "run-a"))
    no_accelerator(monkeypatch)
    with pytest.raises(RestartAfterFinalStop):
        failing_trainer(tmp_path, Hook(), resume_from_checkpoint="latest")
    entry = json.loads((tmp_path / "rendezvous" / "rank_0.json").read_text())
    reason = entry["stop_record"]["reason"]
    assert reason["restarts_left"] == 0, reason
    assert reason["message"].startswith(
        "the restarted run (restart 1 of 3) failed before its receiver of rank 0 started; "
        "no restart resumes it: the run is not coming back on its own (RestartAfterFinalStop"
    ), reason


@pytest.mark.parametrize(
    "environ",
    [
        {"TORCHELASTIC_RUN_ID": "r", "TORCHELASTIC_MAX_RESTARTS": "1",
         "TORCHELASTIC_RESTART_COUNT": "0"},
        {},
    ],
    ids=["a first attempt", "by hand"],
)  # fmt: skip
def test_a_run_that_is_no_restart_sets_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> None:
    for name in RESTART:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    write_records(tmp_path / "rendezvous", ("nonfinite", "nonfinite"), ("run-a", "run-a"))
    failing_trainer(tmp_path, Hook(), resume_from_checkpoint="latest")  # (no refusal)


@pytest.mark.parametrize(
    ("codes", "runs"),
    [(("error", "nonfinite"), ("run-a", "run-b")), (("preempted", "error"), ("run-a", "run-a"))],
    ids=["another run's record", "nothing final"],
)
def test_a_restart_after_no_final_stop_of_the_run_sets_up(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    codes: tuple[str, str],
    runs: tuple[str, str],
) -> None:
    for name, value in RESTART.items():
        monkeypatch.setenv(name, value)
    write_records(tmp_path / "rendezvous", codes, runs)
    no_accelerator(monkeypatch)
    with pytest.raises(AssertionError, match="the Accelerator was built"):
        failing_trainer(tmp_path, Hook(), resume_from_checkpoint="latest")


def test_a_study_reads_the_records_under_its_output_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `Study`'s receivers publish in ``{output_dir}/rendezvous`` (`note_output_dir`,
    the trainer's first call; asked alone, `final_stop` reads there too), nothing else.
    Its restart's rewrite there: tests/trainer/test_restart_fails_study_rendezvous.py."""
    for name, value in RESTART.items():
        monkeypatch.setenv(name, value)
    write_records(tmp_path / "out" / "rendezvous", ("error", "nonfinite"), ("run-a", "run-a"))
    study = Study(Launcher(["true"], make_sampler("uniform", {"a": (0.0, 1.0)}, seed=0), 2))
    said = study.final_stop(str(tmp_path / "out"))
    assert said is not None and said.startswith("restart 1 of 1 by the launcher"), said
    assert study.final_stop(str(tmp_path / "elsewhere")) is None
