"""Test processes and their trees, from /proc: a command run in a session of its own and
killed whole on a timeout (`run_group`), a tree SIGKILLed (`kill_tree`), the processes
of a study (`processes_with`, `simulation_of`, `live`, `cmdline`), and trainers killed
between their jobs' launches (`sigkill_between_launches`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any


def run_group(cmd: list[str], *, timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)``, but in a
    session of its own, whose whole process group is SIGKILLed if the run times out or
    the test is interrupted (pytest-timeout): killing ``accelerate launch`` alone would
    leave its ranks, and the simulations they launched, running into the next tests.

    An ``accelerate launch`` runs its ranks with faulthandler on (a rank's fatal signal
    then shows every thread's Python stack). Its exit code is returned as is: a rank's
    abort in the interpreter's exit after a complete run ("terminate called without an
    active exception", once let through here) is fixed at its root
    (`melissa_trainer.core.process_group`; tests/trainer/test_exit_teardown.py)."""
    launch = "launch" in cmd[1:3] and "accelerate" in Path(cmd[0]).name
    if launch:
        kwargs["env"] = {**kwargs.get("env", os.environ), "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        # (torch elastic starts each rank in a session of its own: the group's SIGKILL
        # missed ranks stuck in a collective, which outlived the test; hrank3)
        kill_tree(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _children() -> dict[int, list[int]]:
    """Each live process's children, from /proc (parent pid -> pids)."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # (the command name, in parentheses, may hold spaces: the fields after its end)
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def kill_tree(root: int) -> list[int]:
    """SIGKILL process `root` and all its descendants, whatever session each is in (an
    ``accelerate launch``'s ranks, their simulations); returns the pids signalled.
    Everyone is stopped first (SIGSTOP), then the tree read again and killed: a
    process cannot start a child that escapes between the reading and the kill."""
    signalled: list[int] = []
    for number in (signal.SIGSTOP, signal.SIGKILL):
        tree, found, todo = _children(), [], [root]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(tree.get(pid, []))
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, number)
        signalled = found
    return signalled


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment mentions `marker` (a unique path: the
    launcher gives every simulation MELISSA_TRAINER_RENDEZVOUS)."""
    needle = marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:  # gone, or not ours
            continue
    return found


def simulation_of(pid: int) -> int | None:
    """The MELISSA_TRAINER_SIMULATION_ID that the launcher gave process `pid`; None when
    the process is gone (or not ours) or has none."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or not ours
        return None
    for item in environ.split(b"\0"):
        name, _, value = item.partition(b"=")
        if name == b"MELISSA_TRAINER_SIMULATION_ID":
            return int(value)
    return None


def _stat(pid: int) -> tuple[bytes, int, int] | None:
    """(state, parent pid, process group) of `pid` from /proc; None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1]), int(fields[2])


def live(pid: int) -> bool:
    """`pid` runs: neither gone nor a zombie (an orphan is reaped by whoever adopted it,
    maybe never)."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in (b"Z", b"X")


def cmdline(pid: int) -> list[str]:
    """The command line of `pid`; [] when it is gone (or a zombie)."""
    try:
        return os.fsdecode(Path(f"/proc/{pid}/cmdline").read_bytes()).split("\0")[:-1]
    except OSError:
        return []


def _launching(child: int, parent: int) -> bool:
    """`child` of `parent` is a local job before its PR_SET_PDEATHSIG: not exec'd yet
    (vfork: it shows its parent's command line), inside its execve (a live process
    with no command line: the kernel sets the new one after switching memory maps),
    or in its wrapper (``... --pdeathsig TERM -- ARGV``, setpriv's or a test's gate in
    front of it)."""
    argv = cmdline(child)
    if not argv:
        return live(child)  # mid-execve (a zombie has none either: not launching)
    if argv == cmdline(parent):
        return True
    return "--" in argv and "--pdeathsig" in argv[: argv.index("--")]


def jobs_being_launched(group: int, others: list[int]) -> list[int]:
    """The children of the processes of `group` and of the pids `others` (trainers)
    that are local jobs before their PR_SET_PDEATHSIG (see `_launching`), except those
    in `group` or `others` themselves (a child not exec'd yet that was stopped with the
    trainers: it dies with them, never a job)."""
    stats = {int(e.name): _stat(int(e.name)) for e in Path("/proc").iterdir() if e.name.isdigit()}
    trainers = {pid for pid, st in stats.items() if st and st[2] == group} | set(others)
    return [
        pid
        for pid, st in stats.items()
        if st and st[1] in trainers and pid not in trainers and _launching(pid, st[1])
    ]


def sigkill_between_launches(group: int, others: list[int], timeout: float = 60.0) -> None:
    """SIGKILL the trainer processes (process group `group` and the pids `others`) at a
    moment when none of their jobs is between its launch and its parent-death signal:
    the window the local backend documents (with setpriv, a trainer killed there
    leaves that job running; see `melissa_trainer.launcher.backends.local`). The
    trainers are stopped (SIGSTOP: no launch begins), the jobs in the window are waited
    for (at most `timeout` s), then everything is killed. Gone processes are fine."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGSTOP)
    for pid in others:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + timeout
        while jobs_being_launched(group, others):
            assert time.monotonic() < deadline, f"a job stayed in its launch for {timeout} s"
            time.sleep(0.005)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        for pid in others:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
