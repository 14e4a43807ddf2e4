"""The examples' ``--backend slurm`` binds the receivers to every interface unless
``--bind`` says otherwise: its jobs run on compute nodes, which cannot reach the
trainer's loopback (docs/how-to/slurm.md: "Bind the receivers to every interface").
Found in a user trial following that page: ``python examples/heat_pde/train.py
--backend slurm`` published ``tcp://127.0.0.1:PORT``, which worked on the one-node test
cluster only because its jobs ran on the trainer's host; a simulation on another node
finds no receiver there and gives up after the client's 60 s (``DeliveryFailed: ... no
receiver ever accepted a connection at tcp://127.0.0.1:...``), every attempt. Failed
before: the slurm backend's receivers bound tcp://127.0.0.1:*, as the worker socket
already did not (it binds tcp://*:* with --backend slurm)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from melissa_trainer import Study


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("argv", "bind"),
    [
        (["--backend", "slurm"], "tcp://*:*"),
        (["--backend", "slurm", "--bind", "tcp://127.0.0.1:*"], "tcp://127.0.0.1:*"),
        ([], "tcp://127.0.0.1:*"),
        (["--bind", "tcp://*:5555"], "tcp://*:5555"),
    ],
)
def test_the_receivers_bind_where_the_backends_jobs_reach(
    argv: list[str], bind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from heat_pde.train import parser  # the example's (examples/ is on sys.path)
    from study_common import StudyArgs, study_source

    # Slurm's commands, which the backend looks for as it is made and this test never
    # runs: stand-ins that fail, so that it runs without Slurm too
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("sbatch", "squeue", "scancel", "sinfo"):
        (tools / name).write_text("#!/bin/sh\nexit 1\n")
        (tools / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    (opts,) = [
        o for o in parser(argv).parse_args_into_dataclasses(argv) if isinstance(o, StudyArgs)
    ]
    _, source = study_source(
        opts, ["solver.py"], {"k": (0.0, 1.0)}, 0, tmp_path / "rendezvous", {"u": ((4,), "f4")}
    )
    assert isinstance(source, Study)
    assert source.stream.config.bind == bind
