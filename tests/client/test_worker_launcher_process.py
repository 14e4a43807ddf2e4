"""`worker_launcher.launcher_gone`: what a worker reads of its launcher's process
(``MELISSA_TRAINER_LAUNCHER_PROCESS``, `launcher_process`): ended only when /proc says
so on the launcher's own machine and pid namespace, a reused pid told apart by its
start time; it cannot tell (None: the worker waits, as before) otherwise. Real
processes, read from /proc as the worker reads them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from melissa_trainer.client.worker_launcher import (
    ENV_LAUNCHER_PROCESS,
    launcher_gone,
    launcher_process,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc")


def named(value: str | None) -> dict[str, str]:
    """A worker's environment naming `value` as its launcher's process."""
    assert value is not None
    return {ENV_LAUNCHER_PROCESS: value}


def test_a_running_launcher_is_not_gone_and_its_fields_are_the_proc_ones() -> None:
    value = launcher_process()
    assert value is not None
    pid, start, boot, namespace = value.split()
    with open(f"/proc/{os.getpid()}/stat") as stat:  # (field 22, after the name's ")")
        assert start == stat.read().rsplit(")", 1)[1].split()[19]
    with open("/proc/sys/kernel/random/boot_id") as boot_id:
        assert (pid, boot) == (str(os.getpid()), boot_id.read().strip())
    assert namespace == os.readlink("/proc/self/ns/pid")
    assert launcher_gone(3, named(value)) is None


@pytest.mark.e2e  # (a process of its own)
@pytest.mark.timeout(60)
def test_an_ended_launcher_is_gone_reaped_or_a_zombie() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    assert child.stdin is not None
    value = launcher_process(child.pid)
    assert launcher_gone(None, named(value)) is None  # (alive)
    child.stdin.close()  # (it ends; not reaped yet: a zombie until waited for)
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    said = launcher_gone(4, named(value))
    assert said is not None and f"(pid {child.pid}, {ENV_LAUNCHER_PROCESS}) has ended" in said
    assert "simulation 4 not reported" in said and "runs simulation 4 again" in said, said
    child.wait()
    assert launcher_gone(None, named(value)) is not None  # (reaped)


def test_a_reused_pid_is_told_apart_by_its_start_time() -> None:
    pid, start, *here = launcher_process().split()  # type: ignore[union-attr]
    other = " ".join([pid, str(int(start) - 1), *here])  # (this pid, once another process)
    assert launcher_gone(None, named(other)) is not None


@pytest.mark.parametrize(
    "value",
    ["", "12", "x 1 boot pid:[1]", "{pid} {start} another-boot-id {ns}",
     "{pid} {start} {boot} pid:[1]"],
)  # fmt: skip
def test_it_cannot_tell_elsewhere_nor_from_a_value_that_is_not_one(value: str) -> None:
    # another machine (boot id) or pid namespace: the pid names nothing there, so a pid
    # long ended, or never started, must not read as the launcher gone
    pid, start, boot, ns = launcher_process().split()  # type: ignore[union-attr]
    value = value.format(pid=2**22 + 1, start=start, boot=boot, ns=ns)
    assert launcher_gone(None, {ENV_LAUNCHER_PROCESS: value}) is None
