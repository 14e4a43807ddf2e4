"""A start-up allowance the user sets is honoured under a numeric `simulation_timeout`.

Found by a user trial: a solver that loads its mesh for 15-20 s, with
``LauncherTuning(simulation_timeout=10, startup_timeout=60)``, was killed at 10 s on
every attempt (the numeric timeout bounded the start-up, silently), and the study's
report told the user to raise the `startup_timeout` they had set. Before an attempt's
first message the bound is now ``max(simulation_timeout, startup_timeout)`` when the
user set `startup_timeout`; left at its default, the numeric timeout bounds the start-up
as before, and the kill and the report say so and name both fixes
(`melissa_trainer.launcher.silence`).

Real processes on the local backend; the heartbeat is a file each simulation writes its
message count to (a receiver's `activity`, without a receiver), so an attempt's first
message is a real transition. The bounds are far apart from the solvers' silences
(seconds), so a loaded machine's delays do not decide the outcome.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from account_studies import failure
from launcher_said import one_line
from waiting import wait_until

from melissa_trainer.launcher import (
    Launcher,
    LauncherTuning,
    ListSampler,
    LocalBackend,
)
from melissa_trainer.launcher.simulation_record import records_of

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

SOLVER = r"""
import json, os, sys, time
out, options = sys.argv[1], json.loads(sys.argv[2])
sid = os.environ["MELISSA_TRAINER_SIMULATION_ID"]
time.sleep(options["startup"])  # its mesh to load: silent
for beat in range(1, options["messages"] + 1):
    path = os.path.join(out, f"beat-{sid}")
    with open(path + ".tmp", "w") as f:
        f.write(str(beat))
    os.replace(path + ".tmp", path)  # (never read half-written)
    time.sleep(0.05)
time.sleep(options.get("hang", 0.0))  # silent again after its messages
"""


def launcher(tmp_path: Path, n: int, options: dict[str, Any], **tuning: Any) -> Launcher:
    script = tmp_path / "solver.py"
    script.write_text(SOLVER)
    escaped = json.dumps(options).replace("{", "{{").replace("}", "}}")  # (a template)
    return Launcher(
        [sys.executable, str(script), str(tmp_path), escaped],
        ListSampler([{"x": float(i)} for i in range(n)]),
        n,
        job_limit=n,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=1.0, **tuning),
    )


def heartbeat(tmp_path: Path) -> Mapping[int, int]:
    """{simulation id: messages sent}, from the files the solvers write."""
    return {int(p.name[5:]): int(p.read_text()) for p in tmp_path.glob("beat-*[0-9]")}


def start(launch: Launcher, tmp_path: Path) -> None:
    launch.start(tmp_path / "rendezvous", heartbeat=lambda: heartbeat(tmp_path))


def kills(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        one_line(r.getMessage())
        for r in caplog.records
        if "killing sim-" in one_line(r.getMessage())
    ]


def first_kill(
    launch: Launcher, tmp_path: Path, caplog: pytest.LogCaptureFixture, what: str, timeout: float
) -> str:
    """Start `launch`, wait up to `timeout` s for its first kill (`what` names the wait),
    stop it; that kill's message."""
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher"):
        start(launch, tmp_path)
        try:
            wait_until(lambda: kills(caplog), what, timeout)
        finally:
            launch.stop()
    return kills(caplog)[0]


@pytest.mark.timeout(60)
def test_a_start_up_within_the_startup_timeout_the_user_set_survives(tmp_path: Path) -> None:
    """Silent 3 s before its first message, past simulation_timeout=1.5 but within the
    startup_timeout=8 the user set: the attempt finishes (it was killed at 1.5 s)."""
    launch = launcher(
        tmp_path, 1, {"startup": 3.0, "messages": 3},
        simulation_timeout=1.5, startup_timeout=8, max_restarts=0, on_failure="raise",
    )  # fmt: skip
    start(launch, tmp_path)
    try:

        def finished() -> bool:
            launch.check()
            return launch.done

        wait_until(finished, "the study to complete", 40)
    finally:
        launch.stop()
    assert records_of(launch.state_dict())[0]["exit_codes"] == [0]


@pytest.mark.timeout(60)
def test_a_start_up_past_both_bounds_is_killed_naming_the_startup_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Silent past max(simulation_timeout=1, startup_timeout=2.5): killed, not before
    2.5 s, and the kill names the bound and the setting to raise."""
    launch = launcher(
        tmp_path, 1, {"startup": 600.0, "messages": 0},
        simulation_timeout=1, startup_timeout=2.5, max_restarts=0, on_failure="abandon",
    )  # fmt: skip
    said = first_kill(launch, tmp_path, caplog, "the start-up killed", 40)
    assert "no message yet" in said, said
    assert "max(simulation_timeout=1.0, startup_timeout=2.5), before its first message" in said
    assert "a slower start-up needs a larger startup_timeout" in said, said
    silent = float(said.split("silent for ")[1].split(" s")[0])
    assert silent >= 2.5, said  # (printed to 0.1 s)


@pytest.mark.timeout(60)
def test_a_numeric_timeout_with_startup_timeout_unset_bounds_the_start_up_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """startup_timeout left at its default (600 s): the numeric simulation_timeout bounds
    the start-up, as before; the kill and the study's report (every attempt killed so:
    `systematic`) say that it did and name both fixes (the trial's report named only
    startup_timeout, which the user had set to no effect)."""
    launch = launcher(
        tmp_path, 2, {"startup": 600.0, "messages": 0},
        simulation_timeout=1, max_restarts=1, systematic_failures=4,
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher"):
        start(launch, tmp_path)
        try:
            report = str(failure(launch, 40))
        finally:
            launch.stop()
    said = kills(caplog)[0]
    rule = "simulation_timeout=1.0, before its first message: a numeric simulation_timeout"
    fixes = "needs LauncherTuning(startup_timeout=...)"
    for text in (said, report):
        assert rule in text and "bounds the start-up too while startup_timeout is unset" in text
        assert fixes in text and "or a larger simulation_timeout" in text, text
    assert "killed as hung" in report, report
    # the first restart killed as its attempt was: the advice names the start-up's bound,
    # not max_restarts=0 alone (new parameters start as slowly; a user trial's C solver,
    # 25 s to load its mesh, was told only that)
    (again,) = [
        one_line(r.getMessage())
        for r in caplog.records
        if "on its restart" in one_line(r.getMessage())
    ]
    assert "killed before its first message again on its restart" in again, again
    assert "LauncherTuning(startup_timeout=...)" in again, again


@pytest.mark.timeout(60)
def test_after_its_first_message_the_numeric_timeout_applies_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The startup_timeout the user set bounds the start-up only: a simulation silent
    after its messages is killed at simulation_timeout, as a hang mid-stream."""
    launch = launcher(
        tmp_path, 1, {"startup": 0.0, "messages": 1, "hang": 600.0},
        simulation_timeout=1, startup_timeout=30, max_restarts=0, on_failure="abandon",
    )  # fmt: skip
    said = first_kill(launch, tmp_path, caplog, "the silent simulation killed", 25)
    assert "since its last message; simulation_timeout=1.0)" in said, said
