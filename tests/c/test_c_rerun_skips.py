"""A C solver the launcher runs again after a resume sends only the steps its receivers'
checkpoint lacks (clients/c/src/rerun.c), as the Python client does
(tests/client/test_held_rerun_skips.py, test_rerun_follow_sends.py): real sockets,
in-process receivers (two training ranks), the C client driven by mt_script.

Run A's receivers take a first attempt's steps (``MELISSA_TRAINER_ATTEMPT=0``), which is
killed before its BYE; their checkpoint is taken; run B's receivers resume from it; the
second attempt (``MELISSA_TRAINER_ATTEMPT=1``) computes and sends every step again. The
oracle: the DATA the resumed receivers got (their duplicates counter: each step the
checkpoint holds that came again; their put count: each step it lacked) and their
buffers (every step once). Before, the C rerun sent every step again (the duplicates
counted 5 and 3: dropped by the receivers).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, CClient, c_client, sanitized_c_client  # noqa: F401
from helpers import drain
from played_receiver import played_receiver
from predict_script import Script, zctx  # noqa: F401 (a fixture)
from resumed_runs import CHECKPOINTS, Run
from waiting import wait_until

from melissa_trainer import wire as P

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]  # (each test starts processes)

SID = 4  # (even: step t to rank t % 2 under either routing, docs/protocol.md 3)
STEPS = 10  # steps 0, 2, ... to rank 0; 1, 3, ... to rank 1
SETUP = (f"id {SID}", "field u 1 1 3", "start")  # (one float32 field of 3)
NOT_ASKED = "could not ask its receivers which steps they hold"


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[list[Run]]:
    """The runs a test starts (appended to it), all stopped at its end."""
    made: list[Run] = []
    try:
        yield made
    finally:
        for run in made:
            run.stop()


def attempt(
    exe: Path, rendezvous: Path, number: int, run_id: str, *setup: str, sid: int = SID,
    **env: str,
) -> Script:  # fmt: skip
    """Attempt `number` of simulation `sid`, as the launcher starts it (started: `setup`,
    then SETUP, its id `sid`)."""
    script = Script(
        exe,
        {
            "MELISSA_TRAINER_RENDEZVOUS": str(rendezvous),
            "MELISSA_TRAINER_ATTEMPT": str(number),
            "MELISSA_TRAINER_RUN_ID": run_id,
            **env,
        },
    )
    try:
        done(script, *setup, f"id {sid}", *SETUP[1:])
    except BaseException:
        script.kill()
        raise
    return script


def sends(steps: list[int]) -> list[str]:
    return [f"send {t} u 1 3 {t}" for t in steps]


def run_to_the_end(script: Script, *lines: str) -> tuple[list[str], str]:
    """Send `lines` then close: the close's outputs and stderr (every line MT_OK)."""
    try:
        closed = script.send(*lines, "close")
        got, err = script.finish()
    finally:
        script.kill()
    bad = {n: out for n, out in got.items() if out[-1].split(" ", 1)[0] != "0"}
    assert not bad, (bad, err)
    return got[closed], err


def done(script: Script, *lines: str) -> None:
    """Send `lines` and wait until the last is done; each MT_OK."""
    first = script.line + 1
    script.wait(script.send(*lines))  # (the lines before it are read first)
    for n in range(first, script.line + 1):
        assert script.seen[n][-1].split(" ", 1)[0] == "0", script.seen


def killed(script: Script) -> None:
    """Abort (no BYE: the launcher runs it again), once what it sent is in."""
    try:
        script.send("abort")
        script.finish()
    finally:
        script.kill()


@CHECKPOINTS
def test_a_c_rerun_sends_only_what_the_checkpoint_lacks(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    runs: list[Run],
    before: list[int],
    puts: list[int],
) -> None:
    rendezvous = tmp_path / "rendezvous"
    runs.append(Run(rendezvous, "run-a"))
    first = attempt(script_exe, rendezvous, 0, "run-a")
    try:
        done(first, *sends(before), "flush")
        checkpoint = runs[0].checkpoint(puts)
        runs[0].stop()  # (after the checkpoint, run A took nothing more: lost with it)
        runs.append(Run(rendezvous, "run-b", checkpoint))
        killed(first)
    finally:
        first.kill()
    again = attempt(script_exe, rendezvous, 1, "run-b")
    _, err = run_to_the_end(again, *sends(list(range(STEPS))))  # (every step computed)
    runs[1].complete(SID)  # (the BYEs count the held steps: else the simulation is not)
    assert NOT_ASKED not in err, err
    for rank, receiver in enumerate(runs[1].receivers):
        figures = receiver.telemetry()
        # the oracle: no step the checkpoint holds came again but the first send (step
        # 0, rank 0's: a rerun's first send goes out at once, rerun.c); each it lacked came
        assert figures["duplicates"] == [1, 0][rank], (rank, figures)
        assert figures["samples_put"] == STEPS // 2, (rank, figures)
    steps = sorted(int(s["time_step"]) for b in runs[1].buffers for s in drain(b))
    assert steps == list(range(STEPS))  # each once


@CHECKPOINTS
def test_a_slow_c_rerun_sends_a_held_step_each_interval(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    runs: list[Run],
    before: list[int],
    puts: list[int],
) -> None:
    """A sign of life (rerun.c, as Python's: tests/client/test_rerun_sign_of_life.py):
    ``MELISSA_TRAINER_SILENCE_S=1`` (a quarter: 0.25 s) and a solver whose steps take
    0.3 s (``sleep``: its compute, not a synchronisation): each held step comes after
    more than the interval without a send, so each is sent anyway, a duplicate its
    receiver drops, on both receivers (the launcher hears every rank's:
    `stream.rank_activity`); the BYEs still count each step once. Before, none was (the
    launcher heard nothing while the rerun recomputed the held part, and killed it);
    then receiver 0's only ([held, 0]: the launcher heard rank 0 alone)."""
    rendezvous = tmp_path / "rendezvous"
    runs.append(Run(rendezvous, "run-a"))
    first = attempt(script_exe, rendezvous, 0, "run-a")
    try:
        done(first, *sends(before), "flush")
        checkpoint = runs[0].checkpoint(puts)
        runs[0].stop()
        runs.append(Run(rendezvous, "run-b", checkpoint))
        killed(first)
    finally:
        first.kill()
    again = attempt(script_exe, rendezvous, 1, "run-b", MELISSA_TRAINER_SILENCE_S="1")
    slow = [line for t in range(STEPS) for line in ("sleep 0.3", *sends([t]))]
    _, err = run_to_the_end(again, *slow)
    runs[1].complete(SID)  # (the BYEs count every step: else the simulation is not)
    assert NOT_ASKED not in err, err
    held = [min(puts[r], sum(1 for t in before if t % 2 == r)) for r in range(2)]
    figures = [r.telemetry() for r in runs[1].receivers]
    assert [f["duplicates"] for f in figures] == held, figures  # (every held step a sign)
    assert [f["samples_put"] for f in figures] == [5, 5], figures
    steps = sorted(int(s["time_step"]) for b in runs[1].buffers for s in drain(b))
    assert steps == list(range(STEPS))  # each once


@pytest.mark.parametrize(
    ("silence", "signs"), [("1", [5, 5]), ("3600", [0, 1])], ids=["slow", "fast"]
)
def test_an_odd_c_simulations_signs_of_life_reach_both_receivers(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    runs: list[Run],
    silence: str,
    signs: list[int],
) -> None:
    """Simulation 5 routed ``(s + t) % 2``: its even steps go to receiver 1, its odd ones
    to receiver 0; the launcher hears both (`stream.rank_activity`;
    tests/client/test_rerun_sign_of_life.py, the same case). Every step held; the first
    send (step 0, receiver 1's) goes at once, then, slow, every later step (each after
    more than the interval). Before, receiver 0's only ([5, 0], [1, 0]): a simulation
    whose held steps never routed there sent no sign of life."""
    sid, rendezvous = 5, tmp_path / "rendezvous"
    runs.append(Run(rendezvous, "run-a"))
    first = attempt(script_exe, rendezvous, 0, "run-a", sid=sid)
    try:
        done(first, *sends(list(range(STEPS))), "flush")
        checkpoint = runs[0].checkpoint([5, 5])
        runs[0].stop()
        runs.append(Run(rendezvous, "run-b", checkpoint))
        killed(first)
    finally:
        first.kill()
    again = attempt(script_exe, rendezvous, 1, "run-b", sid=sid, MELISSA_TRAINER_SILENCE_S=silence)
    pause = ("sleep 0.3",) if silence == "1" else ()  # (longer than the 0.25 s interval)
    _, err = run_to_the_end(again, *[ln for t in range(STEPS) for ln in (*pause, *sends([t]))])
    runs[1].complete(sid)  # (the BYEs count every step: else the simulation is not)
    assert NOT_ASKED not in err, err
    assert [r.telemetry()["duplicates"] for r in runs[1].receivers] == signs


@pytest.mark.parametrize(
    ("number", "env", "duplicates"),
    [(1, {}, [1, 0]), (0, {"SLURM_RESTART_COUNT": "1"}, [1, 0]), (0, {}, [2, 2])],
    ids=["launcher-restart", "slurm-requeue", "first-run-again"],
)
def test_a_c_rerun_in_the_same_run_skips_what_the_receivers_hold(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    runs: list[Run],
    number: int,
    env: dict[str, str],
    duplicates: list[int],
) -> None:
    """A rerun within a run (no resume): a launcher's restart (attempt 1), or a batch job
    Slurm requeued (attempt 0 kept, SLURM_RESTART_COUNT=1), is answered from what the
    receivers hold now: only its first send (step 0, rank 0's) comes again. Attempt 0
    without a requeue asks nothing: steps 0-3 come again, dropped by the receivers'
    dedup. Before (answered from the record they loaded, none), both reruns sent steps
    0-3 again ([2, 2]), as tests/client/test_held_rerun_skips.py's Python client did."""
    rendezvous = tmp_path / "rendezvous"
    runs.append(Run(rendezvous, "run-a"))
    first = attempt(script_exe, rendezvous, 0, "run-a")
    try:
        done(first, *sends([0, 1, 2, 3]), "flush")
        runs[0].checkpoint([2, 2])  # (every step of the first attempt in)
        killed(first)
    finally:
        first.kill()
    again = attempt(script_exe, rendezvous, number, "run-a", **env)
    _, err = run_to_the_end(again, *sends(list(range(STEPS))))
    runs[0].complete(SID)
    assert NOT_ASKED not in err, err
    figures = [r.telemetry() for r in runs[0].receivers]
    assert [f["duplicates"] for f in figures] == duplicates, figures
    steps = sorted(int(s["time_step"]) for b in runs[0].buffers for s in drain(b))
    assert steps == list(range(STEPS))


@contextmanager
def older_trainer(
    ctx: zmq.Context, rendezvous: Path, follow: bool
) -> Iterator[tuple[list[bytes], list[int]]]:
    """One receiver played by the test: a PULL socket (its frames collected) published in
    `rendezvous` without a follow socket (an older trainer), or with one that reads each
    query and never answers (`follow`). Yields the frames and the kinds asked."""
    with played_receiver(ctx, lambda frame, frames: None) as (sink, follow_at, frames, kinds):
        entry = {"version": 1, "rank": 0, "world_size": 1, "run_id": "run-b", "endpoint": sink}
        if follow:
            entry["follow_endpoint"] = follow_at
            entry["follow_kinds"] = [9]
        rendezvous.mkdir()
        (rendezvous / "rank_0.json").write_text(json.dumps(entry))
        yield frames, kinds


@pytest.mark.parametrize("follow", [False, True], ids=["no_follow_socket", "no_answer"])
def test_a_c_rerun_not_answered_sends_every_step_and_says_so(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    follow: bool,
) -> None:
    """An older trainer (no follow socket) or one that does not answer within the bound
    (5 s, as Python's ASK_TIMEOUT): every step is sent, as before, and stderr says why."""
    rendezvous = tmp_path / "rendezvous"
    with older_trainer(zctx, rendezvous, follow) as (frames, kinds):
        again = attempt(script_exe, rendezvous, 1, "run-b", "batching 0 1")  # (DATA each)
        _, err = run_to_the_end(again, *sends([0, 1, 2]))
        wait_until(lambda: frames and frames[-1][P.KIND_AT] == P.BYE, "the BYE", 30)
        got = list(frames)
    assert [f[P.KIND_AT] for f in got] == [P.HELLO] + [P.DATA] * 3 + [P.BYE], got
    assert struct.unpack_from("<Q", got[-1], 20)[0] == 3  # (the BYE's step count)
    lines = [line for line in err.splitlines() if NOT_ASKED in line]
    assert len(lines) == 1, err  # (asked once)
    assert lines[0].startswith(f"melissa_trainer: simulation {SID} rank 0 (attempt 1): "), err
    assert lines[0].endswith("it sends every step, their duplicates dropped"), err
    if follow:
        assert kinds == [P.HELD_QUERY], kinds
        assert "did not say which steps it holds within 5.0 s" in lines[0], err
    else:
        assert "names no follow socket" in lines[0], err


def test_a_c_rerun_that_follows_a_restarted_trainer_sends_every_later_step(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    runs: list[Run],
) -> None:
    """After a follow, the skip is dropped (as Python's `Sending._followed`): the HELD it
    asked answered for the trainer left. Run A's receivers take the first attempt's ten
    steps, step 1 last (their early checkpoint holds step 0, their late one all but step
    1); run B resumes from the late one, so the rerun's first send (step 0) asks B and
    skips it. Then run C resumes from the early checkpoint; the rerun follows C at its
    next send (step 1, which B lacks: sent). The oracle: C's counts and buffers hold every
    step once. With the skip kept, steps 2-9 were called held: not sent to C."""
    rendezvous = tmp_path / "rendezvous"
    runs.append(Run(rendezvous, "run-a"))
    first = attempt(script_exe, rendezvous, 0, "run-a")
    try:
        done(first, *sends([0]), "flush")
        early = runs[0].checkpoint([1, 0])
        done(first, *sends(list(range(2, STEPS))), "flush")
        late = runs[0].checkpoint([5, 4])  # (all but step 1)
        done(first, *sends([1]), "flush")  # (taken after the checkpoint: lost)
        runs[0].checkpoint([5, 5])
        killed(first)
    finally:
        first.kill()
    runs[0].stop()
    runs.append(Run(rendezvous, "run-b", late))
    again = attempt(script_exe, rendezvous, 1, "run-b", MELISSA_TRAINER_REPLAY_BYTES=str(1 << 20))
    try:
        done(again, *sends([0]))  # (held by B, sent: the first send goes out at once)
        runs[1].stop()
        runs.append(Run(rendezvous, "run-c", early))  # (holds step 0 only)
    except BaseException:
        again.kill()
        raise
    # (the look at the rendezvous is due a second after the last: then step 1 follows C)
    _, err = run_to_the_end(again, "sleep 1.1", *sends(list(range(1, STEPS))))
    assert "followed the restarted trainer (run run-c at " in err, err
    runs[2].complete(SID)
    figures = [r.telemetry() for r in runs[2].receivers]
    # (the checkpoint's step 0 counted: its record keeps the count; none came twice)
    assert [f["samples_put"] for f in figures] == [5, 5], figures
    assert [f["duplicates"] for f in figures] == [0, 0], figures
    steps = sorted(int(s["time_step"]) for b in runs[2].buffers for s in drain(b))
    assert steps == list(range(STEPS))  # each once


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_c_rerun_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    tmp_path: Path,
    runs: list[Run],
) -> None:
    """The skip under AddressSanitizer and UBSan: no leak (the HELD replies kept until the
    close), no error."""
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"
    rendezvous = tmp_path / "rendezvous"
    runs.append(Run(rendezvous, "run-a"))
    first = attempt(exe, rendezvous, 0, "run-a", **SANITIZER_ENV)
    try:
        done(first, *sends([0, 1, 2, 3, 4, 5, 6, 8]), "flush")
        checkpoint = runs[0].checkpoint([5, 3])
        runs[0].stop()
        runs.append(Run(rendezvous, "run-b", checkpoint))
        killed(first)
    finally:
        first.kill()
    again = attempt(exe, rendezvous, 1, "run-b", **SANITIZER_ENV)
    _, err = run_to_the_end(again, *sends(list(range(STEPS))))
    runs[1].complete(SID)
    assert [r.telemetry()["duplicates"] for r in runs[1].receivers] == [1, 0]  # (step 0)
    assert "ERROR" not in err and "runtime error" not in err, err
