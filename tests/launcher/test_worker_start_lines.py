"""Worker mode's job logs: each launch of a worker writes one start line (the
launcher's, `Job.say_start`) in its slot's log (``worker-{slot}.log``, which the
slot's relaunches append to), naming the job (``worker-{slot}``, a relaunch's
``worker-{slot}-r{n}``: the slot), the launch, the backend and the ranks, then its
command on a line of its own: none missing, none written twice, when a study launches
several workers and relaunches one whose process died. The sentence is one line within
100 columns, the command on the next (failed before: ``starting worker 0 (its launch
1) as job worker-0 (local backend, 1 rank):``, 122 columns with the prefix and time,
took two lines)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from launcher_runs import launcher, receive, script, stream_study
from launcher_said import MORE, PREFIX, said_in_log, too_long
from test_launcher_workers import WORKER

from melissa_trainer.launcher.worker_mode import WorkerSupervisor

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG"),
]

START = re.compile(r"starting (worker-(\d+)(?:-r\d+)?) \(launch (\d+), local, 1 rank\):")


@pytest.mark.timeout(60)
def test_each_worker_launch_writes_one_start_line(tmp_path: Path) -> None:
    receiver, buffer = receive(tmp_path, expected=6)
    worker = [sys.executable, script(tmp_path, WORKER, "worker.py"), str(tmp_path)]
    launch = launcher(worker, 6, job_limit=3, worker=True)
    stream_study(launch, tmp_path, receiver, buffer)
    supervisor = launch._supervisor
    assert isinstance(supervisor, WorkerSupervisor)
    assert (tmp_path / "crashed").exists()  # (a worker died: its slot relaunched)
    launches = {slot: n for slot, n in enumerate(supervisor.launches) if n}
    assert sum(launches.values()) > len(launches), launches  # (a relaunch among them)
    logs = sorted((tmp_path / "logs").glob("worker-*.log"))
    assert [p.name for p in logs] == [f"worker-{slot}.log" for slot in sorted(launches)]
    command = " ".join(worker)
    for slot, n in launches.items():
        text = (tmp_path / "logs" / f"worker-{slot}.log").read_text()
        starts = [
            found.groups()
            for line in said_in_log(text)
            if (found := START.search(line.split(": ", 1)[1])) is not None
        ]
        names = [f"worker-{slot}"] + [f"worker-{slot}-r{i}" for i in range(1, n)]
        assert starts == [(names[i], str(slot), str(i + 1)) for i in range(n)], text
        # each followed by its command, whole, on a line of its own; none over 100 columns
        # but the command's
        lines = text.splitlines()
        heads = [i for i, line in enumerate(lines) if "starting worker" in line]
        assert len(heads) == n and all(lines[i].startswith(PREFIX) for i in heads), text
        # (the sentence on one line, its command on the next)
        assert all(lines[i + 1] == MORE + command for i in heads), text
        assert lines.count(MORE + command) == n, text
        assert too_long(text) == [line for line in lines if line == MORE + command], text
