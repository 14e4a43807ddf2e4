"""`--seeds N` (`run_seeds`) stopped, as a user trial stopped the Navier-Stokes example's
``--seeds 2``: a SIGTERM to the command ended it alone, at once (exit status 143, no
word), and the seed's run, orphaned, trained on without a checkpoint until it wrote to
the pipe of its output and died of a BrokenPipeError; ``kill -9`` of the command did
the same; a seed that failed ended the command with exit status 1, where
`run_seeds`'s docstring says its own. Each case here runs `run_seeds` in a process of
its own on a fake example (a Python script) that records the signal it gets."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

#: a seed's run: says it is ready (a file), waits for SIGTERM or SIGINT, records which
#: (a file), and exits 128 + its number as a stopped run does; EXIT_NOW exits at once
FAKE_SEED = """
import pathlib, signal, sys, time
out = pathlib.Path(sys.argv[sys.argv.index("--output_dir") + 1])
out.mkdir(parents=True)
if EXIT_NOW is not None:
    sys.exit(EXIT_NOW)
def stop(signum, frame):
    (out / "signal").write_text(str(signum))
    sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
(out / "ready").write_text("")
while True:
    time.sleep(0.05)
"""

#: the `--seeds` command: run_seeds on the fake seed, seeds 1 and 2
COMMAND = """
import sys
sys.path.insert(0, {examples!r})
from pathlib import Path
from study_seeds import run_seeds
run_seeds(Path({script!r}), [], 2, 1, Path({out!r}))
"""


@pytest.fixture(autouse=True)
def no_seed_left(tmp_path: Path) -> Iterator[None]:
    """Kill, at the end, any fake seed still alive (an orphan of a failed case)."""
    yield
    for pid in seeds_alive(tmp_path):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def seeds_alive(tmp_path: Path) -> list[int]:
    """The processes running this test's fake seed (Linux: /proc; elsewhere none)."""
    if not sys.platform.startswith("linux"):
        return []
    script = str(tmp_path / "train.py")
    return [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and script in _cmdline(pid)]


def start(tmp_path: Path, exit_now: int | None = None) -> subprocess.Popen[str]:
    script = tmp_path / "train.py"
    script.write_text(f"EXIT_NOW = {exit_now}\n" + FAKE_SEED)
    code = COMMAND.format(examples=str(EXAMPLES), script=str(script), out=str(tmp_path / "out"))
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for(path: Path, process: subprocess.Popen[str] | None = None) -> None:
    """Wait until `path` exists (the fake seed's own signal of readiness or of a stop),
    failing if `process` ends first; the test's timeout bounds it."""
    while not path.exists():
        assert process is None or process.poll() is None, process.communicate()
        time.sleep(0.02)


def test_a_sigterm_to_the_command_stops_the_seed_and_ends_with_143(tmp_path: Path) -> None:
    command = start(tmp_path)
    try:
        wait_for(tmp_path / "out" / "seed-1" / "ready", command)
        command.send_signal(signal.SIGTERM)
        _, err = command.communicate(timeout=60)
    finally:
        command.kill()
    assert (tmp_path / "out" / "seed-1" / "signal").read_text() == str(int(signal.SIGTERM))
    assert command.returncode == 143, err
    assert "seed 1 stopped by SIGTERM (exit status 143)" in err
    assert "1 seed(s) after it not run" in err
    assert not (tmp_path / "out" / "seed-2").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal: Linux")
def test_a_kill_9_of_the_command_stops_the_seed(tmp_path: Path) -> None:
    command = start(tmp_path)
    try:
        wait_for(tmp_path / "out" / "seed-1" / "ready", command)
        command.kill()
        command.communicate(timeout=60)
        # the seed's run, told by its parent-death signal, stops (else the timeout fails)
        wait_for(tmp_path / "out" / "seed-1" / "signal")
    finally:
        command.kill()
    assert (tmp_path / "out" / "seed-1" / "signal").read_text() == str(int(signal.SIGTERM))


def test_a_failed_seed_ends_the_command_with_its_exit_status(tmp_path: Path) -> None:
    command = start(tmp_path, exit_now=3)
    _, err = command.communicate(timeout=60)
    assert command.returncode == 3, err
    assert "seed 1 failed (exit status 3)" in err


def test_no_seed_is_left_running(tmp_path: Path) -> None:
    """After a SIGTERM's stop, no process of the fake seed's is alive: the seed ended
    before the command did (the command waits for it)."""
    command = start(tmp_path)
    try:
        wait_for(tmp_path / "out" / "seed-1" / "ready", command)
        command.send_signal(signal.SIGTERM)
        command.communicate(timeout=60)
    finally:
        command.kill()
    assert seeds_alive(tmp_path) == []


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:  # (ended meanwhile)
        return ""
