"""A rank that read rank 0's refusal mark tells it so over the connection it read the
mark on (`refusal_mark.await_mark`'s `then`), not over a new one.

A new connection costs torch's client a reverse lookup of the store's address, and on a
machine whose DNS loses a query (about 1 in 40 here) that lookup takes the resolver's 5 s,
as long as rank 0 waits for the reads (`refusal_mark.READ_WAIT`): rank 0 gave up and
exited, and its launcher then ended the rank still telling it (the exit this waiting
exists to prevent). Here the reading rank's lookups after its first take `LOOKUP` s (a
library preloaded into it); before, rank 0's wait ended with no read counted."""

from __future__ import annotations

import datetime
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from agent_store import as_rank
from slow_lookup import compile_library, environment
from torch.distributed import TCPStore

from melissa_trainer.trainer import refusal_mark

#: seconds each reverse lookup after the first takes in the reading rank: past READ_WAIT
LOOKUP = 5.5


#: the other rank: the user's refusal, raised alike on every rank (rank 0 says it)
RANK_1 = """
from melissa_trainer import refusals_end_the_program
from melissa_trainer.config.reading import ConfigError
with refusals_end_the_program():
    raise ConfigError("my_steps=-1 must be positive")
"""


@pytest.mark.e2e  # (a rank's process, and up to READ_WAIT s of real time)
@pytest.mark.skipif(sys.platform != "linux", reason="the lookup is slowed by LD_PRELOAD")
@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")
@pytest.mark.timeout(120)
def test_rank_0_hears_the_read_of_a_rank_whose_new_connections_are_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (this test's subject is the connection a read takes, whatever `READ_WAIT`: the
    # wait is the one before it covered a first connection's lost lookup)
    monkeypatch.setattr(refusal_mark, "READ_WAIT", 5.0)
    assert LOOKUP > refusal_mark.READ_WAIT
    library = compile_library(tmp_path)
    store = TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=30))
    try:
        as_rank(monkeypatch, store.port, rank=0)
        env = {**environment(library, LOOKUP, skip=1), "RANK": "1"}
        rank_1 = subprocess.Popen(
            [sys.executable, "-c", RANK_1, "--"], env=env, stderr=subprocess.PIPE, text=True
        )
        try:
            line = "-c: error: my_steps=-1 must be positive"
            refusal_mark.leave(line)  # (rank 0: waits up to READ_WAIT for the read)
            reads = store.add(f"{refusal_mark._key()}/read", 0)
            _, said = rank_1.communicate(timeout=60)
        finally:
            if rank_1.poll() is None:
                rank_1.kill()
                rank_1.wait(timeout=30)
        assert rank_1.returncode == 2, said
        assert said == "", said  # (the same line as rank 0's: not said again)
        assert reads == 1  # before: 0, the read came LOOKUP s late, after rank 0 had gone
    finally:
        del store


@pytest.mark.e2e  # (a rank's process, and LOOKUP s of real time)
@pytest.mark.skipif(sys.platform != "linux", reason="the lookup is slowed by LD_PRELOAD")
@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")
@pytest.mark.timeout(120)
def test_rank_0_waits_out_a_reading_ranks_slow_first_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reading rank's first connection (its `await_mark`'s) is the slow one: rank 0
    leaves its mark as that connection's lookup begins (both ranks refused alike, at
    once), and still hears the read. Before, `READ_WAIT` (5 s) ended within a lost
    lookup (5 s): rank 0 counted no read and exited, its launcher then ended the rank
    about to say it (here: 0 reads, the read coming 0.5 s after rank 0's wait ended)."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from waiting import wait_until

    library, flag = compile_library(tmp_path), tmp_path / "looking-up"
    store = TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=30))
    try:
        as_rank(monkeypatch, store.port, rank=0)
        env = {**environment(library, LOOKUP, flag=flag), "RANK": "1"}
        rank_1 = subprocess.Popen(
            [sys.executable, "-c", RANK_1, "--"], env=env, stderr=subprocess.PIPE, text=True
        )
        try:
            wait_until(flag.exists, "rank 1's first lookup", 60, procs=[rank_1])
            refusal_mark.leave("-c: error: my_steps=-1 must be positive")
            reads = store.add(f"{refusal_mark._key()}/read", 0)
            _, said = rank_1.communicate(timeout=60)
        finally:
            if rank_1.poll() is None:
                rank_1.kill()
                rank_1.wait(timeout=30)
        assert rank_1.returncode == 2 and said == "", said
        assert reads == 1  # before: 0
        assert refusal_mark.LOST_LOOKUP >= LOOKUP - 0.5  # (a lookup lost: the resolver's 5 s)
    finally:
        del store
