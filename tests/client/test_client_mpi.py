"""A solver's MPI ranks (under mpiexec) each send their part of a field, reassembled bit for
bit by the receiver; a bad first send raises on every rank.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from client_runs import Receiver
from helpers import NO_MPI, find_mpiexec

from melissa_trainer import wire as p

pytestmark = pytest.mark.usefixtures("_clean_environment")


SCRIPTS = Path(__file__).parents[1] / "scripts"


def _mpi_script() -> Any:
    spec = importlib.util.spec_from_file_location("mpi_client", SCRIPTS / "mpi_client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mpiexec() -> str:
    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip(NO_MPI)
    return mpiexec


def _run_mpi(receiver: Receiver, *args: str) -> tuple[list[p.Message], str]:
    proc = subprocess.Popen(
        [_mpiexec(), "-n", "2", sys.executable, str(SCRIPTS / "mpi_client.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # each wait bounds one message (the first: mpiexec's start and two ranks'
        # imports): generous, for a loaded 2-core machine
        messages = receiver.until_bye(byes=2, timeout=90)
        output, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, output
    return messages, output


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_mpi_ranks_send_parts_reassembled_bit_for_bit(receiver: Receiver) -> None:
    script = _mpi_script()
    messages, output = _run_mpi(receiver, receiver.endpoint)
    hellos = [m for m in messages if isinstance(m, p.Hello)]
    assert sorted(h.client_rank for h in hellos) == [0, 1]
    for h in hellos:
        assert (h.simulation_id, h.client_count, h.parameters) == (42, 2, script.PARAMETERS)
    byes = sorted((m for m in messages if isinstance(m, p.Bye)), key=lambda b: b.client_rank)
    assert byes == [p.Bye(42, r, 2, script.STEPS) for r in (0, 1)]
    # reassemble each (step, field) by offset and count, as a receiver does
    full: dict[tuple[int, str], np.ndarray] = {}  # the fields' bytes
    covered: dict[tuple[int, str], np.ndarray] = {}  # how often each element came
    for m in messages:
        if not isinstance(m, p.Data):
            continue
        key, item = (m.time_step, m.name), m.dtype.itemsize
        size = int(np.prod(m.shape))
        raw = full.setdefault(key, np.zeros(size * item, np.uint8))
        hits = covered.setdefault(key, np.zeros(size, np.int8))
        raw[m.offset * item : (m.offset + m.elements) * item] = m.payload.view(np.uint8)
        hits[m.offset : m.offset + m.elements] += 1
        assert m.offset == sum(script.SPLITS[m.name][: m.client_rank])
        assert m.dtype == np.dtype(script.FIELDS[m.name][1])
    assert sorted(full) == [(t, n) for t in range(script.STEPS) for n in ("mask", "u")]
    for (step, name), raw in full.items():
        assert np.all(covered[step, name] == 1)  # no gap, no overlap
        expected = script.global_fields(step)[name]
        assert raw.tobytes() == expected.tobytes(), (step, name)  # bit for bit


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_mpi_bad_first_send_raises_on_every_rank(receiver: Receiver) -> None:
    messages, output = _run_mpi(receiver, receiver.endpoint, "mistakes")
    assert "rank 1 raised TypeError: field 'u': dtype float32" in output
    assert "rank 0 raised ValueError: the first send failed its checks on 1 other" in output
    assert output.count("do not add up to the global fields") == 2, output
    data = [m for m in messages if isinstance(m, p.Data)]
    assert sorted((m.client_rank, m.name) for m in data) == [
        (0, "mask"),
        (0, "u"),
        (1, "mask"),
        (1, "u"),
    ]
    assert {m.time_step for m in data} == {0}
