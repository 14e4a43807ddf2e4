"""Shared fixtures: a clean Accelerate state per test, one torch thread, a warning for an
MPICH file left in /dev/shm (`mpich_shm.ShmGuard`), a failure for a `SegmentRecord` of
the test's study left there (`_no_segment_record_left`); the number of pytest-xdist workers
that ``-n auto`` (pyproject's addopts) starts; each test's timeout, for the waits that
last until shortly before it (`waiting.UNTIL_TEST_TIMEOUT`).

The test files are in folders that mirror the package (docs/concepts/architecture.md,
"Tests"); this file stays at the top of tests/: imported in pytest's default (prepend)
import mode, it puts tests/ on sys.path, so the shared helpers beside it (helpers.py,
slurm_cluster.py, ...) import by name from every folder."""

from __future__ import annotations

import json
import os
import sys
import threading

import pytest

# the line saying how many tests ``-m`` deselected (pytest-xdist hides pytest's own count)
from deselected_summary import (  # noqa: F401 (hooks: pytest finds them by name here)
    pytest_deselected,
    pytest_terminal_summary,
    pytest_testnodedown,
)

# the wait watch's warnings read back (`wait_said.said`: its tests in tests/core, tests/trainer)
from wait_said import said  # noqa: F401 (a fixture: pytest finds it by name here)

#: xdist workers per core for ``-n auto``. One: the suite is mostly CPU-bound (its
#: end-to-end tests train and start several processes each: ~1,180 CPU seconds), and
#: its tests' timeouts were set for one test at a time (two workers per core timed four
#: of them out on a 2-core machine that other work kept busy)
WORKERS_PER_CORE = 1
#: whether a test that starts a process without the e2e marker fails (see below)
ENFORCE_TIERS = True


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: `WORKERS_PER_CORE` workers per core this process may run on (the
    affinity mask, not the machine's count, nor psutil's physical cores), at least 2."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(2, WORKERS_PER_CORE * (cores or 1))


@pytest.fixture(autouse=True)
def _fresh_accelerate_state():
    """Accelerate keeps process-wide singletons; each trainer test starts from scratch."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


@pytest.fixture(autouse=True)
def _no_launch_left():  # type: ignore[no-untyped-def]
    """The launch id a trainer noted under a test's agent store (`trainer.launch_join`)
    is not the next test's: a process-wide value, as torchrun's worker holds one."""
    yield
    from melissa_trainer.stream.launch_identity import note_launch

    note_launch(None)


@pytest.fixture(autouse=True)
def _release_held_ports():  # type: ignore[no-untyped-def]
    """The ports `held_ports.refused_endpoint` held for the test are released."""
    yield
    try:  # (as `_shm_guard`: a copy of this file elsewhere has no held_ports beside it)
        from held_ports import release
    except ImportError:
        return
    release()


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    # (imported here, not at the top: pytest-xdist's controller loads this file too and
    # runs no test; torch cost it ~0.9 CPU-s before it started the workers)
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def _shm_guard():  # type: ignore[no-untyped-def]
    try:  # (tests/ is on sys.path once this file is imported; not this file's copies')
        from mpich_shm import ShmGuard
    except ImportError:  # (a copy of this file beside a test's own suite: no guard)
        yield None
        return
    guard = ShmGuard()
    yield guard
    guard.finish()


@pytest.fixture(autouse=True)
def _no_mpich_file_left(_shm_guard, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A warning names the test during which an MPICH file that nobody holds appeared in
    /dev/shm (a job ended before MPI_Finalize: tests/mpich_shm.py, `ShmGuard`)."""
    before = _shm_guard.before() if _shm_guard else {}
    yield
    if _shm_guard:
        _shm_guard.after(before, request.node.nodeid)


def _records() -> set[str]:
    """The `SegmentRecord` files in /dev/shm now (melissa_trainer/launcher/backends)."""
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("melissa_trainer_")}
    except OSError:
        return set()


@pytest.fixture(autouse=True)
def _no_segment_record_left(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Fails a test that leaves the `SegmentRecord` of a study run in its tmp_path (or a
    folder of it, 3 deep) in /dev/shm, and removes it. Known by the study's id in the
    name (`study_id`), not by a diff of /dev/shm alone: other tests run meanwhile."""
    from melissa_trainer.launcher.backends.base import study_id

    tmp = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    before = _records() if tmp else set()
    yield
    new = _records() - before if tmp else set()
    if not new:
        return
    dirs = [tmp, *(d for glob in ("*/", "*/*/", "*/*/*/") for d in tmp.glob(glob))]
    ids = {study_id(d) for d in dirs if d.is_dir()}
    left = sorted(n for n in new if n[len("melissa_trainer_") :].rsplit("_", 1)[0] in ids)
    for name in left:
        os.unlink(f"/dev/shm/{name}")
    if left:
        pytest.fail(
            f"this test left /dev/shm/{left[0]} (removed now): a backend's record of MPI "
            "segments for the study's next run, which a test's study never has; close the "
            "backend (a study that ends leaves none), or remove it after a SIGKILL",
            pytrace=False,
        )


# -- the tiers: a test that starts a process is end-to-end (marker ``e2e``) -------------
#
# ``pytest -m "not e2e"`` is the inner tier: it starts no process (no torch interpreter,
# accelerate launch, Slurm, compiler, simulation or network namespace), waits no real
# bound of 5 s or more (such a test carries the marker too: a close's bounds at their
# real timescales, 5-20 s each) and answers within 3 minutes on 2 cores
# (docs/concepts/architecture.md, "Tests"). The rule is checked, not hoped: every way
# this interpreter starts a process is watched, and a test without the marker that
# starts one fails at teardown, naming what it started.

#: the processes started during the current test: (how, its command)
_STARTED: list[tuple[str, str]] = []
#: threads alive before the current test began (a late start of one of them, left by an
#: earlier test, is not this test's)
_EARLIER_THREADS: set[int] = set()


def _record(kind: str, args: object) -> None:
    if threading.get_ident() in _EARLIER_THREADS:
        return
    command = " ".join(map(str, args)) if isinstance(args, list | tuple) else str(args)
    _STARTED.append((kind, command[:200]))


def _watch_process_starts() -> None:
    """Wrap every way this interpreter starts a process (subprocess's and
    multiprocessing's fork_exec, posix_spawn, fork) to record it in `_STARTED`."""
    import _posixsubprocess
    import subprocess

    real_fork_exec = _posixsubprocess.fork_exec

    def fork_exec(args, executable_list, *rest):  # type: ignore[no-untyped-def]
        _record("exec", args)
        return real_fork_exec(args, executable_list, *rest)

    _posixsubprocess.fork_exec = fork_exec  # multiprocessing's spawn calls it so
    subprocess._fork_exec = fork_exec  # type: ignore[attr-defined]  # bound at its import
    for name in ("posix_spawn", "posix_spawnp"):
        real = getattr(os, name, None)
        if real is not None:

            def spawn(path, argv, *a, _real=real, **k):  # type: ignore[no-untyped-def]
                _record("spawn", argv)
                return _real(path, argv, *a, **k)

            setattr(os, name, spawn)
    real_fork = os.fork

    def fork() -> int:
        _record("fork", "os.fork()")
        return real_fork()

    os.fork = fork


def _cache_bytecode_outside_the_tree() -> None:
    """Under ``PYTHONDONTWRITEBYTECODE`` (this project's machines set it), let this
    process write bytecode after all, into a cache outside the source tree
    (``sys.pycache_prefix``: ``$XDG_CACHE_HOME/melissa-trainer/pycache``, else
    ``~/.cache/...``), never beside the sources, which is what the variable is there to
    prevent. Without any cache every pytest-xdist worker compiled the package and
    assertion-rewrote all ~830 test modules at each run: 14.5 CPU-s of collection per
    worker instead of 5 (tests/project/test_bytecode_cache.py). A prefix the user set
    (``PYTHONPYCACHEPREFIX``) is kept; the processes the tests start inherit nothing
    of this (their environment is unchanged)."""
    if not sys.dont_write_bytecode:
        return
    if sys.pycache_prefix is None:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        sys.pycache_prefix = os.path.join(cache, "melissa-trainer", "pycache")
    sys.dont_write_bytecode = False


def pytest_configure(config: pytest.Config) -> None:
    # first: the test modules, collected after this hook, are then read from the cache
    _cache_bytecode_outside_the_tree()
    config.addinivalue_line(
        "markers",
        "e2e: starts a process (a torch interpreter, accelerate launch, Slurm, a compiler, "
        "a simulation, a network namespace), or waits 5 s or more of a real bound (a "
        "close's), or is a case of a costly grid that the inner tier's cases of it already "
        "take through the same paths; pytest -m 'not e2e' is the inner tier",
    )
    # The local backend's probe for setpriv runs once per interpreter, at the first
    # launch: left to a test, it was that test's process only when no earlier test in the
    # same worker had launched (test_a_job_that_cannot_start_fails_the_study failed
    # alone, passed in the suite). Run before the watch, it is no test's.
    from melissa_trainer.launcher.backends.pdeathsig import pdeathsig_wrapper

    pdeathsig_wrapper()
    _watch_process_starts()
    if not _xdist_controller(config):
        # torch and accelerate, imported by the autouse fixtures (`_one_thread`,
        # `_fresh_accelerate_state`), imported here instead: a test's timeout counts its
        # fixtures' set-up, and the first test of a process paid them (20 s at load 8:
        # test_signal_when.py's 30 s ran out when it came first in a narrow run)
        import accelerate.state  # noqa: F401
        import torch  # noqa: F401


def _xdist_controller(config: pytest.Config) -> bool:
    """Whether this process only hands tests to pytest-xdist workers (runs none)."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", 0))


#: fixtures that start processes once for many tests (a compiler, a Slurm cluster): every
#: test that uses one is end-to-end, whichever test happens to start it first
E2E_FIXTURES = frozenset(
    {"c_client", "sanitized_c_client", "script_exe", "mpi_script_exe", "slurm_cluster"}
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


def _test_timeout(item: pytest.Item) -> float | None:
    """The test's timeout as pytest-timeout reads it: its marker, else ``--timeout``, else
    ``PYTEST_TIMEOUT``, else the ini's; None for none (0 too)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
        if value is not None:
            return float(value) or None
    try:
        ini = item.config.getini("timeout")
    except ValueError:  # (no pytest-timeout: no timeout)
        return None
    for value in (item.config.getoption("timeout", None), os.environ.get("PYTEST_TIMEOUT"), ini):
        if value not in (None, ""):
            return float(value) or None
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item):  # type: ignore[no-untyped-def]
    try:  # (as `_shm_guard`: a copy of this file elsewhere has no waiting.py beside it)
        from waiting import set_test_timeout
    except ImportError:
        pass
    else:  # (before the test's fixtures: pytest-timeout's clock counts them)
        set_test_timeout(_test_timeout(item))
    _STARTED.clear()
    _EARLIER_THREADS.clear()
    _EARLIER_THREADS.update(
        t.ident for t in threading.enumerate() if t is not threading.main_thread() and t.ident
    )
    yield


@pytest.fixture(autouse=True)
def _inner_tier_starts_no_process(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Fails a test that starts a process without the ``e2e`` marker (at teardown: the
    last fixture torn down, so what other fixtures start counts too)."""
    yield
    started = list(_STARTED)
    log = os.environ.get("MELISSA_TEST_STARTS_LOG")  # benchmarks/suite_cost.py, tiers
    if log and started:
        with open(log, "a") as f:
            record = {"test": request.node.nodeid, "started": started[:3], "n": len(started)}
            f.write(json.dumps(record) + "\n")
    if started and request.node.get_closest_marker("e2e") is None and ENFORCE_TIERS:
        pytest.fail(
            f"this test started {len(started)} process(es) without the e2e marker, e.g. "
            f"{started[0][1]!r}: mark it @pytest.mark.e2e (the inner tier, -m 'not e2e', "
            "starts none)",
            pytrace=False,
        )
