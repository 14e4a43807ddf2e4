"""The C client says what the Python `Predictor` says of the trainer that ran in its
rendezvous directory and stopped (clients/c/src/missing_dir.c mt_stop_reason,
mt_stopped_story; client/predict_lookup.py stop_reason, stopped_story), word for word
(tests/client/test_predict_stopped_note.py checks Python's words):

* what would serve there, per stop code (both said "a resumed one would serve there" of
  every code, also of a run that ended or failed);
* a run that ended or failed fails a request at its first look, in one story with the
  other cases ("(yet)" only where no trainer ran): both waited the request's whole
  timeout (failed before: a request of 120 s outlived the test's 60 s); one a resume
  may follow is waited for;
* a reason's message cut at 200 characters, never inside one (C cut at 200 bytes, two
  bytes of a character apart: a non-ASCII message was cut at 100 characters, or inside
  one);
* a stopped trainer of another run than the client's (``MELISSA_TRAINER_RUN_ID``) is not
  quoted as its; with no run id, an end record already there at the first look is
  waited past (an earlier run's, maybe), quoted at the timeout;
* a client that was served and lost its trainer is told the stop reason too.

Real parts: the compiled client (`clients/c/tests/mt_script.c`) in its own process, a
real `Receiver` writing the rendezvous file, a real `PredictServer` serving."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_driver import run_script
from helpers import running
from predict_runs import CPredict
from predict_script import MT_ETIMEDOUT, Script
from predict_server import serving_u
from test_c_env_parity import ASK, RENDEZVOUS, by_hand  # noqa: F401

from melissa_trainer.client.predict import Predictor
from melissa_trainer.stream.stop_record import StopReason

pytestmark = pytest.mark.e2e  # every test here starts a process

FIELDS = {"u": ((4,), np.float32)}
ENDED = (
    "the run ended, no resume follows on its own (after max_steps, one resumed with a "
    "larger --max_steps would serve there)"
)
FAILED = "no resume follows on its own (one resumed once that is fixed would serve there)"
#: after an end at the stream's end, where a larger --max_steps trains nothing (its
#: ENDED advice was said there too)
STREAM_ENDED = (
    "the run ended at its stream's end, no resume follows on its own (a larger "
    "--max_steps trains nothing past it: a new run would serve there, or one resumed "
    "with more --pseudo_epochs if its buffer has samples to replay)"
)
RUN_ID = "MELISSA_TRAINER_RUN_ID"


def python_words(rendezvous: Path, run_id: str | None = None, timeout: float = 1) -> str:
    """The Python `Predictor`'s error at a request of `timeout` s (simulation 1), in C's
    names."""
    predictor = Predictor(1, rendezvous_dir=rendezvous, run_id=run_id)
    try:
        with pytest.raises(TimeoutError) as error:
            predictor.predict({"u": np.zeros(4, np.float32)}, timeout=timeout)
    finally:
        predictor.close()
    return str(error.value)


def stopped_with(rendezvous: Path, reason: StopReason) -> None:
    """A trainer's rank of run "run-a" that ran in `rendezvous` and stopped for `reason`."""
    with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-a") as receiver:
        receiver.note_stop(reason)


#: what a lookup that found no serve file says of it (read_serving's why, no "(yet)")
NOW = "no trainer serves predictions there"
#: the words a request's failure adds after a trainer found gone (the backoff's)
AGAIN = "; the next request looks the endpoint up again"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (StopReason("end", "max_steps 5 reached"), f"(end: max_steps 5 reached; {NOW}): {ENDED}"),
        (
            StopReason("end", "end of stream, before max_steps 5"),
            f"(end: end of stream, before max_steps 5; {NOW}): {STREAM_ENDED}",
        ),
        (StopReason("error", "x" + "é" * 300), f"(error: x{'é' * 199}; {NOW}): {FAILED}"),
        (
            StopReason("nonfinite", "NaN", simulation_id=2, time_step=7),
            f"(nonfinite: NaN; {NOW}): {FAILED}",
        ),
        (StopReason("error", "boom", restarts_left=0), f"(error: boom; {NOW}): {FAILED}"),
    ],
    ids=["end", "end-of-stream", "error-non-ascii", "nonfinite", "error-no-restart-left"],
)
def test_a_run_that_ended_or_failed_fails_at_once_alike(
    script_exe: Path,
    tmp_path: Path,
    by_hand: None,  # noqa: F811
    reason: StopReason,
    said: str,
) -> None:
    """Requests of 120 s: one that waits outlives the test. The clients ask as run-a, the
    record's run (with no run id, one there at the first look is waited past: below)."""
    rendezvous = tmp_path / "rv"
    stopped_with(rendezvous, reason)
    env = {RENDEZVOUS: str(rendezvous), RUN_ID: "run-a"}
    got = run_script(script_exe, f"{ASK}predict 120\nabort\n", tmp_path, env)
    python = python_words(rendezvous, "run-a", timeout=120)
    assert python == (
        f"no serving endpoint in '{rendezvous}': the trainer that ran there stopped {said}{AGAIN}"
    ), python
    assert got[7][1] == python, (got, python)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (StopReason("preempted", "SIGTERM"), f"(preempted: SIGTERM; {NOW})"),
        (StopReason("broken", "x€" * 150), f"(broken: {'x€' * 100}; {NOW})"),
        (StopReason("stopped", "by its owner"), f"(stopped: by its owner; {NOW})"),
        # (the launcher restarts the failed run, which resumes: hrestart; failed before)
        (StopReason("error", "boom", restarts_left=1), f"(error: boom; {NOW})"),
    ],
    ids=["preempted", "broken-non-ascii", "stopped", "error-restarts-left"],
)
def test_a_trainer_a_resume_may_follow_is_waited_for_alike(
    script_exe: Path,
    tmp_path: Path,
    by_hand: None,  # noqa: F811
    reason: StopReason,
    said: str,
) -> None:
    rendezvous = tmp_path / "rv"
    stopped_with(rendezvous, reason)
    got = run_script(
        script_exe, f"{ASK}predict 1\nabort\n", tmp_path, {RENDEZVOUS: str(rendezvous)}
    )
    python = python_words(rendezvous)
    assert python == (
        f"no serving endpoint in '{rendezvous}' within 1.0 s: the trainer that ran there "
        f"stopped {said}: a resumed one would serve there"
    ), python
    assert got[7][1] == python, (got, python)


@pytest.mark.timeout(60)
def test_an_end_record_there_at_the_first_look_is_waited_past_alike(
    script_exe: Path,
    tmp_path: Path,
    by_hand: None,  # noqa: F811
) -> None:
    """No run id: run-a's end record, there at the client's first look, may be an earlier
    run's (a new trainer may be starting there: tests/client/test_predict_stale_end_record.py):
    both wait their timeout, quoting it (failed before: both failed at once, "no resume
    follows on its own", though a new run would answer)."""
    rendezvous = tmp_path / "rv"
    stopped_with(rendezvous, StopReason("end", "max_steps 5 reached"))
    got = run_script(
        script_exe, f"{ASK}predict 1\nabort\n", tmp_path, {RENDEZVOUS: str(rendezvous)}
    )
    python = python_words(rendezvous)
    assert python == (
        f"no serving endpoint in '{rendezvous}' within 1.0 s: the trainer that ran there "
        f"stopped (end: max_steps 5 reached; {NOW}): {ENDED}"
    ), python
    assert got[7][1] == python, (got, python)


@pytest.mark.timeout(60)
def test_a_stopped_trainer_of_another_run_is_not_quoted_alike(
    script_exe: Path,
    tmp_path: Path,
    by_hand: None,  # noqa: F811
) -> None:
    """Run "run-a" ended there; a client of run "run-b" waits, told "(yet)" only; one of
    "run-a" the end, at once (control)."""
    rendezvous = tmp_path / "rv"
    stopped_with(rendezvous, StopReason("end", "max_steps 5 reached"))
    for run, timeout, words in [
        ("run-b", 1, f"within 1.0 s: {NOW} (yet)"),
        (
            "run-a",
            120,
            f"the trainer that ran there stopped (end: max_steps 5 reached; {NOW}): {ENDED}{AGAIN}",
        ),
    ]:
        env = {RENDEZVOUS: str(rendezvous), RUN_ID: run}
        got = run_script(script_exe, f"{ASK}predict {timeout}\nabort\n", tmp_path, env)
        python = python_words(rendezvous, run, timeout)
        where = f"no serving endpoint in '{rendezvous}'"
        assert python == f"{where}{' ' if timeout == 1 else ': '}{words}", python
        assert got[7][1] == python, (got, python)


@pytest.mark.timeout(60)
def test_a_client_served_then_left_by_its_trainer_is_told_why_it_stopped(
    c_predict: CPredict, tmp_path: Path
) -> None:
    """Served by a trainer of run "run-a", which then ends on max_steps: the request that
    finds its serve file gone says why it stopped (the first after the stop may meet the
    closed socket first: "refused"; a directory changed since ends the backoff)."""
    rv = tmp_path / "rv"
    f32 = ["input u 1 1 4 : 1 2 3 4", "output y 1 4"]
    env = {RENDEZVOUS: str(rv), RUN_ID: "run-a"}
    with c_predict.script(env, 0, ask=f32) as script:
        with running(rendezvous_dir=str(rv), fields=FIELDS, run_id="run-a") as receiver:
            with serving_u(rv, "float32", run_id="run-a"):
                assert ask(script) == (0, "")
            receiver.note_stop(StopReason("end", "max_steps 5 reached"))
        said = []
        for _ in range(3):
            code, message = ask(script)
            assert code == MT_ETIMEDOUT, message
            said.append(message)
            if "served this simulation" in message:
                break
        script.finish()
    assert said[-1] == (
        f"no serving endpoint in '{rv}': the trainer that served this simulation stopped "
        f"(end: max_steps 5 reached; no trainer serves predictions there): {ENDED}; the "
        "next request looks the endpoint up again"
    ), said


def ask(script: Script) -> tuple[int, str]:
    """One request of 120 s (longer than the test's timeout: one that waits for it fails
    the test): its status and message."""
    lines = script.wait(script.send("predict 120"))
    code, _, message = lines[-1].partition(" ")
    return int(code), message.strip()


# (That a run that ended is not warned of as waited for, in C: a unit test on the
# MT_TESTING build's clock, moved past the warning's 3 s instead of slept past it:
# clients/c/tests/unit_predict_ended.c, run by ctest, and under sanitizers by
# tests/c/test_c_client_build.py. Python's: tests/client/test_predict_stopped_note.py.)


@pytest.mark.timeout(60)
def test_a_run_that_ends_after_the_first_look_fails_at_once_without_a_run_id(
    c_predict: CPredict, tmp_path: Path
) -> None:
    """No run id (endpoints given to the start, no MELISSA_TRAINER_RUN_ID): a first
    request of 0.2 s finds the trainer running, no record; the run then ends there, and
    the next request (120 s: one that waits outlives the test) fails at once, a record
    that came since the first look (the other side of the rule above; Python's:
    tests/client/test_predict_stopped_note.py, a request waiting as the run ends)."""
    rv = tmp_path / "rv"
    f32 = ["input u 1 1 4 : 1 2 3 4", "output y 1 4"]
    with c_predict.script({RENDEZVOUS: str(rv)}, 0, ask=f32) as script:
        with running(rendezvous_dir=str(rv), fields=FIELDS, run_id="run-a") as receiver:
            lines = script.wait(script.send("predict 0.2"))
            assert lines[-1].startswith(f"{MT_ETIMEDOUT} "), lines
            assert f"within 0.2 s: {NOW}" in lines[-1], lines
            receiver.note_stop(StopReason("end", "max_steps 5 reached"))
        code, message = ask(script)
        script.finish()
    assert code == MT_ETIMEDOUT, message
    assert message == (
        f"no serving endpoint in '{rv}': the trainer that ran there stopped (end: max_steps 5 "
        f"reached; {NOW}): {ENDED}{AGAIN}"
    )
