"""A C solver started after its trainer stopped (every rendezvous file marked stopped,
with its stop record) says why the trainer stopped, as the Python client does
(`fetch_rendezvous`, endpoints.py `_why_stopped`; tests/client/test_rendezvous_typo.py):
a study that ended on its expected_simulations is named while it waits (the notice on
stderr, 3 s in) and in its failure when its rendezvous timeout ends, instead of "its
trainer stopped" alone (clients/c/src/rendezvous.c, stop_record.c mt_stop_record_words).
When it gives up does not change: the wait and its timeout stay (a trainer started
there again may publish).

The oracle: the Python reader's verdict (`fetch_rendezvous`) on the same directory,
whose records the receiver's own writer (`build_record`) wrote."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, CClient, c_client, sanitized_c_client  # noqa: F401

from melissa_trainer.stream.endpoints import fetch_rendezvous, mark_stopped, write_rendezvous
from melissa_trainer.stream.stop_record import StopReason, build_record

pytestmark = pytest.mark.e2e  # every test here starts a process

ENDPOINTS = ["tcp://127.0.0.1:9", "tcp://127.0.0.1:10"]  # (nobody listens: never dialed)
ENDED = (
    "its trainer ended: the study had its expected_simulations={n} and needs no more "
    "simulations (unless a trainer started there again publishes)"
)
RESUMED = "(a trainer resumed from its checkpoint publishes again)"


def ingest(finished: int, expected: int | None) -> SimpleNamespace:
    """A stream whose simulations 0 .. `finished` - 1 finished, that ended on
    expected_simulations=`expected` (None: it did not)."""
    return SimpleNamespace(
        finished_ids=list(range(finished)),
        sims={},
        archive=SimpleNamespace(steps=dict.fromkeys(range(finished), 4)),
        nonfinite=SimpleNamespace(by_simulation={}),
        expected=expected,
        simulations_finished=finished,
        abandoned=set(),
        unfinished=list,
    )


def stopped_study(rv: Path, record: dict | None) -> str:
    """Two receivers' files at `rv`, marked stopped with `record`: the Python client's
    failure on them (the oracle)."""
    for rank, endpoint in enumerate(ENDPOINTS):
        write_rendezvous(rv, rank, len(ENDPOINTS), endpoint, {"run_id": "run-a"})
        mark_stopped(rv, rank, endpoint, record)
    with pytest.raises(TimeoutError) as caught:
        fetch_rendezvous(rv, timeout=0.05)
    return str(caught.value)


def start(exe: Path, rv: Path, tmp_path: Path, timeout: float) -> tuple[int, str, str]:
    """(status, message) of `mt_client_start` on rendezvous `rv` with rendezvous timeout
    `timeout`, and mt_script's stderr."""
    script = tmp_path / "late.txt"
    script.write_text(f"rendezvous {rv} {timeout}\nid 1\nfield u 1 1 4\nstart\nabort\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    proc = subprocess.run(
        [str(exe), str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **SANITIZER_ENV},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [s for s in proc.stdout.splitlines() if s.startswith("4 ")]  # (the start)
    _, status, message = line.split(" ", 2)
    return int(status), message, proc.stderr


def ended_is_said(exe: Path, tmp_path: Path, finished: int) -> None:
    """The notice and the failure of a solver started after a study of `finished`
    simulations ended on expected_simulations=`finished`."""
    rv = tmp_path / f"ended_{finished}"
    record = build_record(ingest(finished, finished), "run-a", StopReason("end", "end of stream"))
    assert "expected_end" in record
    python = stopped_study(rv, record)
    ended = ENDED.format(n=finished)
    for rank in range(len(ENDPOINTS)):  # (the oracle agrees; in the directory's order)
        assert f"rank_{rank}.json: {ended}" in python, python
    code, message, err = start(exe, rv, tmp_path, 3.5)  # (the notice comes 3 s in)
    assert code != 0, message
    for rank in range(len(ENDPOINTS)):
        assert f"rank_{rank}.json: {ended}" in message, message
    assert message.startswith(f"rendezvous directory '{rv}' incomplete after 3.5 s: "), message
    notice = [line for line in err.splitlines() if "waiting up to 3.5 s in all" in line]
    assert len(notice) == 1 and ended in notice[0], err
    assert "ERROR" not in err and "runtime error" not in err, err


@pytest.mark.timeout(120)
@pytest.mark.parametrize("finished", [2, 1000])  # (1000: a file over 8 KiB, read whole)
def test_a_solver_started_after_the_study_ended_is_told_so(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    finished: int,
) -> None:
    ended_is_said(script_exe, tmp_path, finished)


def other_reasons(exe: Path, tmp_path: Path) -> None:
    """A trainer preempted, failed or stopped without a record: its code (and a failure's
    message, its first line: the notice is one line) with the resumed trainer to wait
    for, as the Python client says."""
    cases = [
        (StopReason("preempted", "SIGTERM from the scheduler"), f"stopped (preempted) {RESUMED}"),
        (StopReason("end", "max_steps 7 reached"), f"stopped (end) {RESUMED}"),
        (
            StopReason("error", "CUDA out of memory\nTraceback (most recent call last):"),
            f"stopped (error: CUDA out of memory) {RESUMED}",
        ),
        (StopReason("nonfinite", "NaN in u", 3, 7), f"stopped (nonfinite: NaN in u) {RESUMED}"),
        # (200 characters, as Python's: C took 200 bytes, cutting a 2-byte one; failed
        # before)
        (StopReason("error", "x" + "é" * 300), f"stopped (error: x{'é' * 199}) {RESUMED}"),
        (None, f"stopped {RESUMED}"),
    ]
    for k, (reason, words) in enumerate(cases):
        rv = tmp_path / f"other_{k}"
        record = None if reason is None else build_record(ingest(2, None), "run-a", reason)
        python = stopped_study(rv, record)
        code, message, err = start(exe, rv, tmp_path, 0.2)
        assert code != 0, message
        for rank in range(len(ENDPOINTS)):
            assert f"rank_{rank}.json: its trainer {words}" in message, message
        assert "ended: the study" not in message, message
        assert "ERROR" not in err and "runtime error" not in err, err
        assert f"rank_0.json: its trainer {words}" in python, python  # (the same words)


@pytest.mark.timeout(120)
def test_a_trainer_preempted_or_failed_is_named_with_its_reason(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    other_reasons(script_exe, tmp_path)


def many_ranks(exe: Path, tmp_path: Path, world: int = 16) -> None:
    """A study of `world` receivers, each file stopped with its own words (an ended study's
    and a failure's, long: about 300 characters each, 16 of them over 4 KiB): every rank
    is named, whole, in the directory's order as the Python client's failure names them
    (the oracle); before, the C client's 768 bytes cut the message after four ranks."""
    rv = tmp_path / f"many_{world}"
    failure = "CUDA out of memory: " + "x" * 300  # (the words keep its first 200 characters)
    for rank in range(world):
        endpoint = f"tcp://127.0.0.1:{20000 + rank}"
        reason = StopReason("error", failure) if rank % 2 else StopReason("end", "end of stream")
        record = build_record(ingest(2, None if rank % 2 else 2), "run-a", reason)
        write_rendezvous(rv, rank, world, endpoint, {"run_id": "run-a"})
        mark_stopped(rv, rank, endpoint, record)
    with pytest.raises(TimeoutError) as caught:
        fetch_rendezvous(rv, timeout=0.05)
    python = str(caught.value)
    code, message, err = start(exe, rv, tmp_path, 0.2)
    assert code != 0, message
    failed = f"its trainer stopped (error: {failure[:200]}) {RESUMED}"
    for rank in range(world):
        words = failed if rank % 2 else ENDED.format(n=2)
        assert f"rank_{rank}.json: {words}" in python, python  # (the oracle)
        assert f"rank_{rank}.json: {words}" in message, message
    assert message.endswith("(is the trainer running, with this output directory?)"), message

    def named(text: str) -> list[str]:  # (each rank's words, in the order said)
        said = text.split(" s: ", 1)[1]  # (after "... incomplete after T s: ")
        return [part for part in said.split("; ") if part.startswith("rank_")]

    assert named(message) == named(python) and len(named(message)) == world, (message, python)
    assert "ERROR" not in err and "runtime error" not in err, err


@pytest.mark.timeout(120)
def test_every_stopped_rank_is_named_whole_however_many(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    many_ranks(script_exe, tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_late_solver_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Every case under AddressSanitizer and UBSan (the whole file read, the record's
    members parsed and freed): no leak, no error."""
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"
    ended_is_said(exe, tmp_path, 1000)
    other_reasons(exe, tmp_path)
    many_ranks(exe, tmp_path)
