"""Where the training rank that serves a `Predictor`'s simulation is (`EndpointLookup`):
the endpoint given (an argument), the environment's list, else the rendezvous
directory's serve files, waited for while no trainer published one yet; and the CURVE
key of that endpoint. The connection to it and what says the trainer is gone are
`predict_link`'s (`PredictLink`, which looks the endpoint up here at each connection);
the words of a lookup that finds nothing are `predict_lookup`'s. The C client's serve.c
(``mt_serve_resolve``) follows the same rules. Imports the standard library and the
shared `stream` modules only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from melissa_trainer.client.config import ENV_RENDEZVOUS
from melissa_trainer.client.predict_errors import PredictTimeout
from melissa_trainer.client.predict_lookup import (
    SERVED_STOPPED,
    MissingDirectory,
    Unserved,
    checked_endpoint,
    logger,
    other_run,
    unreachable,
)
from melissa_trainer.client.server_key import not_the_served_key
from melissa_trainer.client.stop_look import StopLook
from melissa_trainer.stream.endpoints import stamp
from melissa_trainer.stream.serving_rendezvous import read_serving
from melissa_trainer.wire import FieldSpec

__all__ = ["ENV_SERVE_ENDPOINTS", "ENV_SERVE_KEY", "EndpointLookup"]

#: Comma-separated serving endpoints, in training-rank order (else the rendezvous).
ENV_SERVE_ENDPOINTS = "MELISSA_TRAINER_SERVE_ENDPOINTS"
#: The serving sockets' CURVE public key (Z85) for endpoints not read from a rendezvous.
ENV_SERVE_KEY = "MELISSA_TRAINER_SERVE_KEY"


class EndpointLookup:
    """The endpoint of the rank that serves a simulation, looked up again at each
    connection (`find`), and what the last lookup learnt.

    Args (those of `Predictor`):
        simulation_id: chooses the rank (``id % W``).
        run_id: serve files of another run are ignored (None: any run's).
        endpoint: the serving endpoint; default `$MELISSA_TRAINER_SERVE_ENDPOINTS`, else
            the rendezvous directory.
        rendezvous_dir: default `$MELISSA_TRAINER_RENDEZVOUS`.
        curve_server_key: the CURVE key of `endpoint` and of the environment's endpoints;
            default `$MELISSA_TRAINER_SERVE_KEY`. With a serve file, the first one read
            must publish it (else `ConfigError`); then unused.

    Attributes:
        run_id: the run asked as (`PredictLink.join` changes it).
        run_source: where it was given (``run_id``, or ``$MELISSA_TRAINER_RUN_ID``:
            `Predictor`), named by the fix of another run's serve files.
        inputs: the inputs the serving rank takes, when read from its serve file (None:
            an endpoint given, whose trainer is asked: `predict_describe`).
        rank: the rank of the endpoint found, when known (None: the endpoint given).
        serve_file: the serve file last read (None: the endpoint given).
        looked_at: the rendezvous directory and its `stamp` when the endpoint was last
            looked up there (`changed`), None when the endpoint is given.
        served_there: a serve file was found in the rendezvous before.
    """

    def __init__(
        self,
        simulation_id: int,
        run_id: str | None,
        endpoint: str | None,
        rendezvous_dir: str | os.PathLike[str] | None,
        curve_server_key: str | None,
    ) -> None:
        self.simulation_id, self.run_id = simulation_id, run_id
        self.run_source = "run_id"  # (where run_id was given: the words of its fix)
        self._endpoint, self._key = endpoint, curve_server_key
        self._rendezvous = rendezvous_dir
        self._missing = MissingDirectory("rendezvous_dir" if rendezvous_dir else ENV_RENDEZVOUS)
        self._unserved = Unserved()  # (a trainer running without a ServingHook)
        self.inputs: list[FieldSpec] | None = None
        self.rank: int | None = None
        self.serve_file: str | None = None
        self.looked_at: tuple[str, tuple[int, int] | None] | None = None
        self.served_there = False
        #: ``rank_0.json``'s text at this predictor's first look there (`find`), None
        #: before it
        self._first_text: str | None = None
        self._stop_look = StopLook()  # (read and parsed again only when it changed)
        self._warned_far = False  # (a serve file out of reach: warned once)

    def changed(self) -> bool:
        """Whether the rendezvous directory changed since the endpoint was last looked
        up there (one ``stat``; False when it was not looked up there)."""
        return self.looked_at is not None and stamp(self.looked_at[0]) != self.looked_at[1]

    def find(
        self, deadline: float, timeout: float, gone: Callable[[str], PredictTimeout]
    ) -> tuple[str, str | None, bool]:
        """The endpoint of the rank that serves this simulation, its CURVE key, and
        whether that key was given (an argument, the environment; else the rendezvous),
        waiting for a serve file up to `deadline`, the end of the request's `timeout`
        seconds (which its timeout's words name, as the C client's). `gone(why)`: the
        error of a trainer found gone (`PredictLink.gone`: its backoff starts), raised
        for a rendezvous of only another run's serve files, after a trainer that served
        here stopped, and after one of this run that ended or failed there (its stop
        record's code ``end``, ``error``, ``nonfinite``: no resume follows on its own;
        `predict_lookup.stopped_story`); with no `run_id`, only after one whose record
        was not there at this predictor's first look (one there then may be an earlier
        run's, a new trainer starting: waited for). A trainer that stopped otherwise (``preempted``,
        ``broken``, ``stopped``) is waited for, as a first one is: a resume may follow.

        Raises:
            PredictTimeout: no endpoint published in time, or the trainer gone.
            PredictUnreachable: (a `PredictTimeout`, at once) the serve file publishes
                a loopback endpoint of another machine or network namespace
                (`predict_lookup.unreachable`), warned of once.
            ValueError: no endpoint configured, or one of a form not to connect to.
            ConfigError: the key given is not the one the serve file publishes.
        """
        key = self._key or os.environ.get(ENV_SERVE_KEY, "").strip() or None
        self.serve_file = None
        if self._endpoint is not None:
            self.inputs, self.rank = None, None  # (the trainer's number of ranks is not known here)
            return self._endpoint, key, True
        listed = os.environ.get(ENV_SERVE_ENDPOINTS, "").strip()
        if listed:
            endpoints = [e.strip() for e in listed.split(",")]
            self.inputs, self.rank = None, self.simulation_id % len(endpoints)
            return checked_endpoint(endpoints[self.rank], ENV_SERVE_ENDPOINTS), key, True
        directory = self._rendezvous or os.environ.get(ENV_RENDEZVOUS, "").strip()
        if not directory:
            raise ValueError(
                f"no serving endpoint: set {ENV_RENDEZVOUS} (the trainer's rendezvous "
                f"directory) or {ENV_SERVE_ENDPOINTS}, or pass endpoint="
            )
        pause = 0.01
        while True:
            # (stamped before the read: a change after it ends the next backoff)
            self.looked_at = (str(directory), stamp(directory))
            entry, why = read_serving(directory, self.simulation_id, self.run_id)
            if entry is not None:
                far = unreachable(entry, str(Path(directory) / f"serve_{entry['rank']}.json"))
                if far is not None:  # (at once, each request; said once: a fallback is mute)
                    if not self._warned_far:
                        self._warned_far = True
                        logger.warning("Predictor: %s", far)
                    raise far
                self.inputs, self.rank = entry["inputs"], entry.get("rank")
                self.served_there = True
                self.serve_file = str(Path(directory) / f"serve_{self.rank}.json")
                published = entry.get("curve_public_key")
                if self._key is not None and published != self._key:  # (as a Client's)
                    raise not_the_served_key(self._key, published, self.serve_file)
                self._key = None  # (a restarted trainer's new key is its serve file's)
                return entry["endpoint"], published, False
            # (only another run's files: at once)
            other = other_run(why, self.run_id, self.run_source)
            if other is not None:
                raise gone(f"no serving endpoint in {str(directory)!r}: {why}{other}")
            self._missing.check(directory, why)  # (a typo? warned once)
            # (the trainer that stopped there, this run's: what it says, and whether no
            # resume follows on its own; read again only when it changed: `StopLook`)
            text, story = self._stop_look.look(directory, self.run_id, why, self.served_there)
            if self._first_text is None:
                self._first_text = text
            # (No run id known: a record already there at this predictor's first look may
            # be an earlier run's, with a new trainer starting there (a rerun, a resume: a
            # new run id), which rewrites the file: waited for, as a first trainer is.
            # One that came or changed since ended while this predictor asked.)
            ended = story is not None and story[1]
            ended = ended and (self.run_id is not None or text != self._first_text)
            # (one that served: stopped, or stops serving; one that ended: no request waits,
            # which the warning would say)
            if not self.served_there and not ended:
                self._unserved.check(directory, why, story)  # (no ServingHook? warned once)
            where = f"no serving endpoint in {str(directory)!r}"
            if self.served_there or ended:
                # (Waiting for a serve file is for a trainer not started yet, or resumed.
                # One that served this simulation and removed its file has stopped, and
                # one that ended or failed there has no resume to come (each request
                # waited its whole timeout for it): fall back now, and look again at the
                # next request, for a trainer resumed by hand.)
                said = story[0] if story else f"{SERVED_STOPPED} ({why.removesuffix(' (yet)')})"
                raise gone(f"{where}: {said}{self._missing.note(directory)}")
            left = deadline - time.monotonic()
            if left <= 0:
                note = self._missing.note(directory)
                if story is None:  # (a trainer running without serving: said after the why)
                    note += self._unserved.note(directory, why)
                raise PredictTimeout(
                    f"{where} within {timeout} s: {story[0] if story else why}{note}"
                )
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.25)
