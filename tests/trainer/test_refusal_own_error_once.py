"""A refusal the user's own code raises on every rank, inside `refusals_end_the_program`
(a script that checks its own settings and raises melissa_trainer's `ConfigError`, as the
README's pattern lets it), is said once, by rank 0, as the library's own refusals are:
under ``accelerate launch --num_processes 2`` it was said once per rank (two identical
lines). A refusal of another rank alone, or another text, is still said, by that rank.

How: rank 0 leaves the line it said in the launcher's store (`refusal_mark`); another
rank says its own line unless rank 0's is the same (`refusals.refusals_end_the_program`),
then tells rank 0 it has read it: rank 0 exits after that (its exit would make the
launcher end the others, before their own lines).
The unit tests play the store with a `TCPStore` of their own; the end-to-end ones run a
user-like script (written here) on two real ranks (gloo on CPU)."""

from __future__ import annotations

import datetime
import gc
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_store import as_rank
from torch.distributed import TCPStore

from melissa_trainer import ConfigError, refusals_end_the_program
from melissa_trainer.trainer import refusal_mark, refusals

#: a user's script: rank R raises a ConfigError of its own naming the R-th value of
#: TEST_REFUSALS (comma-separated; empty: that rank refuses nothing and ends)
USER_SCRIPT = """\
import os
from melissa_trainer import ConfigError, refusals_end_the_program
from melissa_trainer.trainer import refusals

refusals.QUIET_RANK_GRACE = float(os.environ["TEST_QUIET_RANK_GRACE"])
value = os.environ["TEST_REFUSALS"].split(",")[int(os.environ["RANK"])]
with refusals_end_the_program():
    if value:
        raise ConfigError([f"my_steps={value} must be positive", "give --my_steps 1"])
"""


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[TCPStore]:
    """A store as torch elastic's agent hosts one, this process rank 1 of 2 under it."""
    server = TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=10))
    as_rank(monkeypatch, server.port)
    monkeypatch.setattr(refusal_mark, "READ_WAIT", 0.0)  # (no other rank here to read)
    yield server
    del server  # (closes the listening socket, once nothing else refers to it)
    # A test's pytest.raises keeps its frame, and so the store, in a reference cycle: the
    # garbage collector freed it later, in another test, where the store's end stalled
    # that test's connection to its own store for 5 s (torch: "timed out after 5000ms"):
    # rank 0 left no mark and the next test here waited its timeout; a roll call was cut
    gc.collect()


def rank_0_says(error: BaseException, monkeypatch: pytest.MonkeyPatch) -> None:
    """What rank 0 does with `error` in the wrapper: says it, leaves the mark."""
    with monkeypatch.context() as m:
        m.setenv("RANK", "0")
        with pytest.raises(SystemExit, match="^2$"), refusals_end_the_program():
            raise error


@pytest.mark.timeout(60)
def test_the_same_refusal_as_rank_0s_is_not_said_again(
    store: TCPStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(refusals, "QUIET_RANK_GRACE", 1e6)  # (the mark ends the wait)
    rank_0_says(ConfigError(["my_steps=-1 must be positive"]), monkeypatch)
    assert capsys.readouterr().err.count(": error: my_steps=-1") == 1
    with pytest.raises(SystemExit) as ended, refusals_end_the_program():
        raise ConfigError(["my_steps=-1 must be positive"])
    assert ended.value.code == 2 and capsys.readouterr().err == ""


@pytest.mark.timeout(60)
def test_another_text_or_no_word_from_rank_0_is_said_by_this_rank(
    store: TCPStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(refusals, "QUIET_RANK_GRACE", 0.2)  # rank 0 says nothing
    with pytest.raises(SystemExit) as ended, refusals_end_the_program():
        raise ConfigError(["my_steps=-2 must be positive"])
    assert ended.value.code == 2
    assert capsys.readouterr().err.count(": error: my_steps=-2") == 1
    monkeypatch.setattr(refusals, "QUIET_RANK_GRACE", 1e6)
    rank_0_says(ConfigError(["my_steps=-1 must be positive"]), monkeypatch)
    with pytest.raises(SystemExit, match="^2$"), refusals_end_the_program():
        raise ConfigError(["my_steps=-2 must be positive"])
    said = capsys.readouterr().err
    assert said.count(": error: my_steps=-1") == 1 and said.count(": error: my_steps=-2") == 1


@pytest.mark.timeout(60)
def test_rank_0_ends_once_the_other_ranks_have_read_its_mark(
    store: TCPStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under one launcher, rank 0's exit ends the others: it waits for them to have
    read its line (and said theirs, if another). Here rank 1 has: rank 0 does not wait
    out its (huge) wait."""
    monkeypatch.setattr(refusal_mark, "READ_WAIT", 1e6)
    refusal_mark.read()  # (rank 1, done)
    refusal_mark.leave("train.py: error: my_steps=-1 must be positive")
    assert refusal_mark.await_mark(0) == "train.py: error: my_steps=-1 must be positive"


@pytest.mark.timeout(60)
def test_without_a_store_or_with_one_gone_the_answer_comes_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    assert refusal_mark.await_mark(1e6) == refusal_mark.NO_STORE
    closed = socket.socket()  # a port bound, not listening: it refuses connections
    closed.bind(("127.0.0.1", 0))
    try:
        monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
        monkeypatch.setenv("MASTER_PORT", str(closed.getsockname()[1]))
        assert refusal_mark.await_mark(1e6) == refusal_mark.GONE
        refusal_mark.leave("nothing to leave it in")  # (and no error)
    finally:
        closed.close()


def launch(tmp_path: Path, refusals_by_rank: str, grace: float) -> tuple[int, str]:
    """The user's script on two ranks: the launch's exit code and all it said."""
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from two_ranks import launch_two_ranks
    finally:
        sys.path.remove(str(Path(__file__).parent))
    script = tmp_path / "train.py"
    script.write_text(USER_SCRIPT)
    env = {"TEST_REFUSALS": refusals_by_rank, "TEST_QUIET_RANK_GRACE": str(grace)}
    proc = launch_two_ranks(script, env=env, timeout=240)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_two_ranks_raising_the_same_own_config_error_say_it_once(tmp_path: Path) -> None:
    """Two lines before. The grace is huge: rank 1 ends at rank 0's mark (or its
    launcher's SIGTERM), not at the grace's end."""
    code, output = launch(tmp_path, "-1,-1", grace=1e6)
    said = [line for line in output.splitlines() if "error:" in line]
    assert said == ["train.py: error: my_steps=-1 must be positive give --my_steps 1"], output
    assert code != 0 and "exitcode  : 2" in output, output[-3000:]
    assert "[rank0]: Traceback" not in output and "[rank1]: Traceback" not in output


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_refusal_of_rank_1_alone_or_of_its_own_text_is_said_by_it(tmp_path: Path) -> None:
    code, output = launch(tmp_path, ",-2", grace=2.0)  # (rank 0 refuses nothing: ends 0)
    said = [line for line in output.splitlines() if "error:" in line]
    assert said == ["train.py: error: my_steps=-2 must be positive give --my_steps 1"], output
    assert code != 0 and "exitcode  : 2" in output, output[-3000:]
    code, output = launch(tmp_path, "-1,-2", grace=1e6)
    said = sorted(line for line in output.splitlines() if "error:" in line)
    assert [line.split()[2] for line in said] == ["my_steps=-1", "my_steps=-2"], output
    assert code != 0, output[-3000:]
