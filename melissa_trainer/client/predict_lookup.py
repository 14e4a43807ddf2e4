"""What a `Predictor` says when the lookup of its serving endpoint in a rendezvous
directory finds none (`predict_endpoint.EndpointLookup.find`), beyond `read_serving`'s
why: the fix when only another run's serve files are there (`other_run`: that request
fails at once), and a path that is not a directory (`MissingDirectory`: the typo hint
and the directory likely meant, the `Client`'s words, `rendezvous_words`). A user trial
found both silent: each request waited its whole timeout, and a solver that falls back
on `PredictionUnavailable` fell back for ever without a word. Also `checked_endpoint`,
the form of an endpoint given (`Predictor(endpoint=...)`,
``$MELISSA_TRAINER_SERVE_ENDPOINTS``: `endpoint_form.endpoint_fault`). And a trainer
that runs without a `ServingHook` (`Unserved`), and one that ran there and stopped
(`stopped_story`). Imports the standard library and the shared `stream` modules only.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from melissa_trainer.client.endpoint_form import endpoint_fault
from melissa_trainer.client.predict_errors import PredictUnreachable
from melissa_trainer.client.rendezvous_words import missing_note
from melissa_trainer.stream.endpoints import NOTICE_AFTER, fetch_rendezvous
from melissa_trainer.stream.host_scope import SERVING, out_of_reach
from melissa_trainer.stream.rank_bounds import file_text, read_object
from melissa_trainer.stream.reason_line import (
    SAID_CHARS,
    as_c_reads,
    said_code,
    said_line,
)
from melissa_trainer.stream.receiver_address import is_loopback
from melissa_trainer.stream.serving_rendezvous import NO_SERVER, OTHER_RUN
from melissa_trainer.stream.stop_record import RECORD_KEY, restarts_fault

__all__ = [
    "UNSERVED",
    "MissingDirectory",
    "Unserved",
    "checked_endpoint",
    "other_run",
    "stop_reason",
    "stop_text",
    "stopped_story",
    "unreachable",
]  # fmt: skip

logger = logging.getLogger("melissa_trainer.client.predict")


def other_run(why: str, run_id: str | None, source: str = "run_id") -> str | None:
    """What a lookup whose why (`read_serving`'s) is that only serve files of another
    run than `run_id` (given at `source`: the argument, or ``$MELISSA_TRAINER_RUN_ID``,
    then in the C client's words) are there adds to its error: the run asked as and the
    fix; None for any other why. The request fails at once (its trainer is known not to
    be this run's: waiting the timeout would not change it, unless a trainer of this run
    comes, which the next request's lookup sees)."""
    if run_id is None or not why.startswith(OTHER_RUN):
        return None
    instead = "None" if source == "run_id" else "unset it"
    return (
        f", not run {run_id!r} that this predictor asks as ({source}): give {source} the "
        f"trainer's run id (the run_id of its serve files), or {instead} to ask any run's "
        f"trainer, or use the rendezvous directory of run {run_id!r} (each request looks "
        f"the serve files up again: a trainer of run {run_id!r} that publishes here later "
        "serves the next one)"
    )


def unreachable(entry: dict[str, Any], serve_file: str) -> PredictUnreachable | None:
    """The error of a serve file's `entry` whose endpoint this process can never reach:
    a loopback one (or a host name resolved to loopback here) of another machine or
    network namespace (`host_scope.out_of_reach`, in the `Client`'s words but for the
    serving socket); None if it can be reached, or that cannot be told."""
    endpoint = entry["endpoint"]
    why = out_of_reach(endpoint, entry, is_loopback(endpoint), SERVING)
    return None if why is None else PredictUnreachable(f"serve file {serve_file}: {why}")


def checked_endpoint(endpoint: str, source: str) -> str:
    """`endpoint`, given at `source` (the argument, the variable), if its form is one
    to connect to (`endpoint_form.endpoint_fault`, with the serve files' fix).

    Raises:
        ValueError: "{source}: endpoint 'X' has no port: give tcp://HOST:PORT ...".
    """
    fault = endpoint_fault(endpoint)
    if fault is not None:
        raise ValueError(f"{source}: {fault}")
    return endpoint


class MissingDirectory:
    """The words of a rendezvous path that is not a directory (a typo, or a trainer that
    has not created it yet): `note` for each timeout's message, and a WARNING once
    (`check`), at a lookup `NOTICE_AFTER` seconds or more after the first one that found
    it missing, counted over requests (a solver may start before its trainer: a quiet
    wait at first; its requests may each time out sooner than that).

    Args:
        source: where the path was given (``rendezvous_dir``, or the variable).
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self._since: float | None = None  # when a lookup first found it missing
        self._warned = False

    def check(self, directory: str | os.PathLike[str], why: str) -> None:
        """After a lookup in `directory` found no endpoint (`why`): warn once when it
        has not been a directory for `NOTICE_AFTER` seconds (one ``stat``)."""
        if os.path.isdir(directory):
            self._since = None
            return
        now = time.monotonic()
        if self._since is None:
            self._since = now
        if self._warned or now - self._since < NOTICE_AFTER:
            return
        self._warned = True
        logger.warning(
            "Predictor: %s=%s: %s%s; each request waits up to its timeout for the trainer "
            "to create it (then fails: PredictTimeout)",
            self.source, os.path.abspath(directory), why, self.note(directory),
        )  # fmt: skip

    def note(self, directory: str | os.PathLike[str]) -> str:
        """`missing_note` of `directory` (a typo likely, the directory likely meant; ""
        when it is a directory); when that has nothing to say (its parent exists, no
        name there is close), what makes it exist and where the path came from: a
        request's words had only "cannot list ...: No such file or directory" at
        every timeout (user trial htrial27)."""
        note = missing_note(directory, self.source)
        if note or os.path.isdir(directory):
            return note
        return (
            "; the trainer creates it at its start ({output_dir}/rendezvous): until then "
            f"each request waits its whole timeout; check {self.source} if one runs"
        )


#: what a lookup that found no serve file adds while the trainer runs there (the C
#: client's words too, clients/c/src/missing_dir.h)
UNSERVED = (
    "the trainer is running but serves no predictions: add ServingHook to its hooks "
    "(docs/how-to/serve-while-training.md)"
)


#: what a lookup that found no serve file says when the trainer that ran there stopped
#: (`stopped_story`: its stop record's reason, then what would serve there, per code:
#: `after_stop`); the C client's words too (clients/c/src/missing_dir.h)
STOPPED_THERE = "the trainer that ran there stopped"
#: the same, said to a predictor that trainer served (`stopped_story`)
SERVED_STOPPED = "the trainer that served this simulation stopped"
#: after a code a resume may follow (`stop_record.RESUMABLE`), or one that does not say
#: (``stopped`` by its owner, no record)
RESUMED_SERVES = "a resumed one would serve there"
#: after ``end``: no resume follows on its own; one with a larger ``--max_steps`` after
#: a max_steps end trains on (`stop_kinds.ENDED`'s advice)
ENDED_SERVES = (
    "the run ended, no resume follows on its own (after max_steps, one resumed with a "
    "larger --max_steps would serve there)"
)
#: after ``end`` at the stream's end (its message "end of stream...", the trainer's
#: `ended_by`): a larger ``--max_steps`` trains nothing past it (`resume_end`), so
#: `ENDED_SERVES`' advice is not said there; the C client's words too
STREAM_ENDED_SERVES = (
    "the run ended at its stream's end, no resume follows on its own (a larger "
    "--max_steps trains nothing past it: a new run would serve there, or one resumed "
    "with more --pseudo_epochs if its buffer has samples to replay)"
)
#: how the message of an ``end`` at the stream's end opens (`trainer.loop`'s `ended_by`)
STREAM_END = "end of stream"
#: after ``error``, ``nonfinite``: no resume follows on its own
FAILED_SERVES = "no resume follows on its own (one resumed once that is fixed would serve there)"
#: the most characters of a reason's code (`reason_line.CODE_CHARS`) and of its
#: message's first line quoted (C: the same count of UTF-8 characters, never one cut)
MESSAGE_CHARS = SAID_CHARS


class Unserved:
    """A rendezvous directory whose trainer runs (its receivers' files complete and
    live: `fetch_rendezvous`'s ``alive_only`` look, a client's start's) but that holds
    no serve file: a trainer without a `ServingHook` (a user trial: every request of every
    step waited its whole timeout, the trainer's log silent). Said, not refused: a
    serving hook may publish after the receivers. `check`: a WARNING once, at a lookup
    `NOTICE_AFTER` seconds or more after the first that found no serve file, counted
    over requests (as `MissingDirectory`'s), the trainer found running then (looked at
    once per `NOTICE_AFTER` s at most: a look may dial a remote trainer for up to 1 s),
    or a trainer that ran there found stopped then (`stopped_story`: said too, as a user
    trial read "(yet)" as awaiting a first trainer); `note`: the words of a request's
    timeout."""

    def __init__(self) -> None:
        self._since: float | None = None  # when a lookup first found no serve file
        self._looked = -float("inf")
        self._warned = False

    def check(
        self, directory: str | os.PathLike[str], why: str, story: tuple[str, bool] | None
    ) -> None:
        """After a lookup in `directory` found no endpoint (`why`, `read_serving`'s), whose
        `stopped_story` was `story` (that look's: one read of ``rank_0.json`` per look, so
        this warning and the request's error say the same): warn once, as the class says."""
        if why != NO_SERVER:
            self._since = None
            return
        now = time.monotonic()
        if self._since is None:
            self._since = now
        if self._warned or now - max(self._since, self._looked) < NOTICE_AFTER:
            return
        self._looked = now
        # (a running trainer's fix stands alone; a stopped one's story replaces the why)
        said = UNSERVED if trainer_runs(directory) else story[0] if story else ""
        if said:
            self._warned = True
            logger.warning(
                "Predictor: %s: %s; each request waits up to its timeout for a serve file "
                "(then fails: PredictTimeout)",
                os.path.abspath(directory), said,
            )  # fmt: skip

    def note(self, directory: str | os.PathLike[str], why: str) -> str:
        """When `why` is that no serve file is there: "; " and `UNSERVED` if the trainer
        runs there now; else "" (a trainer that ran there and stopped is `stopped_story`'s
        to say, in place of `why`)."""
        return f"; {UNSERVED}" if why == NO_SERVER and trainer_runs(directory) else ""


def after_stop(code: object, message: object = None, restarts_left: int = 0) -> str:
    """What would serve there after a trainer that stopped with reason `code` (and
    `message`, its reason's): `RESUMED_SERVES` after a resumable code (a resume may
    follow) or one that does not say (``stopped``, none); after ``end``,
    `STREAM_ENDED_SERVES` when `message` opens with `STREAM_END`, else `ENDED_SERVES`
    (max_steps, a hook's stop); `FAILED_SERVES` after ``error``, ``nonfinite``, but
    `RESUMED_SERVES` after ``error`` with `restarts_left` (the record's, valid: the
    launcher restarts the failed run, which resumes).
    (`RESUMED_SERVES` was said after every code, also of a run that ended or failed,
    after which nothing resumes on its own; `ENDED_SERVES`' larger --max_steps was
    said after a stream's end too, where it trains nothing.)"""
    if code == "end":
        if isinstance(message, str) and message.startswith(STREAM_END):
            return STREAM_ENDED_SERVES
        return ENDED_SERVES
    if code == "error" and restarts_left > 0:
        return RESUMED_SERVES
    return FAILED_SERVES if code in ("error", "nonfinite") else RESUMED_SERVES


def stop_text(directory: str | os.PathLike[str]) -> str:
    """The text of the rendezvous `directory`'s ``rank_0.json``, "" when there is none or
    it cannot be read (being replaced): what one look reads of a trainer's stop, once
    (`stopped_story`'s `text`; a lookup keeps its first look's: `EndpointLookup`); bytes
    no UTF-8 decodes kept as surrogates, refused by `stop_reason` as by C
    (`rank_bounds.file_text`)."""
    try:
        return file_text(Path(directory) / "rank_0.json")
    except OSError:
        return ""


def stop_reason(
    directory: str | os.PathLike[str], run_id: str | None = None, text: str | None = None
) -> tuple[str, str] | None:
    """("CODE: MESSAGE", `after_stop` of CODE and MESSAGE) when the rendezvous
    `directory`'s ``rank_0.json`` is marked stopped, CODE and MESSAGE its stop record's
    reason read leniently, each string up to a NUL as C reads it (`as_c_reads`): the
    code's first `reason_line.CODE_CHARS` characters, the message's first line, at most
    `MESSAGE_CHARS` characters; "CODE" without a message, "" without a code. None when
    not marked stopped, and when it is another run's than `run_id` (its ``run_id``, else
    its record's, names another: a request of this run awaits this run's trainer, which
    that one's resume is not; None `run_id`: any run's). `text`: that file's text as
    read already (`stop_text`), None: read it here. Read as every rendezvous reader
    reads it, C's too (`rank_bounds.read_object`: white space before the object, an
    integer of any length; a string not UTF-8, not JSON or not an object: not stopped)."""
    try:
        entry = read_object(stop_text(directory) if text is None else text)
    except ValueError:
        return None  # (none, or being replaced: nothing to say)
    if entry.get("stopped") is not True:
        return None
    record = entry.get(RECORD_KEY)
    record = record if isinstance(record, dict) else {}
    whose = entry.get("run_id", record.get("run_id"))
    # (strings as C reads them, up to a NUL: both clients decide alike, `as_c_reads`)
    if run_id is not None and isinstance(whose, str) and as_c_reads(whose) != run_id:
        return None
    reason = record.get("reason")
    code = reason.get("code") if isinstance(reason, dict) else None
    message = reason.get("message") if isinstance(reason, dict) else None
    if not isinstance(code, str):
        return "", after_stop(None)
    code = as_c_reads(code)
    # (an invalid one is 0: the close's word says it, `stop_record.restarts_fault`)
    said = reason if isinstance(reason, dict) else {}  # (a dict: it has a code)
    left = 0 if restarts_fault(said) is not None else said.get("restarts_left", 0)
    if not isinstance(message, str):
        return said_code(code), after_stop(code, None, left)
    line = said_line(message)  # (its first line, `MESSAGE_CHARS`: the warning is one line)
    return f"{said_code(code)}: {line}", after_stop(code, as_c_reads(message), left)


def stopped_story(
    directory: str | os.PathLike[str],
    run_id: str | None,
    why: str,
    served: bool,
    text: str | None = None,
) -> tuple[str, bool] | None:
    """What a lookup in the rendezvous `directory` that found no serve file (`why`,
    `read_serving`'s) says of the trainer that stopped there, one story for every case
    (a user trial read "no trainer serves predictions there (yet)", which awaits a first
    trainer, beside "no resume follows on its own"): "the trainer that ran there stopped
    (CODE: MESSAGE; WHY): " and what would serve there (`after_stop`), "served this
    simulation" for a predictor that was served there (`served`); WHY is `why` without
    its " (yet)", "(CODE: MESSAGE; " left out without a code. With it, whether no resume
    follows on its own (``end``, ``error``, ``nonfinite``: a request fails at once,
    waiting would not change it). None when `directory`'s ``rank_0.json`` is not marked
    stopped by a trainer of `run_id`'s run or of a run not said (`stop_reason`), and,
    for a predictor not served there, when `why` is another than that no serve file is
    there (`NO_SERVER`). `text`: ``rank_0.json`` as read already (`stop_reason`'s). The C
    client's words too (clients/c/src/missing_dir.c mt_stopped_story)."""
    if not served and why != NO_SERVER:
        return None
    said = stop_reason(directory, run_id, text)
    if said is None:
        return None
    now = why.removesuffix(" (yet)")
    whose = SERVED_STOPPED if served else STOPPED_THERE
    reason = f"{said[0]}; {now}" if said[0] else now
    return f"{whose} ({reason}): {said[1]}", said[1] != RESUMED_SERVES


def trainer_runs(directory: str | os.PathLike[str]) -> bool:
    """Whether a trainer runs in the rendezvous `directory`: its receivers' files there
    complete, none stopped nor of a trainer gone (one look of a client's start's wait,
    `fetch_rendezvous` with ``alive_only``)."""
    try:
        fetch_rendezvous(directory, 0.0, alive_only=True)
    except TimeoutError:
        return False
    return True
