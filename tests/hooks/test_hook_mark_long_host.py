"""A peer's hook mark read on its own host whose name is 64 bytes long (Linux's limit):
the mark keeps 63 of them, and comparing it with the whole name called the peer "not
this host, not checked from here" (hrev3); it is checked, as any peer on this host."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks import Hook
from melissa_trainer.hooks.raised import mark
from melissa_trainer.trainer.hook_mark import MARK_PREFIX, HookMark, in_hook_words, unmarked_words

pytestmark = pytest.mark.timeout(30)

RUN = "run-host"


class Gathers(Hook):
    def on_step_end(self, trainer: object, state: object, control: object) -> None:
        """(a user's hook method: marked)"""


@pytest.mark.parametrize("length", [63, 64])
def test_a_peer_on_a_host_with_a_long_name_is_checked_as_on_this_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, length: int
) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "n" * length)
    peer = HookMark(tmp_path / f"{MARK_PREFIX}1", RUN)  # (this process: alive)
    try:
        args = (None, TrainerState(global_step=5))
        peer.enter(Gathers().on_step_end, args)
        error = RuntimeError("Connection closed by peer")
        mark(error, Gathers().on_step_end, args)
        words = in_hook_words(tmp_path, RUN, [1], error, 5)
    finally:
        peer.close()
    said = f"rank 1 is in the hook method Gathers.on_step_end (step 5, pid {os.getpid()})"
    assert said in words, words
    assert "not this host" not in words, words


def test_a_rank_in_no_hook_on_a_host_with_a_long_name_is_checked_as_on_this_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "n" * 64)
    peer = HookMark(tmp_path / f"{MARK_PREFIX}1", RUN)  # (this process: alive, in no hook)
    try:
        words = unmarked_words(tmp_path, RUN, [1])
    finally:
        peer.close()
    assert words == f"rank 1 (pid {os.getpid()}) is alive on this host", words
