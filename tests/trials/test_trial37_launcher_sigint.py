"""User trial 37 (an engineer who knows Hugging Face and Accelerate), severity LOW (docs).

What a user did: Ctrl-C (SIGINT to ``accelerate launch``) of a two-rank run on CPU
(gloo), then read the exit status and the output to know whether the run was
checkpointed, as docs/how-to/preemption.md ("Ctrl-C under `accelerate launch`") and its
troubleshooting table describe.

What happened: the ranks checkpointed as documented, but the launcher exited **130**
(128 + SIGINT; 143 for a SIGTERM) without any traceback, where the docs said it "prints
torch's `SignalException` traceback and exits 1". accelerate 1.16 catches torch's
`SignalException` itself (`accelerate.commands.launch._run_torchrun`:
``sys.exit(128 + error.sigval)``); the docs described older versions only.

What was expected: the docs saying what the installed accelerate does: 128 + the signal
with an accelerate that catches `SignalException`, 1 and the traceback with one that
does not. This test holds the docs to the installed version: the exit status, no
traceback (or one), the ranks' checkpoint line, no rank left running.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import signal
import sys
from pathlib import Path

import pytest

TRAINER_TESTS = Path(__file__).resolve().parents[1] / "trainer"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc"),
]


def _catches_signal_exception() -> bool:
    """Whether the installed ``accelerate launch`` exits 128 + the signal itself."""
    from accelerate.commands import launch

    runner = getattr(launch, "_run_torchrun", None)
    return runner is not None and "128 + error.sigval" in inspect.getsource(runner)


def test_ctrl_c_of_accelerate_launch_exits_as_the_docs_say(tmp_path: Path) -> None:
    sys.path.insert(0, str(TRAINER_TESTS))
    from test_launcher_death_cause import _launch  # (its file is the ranks' script too)

    out = tmp_path / "out"
    launch = _launch(out, "--max_steps", "1000000")
    ranks: dict[int, int] = {}
    lines: list[str] = []
    try:
        assert launch.stdout is not None
        for line in launch.stdout:  # until both ranks train (pytest-timeout bounds it)
            lines.append(line)
            found = re.match(r"training (\d) (\d+)$", line.strip())
            if found:
                ranks[int(found[1])] = int(found[2])
                if len(ranks) == 2:
                    break
        assert len(ranks) == 2, "".join(lines[-80:])
        os.kill(launch.pid, signal.SIGINT)  # Ctrl-C reaches the launcher alone
        lines += launch.stdout.readlines()  # to EOF: every rank (holding the pipe) exited
        code = launch.wait(60)
    finally:
        for pid in [launch.pid, *ranks.values()]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        launch.wait(30)
        if launch.stdout is not None:
            launch.stdout.close()
    text = "".join(lines)
    assert re.search(r"preempted by SIGINT at step \d+; checkpoint ", text), text[-4000:]
    for pid in ranks.values():  # no rank left running (EOF: their pipes are closed)
        assert (
            not Path(f"/proc/{pid}").exists()
            or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
        ), pid
    if _catches_signal_exception():  # accelerate 1.16: what the docs say first
        assert code == 128 + signal.SIGINT, text[-4000:]
        assert "SignalException" not in text, text[-4000:]
    else:  # older: torch's traceback, exit 1
        assert code == 1, text[-4000:]
        assert "SignalException" in text, text[-4000:]
    docs = (Path(__file__).resolve().parents[2] / "docs/how-to/preemption.md").read_text()
    assert "exits 130 (128 + the signal" in docs
