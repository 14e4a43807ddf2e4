"""What a receiver says of the connections that closed before their BYE, once judged.

`connections.ConnectionWatch` tells which closes were the client's own and which were
not, and why (the study's stop, a kill for NaN or Inf, a connection that carried
nothing, or none of these); `CloseLines` counts each (telemetry ``connections_lost``)
and logs it, in the words below.

A connection that carried nothing after its HELLO (no DATA or BATCH of its simulation
read here from its HELLO to the judging of its close: its ledger, given to the watch's
`hello`, counts them) lost nothing with it: a worker's simulation that failed before its
first send. It is counted as the others and said in one short INFO line per simulation,
not warned of: the failure is its process's, which the launcher reports and runs again
(the paragraph of causes told worker-mode users of a loss there was not). Its one
exception, a first message over the frame bound, is named in the line (after an accepted
HELLO, only a BATCH over it can be one: ``batch_bytes`` far above the receiver's bound).
A count moved by another client rank or a later connection (the ledger is the
simulation's) makes the close warned of as below: never said empty wrongly.

A close read after a receiver failed its simulation for NaN or Inf (``nonfinite="fail"``)
is the launcher's kill, which it logs: an INFO line names that cause (a user trial read
the paragraph below as a second, unrelated problem). This receiver's failure (`killed`,
``here``), or rank 0's heard on another rank (``here=False``: `stream.nonfinite_kills`);
a close on another rank of a simulation that rank 0 failed so earlier, its count not
grown since the connection's HELLO, is warned of (below) naming that possible cause
(`lost`'s ``failed_before``: the kill of an attempt whose HELLO was read there late).

A close is judged at the receiver's first empty poll after it, before the launcher has
read the process's exit and applied its failure policy: whether the simulation runs again
or is given up is not known yet, so the lines say what the receiver knows: the steps
received before the close are kept for training, the rest of the run is missing *unless*
it runs again (never "until": a user trial's given-up simulations were promised a rerun;
nor "its data lost": a user trial read that next to the study account's "the samples
the trainer received from them were trained on"). By `close` the receiver may have heard more
(`fate_in`: the launcher gave it up, or it finished since, a restart's BYE read): the
count of the simulations warned of says it, by simulation.

Each simulation is logged once (the first of its connections lost), at WARNING (the
causes in full for the first only, the others in a short line, their number at `close`,
at WARNING too: that line is promised by the first, and default logging shows WARNING
up; under several ranks each line ends naming its receiver's rank, `label`), unless its
close was seen once the receiver had ended or was stopping, or once the study had begun
to stop its simulations (`stopped`: the watch's `study_stops`). Those closes are the
study's own doing: their simulations are recorded unfinished by the launcher and a
resume runs them again, so nothing is lost in the sense of the warning; they are
counted as before and summarised in one INFO line at `close` (the project's rule for
many like events).

Thread-safety: called by the watch's caller (the receiver's ingester, or `close` once it
has ended): one thread at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Mapping
from typing import Protocol

from melissa_trainer.common.words import plural

__all__ = ["SHORT", "CloseLines", "fate_in"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: a lost connection, after the first (said in full)
SHORT = (
    "a connection closed before its BYE: the steps received before it kept for training, "
    "the rest of its run missing unless it runs again"
)
#: `close`'s words of the simulations warned of, by what became of them (`fate_in`)
_FATES = {
    "given up": "given up by the launcher since, the rest of {its} run{s} missing",
    "finished": "finished since ({its} BYE{s} read: {it} ran again, or went on)",
    "": "the rest of {its} run{s} missing unless {it} run{x} again",
}


class IngestView(Protocol):
    """What `fate_in` reads of a receiver's ingest state (`ingest_state.IngestState`)."""

    @property
    def abandoned(self) -> Container[int]: ...  # given up by the launcher, not replaced

    @property
    def replaced(self) -> Container[int]: ...  # given up and redrawn under a new id

    @property
    def archive(self) -> _Ids: ...  # finished, their ledgers archived

    @property
    def sims(self) -> Mapping[int, _Finished]: ...  # the ledgers of the others heard of


class _Ids(Protocol):
    def __contains__(self, sid: int, /) -> bool: ...


class _Finished(Protocol):
    @property
    def finished(self) -> bool: ...


def fate_in(state: IngestView, sid: int) -> str:
    """What the receiver of `state` heard of simulation `sid` since: "given up" (the
    launcher's word), "finished" (its BYEs read: a restart, or a worker's rerun, sent the
    rest), or "" (neither). The ingester's thread, or once it has ended."""
    if sid in state.abandoned or sid in state.replaced:
        return "given up"
    sim = state.sims.get(sid)
    return "finished" if sid in state.archive or (sim is not None and sim.finished) else ""


class CloseLines:
    """Counts (`count`, called with each close) and logs the closes a `ConnectionWatch`
    judged (module docstring). `frame_bound` is the socket's ``ZMQ_MAXMSGSIZE``, named
    as a cause; `label` ends each line (" (receiver of rank N)" under several ranks)."""

    def __init__(self, frame_bound: int, count: Callable[[], None], label: str = "") -> None:
        self._frame_bound, self._count, self._label = frame_bound, count, label
        self._logged: set[int] = set()  # simulations already warned of (once each)
        self._told: set[int] = set()  # simulations said to have closed carrying nothing
        self._stopped: set[int] = set()  # simulations whose close was the study's (summary)

    def stopped(self, sid: int) -> None:
        """A close seen as the study stopped, or the receiver ended: summarised at `close`."""
        self._stopped.add(sid)
        self._count()

    def killed(self, sid: int, rank: int, here: bool = True) -> None:
        """A close after a failure of its simulation for NaN or Inf: this receiver's
        (`here`), or rank 0's receiver's, heard through the rendezvous directory."""
        # (the launcher logged its kill, and why: one line naming the cause, no paragraph)
        logger.info(
            "simulation %d client rank %d: connection closed before its BYE: killed by the "
            "launcher, %s having failed it for NaN or Inf (nonfinite='fail')%s",
            sid,
            rank,
            "this receiver" if here else "rank 0's receiver",
            self._label,
        )
        self._count()

    def carried_nothing(self, sid: int, rank: int) -> None:
        """A close with no data of its simulation read since its HELLO (module docstring)."""
        # (not in `_logged`: a later close of the simulation that carried data is warned of)
        if sid not in self._told and sid not in self._logged:
            self._told.add(sid)
            logger.info(
                "simulation %d client rank %d: connection closed before its BYE with no "
                "data since its HELLO: nothing lost with it (unless its first message was "
                "over %d bytes)%s",
                sid,
                rank,
                self._frame_bound,
                self._label,
            )
        self._count()

    def lost(self, sid: int, rank: int, failed_before: bool = False, asked: bool = False) -> None:
        """A close none of the others explains: warned of (module docstring); with
        `failed_before`, rank 0's receiver failed its simulation for NaN or Inf before
        (on another rank: the close may be that attempt's kill, said as a cause); with
        `asked`, that client rank asked this receiver a receipt (its close sent its BYE
        and waited: it may have given up at ``close_timeout`` and exited, its BYE and
        what was queued before it lost with the process, said as a cause)."""
        if sid in self._logged:
            self._count()
            return
        self._logged.add(sid)
        maybe = (
            "; rank 0's receiver failed this simulation for NaN or Inf earlier in the run "
            "(nonfinite='fail'), and the launcher kills an attempt so failed: this close "
            "may be that kill (its HELLO read here after that failure)"
            if failed_before
            else ""
        )
        gave_up = "its close gave up waiting for this trainer's receipt (close_timeout)"
        # (the exit is not known here: the close is judged before the launcher reads it,
        # module docstring; the launcher's line names it, so the causes are said short)
        ended = "killed, crashed, or exited"
        if asked:  # (the receipt it waited for: `client.receipts`)
            ended = f"killed, crashed, exited, or {gave_up}"
        if len(self._logged) > 1:  # (the cause in full once per run: trial htrial10 F7)
            gave_up = f"; or {gave_up}" if asked else ""
            said = "simulation %d client rank %d: %s (as above%s%s)%s"
            logger.warning(said, sid, rank, SHORT, maybe, gave_up, self._label)
            self._count()
            return
        logger.warning(
            "simulation %d client rank %d: its connection closed before its BYE: its "
            "process ended without one (%s: a launcher logs how, exit code or signal), its "
            "client was left by an exception, or it sent a message over %d bytes "
            "(max_message_bytes + header), dropped by ZeroMQ with its connection. The steps "
            "received before the close are kept for training; the rest of its run is missing "
            "unless the simulation runs again (a launcher restarts it up to max_restarts "
            "times; Slurm runs a job it requeued again, no restart counted; either rerun "
            "skips the steps the receivers hold; a solver you started: run it again with "
            "the same simulation id)%s. "
            "Said in full once; the others in one line each, counted at the end%s",
            sid,
            rank,
            ended,
            self._frame_bound,
            maybe,
            self._label,
        )
        self._count()  # after the log: a reader of the count finds the line written

    def close(self, study_stops: bool, fate: Callable[[int], str] | None = None) -> None:
        """The summary of the closes that were the study's (`stopped`), if any, said as
        the launcher's kills if the study stopped (`study_stops`), else as closes after
        this receiver ended; and the number of simulations warned of, if more than one,
        with what became of them by `fate` (`fate_in`; None: not known)."""
        if self._stopped:
            self._summary(study_stops)
        # (at WARNING, as the first one was: its warning promised this line, which
        # default logging, from WARNING up, would otherwise hide)
        if len(self._logged) > 1:
            groups: dict[str, list[int]] = {}
            for sid in sorted(self._logged):
                groups.setdefault("" if fate is None else fate(sid), []).append(sid)
            said = "; ".join(
                _fate_said(groups[k], k, len(groups) > 1) for k in _FATES if k in groups
            )
            logger.warning(
                "%s warned of: a connection closed before its BYE, the steps "
                "received before it kept for training; %s%s",
                plural(len(self._logged), "simulation"),
                said,
                self._label,
            )

    def _summary(self, study_stops: bool) -> None:
        ids = sorted(self._stopped)
        one = len(ids) == 1
        shown = ", ".join(map(str, ids[:12])) + (", ..." if len(ids) > 12 else "")
        if study_stops:  # (the launcher's kills: rank 0's, heard on every rank)
            why = (
                "killed as the study stopped (the trainer's end, a preemption or an "
                "error) closed without a BYE: no data lost, the launcher records "
                f"{'it' if one else 'them'} unfinished and a run resumed from a checkpoint "
                f"runs {'it' if one else 'them'} again (steps already received are not "
                "taken twice)"
            )
        else:  # (external mode: no launcher)
            why = (
                "closed without a BYE once this receiver had ended or was stopping: "
                "counted (connections_lost), not warned of"
            )
        s = "" if one else "s"
        logger.info("%d simulation%s (%s) %s%s", len(ids), s, shown, why, self._label)


def _fate_said(ids: list[int], fate: str, named: bool) -> str:
    """`_FATES`' words of the simulations `ids`, in their number; `named`: preceded by
    their number and ids (the simulations warned of met more than one fate)."""
    one = len(ids) == 1
    words = _FATES[fate].format(
        its="its" if one else "their", s="" if one else "s", it="it" if one else "they",
        x="s" if one else "",
    )  # fmt: skip
    if not named:
        return words
    shown = ", ".join(map(str, ids[:12])) + (", ..." if len(ids) > 12 else "")
    return f"{len(ids)} ({shown}) {'not finished here, ' if not fate else ''}{words}"
