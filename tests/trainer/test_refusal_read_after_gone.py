"""A rank that learned rank 0's store is gone or absent (`refusal_mark.GONE`,
`refusal_mark.NO_STORE`) does not open a new connection to it to say it read the mark
(`refusal_mark.read`): to a node 0 that drops packets, that connection waited out its
connect timeout (5 s) before the rank exited. With a mark (or none by the grace: rank 0
may still wait for it), it does say so."""

from __future__ import annotations

import pytest

from melissa_trainer import ConfigError, refusals_end_the_program
from melissa_trainer.common.refusal import elsewhere
from melissa_trainer.trainer import refusal_mark, refusals

pytestmark = pytest.mark.timeout(60)

LINE_WORDS = "my_steps=-3 must be positive"


class _Link:
    """A live store's link (`refusal_mark.StoreLink`'s part that a read uses): counts
    the reads told over it."""

    def __init__(self, reads: list[str]) -> None:
        self.store = self
        self.reads = reads

    def add(self, key: str, amount: int) -> int:
        self.reads.append(key)
        return len(self.reads)

    def gone(self) -> bool:
        return False

    def __enter__(self) -> _Link:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def reads_after(monkeypatch: pytest.MonkeyPatch, answer: str | None, *, quiet: bool) -> int:
    """How many times the rank told rank 0 it read the mark, when the wait answered
    `answer`, for a quiet copy of rank 0's refusal or a refusal of its own (over the
    connection the wait used: `await_mark`'s `then`; a new one, `read`, counts too)."""
    reads: list[str] = []
    monkeypatch.setattr(refusals, "QUIET_RANK_GRACE", 0.0)
    monkeypatch.setattr(refusals, "launch_rank", lambda: 1)
    link = None if answer == refusal_mark.NO_STORE else answer
    if answer not in (refusal_mark.GONE, refusal_mark.NO_STORE):
        link = _Link(reads)  # type: ignore[assignment]
        monkeypatch.setattr(refusal_mark, "_poll_mark", lambda link, timeout: answer)
    monkeypatch.setattr(refusal_mark, "launch_store", lambda: link)
    monkeypatch.setattr(refusal_mark, "read", lambda: reads.append("new connection"))
    error = ConfigError([LINE_WORDS])
    with pytest.raises(SystemExit, match="^2$"), refusals_end_the_program():
        raise elsewhere(error, 1) if quiet else error
    assert "new connection" not in reads  # (a lost DNS query: 5 s, rank 0 gone meanwhile)
    return len(reads)


@pytest.mark.parametrize("answer", [refusal_mark.GONE, refusal_mark.NO_STORE])
@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "own"])
def test_no_read_is_told_to_a_store_gone_or_absent(
    monkeypatch: pytest.MonkeyPatch, answer: str, quiet: bool
) -> None:
    assert reads_after(monkeypatch, answer, quiet=quiet) == 0


@pytest.mark.parametrize("answer", ["rank 0's line", None], ids=["mark", "none_yet"])
@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "own"])
def test_a_read_is_told_to_a_live_store(
    monkeypatch: pytest.MonkeyPatch, answer: str | None, quiet: bool
) -> None:
    assert reads_after(monkeypatch, answer, quiet=quiet) == 1
