"""How the local backend places a job beside the trainer (`Placement`): its niceness,
session, BLAS/OpenMP threads and cores, read back by the real job from /proc, and the
opt-outs (``threads=None``, ``nice=0``, ``placement=None``)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from melissa_trainer.launcher import Launcher, Placement
from melissa_trainer.launcher.backends import Job, LocalBackend, local, make_backend
from melissa_trainer.launcher.backends.placement import THREAD_VARIABLES

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc, affinity, autogroup")

PYTHON = sys.executable
#: the job's own view of itself, from /proc (an oracle independent of the backend): the
#: niceness of its main thread and of a thread it starts, its session, group, affinity,
#: autogroup and thread variables
REPORT = """
import json, os, sys, threading
def nice(tid):
    with open(f"/proc/self/task/{tid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])
seen = {}
t = threading.Thread(target=lambda: seen.update(thread=nice(threading.get_native_id())))
t.start(); t.join()
try:  # absent without autogroup; empty in some sandboxes (CI's)
    autogroup = (open("/proc/self/autogroup").read().split() or [None])[0]
except OSError:
    autogroup = None
print(json.dumps({
    "pid": os.getpid(), "sid": os.getsid(0), "pgid": os.getpgid(0),
    "nice": nice(os.getpid()), "thread_nice": seen["thread"],
    "cpus": sorted(os.sched_getaffinity(0)), "autogroup": autogroup,
    "env": {k: v for k, v in os.environ.items() if k in sys.argv[1].split(",")},
}))
"""


def run_report(backend: LocalBackend, tmp_path: Path, env: dict[str, str] | None = None) -> dict:
    log = tmp_path / f"report-{time.monotonic_ns()}.log"
    job = Job("report", [PYTHON, "-c", REPORT, ",".join(THREAD_VARIABLES)], env=env or {},
              log_path=log)  # fmt: skip
    handle = backend.launch(job)
    deadline = time.monotonic() + 30
    while (code := backend.poll(handle)) is None:
        assert time.monotonic() < deadline, "the job did not end"
        time.sleep(0.01)
    assert code == 0, log.read_text()
    seen = json.loads(log.read_text())
    assert seen["pid"] == seen["pgid"] == handle.pid  # a process group of its own
    return seen


def own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def own_autogroup() -> str | None:
    """This process's autogroup; None where the kernel has none, or where the file reads
    empty (some sandboxes, CI's among them)."""
    try:
        words = Path("/proc/self/autogroup").read_text().split()
    except OSError:
        return None
    return words[0] if words else None


@pytest.fixture(autouse=True)
def clean_thread_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests' own environment must not set the thread variables (CI may)."""
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_by_default_a_job_is_niced_in_our_session_with_one_thread(tmp_path: Path) -> None:
    if own_nice() > 19 - 10:
        pytest.skip("this process is already niced near the bottom")
    seen = run_report(LocalBackend(), tmp_path)
    assert seen["nice"] == seen["thread_nice"] == own_nice() + 10  # threads inherit it
    assert seen["sid"] == os.getsid(0)  # our session, so niceness counts against us
    assert seen["env"] == dict.fromkeys(THREAD_VARIABLES, "1")
    assert seen["cpus"] == sorted(os.sched_getaffinity(0))
    if own_autogroup() is not None:  # an autogroup kernel: the job shares ours
        assert seen["autogroup"] == own_autogroup()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_placement_none_is_the_old_behaviour(tmp_path: Path) -> None:
    """A session of its own, the trainer's niceness, the environment untouched; on an
    autogroup kernel, an autogroup of its own (the CPU share of a whole trainer)."""
    seen = run_report(LocalBackend(placement=None), tmp_path)
    assert seen["sid"] == seen["pid"]
    assert seen["nice"] == seen["thread_nice"] == own_nice()
    assert seen["env"] == {}
    if own_autogroup() is not None:
        assert seen["autogroup"] != own_autogroup()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_users_thread_setting_wins_and_threads_none_leaves_the_env(tmp_path: Path) -> None:
    seen = run_report(LocalBackend(), tmp_path, env={"OMP_NUM_THREADS": "4"})
    assert seen["env"] == {"OMP_NUM_THREADS": "4"}  # none of the others is set either
    seen = run_report(LocalBackend(Placement(threads=None, nice=0)), tmp_path)
    assert seen["env"] == {} and seen["nice"] == own_nice()
    seen = run_report(LocalBackend(Placement(threads=3, nice=2)), tmp_path)
    assert seen["env"] == dict.fromkeys(THREAD_VARIABLES, "3")
    assert seen["nice"] == seen["thread_nice"] == min(own_nice() + 2, 19)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_cpus_bind_the_job_and_the_launching_thread_gets_its_own_back(tmp_path: Path) -> None:
    ours = sorted(os.sched_getaffinity(0))
    cpu = ours[-1]
    seen = run_report(LocalBackend(Placement(cpus={cpu})), tmp_path)
    assert seen["cpus"] == [cpu]
    assert sorted(os.sched_getaffinity(0)) == ours  # restored after the launch


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_without_a_nice_program_the_group_is_reniced_after_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback renices the job's process group from here: a job that waits until
    it is told shows the niceness on every thread it has by then."""
    monkeypatch.setattr(local, "_nice_program", lambda: None)
    backend = LocalBackend(Placement(nice=5))
    assert backend._nice is None
    go = tmp_path / "go"
    code = (
        "import os, sys, threading, time\n"
        "t = threading.Thread(target=time.sleep, args=(60,), daemon=True); t.start()\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
    )
    handle = backend.launch(Job("waits", [PYTHON, "-c", code]))
    try:
        nices = set()
        for tid in os.listdir(f"/proc/{handle.pid}/task"):
            stat = Path(f"/proc/{handle.pid}/task/{tid}/stat").read_text()
            nices.add(int(stat.rsplit(")", 1)[1].split()[16]))
        assert nices == {min(own_nice() + 5, 19)}
    finally:
        go.touch()
        backend.close()


def test_bad_placements_are_named_before_anything_starts() -> None:
    for nice in (-1, 20, True, 1.5, "5"):
        with pytest.raises(ValueError, match="Placement.nice"):
            Placement(nice=nice)  # type: ignore[arg-type]
    for threads in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="Placement.threads"):
            Placement(threads=threads)  # type: ignore[arg-type]
    for cpus in (set(), "1", [-1], [1.5]):
        with pytest.raises(ValueError, match="Placement.cpus"):
            Placement(cpus=cpus)  # type: ignore[arg-type]
    outside = max(os.sched_getaffinity(0)) + 1
    with pytest.raises(ValueError, match=f"CPU\\(s\\) \\[{outside}\\].*may not use"):
        Placement(cpus={outside})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="placement must be"):
        LocalBackend(placement={"nice": 5})  # type: ignore[arg-type]
    assert Placement(cpus=[0, 0]).cpus == frozenset({0})  # type: ignore[arg-type]


def test_the_placement_reaches_the_backend_by_name_and_through_the_launcher() -> None:
    assert make_backend("local", placement=None).placement is None  # type: ignore[attr-defined]
    assert make_backend("local").placement == Placement()  # type: ignore[attr-defined]
    backend = LocalBackend(Placement(nice=3))
    launcher = Launcher([PYTHON, "-c", "pass"], [{"x": 0.0}], 1, backend=backend)
    assert launcher.backend.placement == Placement(nice=3)  # type: ignore[attr-defined]
