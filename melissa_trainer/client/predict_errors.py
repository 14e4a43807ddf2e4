"""What `Predictor.predict` (`melissa_trainer.client.predict`) returns and raises: the
prediction (`Predicted`), and the failures a simulation falls back from, all
`PredictionUnavailable`; the errors of a mistake to fix (a refused handshake, an endpoint
that is not a serving socket, a host name that does not resolve). Imports numpy only.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "PLAIN_SERVE",
    "NO_ANSWER_WHY",
    "PLAIN_SERVE_FILE",
    "SILENT",
    "UNANSWERED",
    "PredictRefused",
    "PredictTimeout",
    "PredictUnreachable",
    "Predicted",
    "PredictionUnavailable",
    "handshake_refused",
    "malformed_serve_key",
    "no_answer",
    "not_serving",
    "unresolved",
]

#: where a rank's serving endpoint is, and the endpoint it is confused with
_SERVE_FILE = (
    "the serving endpoint is the `endpoint` of serve_{rank}.json in the rendezvous "
    "directory, not that of rank_{rank}.json (the stream receiver's)"
)

#: what a serving peer that accepted TCP and never completed a ZeroMQ handshake is (a
#: request's timeout, `predict_events`), and the fix; the C client's words too
#: (clients/c/src/predict_watch.c)
SILENT = (
    "a trainer whose process is stopped (SIGSTOP, a suspended job) answers once "
    "continued; else it is not a serving socket: check the endpoint (the `endpoint` of "
    "serve_N.json in the rendezvous directory)"
)

#: what else a request that made no connection in its timeout may be (neither refused
#: nor answered: no connect even started under a timeout of 0.1 ms, a live trainer's
#: too); the C client's words too (predict_watch.c)
TOO_SHORT = "or a timeout shorter than a connection takes: give a few of the trainer's steps"

#: why a request sent on a connection that is still up got no answer in time (its
#: `PredictTimeout`, after "no prediction from the trainer's serving endpoint E within
#: T s: "): the monitor saw no drop, so the trainer's process holds the connection
#: (busy, or stopped: a suspended Slurm job, a debugger) or its node went without a word;
#: the C client's words too (clients/c/src/predict.c)
UNANSWERED = (
    "its connection is still up: the trainer is busy, or its process is stopped (SIGSTOP, "
    "a suspended job: it answers once continued), or its node is unreachable (a trainer "
    "whose process died closes the connection, which fails a request at once)"
)
#: what a host that never answered a connection attempt is (its SYNs unanswered: no
#: connection made, none refused; `no_answer`); the C client's words too (predict_watch.c)
NO_ANSWER_WHY = "a wrong host, a firewall dropping packets, or a host that is down"
#: why a serving socket refused a client with a CURVE key with ZeroMQ's detail of a
#: mechanism mismatch: it takes no CURVE; the C client's words too (predict_watch.c)
PLAIN_SERVE = (
    "the serving socket is not encrypted (it takes plain connections: ZeroMQ reports a "
    "mechanism mismatch), and this client has a CURVE key for it"
)
#: what `PLAIN_SERVE` goes on with when that key was read from the serve file of rank
#: `{rank}` (no one gave it: a stale file, its port another socket's since), and where
#: to look; the C client's words too (predict_watch.c)
PLAIN_SERVE_FILE = (
    ", read from its serve file (the curve_public_key of serve_{rank}.json): a stale "
    "serve file? (its trainer gone, its port another's that serves without CURVE): check "
    "the rendezvous directory ({env_rendezvous}) and the trainer serving there"
)


class PredictionUnavailable(Exception):
    """No prediction this time: the simulation goes on without one (its fallback)."""


class PredictTimeout(PredictionUnavailable, TimeoutError):
    """No answer within the timeout: the trainer is not serving there (not started,
    restarting, gone) or was too busy; or no answer can come (raised at once): the
    connection to the trainer dropped, its endpoint refused the connection, or the
    trainer that served there removed its serve file. The next request looks its
    endpoint up again (after a short backoff when the trainer was found gone)."""


class PredictUnreachable(PredictTimeout):
    """The rendezvous directory's serve file publishes a loopback serving endpoint of
    another machine, or of another network namespace, than this process's
    (`stream.host_scope`: a Slurm compute node reading a trainer's ``127.0.0.1``, or its
    host name that this node resolves to loopback): no connection could ever be made, so
    each request says so at once, naming both hosts and the fix, instead of waiting out
    its timeout as for a trainer that does not answer (and a WARNING says it once per
    predictor: a simulation that falls back hears nothing else). A `PredictTimeout`, so
    a simulation's fallback (``except PredictionUnavailable``) still takes it; the next
    request looks at the serve file again (a trainer restarted with a reachable bind).
    The `Client`'s `ReceiverUnreachable` for the stream's endpoints."""


class PredictRefused(PredictionUnavailable):
    """The trainer refused the request.

    Attributes:
        reason: ``busy`` (back-pressure: try again after `retry_after` seconds),
            ``not_serving`` (starting or stopping), ``wrong_run``, ``bad_request``,
            ``failed`` (its inference function raised; `detail` says what).
        retry_after: seconds the trainer suggests waiting (0: no suggestion).
        version: the model version (global step) at the refusal.
    """

    def __init__(self, reason: str, detail: str, retry_after: float, version: int) -> None:
        super().__init__(f"the trainer refused the prediction ({reason}): {detail}")
        self.reason, self.detail = reason, detail
        self.retry_after, self.version = retry_after, version


class Predicted(NamedTuple):
    """A prediction: the output arrays (read-only) and the model version (global step)."""

    outputs: dict[str, np.ndarray]
    version: int


def handshake_refused(
    endpoint: str,
    key: str | None,
    env_rendezvous: str,
    env_key: str,
    given: bool = True,
    rank: int | None = None,
    plain: bool = False,
) -> ValueError:
    """The error of a serving endpoint that refused the client's handshake: CURVE only
    and no key known here (`key` None), or a key that is not the server's, `given` (an
    argument, `env_key`) or read from its serve file (the C client's words:
    predict_watch.c); names the endpoint and the fix (`env_rendezvous`, `env_key`: the
    variables that give it), and the serve file of `rank` (None: not known here).
    `plain`: ZeroMQ said why (a mechanism mismatch): the server takes no CURVE
    (`PLAIN_SERVE`); the fix is to drop a key given, and a serve file's key says the
    file is stale (`PLAIN_SERVE_FILE`)."""
    fix = (
        f"read it from the rendezvous directory ({env_rendezvous}: the serve files "
        f"carry it), or pass curve_server_key= (or set {env_key}) to the "
        "stream's ReceiverConfig.curve_public_key"
    )
    if key is None:
        return ValueError(
            f"the serving endpoint {endpoint} refused this client's handshake: it "
            f"takes CURVE (encrypted) connections only, and no CURVE key is known for "
            f"it here: {fix}"
        )
    if plain and given:  # (certain: a mismatch's detail, not a key that may be stale)
        return ValueError(
            f"the serving endpoint {endpoint} refused this client's CURVE handshake: "
            f"{PLAIN_SERVE}: drop the key given (curve_server_key or {env_key}), or check "
            "the endpoint if that serving socket should use CURVE"
        )
    if plain:  # (a serve file's key: no one gave it, a stale file says it)
        where = PLAIN_SERVE_FILE.format(rank=rank, env_rendezvous=env_rendezvous)
        return ValueError(
            f"the serving endpoint {endpoint} refused this client's CURVE handshake: "
            f"{PLAIN_SERVE}{where}"
        )
    whose = (
        f"the key given (curve_server_key or {env_key})"
        if given
        else "the key of its serve file (curve_public_key)"
    )
    return ValueError(
        f"the serving endpoint {endpoint} refused this client's CURVE handshake: {whose} "
        f"is not its public key, or it takes no CURVE: {fix}; or it is not a serving "
        f"socket: {_SERVE_FILE.format(rank='{rank}' if rank is None else rank)}"
    )


def malformed_serve_key(key: str, fault: str, env_key: str, serve_file: str | None) -> ValueError:
    """The error of a serving CURVE key that is not a 40-character Z85 key (`fault`:
    what it must be, `server_key.z85_fault`), given (`env_key`, or the argument:
    `serve_file` None) or read from the serve file `serve_file` (its curve_public_key:
    no one gave it, so the words name the file; the C client's too, serve.c)."""
    if serve_file is None:
        return ValueError(
            f"the serving endpoint's CURVE key (curve_server_key or {env_key}) must be the "
            f"40-character Z85 public key, not {key!r} (it must be {fault})"
        )
    return ValueError(
        f"the curve_public_key of the serve file {serve_file} must be the 40-character Z85 "
        f"public key, not {key!r} (it must be {fault}): the trainer writes its own there; "
        "is that file the trainer's?"
    )


def not_serving(
    endpoint: str,
    rank: int | None,
    env_rendezvous: str,
    env_endpoints: str,
    env_key: str | None = None,
) -> ValueError:
    """The error of a serving endpoint given (an argument, `env_endpoints`) that answers
    but closed the connection at the handshake: a socket of another kind (ZeroMQ's
    socket types do not match), most often the stream receiver's; names the endpoint,
    the serve file of `rank` (None: not known here) and the fix. With `env_key` (no key
    known here, handshakes failed without detail), a CURVE-only serving socket closes
    alike (which one comes first is a race): the error names both, and both fixes."""
    where = _SERVE_FILE.format(rank="{rank}" if rank is None else rank)
    if rank is None:
        where += " (rank: simulation_id % the number of training ranks)"
    fix = (
        f"{where[0].upper()}{where[1:]}: give that one (endpoint= or {env_endpoints}), or "
        f"give the directory ({env_rendezvous} or rendezvous_dir=) and no endpoint"
    )
    if env_key is not None:
        return ValueError(
            f"the endpoint {endpoint} refused this client's handshake: it is not a serving "
            "socket (a socket of another kind: the stream receiver's?), or one that takes "
            f"CURVE (encrypted) connections only, no CURVE key being known here. {fix}; "
            f"for CURVE, pass curve_server_key= (or set {env_key}) to the stream's "
            "ReceiverConfig.curve_public_key, or give the rendezvous directory"
        )
    return ValueError(
        f"the endpoint {endpoint} answers but is not a serving socket: it closed the "
        f"connection at the handshake (a socket of another kind: the stream receiver's?). "
        f"{fix}"
    )


def unresolved(endpoint: str, host: str, why: str, given: bool) -> ValueError:
    """The error of a serving endpoint whose host name does not resolve (`why`: the
    resolver's words), `given` (an argument, the environment) or read from a serve file
    (the trainer's advertised host)."""
    fix = (
        "check the endpoint given (endpoint= or MELISSA_TRAINER_SERVE_ENDPOINTS)"
        if given
        else "the trainer advertises it (the stream's ReceiverConfig.advertise_host): "
        "give one this node resolves"
    )
    return ValueError(
        f"the serving endpoint {endpoint}: the host name {host!r} does not resolve "
        f"({why}; a typo?): {fix}"
    )


def no_answer(endpoint: str, seconds: float) -> PredictTimeout:
    """The error of a serving endpoint whose host never answered the connection attempt
    for `seconds` (until the request's timeout, or the connect bound that ended the
    attempt: `predict_link`): not a refusal ("nothing listens there": a host's RST),
    which comes at once. Names the endpoint's HOST:PORT (the C client's words too)."""
    address = endpoint.removeprefix("tcp://").rpartition(";")[2]
    return PredictTimeout(
        f"no answer from {address} (the trainer's serving endpoint) within {seconds:.1f} s: "
        f"{NO_ANSWER_WHY}"
    )
