"""`SlurmBackend`'s node exclusion (`node_failures`) against stand-in Slurm commands:
sbatch numbers the jobs and keeps each script, squeue prints what the test writes
(``ID|STATE|REASON|NODES``), sinfo lists the partition's nodes. The oracle is the
``#SBATCH --exclude`` line of the scripts submitted, as sbatch received them.

The real cluster's tests: a study whose node n1 fails every attempt,
test_slurm_two_nodes.py::test_a_node_that_fails_every_attempt_is_left_out; one power
loss of n1 with two jobs there counted once, test_slurm_node_down_once.py."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
from launcher_said import one_line

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.base import Handle

FAKE = {
    # sbatch --parsable --export=ALL SCRIPT: the next job id, the script kept under it
    "sbatch": """#!/bin/bash
n=$(( $(cat "$FAKE/next" 2>/dev/null || echo 0) + 1 ))
echo $n > "$FAKE/next"
cp "${@: -1}" "$FAKE/job-$n.sbatch"
echo $n
""",
    "squeue": '#!/bin/bash\ncat "$FAKE/state" 2>/dev/null\n',
    "scancel": "#!/bin/bash\nexit 0\n",
    "sacct": "#!/bin/bash\nexit 1\n",
    # scontrol update JobId=N ExcNodeList=...: recorded; no job record known
    "scontrol": """#!/bin/bash
if [ "$1" == "update" ]; then echo "$@" >> "$FAKE/scontrol.calls"; exit 0; fi
exit 1
""",
    # sinfo -h -N -o %N|%P: the partition's nodes, one line each (the default marked *)
    "sinfo": '#!/bin/bash\ncat "$FAKE/nodes"\n',
}


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir, state = tmp_path / "bin", tmp_path / "fake"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in FAKE.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(stat.S_IRWXU)
    (state / "nodes").write_text("n0|debug*\nn1|debug*\nn2|debug*\ng0|gpu\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("FAKE", str(state))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return state


def run(backend: SlurmBackend, fake: Path, tmp_path: Path, end: str, also: str = "") -> Handle:
    """Submit one job and have squeue list it ended as `end` (``STATE|REASON|NODES``),
    and the lines `also`; polled until its code is known."""
    handle = backend.launch(Job("sim", ["/bin/true"], cwd=tmp_path, log_path=tmp_path / "sim.log"))
    job_id = (fake / "next").read_text().strip()
    (fake / "state").write_text(f"{also}{job_id}|{end}\n")
    assert backend.poll(handle) is not None
    return handle


def exclude_line(fake: Path) -> str | None:
    """The ``#SBATCH --exclude`` line of the last script sbatch received, if any."""
    job_id = (fake / "next").read_text().strip()
    text = (fake / f"job-{job_id}.sbatch").read_text()
    lines = [line for line in text.splitlines() if line.startswith("#SBATCH --exclude")]
    assert len(lines) <= 1, text
    return lines[0] if lines else None


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_node_that_failed_twice_in_a_row_is_left_out_until_it_completes_a_job(
    fake: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "melissa_trainer")
    backend = SlurmBackend(poll_every=0, script_dir=tmp_path / "scripts")
    try:
        run(backend, fake, tmp_path, "FAILED|None|n1")
        run(backend, fake, tmp_path, "COMPLETED|None|n1")  # (a success: the count restarts)
        run(backend, fake, tmp_path, "FAILED|None|n1")
        run(backend, fake, tmp_path, "FAILED|None|n[1-2]")  # (two nodes: not counted)
        run(backend, fake, tmp_path, "TIMEOUT|None|n1")  # (Slurm's limit: not the node's)
        run(backend, fake, tmp_path, "FAILED|None|n0")
        assert exclude_line(fake) is None
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        run(backend, fake, tmp_path, "NODE_FAIL|None|n1")  # (n1's second in a row)
        warned = [one_line(r.getMessage()) for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warned) == 1 and warned[0].startswith("node n1 failed 2 attempts"), warned
        assert "exclude_after=2" in warned[0] and "--exclude=n1" in warned[0], warned
        assert "sim (Slurm job 3): exit 1" in warned[0], warned  # (its failures named)
        run(backend, fake, tmp_path, "FAILED|None|n0")  # (n0's second: n2 is left)
        assert exclude_line(fake) == "#SBATCH --exclude=n1"
        run(backend, fake, tmp_path, "FAILED|None|n1")  # (a job submitted before: said once)
        assert exclude_line(fake) == "#SBATCH --exclude=n1,n0"
        assert sum("node n1 failed" in one_line(r.getMessage()) for r in caplog.records) == 1
        run(backend, fake, tmp_path, "COMPLETED|None|n1")  # (submitted before: n1 works)
        run(backend, fake, tmp_path, "COMPLETED|None|n2")
        assert exclude_line(fake) == "#SBATCH --exclude=n0"
        assert "completed on node n1: later jobs may run there again" in one_line(caplog.text)
    finally:
        backend.close()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_last_node_of_the_partition_is_never_left_out(
    fake: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every node of partition gpu (one node, g0) failing: no exclusion (it would leave
    the partition none: sbatch would refuse every job), said once; and none after. The
    same where sinfo cannot tell the partition's nodes."""
    caplog.set_level(logging.WARNING, "melissa_trainer")
    backend = SlurmBackend(partition="gpu", poll_every=0, script_dir=tmp_path / "scripts")
    try:
        for _ in range(4):
            run(backend, fake, tmp_path, "FAILED|None|g0")
            assert exclude_line(fake) is None
        said = [one_line(r.getMessage()) for r in caplog.records]
        assert len(said) == 1 and "no node is left out any more" in said[0], said
        assert "it would leave none of the partition's nodes (g0)" in said[0], said
    finally:
        backend.close()
    (fake / "nodes").unlink()  # (sinfo fails: the partition's nodes unknown)
    unknown = SlurmBackend(poll_every=0, script_dir=tmp_path / "unknown")
    try:
        for _ in range(3):
            run(unknown, fake, tmp_path, "FAILED|None|n1")
            assert exclude_line(fake) is None
        said = [one_line(r.getMessage()) for r in caplog.records][1:]
        assert len(said) == 1 and "sinfo could not tell the nodes" in said[0], said
    finally:
        unknown.close()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_users_own_exclude_is_kept_and_none_turns_it_off(
    fake: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = SlurmBackend(extra_args=["--exclude=n2"], poll_every=0, script_dir=tmp_path / "s")
    off = SlurmBackend(exclude_after=None, poll_every=0, script_dir=tmp_path / "off")
    pinned = SlurmBackend(extra_args=["--nodelist=n1"], poll_every=0, script_dir=tmp_path / "w")
    try:
        for _ in range(2):
            run(backend, fake, tmp_path, "FAILED|None|n1")
        assert exclude_line(fake) == "#SBATCH --exclude=n2"
        run(backend, fake, tmp_path, "FAILED|None|n0")
        assert exclude_line(fake) == "#SBATCH --exclude=n2,n1"  # (one line: both)
        for other in (off, pinned):
            for _ in range(3):
                run(other, fake, tmp_path, "FAILED|None|n1")
            assert exclude_line(fake) is None
    finally:
        for each in (backend, off, pinned):
            each.close()
    with pytest.raises(ValueError, match="exclude_after must be an int >= 1"):
        SlurmBackend(exclude_after=0)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_jobs_still_queued_get_the_exclusion_too(
    fake: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A job submitted before the exclusion and still PENDING would start on the failing
    node next (its CPUs freed by each failure): ``scontrol update ExcNodeList`` (Slurm
    takes it from a pending job's owner: seen on the two-node test cluster); a running
    one is left as it is."""
    caplog.set_level(logging.WARNING, "melissa_trainer")
    backend = SlurmBackend(poll_every=0, script_dir=tmp_path / "scripts")
    try:
        job = Job("queued", ["/bin/true"], cwd=tmp_path)
        queued, running = backend.launch(job), backend.launch(job)
        also = "1|PENDING|Resources|\n2|RUNNING|None|n0\n"
        run(backend, fake, tmp_path, "FAILED|None|n1", also)
        assert not (fake / "scontrol.calls").exists()
        run(backend, fake, tmp_path, "FAILED|None|n1", also)
        calls = (fake / "scontrol.calls").read_text().splitlines()
        assert calls == ["update JobId=1 ExcNodeList=n1"], calls
        said = [one_line(r.getMessage()) for r in caplog.records]
        assert len(said) == 1 and ", and the 1 still queued (scontrol update" in said[0], said
        assert backend.poll(queued) is None and backend.poll(running) is None
    finally:
        (fake / "state").write_text("1|CANCELLED|None|\n2|CANCELLED|None|n0\n")  # (closed)
        backend.close()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_one_node_down_counts_once_however_many_jobs_it_ended(
    fake: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two jobs running on n1 both end NODE_FAIL, listed so in one squeue answer (as on
    the two-node cluster: one power loss ends them at the same EndTime): one failure of
    n1, not two (failed before: n1 excluded at once). A job started on n1 after that,
    ended NODE_FAIL too, is a second node-down: n1 is left out."""
    caplog.set_level(logging.WARNING, "melissa_trainer")
    backend = SlurmBackend(poll_every=0, script_dir=tmp_path / "scripts")
    sim = Job("sim", ["/bin/true"], cwd=tmp_path, log_path=tmp_path / "sim.log")
    try:
        first, second = backend.launch(sim), backend.launch(sim)
        (fake / "state").write_text("1|RUNNING|None|n1\n2|RUNNING|None|n1\n")
        assert backend.poll(first) is None and backend.poll(second) is None
        (fake / "state").write_text("1|NODE_FAIL|None|n1\n2|NODE_FAIL|None|n1\n")
        assert backend.poll(first) is not None and backend.poll(second) is not None
        assert "node n1 failed" not in one_line(
            caplog.text
        )  # (each job's own NODE_FAIL words only)
        run(backend, fake, tmp_path, "NODE_FAIL|None|n1")  # (a later down: the second)
        said = [
            one_line(r.getMessage())
            for r in caplog.records
            if "node n1 failed" in one_line(r.getMessage())
        ]
        assert len(said) == 1 and said[0].startswith("node n1 failed 2 attempts"), said
        run(backend, fake, tmp_path, "FAILED|None|n0")
        assert exclude_line(fake) == "#SBATCH --exclude=n1"
    finally:
        backend.close()
