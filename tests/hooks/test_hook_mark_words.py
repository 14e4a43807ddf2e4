"""`trainer.hook_mark.in_hook_words`: what a rank whose collective broke (a peer gone,
no note) says of the hook methods the ranks were in. Only a rank whose pid ended "died",
of two ranks too (a collective broken by a network error leaves the other alive:
`tests/hooks/test_rank_gone_checked.py`); a live peer "is in" its hook method, one not
checkable (another host) "was in" it (its mark outlives it); the rule on collectives in
a hook is said flat only when the ranks were not all in the same hook method at the same
step, else as one possibility after the likelier death of something else (killed by a
signal, out of memory). Here every mark is this process's (alive): a peer read as on
another host "was in" its hook method (its pid not checked);
`tests/hooks/test_hook_mark_pids.py` has peers of their own that die.

Failed before: every peer with a mark "died in the hook method ...", each followed by
the rule, so that of 3 ranks in a legitimate all-rank collective of a hook, the live
one was said dead and an OOM kill blamed on a one-rank collective. The marks are real
(`HookMark` files written as `HookList.fire` writes them), the error marked as
`hooks.raised` marks a hook's error; the oracle: the words as written here."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks import Hook
from melissa_trainer.hooks.raised import mark
from melissa_trainer.trainer.hook_mark import MARK_PREFIX, HookMark, in_hook_words

pytestmark = pytest.mark.timeout(30)

RUN = "run-w"
RULE = "a collective in a hook (torch.distributed's, accelerator.gather / reduce) must be"
ALIVE = (
    "every other rank is alive on this host: the collective likely broke of something else "
    "(a network error, a collective's timeout?)"
)
ELSE = "the rank gone likely died of something else (killed by a signal, out of memory?)"


class Gathers(Hook):
    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        """(its all-rank collective, never called here: the marks say it runs)"""


def in_hook(notes: Path, rank: int, step: int) -> HookMark:
    """Rank `rank`'s mark, in ``Gathers.on_step_end`` at `step` (closed by the caller)."""
    hook_mark = HookMark(notes / f"{MARK_PREFIX}{rank}", RUN)
    hook_mark.enter(Gathers().on_step_end, (None, TrainerState(global_step=step)))
    return hook_mark


def broke_in_hook(step: int) -> RuntimeError:
    """This rank's collective's error, raised in ``Gathers.on_step_end`` at `step`."""
    error = RuntimeError("Connection closed by peer")
    mark(error, Gathers().on_step_end, (None, TrainerState(global_step=step)))
    return error


def test_of_three_ranks_in_the_same_hook_none_is_said_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ranks 1 and 2 and this rank (0) in the same hook method at step 5; which one is
    # gone is not known (3 ranks), nor checkable (their host is not this one, as read
    # here): neither peer is said to have died
    marks = [in_hook(tmp_path, 1, 5), in_hook(tmp_path, 2, 5)]
    monkeypatch.setattr(socket, "gethostname", lambda: "another-node")
    words = in_hook_words(tmp_path, RUN, [1, 2], broke_in_hook(5), 5)
    assert "rank 1 died" not in words and "rank 2 died" not in words, words  # (before: both)
    unchecked = f"pid {os.getpid()} on {os.uname().nodename}: not this host, not checked"
    assert f"rank 1 was in the hook method Gathers.on_step_end (step 5, {unchecked}" in words
    assert f"rank 2 was in the hook method Gathers.on_step_end (step 5, {unchecked}" in words
    assert "every rank was in Gathers.on_step_end at step 5" in words, words
    assert ELSE in words and words.index(ELSE) < words.index(RULE), words
    for hook_mark in marks:
        hook_mark.close()


def test_live_peers_are_in_their_hook(tmp_path: Path) -> None:
    # their pid (this process's) runs: neither died, whichever the collective lost
    marks = [in_hook(tmp_path, 1, 5), in_hook(tmp_path, 2, 5)]
    words = in_hook_words(tmp_path, RUN, [1, 2], broke_in_hook(5), 5)
    pid = os.getpid()
    assert f"rank 1 is in the hook method Gathers.on_step_end (step 5, pid {pid})" in words
    assert f"rank 2 is in the hook method Gathers.on_step_end (step 5, pid {pid})" in words
    assert "died in" not in words, words
    # (all in the same hook at the same step, all alive: before, "the rank gone likely
    # died of something else (killed by a signal ...)", which the pids contradict)
    assert ELSE not in words and ALIVE in words, words
    for hook_mark in marks:
        hook_mark.close()


def test_a_rank_in_a_hook_where_the_others_were_not_gets_the_rule(tmp_path: Path) -> None:
    # 2 ranks: rank 1 in the hook at step 3, this rank broke outside any hook (in the
    # trainer's collective): the one-rank collective is the likely cause
    hook_mark = in_hook(tmp_path, 1, 3)
    words = in_hook_words(tmp_path, RUN, [1], RuntimeError("closed by peer"), 3)
    pid = os.getpid()
    assert words.startswith(
        f"rank 1 is in the hook method Gathers.on_step_end (step 3, pid {pid}): {RULE}"
    ), words
    assert ELSE not in words, words
    # 3 ranks, gone not known: rank 1 in the hook (its pid, this process's, alive),
    # rank 2 not, this rank not
    words = in_hook_words(tmp_path, RUN, [1, 2], RuntimeError("closed by peer"), 3)
    assert words.startswith(
        f"rank 1 is in the hook method Gathers.on_step_end (step 3, pid {pid}): {RULE}"
    ), words
    hook_mark.close()
    # the same hook method at another step is not the same place
    marks = [in_hook(tmp_path, 1, 4), in_hook(tmp_path, 2, 3)]
    words = in_hook_words(tmp_path, RUN, [1, 2], broke_in_hook(3), 3)
    assert ELSE not in words and f": {RULE}" in words, words
    for hook_mark in marks:
        hook_mark.close()
