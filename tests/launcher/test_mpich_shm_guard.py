"""The tests' guard (`mpich_shm.ShmGuard`, run around every test by conftest.py): an
MPICH file that appears in /dev/shm during a test and that nobody holds is named in a
warning (a test whose job ended before MPI_Finalize and whose cleanup forgot the file).
Here in a directory of its own, as the guard's /dev/shm."""

from __future__ import annotations

import os
from pathlib import Path

import mpich_shm
import pytest
from mpich_shm import LeakWarning, ShmGuard


@pytest.fixture
def shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(mpich_shm, "SHM", tmp_path)
    return tmp_path


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_a_new_file_nobody_holds_is_named_with_its_test(shm: Path) -> None:
    """Named: a new MPICH file free at the test's end (at once), one a process still held
    then and that is free at the session's end (then). Not named: one that existed
    before (same inode), one removed, one still held, a file that is not MPICH's."""
    old, replaced = shm / "mpich_shm_old_0", shm / "mpich_shm_replaced_0"
    for path in (old, replaced):
        path.write_bytes(b"\0")
    guard = ShmGuard()
    before = guard.before()
    (shm / "new").write_bytes(b"\0")
    (shm / "new").rename(replaced)  # (another file under an old name: new)
    left, held, kept, gone = (shm / f"mpich_shm_{n}_0" for n in ("left", "held", "kept", "gone"))
    for path in (left, held, kept, gone, shm / "other_0"):
        path.write_bytes(b"\0")
    gone.unlink()
    fds = [os.open(held, os.O_RDONLY), os.open(kept, os.O_RDONLY)]
    try:
        with pytest.warns(LeakWarning) as said:
            guard.after(before, "tests/x.py::test_x")
        assert sorted(str(w.message).split()[0] for w in said) == [str(left), str(replaced)]
        assert all("during tests/x.py::test_x and nobody holds it" in str(w.message) for w in said)
        os.close(fds.pop(0))  # (the held file's last process ends after the test)
        with pytest.warns(LeakWarning) as said:
            guard.finish()
        assert [str(w.message).split()[0] for w in said] == [str(held)]
        assert "at the session's end" in str(said[0].message)
    finally:
        for fd in fds:
            os.close(fd)


def test_a_test_that_leaves_nothing_is_not_named(
    shm: Path, recwarn: pytest.WarningsRecorder
) -> None:
    guard = ShmGuard()
    before = guard.before()
    (shm / "mpich_shm_made_0").write_bytes(b"\0")
    (shm / "mpich_shm_made_0").unlink()  # (the test's cleanup)
    guard.after(before, "tests/x.py::test_x")
    guard.finish()
    assert [w for w in recwarn if issubclass(w.category, LeakWarning)] == []


def test_a_warning_says_what_the_files_name_tells_of_its_maker(shm: Path) -> None:
    """A leak's name traces it (`mpich_shm.origin`): a communicator's segment, which this
    suite never makes (mkstemp's name); a singleton's, named after its pid; a job's,
    named after its key-value space, e.g. Slurm step 27810030.13 (CI, 2026-12-01)."""
    guard = ShmGuard()
    before = guard.before()
    step = mpich_shm.segment_names("27810030.13")[0]
    assert step == "mpich_shm_73621b9c_0"
    for name in ("mpich_shar_tmpvX6bmG", "mpich_shm_4a1e_0", step):
        (shm / name).write_bytes(b"\0")
    with pytest.warns(LeakWarning) as said:
        guard.after(before, "tests/x.py::test_x")
    told = {str(w.message).split()[0]: str(w.message) for w in said}
    assert "a communicator's segment" in told[f"{shm}/mpich_shar_tmpvX6bmG"]
    assert "an MPI singleton's, pid 18974" in told[f"{shm}/mpich_shm_4a1e_0"]
    assert "named after its key-value space" in told[f"{shm}/{step}"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_a_slurm_steps_file_left_until_its_clusters_stop_is_named(shm: Path) -> None:
    """Named when a module's tests are done: a step's file that nobody holds (its stop
    would remove it unsaid). Not named: one a live process holds, another job's."""
    left, held = (shm / mpich_shm.segment_names(f"7472301.{s}")[0] for s in (0, 8))
    other = shm / mpich_shm.segment_names("7472300.0")[0]
    for path in (left, held, other):
        path.write_bytes(b"\0")
    fd = os.open(held, os.O_RDONLY)
    try:
        with pytest.warns(LeakWarning) as said:
            mpich_shm.warn_unheld_steps(range(7472301, 7472310), "tests/x.py")
    finally:
        os.close(fd)
    assert [str(w.message).split()[0] for w in said] == [str(left)]
    assert "during tests/x.py and nobody holds it when its tests were done" in str(said[0].message)
