"""Why a preemption stop was asked (`StopCause`): a signal (SIGTERM, SIGINT), or the
death of the launcher that started the rank (`preemption`'s watch of its parent).

The cause travels with the stop request: the ranks agree on one integer per window
(`core.stop_sync.StopSync`, all-reduced with MAX), and `StopCause.code` packs the whole
cause into it, so that every rank, the one that noticed or another, says the same true
thing ("the launcher (accelerate launch, pid 4242) is gone", not "SIGTERM", which nobody
sent). The code's low byte is the signal whose exit status the stop takes (SIGTERM for a
launcher's death: `Preempted` exits with 143); above it the launcher's kind (3 bits);
then, in a job of several nodes, the node's rank plus one (16 bits; 0: one node, or not
known); then the launcher's pid (23 bits: Linux's pid_max is at most 2**22). A launcher's
death therefore outranks a plain signal in the agreement (its pid makes the code
larger): a rank that got SIGTERM as its launcher died says the launcher's death, which
is the one that needs a new launch to resume.

On several nodes the pid alone would send a user of node 0 looking for a process of
node 1: every rank says "the launcher (accelerate launch, pid 4242) of node 1 is gone"
(node: ``--machine_rank``, torch elastic's ``GROUP_RANK``), and a signal names the node
whose rank got it ("SIGTERM on node 1": one node preempted). When ranks of several nodes
got a signal, the highest node's is named (its code is the largest), whatever signal
each got.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from signal import SIGTERM, Signals

__all__ = ["LAUNCHER_KINDS", "StopCause", "kind_of", "launcher_kind", "launcher_node"]

#: what a launcher is called in the log, by its index in the code ("": unknown)
LAUNCHER_KINDS = ("", "accelerate launch", "torchrun")
_KIND_SHIFT, _NODE_SHIFT, _PID_SHIFT = 8, 11, 27
#: node ranks from this one on are not named (the code's 16 bits of node hold rank + 1)
_MAX_NODE = (1 << (_PID_SHIFT - _NODE_SHIFT)) - 1


def launcher_node() -> int | None:
    """This rank's node rank (torch elastic's ``GROUP_RANK``: ``--machine_rank``) when
    the job spans several nodes (``WORLD_SIZE`` > ``LOCAL_WORLD_SIZE``); None on one
    node or outside torch elastic (nothing to tell apart)."""
    env = os.environ
    try:
        node, world, local = (int(env[k]) for k in ("GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"))
    except (KeyError, ValueError):
        return None
    return node if world > local and 0 <= node < _MAX_NODE else None


def launcher_kind(pid: int) -> str:
    """What process `pid` is, as a launcher (`kind_of` its command line, read from
    ``/proc``); "" when it cannot be read (not Linux, gone). Read while the launcher is
    alive: a dead one has no command line."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [os.fsdecode(a) for a in f.read().split(b"\0")]
    except OSError:
        return ""
    return kind_of(argv)


def kind_of(argv: list[str]) -> str:
    """ "accelerate launch" for the ``accelerate launch`` command (``python -m
    accelerate.commands.launch`` too), "torchrun" for ``torchrun`` (``python -m
    torch.distributed.run``), "" for any other command line `argv`."""
    head = argv[:3]
    names = [os.path.basename(a) for a in head]
    if ("accelerate" in names and "launch" in argv[1:4]) or "accelerate.commands.launch" in head:
        return "accelerate launch"
    if "torchrun" in names or "torch.distributed.run" in head or "torch.distributed.launch" in head:
        return "torchrun"
    return ""


@dataclass(frozen=True)
class StopCause:
    """A preemption stop's cause.

    Attributes:
        signum: the signal that asked (SIGTERM for a launcher's death: the exit status
            `Preempted` takes, 143, is the one a launcher's SIGTERM would have given).
        launcher: the pid of the launcher that is gone; 0: a signal asked.
        kind: what that launcher was (`LAUNCHER_KINDS`: "accelerate launch", "torchrun";
            "": unknown).
        node: the rank of that launcher's node in a job of several nodes
            (`launcher_node`); None: one node, or not known.
    """

    signum: int
    launcher: int = 0
    kind: str = ""
    node: int | None = None

    @classmethod
    def launcher_gone(cls, pid: int) -> StopCause:
        """The death of launcher `pid`, this process's parent: its kind and node read
        now (`launcher_kind`, `launcher_node`; call it while the launcher lives)."""
        return cls(SIGTERM, pid, launcher_kind(pid), launcher_node())

    @property
    def code(self) -> int:
        """The cause as the ranks agree on it (module docstring); > 0."""
        kind = LAUNCHER_KINDS.index(self.kind) if self.kind in LAUNCHER_KINDS else 0
        node = 0 if self.node is None else self.node + 1
        code = int(self.signum) | kind << _KIND_SHIFT | node << _NODE_SHIFT
        return code | self.launcher << _PID_SHIFT

    @classmethod
    def of(cls, code: int) -> StopCause | None:
        """The cause whose `code` is `code`; None for 0 (no stop asked)."""
        if not code:
            return None
        kind = (code >> _KIND_SHIFT) & ((1 << (_NODE_SHIFT - _KIND_SHIFT)) - 1)
        name = LAUNCHER_KINDS[kind] if kind < len(LAUNCHER_KINDS) else ""
        node = (code >> _NODE_SHIFT) & _MAX_NODE
        pid = code >> _PID_SHIFT
        return cls(code & 0xFF, pid, name, node - 1 if node else None)

    @property
    def signal(self) -> Signals:
        """`signum` as a `signal.Signals` (`OnlineTrainer.preempted_by`)."""
        return Signals(self.signum)

    @staticmethod
    def signal_of(code: int) -> Signals:
        """The signal of a cause's `code` (> 0): `OnlineTrainer.preempted_by`."""
        return Signals(code & 0xFF)

    @property
    def stopped(self) -> str:
        """The stop in words, for `OnlineTrainer.ended_by`: "stopped by SIGTERM", or
        "stopped because the launcher (accelerate launch, pid N) is gone"."""
        return f"stopped because {self}" if self.launcher else f"stopped by {self}"

    def __str__(self) -> str:
        """ "SIGTERM", or "the launcher (accelerate launch, pid N) is gone"; on several
        nodes "SIGTERM on node K", "the launcher (accelerate launch, pid N) of node K is
        gone"."""
        if not self.launcher:
            return self.signal.name + ("" if self.node is None else f" on node {self.node}")
        what = f"{self.kind}, pid {self.launcher}" if self.kind else f"pid {self.launcher}"
        where = "" if self.node is None else f" of node {self.node}"
        return f"the launcher ({what}){where} is gone"
