"""A study whose backend runs the simulations on compute nodes (Slurm) while its
receivers bind loopback (`study.launch.warn_unreachable_receivers`): said in one WARNING
as rank 0's study starts, naming the fix. Found reading a user's own script after the
examples' fix (their ``--backend slurm`` now binds every interface): `SlurmBackend`
with the default ``ReceiverConfig`` published ``tcp://127.0.0.1:PORT`` without a word,
and every simulation on another node gave up after its client's 60 s, attempt after
attempt. A bind the nodes reach, or a backend on this host, is not said."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from helpers import NO_MPI, find_mpiexec

from melissa_trainer import StreamSource, Study
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher
from melissa_trainer.launcher.backends import Backend, LocalBackend, MpiexecBackend, SlurmBackend
from melissa_trainer.launcher.backends.hydra_step import hydra_other_hosts
from melissa_trainer.stream.receiver_config import ReceiverConfig

LOGGER = "melissa_trainer.study.launch"


def started_warnings(
    backend: Backend,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    rank: int = 0,
    **config: str,
) -> list[str]:
    """The warnings of a `Study` on `backend` started as `rank` of 2 (then stopped;
    its launcher never starts: no job is submitted)."""
    launch = Launcher("true", [{"a": 0.0}], 1, backend=backend)
    source = Study(launch, StreamSource(ReceiverConfig(rendezvous_dir=tmp_path, **config)))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        source.start(FIFOBuffer(10), rank, 2)
    source.stop()
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


@pytest.mark.timeout(30)
def test_slurm_with_loopback_receivers_is_said_once_with_the_fix(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    said = started_warnings(SlurmBackend(script_dir=tmp_path / "jobs"), tmp_path, caplog)
    assert len(said) == 1, said
    assert "'tcp://127.0.0.1:*'" in said[0] and "loopback" in said[0]
    assert "bind='tcp://*:*'" in said[0] and "one-node cluster" in said[0]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("backend", "bind", "rank"),
    [
        ("slurm", "tcp://*:*", 0),  # every interface: the nodes reach it
        ("slurm", "tcp://127.0.0.1:*", 1),  # said by rank 0 only
        ("local", "tcp://127.0.0.1:*", 0),  # the jobs run on this host
    ],
)
def test_a_bind_the_jobs_reach_or_another_rank_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, backend: str, bind: str, rank: int
) -> None:
    made = SlurmBackend(script_dir=tmp_path / "jobs") if backend == "slurm" else LocalBackend()
    assert started_warnings(made, tmp_path, caplog, rank, bind=bind) == []


@pytest.mark.parametrize(
    ("environ", "extra_args", "elsewhere"),
    [
        ({}, [], False),  # this machine
        ({}, ["-hosts", "node1,node2"], True),
        ({}, ["--hostfile=hosts.txt"], True),
        ({}, ["-f", "hosts.txt"], True),
        ({"HYDRA_HOST_FILE": "hosts.txt"}, [], True),
        ({}, ["-bind-to", "none"], False),
        # a Slurm allocation: hydra spreads over its nodes unless a launcher is chosen
        ({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "4"}, [], True),
        ({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "1"}, [], False),
        ({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "4"}, ["-launcher", "fork"], False),
    ],
)
def test_hydra_runs_ranks_elsewhere_when_told_of_hosts_or_spread_over_an_allocation(
    environ: dict[str, str], extra_args: list[str], elsewhere: bool
) -> None:
    assert hydra_other_hosts(environ, extra_args) is elsewhere


MPIEXEC = find_mpiexec()


@pytest.mark.skipif(MPIEXEC is None, reason=NO_MPI)
@pytest.mark.timeout(30)
def test_an_mpiexec_told_of_hosts_with_loopback_receivers_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("SLURM_JOB_ID", "SLURM_STEP_ID", "HYDRA_HOST_FILE"):
        monkeypatch.delenv(name, raising=False)
    assert MPIEXEC is not None
    hosts = MpiexecBackend(MPIEXEC, extra_args=["-hosts", "node1,node2"])
    said = started_warnings(hosts, tmp_path, caplog)
    assert len(said) == 1 and "the mpiexec backend runs the simulations on other hosts" in said[0]
    caplog.clear()
    assert started_warnings(MpiexecBackend(MPIEXEC), tmp_path, caplog) == []
