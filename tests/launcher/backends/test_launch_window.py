"""The window between a local job's launch and its PR_SET_PDEATHSIG, held open.

A gate (a small script in front of the wrapper) waits on a FIFO until the test opens
it, so that the trainer, a process of its own that launched the job, can be killed at
a chosen point of that window. The kernel never signals a job that asks for a
parent-death signal after its parent died: only a wrapper that then checks its parent
ends such a job. The Python wrapper does; setpriv does not (the window documented in
`melissa_trainer.launcher.backends.local` and docs/concepts/study.md, "Backends").

The tests that SIGKILL a trainer and then require its solvers gone therefore kill it
between launches (`process_tree.sigkill_between_launches`), which the last test checks.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import process_tree
import pytest
from process_tree import cmdline, jobs_being_launched, live, sigkill_between_launches

from melissa_trainer.launcher.backends import local, pdeathsig

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG, /proc"),
    pytest.mark.e2e,
]

SETPRIV = local.pdeathsig_wrapper() if local.pdeathsig_wrapper() != "python" else None
NO_SETPRIV = "no setpriv with --pdeathsig (util-linux >= 2.33) here"

GATE = """\
#!/bin/sh
# in front of the wrapper: runs it once the test opens the FIFO $GATE
read line < "$GATE"
exec "$GATED" "$@"
"""

#: argv: the gate, the wrapper ("python" or setpriv's path), the FIFO, then the job's
#: command. Prints the job's pid, then waits to be killed.
TRAINER = """
import sys
from melissa_trainer.launcher.backends import Job, LocalBackend
gate, wrapper, fifo, *argv = sys.argv[1:]
gated = sys.executable if wrapper == "python" else wrapper
if wrapper == "python":  # `wrapped_argv` puts sys.executable in front
    sys.executable = gate
backend = LocalBackend()
backend._wrapper = "python" if wrapper == "python" else gate
handle = backend.launch(Job("late", argv, env={"GATE": fifo, "GATED": gated}))
print(handle.pid, flush=True)
sys.stdin.read()  # until killed
"""


class Gated:
    """A trainer process that launched one job, held at the gate in front of its
    wrapper; `job` is the job's pid."""

    def __init__(self, tmp: Path, wrapper: str, argv: list[str]) -> None:
        gate, self.fifo = tmp / "gate", tmp / "fifo"
        gate.write_text(GATE)
        gate.chmod(0o755)
        os.mkfifo(self.fifo)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p or os.getcwd() for p in sys.path)}
        self.trainer = subprocess.Popen(
            [sys.executable, "-c", TRAINER, str(gate), wrapper, str(self.fifo), *argv],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
            start_new_session=True,  # its own group, as the tests' trainers
        )  # fmt: skip
        assert self.trainer.stdout is not None
        self.job = int(self.trainer.stdout.readline())

    def open(self) -> None:
        """Let the job through the gate (ENXIO until it waits at the FIFO)."""
        deadline = time.monotonic() + 20
        while True:
            try:
                os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
                return
            except OSError as exc:
                assert exc.errno == errno.ENXIO and time.monotonic() < deadline, exc
                time.sleep(0.01)

    def wait_job_gone(self) -> None:
        deadline = time.monotonic() + 20
        while live(self.job):
            assert time.monotonic() < deadline, f"job {self.job} runs, its trainer dead"
            time.sleep(0.01)

    def close(self) -> None:
        self.trainer.kill()
        self.trainer.wait()
        if live(self.job):
            os.kill(self.job, signal.SIGKILL)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "wrapper",
    [
        pytest.param(SETPRIV, id="setpriv", marks=[
            pytest.mark.skipif(SETPRIV is None, reason=NO_SETPRIV),
            pytest.mark.xfail(strict=True, reason="the documented window: setpriv does "
                              "not check its parent after its prctl"),
        ]),
        pytest.param("python", id="python"),
    ],
)  # fmt: skip
def test_a_job_whose_trainer_died_before_the_wrappers_prctl_does_not_run(
    tmp_path: Path, wrapper: str
) -> None:
    """The trainer SIGKILLed and reaped before the wrapper's prctl: the wrapper must
    see that its parent is no longer the trainer and end the job before its command
    runs (here: `touch`, which would leave its file)."""
    marker = tmp_path / "ran"
    gated = Gated(tmp_path, wrapper, [pdeathsig.shutil.which("touch") or "/bin/touch", str(marker)])
    try:
        gated.trainer.kill()
        gated.trainer.wait(20)
        gated.open()
        gated.wait_job_gone()
        assert not marker.exists(), "the command ran, its trainer dead"
    finally:
        gated.close()


@pytest.mark.timeout(60)
@pytest.mark.skipif(SETPRIV is None, reason=NO_SETPRIV)
def test_a_trainer_is_killed_only_once_its_jobs_have_their_parent_death_signal(
    tmp_path: Path,
) -> None:
    """What the tests' kill of a trainer waits for: a job in its wrapper (held at the
    gate) counts as being launched, then no more once it runs its command; killed
    then, the trainer takes the job with it (killed in the window, it would not: the
    test above)."""
    sleep = pdeathsig.shutil.which("sleep") or "/bin/sleep"
    gated = Gated(tmp_path, SETPRIV or "", [sleep, "60"])
    group = gated.trainer.pid
    try:
        assert jobs_being_launched(group, [group]) == [gated.job]
        gated.open()
        deadline = time.monotonic() + 20
        while cmdline(gated.job) != [sleep, "60"]:
            assert time.monotonic() < deadline, cmdline(gated.job)
            time.sleep(0.01)
        assert jobs_being_launched(group, [group]) == []
        sigkill_between_launches(group, [group])
        assert gated.trainer.wait(20) == -signal.SIGKILL
        gated.wait_job_gone()  # SIGTERM, its parent-death signal
    finally:
        gated.close()


def test_a_live_child_without_a_command_line_counts_as_being_launched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inside execve the kernel shows an empty command line (the new one is set after
    the memory maps are switched): such a job is still before its prctl. The suite
    once read that moment under load and missed the job."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    try:
        monkeypatch.setattr(process_tree, "cmdline", lambda pid: [])
        assert process_tree._launching(child.pid, os.getpid())
    finally:
        child.kill()
    monkeypatch.setattr(process_tree, "live", lambda pid: False)  # a zombie: none either
    assert not process_tree._launching(child.pid, os.getpid())
    child.wait()
