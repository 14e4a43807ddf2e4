"""Two live connections that say HELLO as the same simulation and client rank.

Each client rank of a simulation opens one connection to each receiver and says HELLO on
it once. A second HELLO for the same (simulation, client rank) is normal in three cases:

* a restarted attempt (the launcher's restart, a resumed run's): the earlier process
  ended, so will its connection, without a BYE (it crashed or was killed);
* a worker (Python client, worker mode) that runs the simulation again after a failure:
  the same process, possibly the same connection (same descriptor: not a twin);
* a client that followed a restarted trainer: it says HELLO to the new trainer's
  receivers, which never saw the first connection.

Two connections open at once, each having said HELLO as the same simulation and rank, are
two processes streaming as one: every step arrives twice (counted as duplicates, silently)
and, for a solver that splits its domain by the communicator's size, each copy computed
another problem. The usual cause is an MPI solver whose ranks did not find each other:
each one is MPI_COMM_WORLD of size 1 ("singletons"), rank 0 of 1, and says so. Under Slurm,
``srun`` without the MPI plugin the solver's MPI needs (``--mpi=pmi2`` or ``--mpi=pmix``:
``SlurmBackend(srun_args=["--mpi=pmi2"])``), or, anywhere, an ``mpiexec`` of another MPI
than the one the solver was built with. Less often, two solvers started by hand with the
same ``MELISSA_TRAINER_SIMULATION_ID``. The rank counts the two HELLOs said tell other
cases apart, each warned of in its own words (`twin_causes`): ranks of one simulation
that disagree on their communicator (one built its client with it, another without), and
two runs of a solver of several ranks (no singletons: those say 0 of 1).

`TwinHellos` is told each HELLO, the descriptor of its connection (ZeroMQ's ``SRCFD``)
and the address of its peer (ZeroMQ's ``Peer-Address``: `peer_address`), which the warning
names for both connections (two hosts: the nodes each copy runs on; one: the descriptors);
whether the first connection is still open is the watch's word (`ConnectionWatch.owner_of`:
open, its HELLO read, no BYE read yet). The watch reads a close late: a restarted attempt's
HELLO was read while its dead predecessor's connection still counted as open (a user trial:
``mpiexec -n 2`` restarted after rank 1's ``exit(1)``, 1 restart in ~5 at load 6: a false
warning naming singletons). So a second HELLO while the first connection is open is only a
suspect, judged later by what the first connection does:

* it closes without a BYE: a dead attempt, the second its restart; nothing said;
* it says BYE (`bye`): that process was alive and streaming while the second was: a twin;
* it is still open after a grace: a twin. `GRACE_SECONDS` when both connections come
  from one host (or their peers are unknown: IPC, inproc): a process that died there has
  its connection closed by its kernel at once. `OTHER_HOST_GRACE_SECONDS` when they come
  from two: past the receiver's TCP keepalive (`liveness`: a connection whose peer host
  stopped answering is closed within KEEPALIVE_IDLE + KEEPALIVE_COUNT x
  KEEPALIVE_INTERVAL, 120 s), since a process whose node vanished (power lost, network
  cut: no FIN ever comes) keeps its connection open that long, and its restart runs on
  another node (a two-node Slurm trial: the launcher killed the silent attempt after
  its simulation_timeout and reran it; the 10 s grace warned of MPI singletons). A live
  peer's connection stays open past it: its kernel answers the probes. Twins on two
  hosts that say BYE are judged at once, as before; only those silent about their end
  wait the longer grace.

The closes and the grace are judged at an idle poll (`settle`), once the receiver found its
socket empty: every message the first connection sent was read by then, its BYE included
if it sent one (ZeroMQ reads a connection ahead of the receiver: its close can be seen
before its BYE is read). Not before: while the receiver is slow to read, a dead process's
connection stays open in ZeroMQ's eyes behind its queued messages (its I/O thread stops
reading a connection whose queue is full: the close waits behind the data), which is
likely how the trial's close came after the restart's HELLO.

Twins that both die before the first says BYE and within the grace go unwarned (their
duplicates are still counted). The first twin is a WARNING on the receiver of rank 0
(every client rank connects to every receiver: rank 0 hears them all; the other ranks log
it at DEBUG), naming the cause and the fix; the others are only counted, and listed in one
line at the end of the stream (`summary`; at WARNING on rank 0, whose warning promised
it: `summary_level`), once no suspect awaits judgment: after the end the ingester still
reads the BYEs for it, and judges closes and the grace (`IngestLoop._tell_twins`: a
twin's second connection's BYE, read first, may end the stream); a receiver that stops
first names the suspects still pending as not judged (`summary`). Nothing on the data
path: HELLOs, BYEs, and idle polls while a suspect is pending.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import zmq

from melissa_trainer.stream.liveness import KEEPALIVE_COUNT, KEEPALIVE_IDLE, KEEPALIVE_INTERVAL
from melissa_trainer.stream.twin_causes import twin_cause
from melissa_trainer.wire import Bye, Hello

__all__ = ["GRACE_SECONDS", "OTHER_HOST_GRACE_SECONDS", "TwinHellos", "peer_address"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

Owner = tuple[int, int]  # (simulation id, client rank)
_SWEEP_MIN = 4096  # entries before the first sweep of closed connections (memory bound)
#: how long a first connection may stay open after a second HELLO as its owner, from the
#: same host, before the two are judged twins (a dead process's close is read well
#: within it; a twin streams on)
GRACE_SECONDS = 10.0
#: the same from two hosts: past the receiver's TCP keepalive, which closes the
#: connection of a peer whose host vanished (module docstring)
OTHER_HOST_GRACE_SECONDS = float(KEEPALIVE_IDLE + KEEPALIVE_COUNT * KEEPALIVE_INTERVAL + 10)


def peer_address(frame: zmq.Frame) -> str | None:
    """The address of the peer of the connection `frame` came on (ZeroMQ's
    ``Peer-Address`` metadata: over TCP, the host without its port, ``127.0.0.1`` or
    ``::1``; over IPC, ZeroMQ's ``localhost:0:0:PID``), or None where the transport has
    none (inproc: ZeroMQ answers EINVAL, the only error it gives for a property it does
    not hold)."""
    try:
        return str(frame.get("Peer-Address"))
    except zmq.ZMQError:
        return None


def _shown(ids: list[int]) -> str:
    """At most 12 ids, then "...": as a list names them."""
    return ", ".join(map(str, ids[:12])) + (", ..." if len(ids) > 12 else "")


def _named(fd: int, peer: str | None) -> str:
    """A connection as the warning names it: its peer's address, if known, and its
    descriptor (what tells two connections from one host apart)."""
    return f"from {peer}, descriptor {fd}" if peer else f"descriptor {fd}"


@dataclass
class _Suspect:
    """A second HELLO (on `fd`, from `peer`, at `at` on the clock, saying `client_count`
    ranks) while the `first` connection of its owner (from `first_peer`, its HELLO saying
    `first_count` ranks) was open."""

    first: int
    fd: int
    at: float
    client_count: int
    first_peer: str | None = None
    peer: str | None = None
    first_count: int = 1

    @property
    def grace(self) -> float:
        """How long the first connection may stay open before the two are twins: longer
        when they come from two hosts (module docstring)."""
        same = self.first_peer == self.peer
        return GRACE_SECONDS if same else OTHER_HOST_GRACE_SECONDS


class TwinHellos:
    """Finds HELLOs of a (simulation, client rank) already open on another connection
    (module docstring). Called by the receiver's ingester only. `clock` is
    `time.monotonic` (a test's own, to pass the grace without waiting)."""

    def __init__(self, rank: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._rank, self._clock = rank, clock
        #: (simulation, client rank) -> the descriptor of the first connection that said
        #: HELLO as it (closed ones swept when the map doubles: `_sweep`)
        self._first: dict[Owner, int] = {}
        #: (simulation, client rank) -> the peer address of that first connection and
        #: the client count its HELLO said (`twin_causes`)
        self._first_said: dict[Owner, tuple[str | None, int]] = {}
        self._sweep_at = _SWEEP_MIN
        #: a second HELLO while the first connection was open, not judged yet
        self._suspects: dict[Owner, _Suspect] = {}
        #: simulation id -> (client rank, client count) of its first twin, in order
        self.simulations: dict[int, tuple[int, int]] = {}

    @property
    def pending(self) -> bool:
        """Whether a suspect awaits judgment (`settle` is then worth calling)."""
        return bool(self._suspects)

    def hello(
        self,
        fd: int,
        msg: Hello,
        owner_of: Callable[[int], Owner | None],
        peer: str | None = None,
    ) -> bool:
        """A HELLO came on connection `fd` from `peer` (`peer_address`; None: unknown);
        `owner_of(fd)` is whose open connection `fd` is (`ConnectionWatch.owner_of`, its
        monitor read just before). True if the first connection of its owner is still
        open on another descriptor: a suspect, judged later (module docstring); nothing
        is said now."""
        owner = (msg.simulation_id, msg.client_rank)
        first = self._first.get(owner)
        if first is not None and first != fd and owner_of(first) == owner:
            suspect = self._suspects.get(owner)
            if suspect is None:
                first_peer, first_count = self._first_said.get(owner, (None, msg.client_count))
                self._suspects[owner] = _Suspect(
                    first, fd, self._clock(), msg.client_count, first_peer, peer, first_count
                )
            else:  # (a third HELLO: the first is still the one compared with)
                suspect.fd, suspect.peer, suspect.client_count = fd, peer, msg.client_count
            return True
        self._first[owner], self._first_said[owner] = fd, (peer, msg.client_count)
        if len(self._first) >= self._sweep_at:
            self._sweep(owner_of)
        return False

    def bye(self, fd: int, msg: Bye) -> None:
        """A BYE came on connection `fd` (called before the ingest and the watch read it:
        the end of the stream it may cause comes after the judgment): the first
        connection of a suspect saying BYE was a live process streaming alongside the
        second: a twin."""
        owner = (msg.simulation_id, msg.client_rank)
        suspect = self._suspects.get(owner)
        if suspect is not None and suspect.first == fd:
            self._twin(owner, suspect)

    def settle(self, owner_of: Callable[[int], Owner | None], empty: Callable[[], bool]) -> None:
        """Judge the suspects at an idle poll, the watch's monitor read just before, if
        `empty()` says the socket holds no message (what their first connections sent was
        all read: a close is no longer behind queued data, a BYE no longer unread): a first
        connection closed makes the second a restart (said at DEBUG only), one still open
        past the grace a twin."""
        if not empty():
            return
        now = self._clock()
        for owner, suspect in list(self._suspects.items()):
            if owner_of(suspect.first) == owner:
                if now - suspect.at >= suspect.grace:
                    self._twin(owner, suspect)
                continue
            del self._suspects[owner]
            # (the restart's connection, compared with next)
            self._first[owner] = suspect.fd
            self._first_said[owner] = (suspect.peer, suspect.client_count)
            logger.debug(
                "simulation %d client rank %d: its earlier connection closed without a BYE "
                "after the next one's HELLO: a restarted attempt, not a twin",
                *owner,
            )

    def summary(self, unjudged: bool = False) -> str | None:
        """One line naming every simulation that had a twin, or None if none did. With
        `unjudged` (the receiver stops), also the suspects not judged yet: their first
        connection neither said BYE nor was seen closed (a twin whose BYE was still
        unread, or an attempt that died as the study stopped), named as such."""
        ids = list(self.simulations)
        pending = sorted({sid for sid, _ in self._suspects} - set(ids)) if unjudged else []
        parts = []
        if ids:
            n = len(ids)
            parts.append(
                f"{n} simulation{'' if n == 1 else 's'} ({_shown(ids)}) had two open "
                f"connections saying HELLO as the same client rank (see the warning above "
                f"for the likely cause)"
            )
        if pending:
            n = len(pending)
            parts.append(
                f"{n} simulation{'' if n == 1 else 's'} ({_shown(pending)}) not judged when "
                f"the receiver stopped: a second connection said HELLO as the same client "
                f"rank while the first was open, and the first neither said BYE nor was seen "
                f"closed (two copies streaming, or an attempt that died as the study stopped)"
            )
        return f"receiver of rank {self._rank}: " + "; and ".join(parts) if parts else None

    @property
    def summary_level(self) -> int:
        """The level of `summary`'s line: WARNING where the first twin was warned of (rank
        0: that warning promised the list, which default logging must show), else INFO."""
        return logging.WARNING if self._rank == 0 and self.simulations else logging.INFO

    def _twin(self, owner: Owner, suspect: _Suspect) -> None:
        del self._suspects[owner]  # (the first stays the one compared with: it is open)
        sid, client_rank = owner
        if sid in self.simulations:
            return
        first = not self.simulations
        self.simulations[sid] = (client_rank, suspect.client_count)
        level = logging.WARNING if first and self._rank == 0 else logging.DEBUG
        counts = suspect.first_count, suspect.client_count
        # (the first's count named only where it differs: the ranks disagree)
        said = "" if counts[0] == counts[1] else f" (as client rank {client_rank} of {counts[0]})"
        logger.log(
            level,
            "simulation %d: a second connection said HELLO as client rank %d of %d while "
            "the first%s was open and streaming (the first %s; the second %s): %s. Said "
            "once; the other simulations alike are listed at the end of the stream",
            sid,
            client_rank,
            suspect.client_count,
            said,
            _named(suspect.first, suspect.first_peer),
            _named(suspect.fd, suspect.peer),
            twin_cause(client_rank, *counts),
        )

    def _sweep(self, owner_of: Callable[[int], Owner | None]) -> None:
        """Forget the connections closed since (memory: the open ones, not every
        simulation of the study)."""
        self._first = {o: fd for o, fd in self._first.items() if owner_of(fd) == o}
        self._first_said = {o: p for o, p in self._first_said.items() if o in self._first}
        self._sweep_at = max(_SWEEP_MIN, 2 * len(self._first))
