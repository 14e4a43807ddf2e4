"""What `Predictor.predict` (`melissa_trainer.client.predict`) returns and raises: the
prediction (`Predicted`), and the failures a simulation falls back from, all
`PredictionUnavailable`; the error of a refused handshake. Imports numpy only.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "PredictRefused",
    "PredictTimeout",
    "Predicted",
    "PredictionUnavailable",
    "handshake_refused",
]


class PredictionUnavailable(Exception):
    """No prediction this time: the simulation goes on without one (its fallback)."""


class PredictTimeout(PredictionUnavailable, TimeoutError):
    """No answer within the timeout: the trainer is not serving there (not started,
    restarting, gone) or was too busy; or no answer can come (raised at once): the
    connection to the trainer dropped, its endpoint refused the connection, or the
    trainer that served there removed its serve file. The next request looks its
    endpoint up again (after a short backoff when the trainer was found gone)."""


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
    endpoint: str, key: str | None, env_rendezvous: str, env_key: str
) -> ValueError:
    """The error of a serving endpoint that refused the client's handshake: CURVE only
    and no key known here (`key` None), or a key that is not the server's; names the
    endpoint and the fix (`env_rendezvous`, `env_key`: the variables that give it)."""
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
    return ValueError(
        f"the serving endpoint {endpoint} refused this client's CURVE handshake: the "
        f"key given (curve_server_key or {env_key}) is not its public key, or it "
        f"takes no CURVE: {fix}"
    )
