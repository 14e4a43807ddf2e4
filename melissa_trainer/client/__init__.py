"""The client side: what a simulation imports to stream its fields to the trainer.

```python
from melissa_trainer.client import Client

with Client(fields={"temperature": ((64, 64), "float32")}, parameters={"t0": 300.0}) as client:
    for t in range(steps):
        client.send(t, temperature=u)
```

Torch-free and independent of the receiving side (`melissa_trainer.stream`'s receiver):
it shares only the wire format (`melissa_trainer.wire`), the rendezvous
(`stream.endpoints`) and the checks of counts and durations (`melissa_trainer.common.checks`,
standard library only) with it. Modules: `client` (`Client`), `config` (what a client
is told: its simulation id, receivers, parameters), `tuning` (how it sends:
`ClientTuning`), `sending` (`Client.send` and `flush`), `transport` (how its
messages reach the receivers: the sockets, a step's send, `flush`, the BYE and
`close`'s waits), `send_wait` (how a blocked send waits; the errors it gives up with
in `send_errors`), `send_arrays` (a send's
arrays, checked and placed over MPI ranks), `field_part` (prebuilt headers), `outbox`
(small payloads coalesced into BATCH messages), `held` (large arrays sent without a
copy, `array_reuse`), `fast_send` (the usual send, specialized), `predict`
(`Client.predict`, `Predictor`: the trainer's current model asked for a prediction),
`predict_link` (a `Predictor`'s connection to its serving rank, and a trainer gone),
`predict_events` (that connection's handshake, read by `handshake`'s rule),
`handshake` (whether each receiver accepted the handshake; its words in
`handshake_words`, its time bounds in `handshake_timing`), `server_key` (a CURVE key
checked as Z85), `rendezvous_words` (what a wait on a missing rendezvous says),
`asking` (`Client.predict`'s predictor, and its following of a restarted trainer),
`worker` (the job side of the launcher's worker mode: `worker.serve_simulations`, its
loop, on `worker.next_simulation`),
`admission` (whether the trainer took the simulation, asked at `close`).

Names are imported on first use (PEP 562): a worker that imports
`melissa_trainer.client.worker` loads only the standard library and pyzmq, and gets
numpy with its first `Client`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - the eager imports, for type checkers
    from melissa_trainer.client.admission import SimulationRefused
    from melissa_trainer.client.client import Client
    from melissa_trainer.client.config import (
        ENV_ENDPOINTS,
        ENV_KEY,
        ENV_RENDEZVOUS,
        ENV_RUN_ID,
        ENV_SIMULATION_ID,
    )
    from melissa_trainer.client.field_part import INLINE_MAX_BYTES
    from melissa_trainer.client.gave_up import (
        DeliveryFailed,
        ReceiverNotFound,
        ReceiverUnreachable,
    )
    from melissa_trainer.client.held import ARRAY_REUSE_MODES, HELD_BYTES_MAX
    from melissa_trainer.client.parameters import ENV_PARAMETERS
    from melissa_trainer.client.predict import Predictor
    from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY
    from melissa_trainer.client.predict_errors import (
        Predicted,
        PredictionUnavailable,
        PredictRefused,
        PredictTimeout,
        PredictUnreachable,
    )
    from melissa_trainer.client.stop_kinds import SimulationNotNeeded
    from melissa_trainer.client.tuning import (
        DEFAULT_BATCH_BYTES,
        DEFAULT_BATCH_DELAY,
        DEFAULT_SNDHWM,
        ClientTuning,
    )
    from melissa_trainer.stream.endpoints import fetch_endpoints
    from melissa_trainer.wire import RESERVED_NAMES, FieldSpec

__all__ = [
    "ARRAY_REUSE_MODES",
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_BATCH_DELAY",
    "DEFAULT_SNDHWM",
    "ENV_ENDPOINTS",
    "ENV_KEY",
    "ENV_PARAMETERS",
    "ENV_RENDEZVOUS",
    "ENV_RUN_ID",
    "ENV_SERVE_ENDPOINTS",
    "ENV_SERVE_KEY",
    "ENV_SIMULATION_ID",
    "HELD_BYTES_MAX",
    "INLINE_MAX_BYTES",
    "RESERVED_NAMES",
    "Client",
    "ClientTuning",
    "DeliveryFailed",
    "FieldSpec",
    "PredictRefused",
    "PredictTimeout",
    "PredictUnreachable",
    "Predicted",
    "PredictionUnavailable",
    "Predictor",
    "ReceiverNotFound",
    "ReceiverUnreachable",
    "SimulationNotNeeded",
    "SimulationRefused",
    "fetch_endpoints",
]

#: name -> the module (absolute) that defines it
_WHERE = {
    "Client": "melissa_trainer.client.client",
    "ENV_PARAMETERS": "melissa_trainer.client.parameters",
    "SimulationRefused": "melissa_trainer.client.admission",
    "SimulationNotNeeded": "melissa_trainer.client.stop_kinds",
    "DeliveryFailed": "melissa_trainer.client.gave_up",
    "ReceiverNotFound": "melissa_trainer.client.gave_up",
    "ReceiverUnreachable": "melissa_trainer.client.gave_up",
    **dict.fromkeys(
        [
            "ENV_ENDPOINTS",
            "ENV_KEY",
            "ENV_RENDEZVOUS",
            "ENV_RUN_ID",
            "ENV_SIMULATION_ID",
        ],
        "melissa_trainer.client.config",
    ),
    **dict.fromkeys(
        ["DEFAULT_BATCH_BYTES", "DEFAULT_BATCH_DELAY", "DEFAULT_SNDHWM", "ClientTuning"],
        "melissa_trainer.client.tuning",
    ),
    "INLINE_MAX_BYTES": "melissa_trainer.client.field_part",
    "ARRAY_REUSE_MODES": "melissa_trainer.client.held",
    "HELD_BYTES_MAX": "melissa_trainer.client.held",
    "ENV_SERVE_ENDPOINTS": "melissa_trainer.client.predict_endpoint",
    "ENV_SERVE_KEY": "melissa_trainer.client.predict_endpoint",
    "Predictor": "melissa_trainer.client.predict",
    **dict.fromkeys(
        [
            "Predicted",
            "PredictionUnavailable",
            "PredictRefused",
            "PredictTimeout",
            "PredictUnreachable",
        ],
        "melissa_trainer.client.predict_errors",
    ),
    "fetch_endpoints": "melissa_trainer.stream.endpoints",
    "RESERVED_NAMES": "melissa_trainer.wire",
    "FieldSpec": "melissa_trainer.wire",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
