"""The sweep of an ended srun step's MPICH files (`steps.SrunSteps`, `step_sweeps`),
without Slurm: a stand-in ``srun`` (/bin/false: a step that fails at once), a stand-in
``squeue`` (its listing given by the test) and a stand-in /dev/shm
(`mpich_segments.SHM_DIR`) holding files named as MPICH names a step's (``<allocation>.<step
id>``, `kvs_hash`). The real run, with MPICH ranks killed under a one-node Slurm, is
test_slurm_srun_segments.py."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from melissa_trainer.launcher.backends import Job, mpich_segments
from melissa_trainer.launcher.backends.mpich_segments import kvs_hash
from melissa_trainer.launcher.backends.slurm import step_sweeps
from melissa_trainer.launcher.backends.slurm import steps as steps_module
from melissa_trainer.launcher.backends.slurm.commands import SlurmCommands
from melissa_trainer.launcher.backends.slurm.srun_handle import SrunHandle
from melissa_trainer.launcher.backends.slurm.steps import SrunSteps

ALLOCATION = "4242"


class Commands(SlurmCommands):
    """srun is `srun` (/bin/false: exits 1 at once); squeue answers `listing` ("ID|NAME"
    lines)."""

    def __init__(self, srun: str = "/bin/false") -> None:
        self.listing, self.srun = "", srun

    def path(self, name: str) -> str:
        return self.srun if name == "srun" else name

    def run(self, argv, cwd=None, env=None, timeout=None):  # type: ignore[no-untyped-def]
        return subprocess.CompletedProcess(argv, 0, stdout=self.listing, stderr="")


@pytest.fixture
def shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in /dev/shm, and no wait between two listings of the steps."""
    monkeypatch.setattr(mpich_segments, "SHM_DIR", f"{tmp_path}/")
    monkeypatch.setattr(steps_module, "LIST_EVERY", 0.0)
    return tmp_path


def segment(shm: Path, step: int, node: int = 0, prefix: str = "mpich_shm_") -> Path:
    path = shm / f"{prefix}{kvs_hash(f'{ALLOCATION}.{step}')}_{node}"
    path.write_bytes(b"\0" * 64)
    return path


def end(steps: SrunSteps, handle: SrunHandle) -> int:
    deadline = time.monotonic() + 30
    while (code := steps.poll(handle)) is None:
        assert time.monotonic() < deadline, "the stand-in srun did not end"
        time.sleep(0.01)
    return code


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_an_ended_step_s_files_are_removed_those_of_others_kept(
    shm: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The step listed as <allocation>.3: its files on any node index go; another step's
    file, and a file of it that a live process holds, stay (until it is let go)."""
    tmp_path = tmp_path_factory.mktemp("srun")  # (not the stand-in /dev/shm)
    fifo = tmp_path / "srun.fifo"
    os.mkfifo(fifo)
    srun = tmp_path / "srun"  # runs until the test writes a line to the fifo, exits 1
    srun.write_text(f"#!/bin/sh\nread line < {fifo}\nexit 1\n")
    srun.chmod(0o755)
    commands = Commands(str(srun))
    steps = SrunSteps(commands, ALLOCATION, None, ())
    try:
        handle = steps.launch(Job("sim-1", ["x"], cwd=shm), "mt-s-sim-1")
        commands.listing = f"{ALLOCATION}.3|mt-s-sim-1\n{ALLOCATION}.2|mt-s-other\n"
        assert steps.poll(handle) is None and handle.step_id == 3
        mine = [segment(shm, 3), segment(shm, 3, node=5, prefix="mpich_vci_")]
        held = segment(shm, 3, node=1)
        other = segment(shm, 2)
        with held.open("rb"):
            fifo.write_text("end\n")
            assert end(steps, handle) == 1
            assert not any(path.exists() for path in mine)
            assert held.exists() and other.exists()
        assert steps.poll(handle) == 1  # a retry is not due yet
        steps.close()  # (retries what is pending, at once)
        assert not held.exists() and other.exists()
    finally:
        steps.close()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_step_never_listed_is_swept_over_the_ids_it_may_have_had(shm: Path) -> None:
    """Squeue never listed it (it ended at once): the files of the step ids above the
    highest listed before its launch are swept, not those below, nor another user's."""
    commands = Commands()
    commands.listing = f"{ALLOCATION}.6|mt-s-earlier\n"
    steps = SrunSteps(commands, ALLOCATION, None, ())
    try:
        steps.cancel(lambda name: False)  # (a listing: step 6 is the highest known)
        older = segment(shm, 6)
        commands.listing = ""
        handle = steps.launch(Job("sim-2", ["x"], cwd=shm), "mt-s-sim-2")
        assert handle.floor == 7
        candidates = [segment(shm, 7), segment(shm, 6 + step_sweeps.SPAN)]
        foreign = segment(shm, 8)
        if os.geteuid() == 0:  # (another user's file: only root can make one)
            os.chown(foreign, 54321, 54321)
        else:
            foreign.unlink()
        assert end(steps, handle) == 1 and handle.step_id is None
        assert not any(path.exists() for path in candidates)
        assert older.exists()
        assert foreign.exists() or os.geteuid() != 0
    finally:
        steps.close()
