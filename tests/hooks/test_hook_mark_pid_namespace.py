"""`trainer.hook_mark`: a peer rank in a pid namespace of its own on this host (ranks in
containers of their own on one node: ``apptainer exec --containall`` under ``srun``,
Docker with host networking) is not checked by its pid from here.

Failed before (hrev4): `checked` compared the host name only, and a peer's pid, which
names another process or none in our namespace, was read as ours: a live peer was
"dead on this host" (or "died" in its hook method). The peer is a real process started
by ``unshare --user --pid --fork --mount-proc`` (same host name, its own pids), keeping
its `HookMark` in a hook method until its stdin closes; the oracle: it still runs (its
`Popen.poll`) while the words are read. A control, the same peer in our namespace, is
checked and found alive.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks import Hook
from melissa_trainer.hooks.raised import mark
from melissa_trainer.trainer.hook_mark import in_hook_words, unmarked_words

pytestmark = [
    pytest.mark.e2e,  # (a process of its own)
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform != "linux", reason="pid namespaces are Linux's"),
]

RUN = "run-ns"
ROOT = Path(__file__).resolve().parents[2]
#: rank 1, in ``Gathers.on_step_end`` at step 3 when argv[2] is "hook", until stdin closes
RANK = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from melissa_trainer.core.state import TrainerState
    from melissa_trainer.hooks import Hook
    from melissa_trainer.trainer.hook_mark import MARK_PREFIX, HookMark

    class Gathers(Hook):
        def on_step_end(self, trainer, state, control):
            pass

    mark = HookMark(Path(sys.argv[1]) / f"{MARK_PREFIX}1", sys.argv[3])
    if sys.argv[2] == "hook":
        mark.enter(Gathers().on_step_end, (None, TrainerState(global_step=3)))
    print("marked", os.getpid(), flush=True)
    sys.stdin.read()
    """
)


def _own_namespace_works() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    done = subprocess.run(
        [unshare, "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "true"],
        capture_output=True,
        timeout=30,
    )
    return done.returncode == 0


OWN_NAMESPACE = _own_namespace_works()


@pytest.fixture(params=["own-namespace", "ours"])
def peer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Rank 1 alive, marked in a hook method (``hook`` in the test's name) or in none."""
    where = request.param
    if where == "own-namespace" and not OWN_NAMESPACE:
        pytest.skip("no unprivileged `unshare --user --pid` here (util-linux, user namespaces)")
    in_hook = "hook" if "in_a_hook" in request.node.name else "none"
    prefix = (
        ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]
        if where == "own-namespace"
        else []
    )
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-c", RANK, str(tmp_path), in_hook, RUN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        said = proc.stdout.readline().split()  # (the event: its mark is made)
        assert said[:1] == ["marked"], said
        if where == "own-namespace":
            assert int(said[1]) != proc.pid  # (its own pids: pid 1 or so, not ours)
        yield where, tmp_path
        assert proc.poll() is None  # (the oracle: it ran while the words were read)
    finally:
        proc.kill()
        proc.communicate()


def test_a_live_peer_in_no_hook_is_not_said_dead(peer: tuple[str, Path]) -> None:
    where, notes = peer
    words = unmarked_words(notes, RUN, [1])
    assert "dead" not in words, words
    if where == "own-namespace":
        assert "in another pid namespace of this host" in words, words
        assert "not checked from here" in words, words
    else:
        assert "is alive on this host" in words, words


class Gathers(Hook):
    def on_step_end(self, trainer: object, state: object, control: object) -> None:
        """(this rank's own collective broke here)"""


def test_a_live_peer_in_a_hook_is_not_said_to_have_died(peer: tuple[str, Path]) -> None:
    where, notes = peer
    error = RuntimeError("Connection closed by peer")
    mark(error, Gathers().on_step_end, (None, TrainerState(global_step=3)))
    words = in_hook_words(notes, RUN, [1], error, 3)
    assert "rank 1 died" not in words, words
    verb = "was" if where == "own-namespace" else "is"
    assert f"rank 1 {verb} in the hook method Gathers.on_step_end (step 3" in words, words
