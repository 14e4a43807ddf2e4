"""`refusals_end_the_program` (`melissa_trainer.trainer.refusals`): around a user's own
script's trainer, a refused start is one ``PROGRAM: error: ...`` line and exit status 2;
a rank other than 0 (its quiet copy) exits 2 without repeating it; anything else
propagates. Found in a user trial (htrial20): a second trainer on a busy output_dir was
refused with a 17-line traceback under ``python``, 62 lines under ``accelerate launch``
(the examples had the one line: the implementation lived in examples/study_common.py).

The end-to-end checks run tests/scripts/user_train_refusals.py, a user-like script, on
an output_dir whose lock tests/scripts/hold_output_lock.py holds."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import melissa_trainer
from melissa_trainer import REFUSALS, ConfigError, refusals_end_the_program
from melissa_trainer.common.refusal import elsewhere, said_once
from melissa_trainer.trainer import refusals
from melissa_trainer.trainer.lock_holder import OutputDirLocked

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "user_train_refusals.py"
HOLDER = ROOT / "tests" / "scripts" / "hold_output_lock.py"


@pytest.mark.timeout(30)
def test_a_refusal_is_one_error_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    error = ConfigError(["output_dir holds checkpoints", "give another --output_dir"])
    with pytest.raises(SystemExit) as info, refusals_end_the_program():
        raise error
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ": error: " in err, err
    assert "output_dir holds checkpoints" in err and "give another --output_dir" in err
    assert err.startswith(f"{Path(sys.argv[0]).name}: error: ")


@pytest.mark.timeout(30)
def test_another_ranks_quiet_copy_exits_2_silently_rank_0s_said_once_speaks(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float | None] = []

    class Grace:  # (the quiet rank's wait for rank 0 to end first, recorded, not waited)
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout)
            return False

    monkeypatch.setattr(refusals.threading, "Event", Grace)
    locked = OutputDirLocked("/tmp/out", None)
    with pytest.raises(SystemExit) as info, refusals_end_the_program():
        raise elsewhere(locked, 1)
    assert info.value.code == 2 and capsys.readouterr().err == ""
    assert waits == [refusals.QUIET_RANK_GRACE]  # rank 0 ends first: its line is not lost
    with pytest.raises(SystemExit) as info, refusals_end_the_program():
        raise said_once(ConfigError(["no checkpoint verifies"]), 0)
    assert info.value.code == 2
    assert capsys.readouterr().err.count("no checkpoint verifies") == 1


@pytest.mark.timeout(30)
def test_anything_else_propagates_with_its_traceback() -> None:
    with pytest.raises(ValueError, match="a bug"), refusals_end_the_program():
        raise ValueError("a bug")
    with pytest.raises(KeyboardInterrupt), refusals_end_the_program():
        raise KeyboardInterrupt
    assert {c.__name__ for c in REFUSALS} == {
        "ConfigError", "OutputDirLocked", "StudyChanged", "CheckpointError", "PortInUse"
    }  # fmt: skip
    assert "refusals_end_the_program" in melissa_trainer.__all__


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """An output_dir whose lock another process holds: (the directory, its pid)."""
    out, go = tmp_path / "out", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen(
        [sys.executable, str(HOLDER), str(out), "running", str(go)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield out, holder.pid
    finally:
        go.touch()
        try:
            holder.wait(30)
        finally:
            if holder.poll() is None:
                holder.kill()
                holder.wait(30)
            for stream in (holder.stdout, holder.stderr):
                if stream is not None:
                    stream.close()


FLAGS = ["--disable_progress_bar", "--report_to", "none"]


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_users_script_on_a_held_output_dir_says_one_line_and_exits_2(
    held: tuple[Path, int],
) -> None:
    out, pid = held
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--output_dir", str(out), *FLAGS],
        capture_output=True, text=True, timeout=100, cwd=out.parent,
        env={**env, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(said) == 1, proc.stderr[-3000:]
    assert said[0].startswith("user_train_refusals.py: error: output_dir ")
    assert "in use by another trainer" in said[0] and f"pid {pid}" in said[0]


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_under_accelerate_launch_rank_0_says_it_once_then_torchruns_summary(
    held: tuple[Path, int],
) -> None:
    """Two ranks: one error line (rank 0's; rank 1's quiet copy says nothing), no
    ``[rank0]:`` traceback; what follows is the launcher's own ChildFailedError
    summary, which the page says we cannot suppress (docs/how-to/own-solver.md)."""
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from two_ranks import launch_two_ranks
    finally:
        sys.path.remove(str(Path(__file__).parent))
    out, pid = held
    proc = launch_two_ranks(SCRIPT, "--output_dir", str(out), *FLAGS, timeout=240)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    said = [line for line in output.splitlines() if "error:" in line]
    assert len(said) == 1 and f"pid {pid}" in said[0], output[-3000:]
    assert "[rank0]: Traceback" not in output and "[rank1]: Traceback" not in output
    assert "exitcode  : 2" in output, output[-3000:]  # torchrun's summary: status 2


@pytest.mark.timeout(30)
@pytest.mark.parametrize("rank", ["0", "1"])
@pytest.mark.parametrize("read_held", [False, True])
def test_a_collectives_failure_after_rank_0s_mark_was_read_held_ends_quiet_with_2(
    rank: str, read_held: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank other than 0 that read rank 0's mark held in a collective (its wait
    watch's `read_if_left`) ends quiet with status 2 when that collective then fails;
    any other RuntimeError, or rank 0's own, propagates unchanged (the e2e case:
    test_refusal_alone_read.py)."""
    monkeypatch.setenv("RANK", rank)
    held = refusals.refusal_mark._HELD_READ
    monkeypatch.setattr(refusals.refusal_mark, "_HELD_READ", type(held)())
    if read_held:
        refusals.refusal_mark._HELD_READ.set()
    broken = RuntimeError("[gloo/transport/tcp/pair.cc:553] Connection closed by peer")
    if read_held and rank == "1":
        with pytest.raises(SystemExit) as info, refusals_end_the_program():
            raise broken
        assert info.value.code == refusals.REFUSED_STATUS
    else:
        with pytest.raises(RuntimeError) as raised, refusals_end_the_program():
            raise broken
        assert raised.value is broken
    assert capsys.readouterr().err == ""
