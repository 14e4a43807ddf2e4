"""How the local backend starts a job: without forking the trainer (CPython's vfork path:
the trainer's memory is neither copied nor write-protected), and still with
PR_SET_PDEATHSIG, set by the wrapper in front of the argv (setpriv, or the Python
wrapper where there is none). Through either wrapper a job is the same as a direct exec
of its command: its pid, process group, exit status, signal death, log, environment
(with the default `Placement`'s thread variables) and launch errors."""

from __future__ import annotations

import json
import logging
import mmap
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from process_tree import cmdline

from melissa_trainer.launcher.backends import Job, LaunchError, LocalBackend, local, pdeathsig
from melissa_trainer.launcher.backends.placement import THREAD_VARIABLES

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="vfork, PR_SET_PDEATHSIG, /proc")

PYTHON = sys.executable
TRUE = shutil.which("true") or "/bin/true"
SETPRIV = local.pdeathsig_wrapper() if local.pdeathsig_wrapper() != "python" else None
WRAPPERS = [
    pytest.param(SETPRIV, id="setpriv", marks=pytest.mark.skipif(
        SETPRIV is None, reason="no setpriv with --pdeathsig (util-linux >= 2.33) here")),
    pytest.param("python", id="python"),
]  # fmt: skip


def backend_with(wrapper: str | None) -> LocalBackend:
    backend = LocalBackend()
    backend._wrapper = wrapper
    return backend


def finish(backend: LocalBackend, handle: local.LocalHandle, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while (code := backend.poll(handle)) is None:
        assert time.monotonic() < deadline, f"{backend.describe(handle)} did not end"
        time.sleep(0.01)
    return code


# -- no fork ------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_launching_neither_copies_nor_write_protects_the_trainers_memory() -> None:
    """After a fork the parent's private pages are copy-on-write: each page it writes
    next takes a fault, even once the child has exec'd. After vfork none does. A 64 MiB
    private buffer (no huge pages: one fault per 4 KiB page), written whole after each
    launch: a fork would cost 16,384 minor faults per launch, counted exactly by the
    kernel (``ru_minflt``); what Python itself allocates meanwhile is a few hundred."""
    page = mmap.PAGESIZE
    pages = (64 << 20) // page
    buffer = mmap.mmap(-1, pages * page, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        buffer.madvise(mmap.MADV_NOHUGEPAGE)

    def write_every_page(value: int) -> None:
        for offset in range(0, pages * page, page):
            buffer[offset] = value

    write_every_page(1)  # mapped and writable before we count
    backend = LocalBackend()
    launches = 3
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for n in range(launches):
        handle = backend.launch(Job(f"true-{n}", [TRUE]))
        write_every_page(n + 2)
        assert finish(backend, handle) == 0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    buffer.close()
    assert faults < pages // 4, (
        f"{faults} minor faults in the launcher for {launches} launches: the "
        f"{pages}-page buffer was write-protected, i.e. the trainer was forked"
    )


STRACED = """
import sys, time
from melissa_trainer.launcher.backends import Job, LocalBackend
backend = LocalBackend()
handle = backend.launch(Job("t", [sys.argv[1]]))
while backend.poll(handle) is None:
    time.sleep(0.01)
print(handle.pid)
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_job_is_started_with_vfork_as_strace_sees_it(tmp_path: Path) -> None:
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed (the minor-fault test checks the same)")
    trace = tmp_path / "trace"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p or os.getcwd() for p in sys.path)}
    done = subprocess.run(
        [strace, "-f", "-qq", "-e", "trace=vfork,fork,clone,clone3", "-o", str(trace),
         PYTHON, "-c", STRACED, TRUE],
        capture_output=True, text=True, timeout=50, env=env, check=False,
    )  # fmt: skip
    if done.returncode != 0 and ("ptrace" in done.stderr or "not permitted" in done.stderr):
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    pid = done.stdout.split()[-1]
    started = [line for line in trace.read_text().splitlines() if line.endswith(f"= {pid}")]
    assert len(started) == 1, trace.read_text()[-3000:]
    assert "vfork" in started[0] or "CLONE_VFORK" in started[0], started[0]


# -- the wrapper: the job is its command, with PR_SET_PDEATHSIG -----------------------------

REPORT = """
import ctypes, json, os, sys
libc = ctypes.CDLL(None)
sig = ctypes.c_int(-1)
libc.prctl(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG
with open("/proc/self/cmdline", "rb") as f:
    cmdline = f.read().split(b"\\0")[:-1]
print(json.dumps({"pid": os.getpid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
                  "ppid": os.getppid(), "pdeathsig": sig.value,
                  "argv": [a.decode() for a in cmdline]}))
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_the_job_is_its_command_in_its_own_group_with_the_parent_death_signal(
    tmp_path: Path, wrapper: str
) -> None:
    backend = backend_with(wrapper)
    log = tmp_path / "logs" / "job.log"
    argv = [PYTHON, "-c", REPORT, "an argument", "-x"]
    handle = backend.launch(Job("report", argv, log_path=log))
    assert backend.describe(handle) == f"report (pid {handle.pid})"
    assert finish(backend, handle) == 0
    seen = json.loads(log.read_text())
    assert seen["pid"] == seen["pgid"] == handle.pid  # exec'd in place (nice, wrapper)
    assert seen["sid"] == os.getsid(0)  # the default placement: in the trainer's session
    assert seen["ppid"] == os.getpid()
    assert seen["pdeathsig"] == signal.SIGTERM
    assert seen["argv"] == argv  # the wrapper is gone from the command line


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("lc_ctype", [None, "C"])
@pytest.mark.parametrize("wrapper", [None, *WRAPPERS])
def test_the_job_gets_exactly_its_environment(
    tmp_path: Path, wrapper: str | None, lc_ctype: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a C locale the Python wrapper's interpreter coerces LC_CTYPE in its own
    environment; the job gets the one it was given."""
    for name in ("LC_ALL", "LC_CTYPE", "LANG", *THREAD_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    env = {"MARK": "a value with spaces", "EMPTY": ""}
    if lc_ctype is not None:
        env["LC_CTYPE"] = lc_ctype
    job = Job("env", [shutil.which("env") or "/usr/bin/env", "-0"], env=env,
              log_path=tmp_path / "env.log")  # fmt: skip
    backend = backend_with(wrapper)
    assert finish(backend, backend.launch(job)) == 0
    entries = (tmp_path / "env.log").read_bytes().split(b"\0")[:-1]
    seen = dict(entry.decode().split("=", 1) for entry in entries)
    # and the default placement's one BLAS/OpenMP thread (the environment set none)
    assert seen == {**job.full_env(), **dict.fromkeys(THREAD_VARIABLES, "1")}


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("wrapper", [None, *WRAPPERS])
def test_exit_codes_signal_deaths_and_the_log(tmp_path: Path, wrapper: str | None) -> None:
    backend = backend_with(wrapper)
    log = tmp_path / "job.log"
    code = "import sys; print('out', flush=True); print('err', file=sys.stderr); sys.exit(3)"
    assert finish(backend, backend.launch(Job("exits", [PYTHON, "-c", code], log_path=log))) == 3
    assert log.read_text().split() == ["out", "err"]
    suicide = "import os, signal; os.kill(os.getpid(), signal.SIGUSR1)"
    handle = backend.launch(Job("signalled", [PYTHON, "-c", suicide]))
    assert finish(backend, handle) == -signal.SIGUSR1
    handle = backend.launch(Job("killed", [shutil.which("sleep") or "/bin/sleep", "60"]))
    backend.kill(handle, grace=5)
    assert backend.poll(handle) == -signal.SIGTERM


#: a Python solver that prints a line and dies without a flush (a kill -9, an OOM kill)
PRINTS_THEN_DIES = (
    "import os, signal; print('step', 0, 'sent'); os.kill(os.getpid(), signal.SIGKILL)"
)


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("wrapper", [None, *WRAPPERS])
def test_a_python_jobs_lines_reach_its_log_before_a_sigkill(
    tmp_path: Path, wrapper: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's stdout is its log, a file, where Python buffers in blocks: the job runs with
    PYTHONUNBUFFERED=1 (`Job.full_env`), as Slurm's do. Failed before: the line was lost,
    the log empty. A job or trainer that sets the variable itself keeps its own."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # (the job inherits the trainer's)
    backend = backend_with(wrapper)
    log = tmp_path / "job.log"
    job = Job("dies", [PYTHON, "-c", PRINTS_THEN_DIES], log_path=log)
    assert finish(backend, backend.launch(job)) == -signal.SIGKILL
    assert "step 0 sent" in log.read_text(), log.read_text()
    own = Job("own", [PYTHON, "-c", PRINTS_THEN_DIES], env={"PYTHONUNBUFFERED": ""},
              log_path=tmp_path / "own.log")  # fmt: skip
    assert own.full_env()["PYTHONUNBUFFERED"] == ""  # (empty: Python buffers, as asked)
    assert finish(backend, backend.launch(own)) == -signal.SIGKILL
    assert (tmp_path / "own.log").read_text() == ""


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("wrapper", [None, *WRAPPERS])
def test_a_command_that_cannot_run_is_a_launch_error(tmp_path: Path, wrapper: str | None) -> None:
    """As a direct exec reports it: the wrapper would otherwise start and fail later."""
    backend = backend_with(wrapper)
    with pytest.raises(LaunchError, match=r"No such file or directory: 'no-such-command'"):
        backend.launch(Job("missing", ["no-such-command"]))
    with pytest.raises(LaunchError, match=r"No such file or directory: './nowhere'"):
        backend.launch(Job("missing", ["./nowhere"], cwd=tmp_path))
    data = tmp_path / "data.txt"
    data.write_text("not a program\n")
    with pytest.raises(LaunchError, match=r"Permission denied"):
        backend.launch(Job("not executable", [str(data)]))
    with pytest.raises(LaunchError, match=r"empty command"):
        backend.launch(Job("empty", []))
    assert backend._handles == []
    program = tmp_path / "bin" / "hello"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\necho hello\n")
    program.chmod(0o755)
    found = [  # from the job's PATH; relative to the job's cwd
        Job("on path", ["hello"], env={"PATH": str(program.parent)}, log_path=tmp_path / "1"),
        Job("relative", ["bin/hello"], cwd=tmp_path, log_path=tmp_path / "2"),
    ]
    for job in found:
        assert finish(backend, backend.launch(job)) == 0
    assert (tmp_path / "1").read_text() == (tmp_path / "2").read_text() == "hello\n"


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_the_job_is_terminated_when_the_thread_that_launched_it_ends(wrapper: str) -> None:
    """PR_SET_PDEATHSIG follows the launching thread (the launcher's supervisor thread
    outlives its jobs); here the thread ends while its job sleeps. (It waits until the
    job runs its command: the wrapper's prctl comes before that exec, after `launch`
    returned.)"""
    backend = backend_with(wrapper)
    handles: list[local.LocalHandle] = []
    ran: list[bool] = []  # (the thread's own verdict: an assert there would fail nothing)
    argv = [shutil.which("sleep") or "/bin/sleep", "60"]

    def launch_and_end() -> None:
        handles.append(backend.launch(Job("orphan-to-be", argv)))
        deadline = time.monotonic() + 20
        while cmdline(handles[0].pid) != argv and time.monotonic() < deadline:
            time.sleep(0.005)
        ran.append(cmdline(handles[0].pid) == argv)

    launching = threading.Thread(target=launch_and_end)
    launching.start()
    launching.join()
    try:
        # the premise: the job ran its command (past the wrapper's prctl) before the
        # thread ended; a job killed before would pass the check below untested
        assert ran == [True], "the job never ran its command"
        assert finish(backend, handles[0], timeout=20) == -signal.SIGTERM
    finally:
        backend.close()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_python_wrapper_ends_the_job_when_the_trainer_died_before_its_prctl(
    tmp_path: Path,
) -> None:
    """The race setpriv leaves open: had the trainer died before the wrapper's prctl,
    the kernel would never signal the job. The wrapper sees a parent that is not the
    trainer (here: a pid that is not its parent's) and terminates itself instead of
    running the command."""
    marker = tmp_path / "ran"
    argv = local.wrapped_argv([shutil.which("touch") or "/bin/touch", str(marker)],
                              os.environ, "python")  # fmt: skip
    assert argv[5] == str(os.getpid())
    done = subprocess.run(argv, check=False)  # our child: its parent is us, fine
    assert done.returncode == 0 and marker.exists()
    marker.unlink()
    argv[5] = str(os.getpid() + 1_000_000)  # a dead trainer: the parent is someone else
    done = subprocess.run(argv, check=False)
    assert done.returncode == -signal.SIGTERM
    assert not marker.exists()


# -- which wrapper ------------------------------------------------------------------------


@pytest.fixture
def fresh_choice():  # type: ignore[no-untyped-def]
    local.pdeathsig_wrapper.cache_clear()
    yield local.pdeathsig_wrapper
    local.pdeathsig_wrapper.cache_clear()


@pytest.mark.e2e  # (setpriv --version, when another test cleared the choice)
def test_the_debug_log_names_the_wrapper(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="melissa_trainer.launcher"):
        LocalBackend()._resolve_wrapper()  # at the first launch
    expected = "the Python wrapper" if SETPRIV is None else f"{SETPRIV} --pdeathsig TERM"
    assert f"local jobs start with vfork, PR_SET_PDEATHSIG set by {expected}" in caplog.text


@pytest.mark.e2e
def test_without_a_setpriv_that_has_pdeathsig_the_python_wrapper_is_used(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fresh_choice,
) -> None:  # type: ignore[no-untyped-def]
    old = tmp_path / "setpriv"  # util-linux < 2.33: no --pdeathsig
    old.write_text(textwrap.dedent("""\
        #!/bin/sh
        echo "setpriv: unrecognized option '$1'" >&2
        exit 1
        """))  # fmt: skip
    old.chmod(0o755)
    monkeypatch.setattr(pdeathsig.shutil, "which", lambda name, path=None: str(old))
    assert fresh_choice() == "python"
    fresh_choice.cache_clear()
    monkeypatch.setattr(pdeathsig.shutil, "which", lambda name, path=None: None)
    with caplog.at_level(logging.DEBUG, logger="melissa_trainer.launcher"):
        assert LocalBackend()._resolve_wrapper() == "python"
    assert "PR_SET_PDEATHSIG set by the Python wrapper (no setpriv" in caplog.text
    fresh_choice.cache_clear()
    monkeypatch.setattr(local.sys, "platform", "darwin")
    assert fresh_choice() is None


@pytest.mark.timeout(60)
def test_a_backend_starts_nothing_until_its_first_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Looking for the parent-death wrapper runs ``setpriv --version``: at the first
    launch, not when the backend is built (a launcher that never launches, a resumed
    study with nothing left to run, starts no process)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("looked for the wrapper before a launch")

    monkeypatch.setattr(local, "pdeathsig_wrapper", refuse)
    backend = LocalBackend()
    backend.close()
    with pytest.raises(AssertionError, match="before a launch"):  # and looks at launch
        backend.launch(Job("x", [sys.executable, "-c", "pass"]))
