"""Nodes that keep failing, left out of later batch jobs (``sbatch --exclude``).

Found in a user trial on the two-node test cluster: every attempt on one node failed
(its simulations could not reach the receiver), and the launcher's restarts and
redraws kept landing on that node (Slurm places a new job where CPUs are free: the
failing node's, freed by the failure) until the study reached its redraw limit.
`FailingNodes` counts, for each node, the attempts that failed there since its last
success; once a node has `after` of them (`SlurmBackend`'s ``exclude_after``, default
`EXCLUDE_AFTER`; None: never), the batch jobs submitted from then on carry
``--exclude`` naming it, and a WARNING says so once for the node, naming it, its
failures and the option. The jobs still queued (PENDING) get it too (``scontrol update
JobId=N ExcNodeList=...``, which Slurm lets a job's owner do while it is pending): the
failing node's CPUs, freed by each failure, would start them there next. Jobs already
running keep their node (none can be moved), named in that WARNING: a restart that
Slurm placed on the node before its last failure may fail there once more.

What counts:

* **A failure**: a job that ran on one node (squeue's ``%N`` while it ran, or at its
  end) and ended on its own with a non-zero exit code, NODE_FAIL included. Not a job
  this backend cancelled (the launcher's kill of a silent attempt, a stop: a hung node
  and a hung solver look the same), nor one that Slurm ended for its time limit, a
  preemption or someone's scancel (not the node's doing), nor a job of several nodes
  (which one failed is unknown), nor one whose node squeue never gave (started and
  ended between two polls, and no longer listed).
* **One node-down, one failure**: a node that stops answering (a power loss) ends all
  its jobs at once; those Slurm does not requeue (``--no-requeue``, JobRequeue=0) end
  NODE_FAIL at the same EndTime (two-node trial). They count as one failure of the
  node: a NODE_FAIL job that squeue listed started no later than the answer that first
  listed the node's last counted NODE_FAIL job ended is that same down (it was running
  when the down ended it), not counted again, unless that answer or a later one listed
  it running (the node back within one poll: a later down). Before, each counted: one
  power loss of a node running 2 jobs excluded it for the rest of the run. A job Slurm requeued
  (PENDING again) is not counted at all: squeue and ``scontrol show job`` show a
  node-failure requeue exactly as a ``scontrol requeue`` (reason BeginTime,
  Restarts=1, no node), and the attempt goes on; its rerun is counted where it ends.
* **A success** (exit 0) on a node starts its count again from 0 and, if the node was
  excluded, ends its exclusion (said in an INFO): a node that completes a job works.

Never every node: before a node is excluded, the nodes of the jobs' partition (the
backend's `partition`, else the cluster's default one) are asked of ``sinfo``. If the
exclusion would leave none of them, nothing is excluded any more for the rest of the
run, and a WARNING says why: when every node fails, the failures are the solver's (or
the study's: a receiver no node can reach), not the nodes', and the launcher's own
limits decide (``LauncherTuning.max_restarts``, ``on_failure``, ``max_redraws``),
as without this option. Where sinfo cannot tell the partition's nodes, the same: no
node is excluded any more (said in the same WARNING).

A user's own ``--exclude`` (``-x``) in `extra_args` is kept: the backend's line names
its nodes and the failing ones, in place of it. A user's ``--nodelist`` (``-w``) pins
the jobs to nodes: nothing is excluded (excluding one of them makes sbatch refuse).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.backends.slurm import queries as sq
from melissa_trainer.launcher.backends.slurm.commands import SlurmCommands, failure
from melissa_trainer.launcher.exit_cause import exit_text
from melissa_trainer.launcher.log_lines import warn

if TYPE_CHECKING:  # (annotations only)
    from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle

__all__ = ["EXCLUDE_AFTER", "FailingNodes", "check_exclude_after"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

#: failed attempts in a row on one node after which it is excluded (`FailingNodes`)
EXCLUDE_AFTER = 2
#: final states of a job ended by Slurm or someone, not by its node: never counted
NOT_THE_NODE = frozenset({"TIMEOUT", "PREEMPTED", "CANCELLED", "DEADLINE"})
_EXCLUDE = re.compile(r"(?:--exclude|-x)(?:=|\s+|(?<=-x))(\S+)")
#: squeue's states of a job that holds its node now (started, not ended)
_RUNNING = sq.STARTED_STATES - sq.TERMINAL_STATES
_NODELIST = re.compile(r"(?:--nodelist|-w)(?:=|\s+|(?<=-w))\S+")


def _running_there(jobs: Sequence[SlurmHandle]) -> str:
    """Words for the jobs `jobs` that Slurm started on the node before its exclusion:
    they keep it (a running job cannot be moved; killing it would cost its attempt, and
    it may well succeed there), so one of them failing there too is not the exclusion's
    miss. A restart of the node's first failure placed there (its CPUs freed by that
    failure) before the second came was seen to fail once more on the two-node test
    cluster, unsaid."""
    if not jobs:
        return ""
    names = ", ".join(f"{h.job.name} (Slurm job {h.job_id})" for h in jobs)
    return f"; already running there, started before this, and kept there: {names}"


def check_exclude_after(value: int | None) -> int | None:
    """`value` if it is None or an int >= 1; ValueError naming ``exclude_after`` else."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(
            "exclude_after must be an int >= 1 (failed attempts in a row on one node before "
            f"later jobs leave it out) or None (never), got {value!r}"
        )
    return value


class FailingNodes:
    """The failures of each node and the nodes left out (see the module docstring).

    Args:
        commands: the backend's Slurm commands (``sinfo``, for the partition's nodes).
        after: failed attempts in a row after which a node is excluded; None: never.
        partition: the jobs' partition; None: the cluster's default one.
        extra_args: the backend's sbatch options (a ``--nodelist`` turns this off).
    """

    def __init__(
        self,
        commands: SlurmCommands,
        *,
        after: int | None,
        partition: str | None,
        extra_args: Sequence[str],
    ) -> None:
        self._commands, self._partition = commands, partition
        pinned = any(_NODELIST.fullmatch(arg) for arg in extra_args)
        self._own = [m.group(1) for arg in extra_args if (m := _EXCLUDE.fullmatch(arg))]
        self.after = None if pinned else check_exclude_after(after)
        self._failed: dict[str, list[str]] = {}  # node -> its failures since its last success
        # node -> the squeue answer that first listed its last counted NODE_FAIL ended
        self._down: dict[str, int] = {}
        self.excluded: list[str] = []  # in the order they were excluded

    def ended(self, job: str, handle: SlurmHandle, live: Iterable[SlurmHandle] = ()) -> None:
        """Count the end of `handle`'s job (`job`: its description) against its node; the
        jobs of `live` still queued get a new exclusion too."""
        node, code = handle.node, handle.code
        if self.after is None or node is None or code is None or handle.stale:
            return
        if handle.cancelled or handle.final in NOT_THE_NODE or "," in node or "[" in node:
            return
        if code == 0:
            self._failed.pop(node, None)
            if node in self.excluded:
                self.excluded.remove(node)
                logger.info("%s completed on node %s: later jobs may run there again", job, node)
            return
        if handle.final == "NODE_FAIL" and self._same_down(node, handle):
            return
        failed = self._failed.setdefault(node, [])
        failed.append(f"{job}: {exit_text(code)}")
        if len(failed) >= self.after and node not in self.excluded:
            self._exclude(node, failed, live)

    def _same_down(self, node: str, handle: SlurmHandle) -> bool:
        """True if `handle`'s NODE_FAIL is that of a node-down of `node` already counted:
        the job was listed started no later than the squeue answer that first listed the
        counted job ended (it was running when that down ended it), and never listed
        running by that answer or a later one (then it was alive after that down: the
        node came back within one poll and a later down ended it). Else False, and this
        down becomes the node's last counted one. Two downs between two answers, their
        jobs all listed ended in one, are one (squeue cannot tell them apart)."""
        down = self._down.get(node)
        started, running = handle.seen_started, handle.last_running
        alive_after = down is not None and running is not None and running >= down
        if down is not None and started is not None and started <= down and not alive_after:
            return True
        ended = handle.seen_ended if handle.seen_ended is not None else started
        if ended is not None:
            self._down[node] = ended
        return False

    def args(self, extra_args: Sequence[str]) -> tuple[str, ...]:
        """`extra_args` as a job submitted now gets them: with ``--exclude`` naming the
        excluded nodes (the user's own ``--exclude`` merged into it), if any."""
        if not self.excluded:
            return tuple(extra_args)
        rest = tuple(arg for arg in extra_args if not _EXCLUDE.fullmatch(arg))
        return (*rest, f"--exclude={self._nodes()}")

    def _nodes(self) -> str:
        """The nodes to exclude, as Slurm reads a list: the user's, then the failing."""
        return ",".join([*self._own, *self.excluded])

    def _exclude(self, node: str, failed: list[str], live: Iterable[SlurmHandle]) -> None:
        nodes = self._partition_nodes()
        left = None if nodes is None else nodes - {node, *self.excluded}
        if not left:  # (None: unknown; empty: it would be every node)
            why = (
                "sinfo could not tell the nodes of the jobs' partition"
                if nodes is None
                else f"it would leave none of the partition's nodes ({', '.join(sorted(nodes))})"
                ": when every node fails, the failures are the solver's or the study's (a "
                "receiver no node can reach), not the nodes'"
            )
            warn(
                logger,
                f"node {node} failed {plural(len(failed), 'attempt')} in a row "
                f"({'; '.join(failed)}), but no node is left out any more (SlurmBackend's "
                f"exclude_after={self.after}): {why}; the launcher's restarts and failure "
                "policy decide, as without it",
            )
            self.after, self.excluded = None, []
            return
        self.excluded.append(node)
        own = [h for h in live if not (h.cancelled or h.stale)]
        updated = self._update([h for h in own if h.state == "PENDING"])
        there = [h for h in own if h.node == node and h.state in _RUNNING]
        queued = (
            f", and the {updated} still queued (scontrol update ExcNodeList)" if updated else ""
        )
        warn(
            logger,
            f"node {node} failed {plural(len(failed), 'attempt')} in a row with no success "
            f"there since ({'; '.join(failed)}): the jobs submitted from now on leave it out "
            f"(sbatch --exclude={self._nodes()}){queued}{_running_there(there)}; "
            f"SlurmBackend's exclude_after={self.after} sets how many failures (None: never "
            "exclude)",
        )

    def _update(self, queued: list[SlurmHandle]) -> int:
        """Give the queued jobs `queued` the exclusion; how many took it (a job that
        started meanwhile is refused: logged at debug level, as a missing scontrol)."""
        if not queued or not self._commands.has("scontrol"):
            return 0
        done = 0
        for handle in queued:
            argv = [self._commands.path("scontrol"), "update", f"JobId={handle.job_id}"]
            result = self._commands.run([*argv, f"ExcNodeList={self._nodes()}"])
            why = failure(result)
            if why is None:
                done += 1
            else:
                logger.debug("scontrol update of job %s's ExcNodeList: %s", handle.job_id, why)
        return done

    def _partition_nodes(self) -> set[str] | None:
        """The nodes of the jobs' partition (``sinfo -N``), None if sinfo cannot tell."""
        if not self._commands.has("sinfo"):
            return None
        result = self._commands.run([self._commands.path("sinfo"), "-h", "-N", "-o", "%N|%P"])
        if failure(result) is not None or isinstance(result, str):
            return None
        nodes = set()
        for line in result.stdout.splitlines():
            node, _, partition = line.strip().partition("|")
            default = partition.endswith("*")
            if node and (partition.rstrip("*") == self._partition if self._partition else default):
                nodes.add(node)
        return nodes or None
