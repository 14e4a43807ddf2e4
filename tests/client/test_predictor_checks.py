"""A `Predictor`'s mistakes said at once, with the fix (a user trial, findings F3, F4,
F7): a simulation id that is not a u64 (before: a bare ``struct.error`` at the first
request, a TypeError of a log format for a string, the whole timeout then "rank 0.5 of
1" for a float); a run id that is not the serve files' (before: the whole timeout at
every request); a rendezvous path that is not a directory (before: a silent timeout,
no typo hint, where the `Client` says "a typo is likely" and the directory meant).

No trainer: serve files written by hand (`write_serving`), nothing listens; each
request's timeout is long (20 s), so "at once" is a failure before it, never a time
asserted."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from melissa_trainer import wire as protocol
from melissa_trainer.client.predict import Predictor
from melissa_trainer.client.predict_errors import PredictTimeout
from melissa_trainer.stream.serving_rendezvous import write_serving

pytestmark = pytest.mark.timeout(60)

_U = {"u": np.zeros(4, np.float32)}


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (-1, "simulation_id=-1 is out of range [0, 2**64)"),
        (2**70, f"simulation_id={2**70} is out of range [0, 2**64)"),
        (2**64, f"simulation_id={2**64} is out of range [0, 2**64)"),
        ("0", "simulation_id must be an integer, not '0': give the id as an int (int(...)"),
        (1.5, "simulation_id must be an integer, not 1.5"),
        (True, "simulation_id must be an integer, not True"),
        (None, "simulation_id must be an integer, not None"),
    ],
)
def test_a_bad_simulation_id_is_refused_at_construction(
    bad: object, said: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError) as raised:
        Predictor(bad, rendezvous_dir=tmp_path)  # type: ignore[arg-type]
    assert said in str(raised.value) and str(raised.value).startswith("Predictor: ")


def test_the_largest_u64_and_a_numpy_integer_are_ids(tmp_path: Path) -> None:
    with Predictor(2**64 - 1, rendezvous_dir=tmp_path) as p:
        assert p.simulation_id == 2**64 - 1
    with Predictor(np.int64(7), rendezvous_dir=tmp_path) as p:  # type: ignore[arg-type]
        assert p.simulation_id == 7 and type(p.simulation_id) is int


def test_serve_files_of_another_run_fail_the_request_at_once(tmp_path: Path) -> None:
    specs = protocol.field_specs({"u": ((4,), "float32")})
    write_serving(tmp_path, 0, 1, "tcp://127.0.0.1:1", specs, "run-a", None)
    with Predictor(0, rendezvous_dir=tmp_path, run_id="run-b") as p:
        for _ in range(2):  # (the second in the backoff: at once too, the same words)
            with pytest.raises(PredictTimeout) as raised:
                p.predict(_U, timeout=20)
            text = str(raised.value)
            assert "belongs to another run (['run-a'])" in text, text
            assert "not run 'run-b' that this predictor asks as (run_id)" in text, text
            assert "give run_id the trainer's run id" in text, text
            # (a Predictor's own words: it follows no restarted trainer, as a Client does;
            # its next request looks the serve files up again)
            assert "Client" not in text, text
            assert (
                "use the rendezvous directory of run 'run-b' (each request looks the serve "
                "files up again: a trainer of run 'run-b' that publishes here later serves "
                "the next one)"
            ) in text, text


def test_serve_files_of_many_other_runs_are_counted_past_five(tmp_path: Path) -> None:
    """Failed before: every run listed, as C did not (its why of 512 bytes, cut within the
    7th run of 64 characters): both say the first 5, sorted, and their count."""
    specs = protocol.field_specs({"u": ((4,), "float32")})
    runs = [f"run-{k}-" + "x" * 58 for k in range(8)]
    for rank, run in enumerate(reversed(runs)):
        write_serving(tmp_path, rank, 8, f"tcp://127.0.0.1:{rank + 1}", specs, run, None)
    shown = ", ".join(f"'{run}'" for run in runs[:5])
    with (
        Predictor(0, rendezvous_dir=tmp_path, run_id="run-b") as p,
        pytest.raises(PredictTimeout) as raised,
    ):
        p.predict(_U, timeout=20)
    text = str(raised.value)
    assert f"belongs to another run ([{shown}, ... (8 in all)]), not run 'run-b'" in text, text


def test_the_same_run_s_file_is_still_used(tmp_path: Path) -> None:
    # (the rule above is for another run's files only: this run's is looked up)
    specs = protocol.field_specs({"u": ((4,), "float32")})
    write_serving(tmp_path, 0, 1, "tcp://127.0.0.1:1", specs, "run-a", None)
    with (
        Predictor(0, rendezvous_dir=tmp_path, run_id="run-a") as p,
        pytest.raises(PredictTimeout, match="refused the connection"),
    ):
        p.predict(_U, timeout=20)  # (nothing listens at port 1: at once)


def test_a_mistyped_rendezvous_dir_says_the_directory_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from melissa_trainer.client import predict_lookup

    (tmp_path / "rendezvous").mkdir()
    typo = tmp_path / "rendezvouz"
    monkeypatch.setattr(predict_lookup, "NOTICE_AFTER", 0.0)  # (warned at the first lookup)
    caplog.set_level(logging.WARNING, "melissa_trainer.client.predict")
    with Predictor(0, rendezvous_dir=typo) as p:
        with pytest.raises(PredictTimeout) as raised:
            p.predict(_U, timeout=0.2)
        with pytest.raises(PredictTimeout, match="did you mean"):
            p.predict(_U, timeout=0.2)
    meant = f"did you mean {tmp_path / 'rendezvous'}?"
    assert meant in str(raised.value), raised.value
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings  # (once, not at each request)
    assert warnings[0].startswith(f"Predictor: rendezvous_dir={typo}: ") and meant in warnings[0]


def test_a_missing_parent_says_a_typo_is_likely_naming_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path / "nowhere" / "rendezvous"))
    monkeypatch.delenv("MELISSA_TRAINER_SERVE_ENDPOINTS", raising=False)
    with Predictor(0) as p, pytest.raises(PredictTimeout) as raised:
        p.predict(_U, timeout=0.2)
    assert "a typo in MELISSA_TRAINER_RENDEZVOUS is likely" in str(raised.value)
    with Predictor(0, rendezvous_dir=tmp_path / "x" / "y") as p, pytest.raises(PredictTimeout) as e:
        p.predict(_U, timeout=0.2)
    assert "a typo in rendezvous_dir is likely" in str(e.value)


def test_a_missing_directory_with_no_likely_typo_says_what_creates_it(tmp_path: Path) -> None:
    # (htrial27: "cannot list ...: No such file or directory" at every request, no hint:
    # its parent exists and no name there is close)
    with Predictor(0, rendezvous_dir=tmp_path / "qqq") as p, pytest.raises(PredictTimeout) as e:
        p.predict(_U, timeout=0.2)
    said = str(e.value)
    assert "the trainer creates it at its start ({output_dir}/rendezvous)" in said, said
    assert said.endswith("check rendezvous_dir if one runs"), said


def test_no_warning_before_notice_after(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # (a solver may start before its trainer creates the directory: quiet at first)
    from melissa_trainer.client import predict_lookup

    caplog.set_level(logging.WARNING, "melissa_trainer.client.predict")
    with (
        Predictor(0, rendezvous_dir=tmp_path / "later") as p,
        pytest.raises(PredictTimeout, match="cannot list"),
    ):
        p.predict(_U, timeout=0.05)
    assert predict_lookup.NOTICE_AFTER >= 1.0  # (so 0.05 s of waiting is before it)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
