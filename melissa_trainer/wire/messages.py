"""What a message says, decoded: `Hello`, `Data`, `Batch`, `Bye`, `Abandon` (the
`Message` union), `FieldSpec` (a declared field), and `ProtocolError`, the rejection of
a message that breaks the protocol. Standard library and numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np


class ProtocolError(ValueError):
    """A message that breaks the protocol; `reason` names the rule (for counters)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class FieldSpec:
    """A field as declared in HELLO: name, dtype and global shape."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)  # exact (np.prod in int64 wraps around silently)


@dataclass(frozen=True)
class Hello:
    simulation_id: int
    client_rank: int
    client_count: int
    fields: tuple[FieldSpec, ...]
    parameters: dict[str, float] = field(default_factory=dict)
    #: the run the client belongs to (None: it did not say, as older clients)
    run_id: str | None = None
    #: the client library that sent it, `CLIENT_KINDS` ("python", "c": the C client and
    #: the Fortran bindings built on it); None: it did not say (older clients) or said
    #: something unreadable (informational: never a reason to refuse the HELLO)
    client: str | None = None
    #: the routing of its steps (`routing.SIMULATION_STEP`); None: ``t % W`` (it did not
    #: say, as older clients and clients given their endpoints)
    routing: str | None = None


class Data(NamedTuple):
    """One DATA message (a tuple: cheap to build at hundreds of thousands per second)."""

    simulation_id: int
    time_step: int
    client_rank: int
    client_count: int
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int
    elements: int  # the wire's `count` (not `count`: that is a tuple method)
    payload: Any  # a buffer of elements * itemsize bytes (a view of the frame: no copy)
    finite: bool = False  # FLAG_FINITE: the sender found every value finite


class Batch(NamedTuple):
    """One BATCH message: `records` time steps of one field part of one client rank."""

    simulation_id: int
    records: int
    client_rank: int
    client_count: int
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int
    elements: int
    steps: np.ndarray  # (records,) little-endian u64, a strided view of the frame
    payloads: np.ndarray  # (records, elements) of `dtype`, a strided view of the frame
    finite: bool = False  # FLAG_FINITE: the sender found every record's values finite

    def record(self, i: int) -> Data:
        """Record `i` as the DATA message it stands for (the slow, general path)."""
        payload = self.payloads[i]
        return Data(
            self.simulation_id,
            int(self.steps[i]),
            self.client_rank,
            self.client_count,
            self.name,
            self.dtype,
            self.shape,
            self.offset,
            self.elements,
            payload,
            self.finite,
        )


@dataclass(frozen=True)
class Bye:
    simulation_id: int
    client_rank: int
    client_count: int
    steps_sent: int  #: distinct time steps this client rank sent to the receiving end


@dataclass(frozen=True)
class Abandon:
    simulation_id: int
    replaced: bool = False


@dataclass(frozen=True, eq=False)
class StudyEnd:
    """STUDY_END (`wire.study_end`): the ids that ended with exit 0, increasing."""

    finished: np.ndarray


Message = Hello | Data | Batch | Bye | Abandon | StudyEnd
