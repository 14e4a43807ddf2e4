"""One receiver's ledger of one simulation's time steps (`StepLedger`): what the receiver
knows of its data (the launcher's `SimulationRecord` is what the launcher knows of its
runs: status, attempts, exit codes): what it declared in its HELLO (fields, parameters,
rank count), which of its time steps this receiver has completed (a bit array:
O(steps / 8) bytes per simulation, indexed by the *local* step
``time_step // world_size``), the BYEs of its ranks, and whether it has finished. It
serializes to JSON (bits as base64) for checkpoints.

Used by one receiver thread only (no locking inside; the receiver holds its own lock
around what a checkpoint reads). The samples in progress are `assembly.Assembly`.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import numpy as np

from melissa_trainer.wire import FieldSpec, Hello

__all__ = ["StepLedger"]


class StepLedger:
    """One receiver's ledger of one simulation's time steps: its declaration and the
    steps received (see the module docstring)."""

    __slots__ = (
        "simulation_id",
        "client_count",
        "fields",
        "specs",
        "layout",
        "parameters",
        "id_array",
        "param_array",
        "single",
        "sample_nbytes",
        "done",
        "completed",
        "byes",
        "finished",
        "lost",
        "messages",
        "first_data_at",
        "client",
        "frontier",
        "nonfinite_failures",
        "asked",
    )

    def __init__(
        self,
        simulation_id: int,
        client_count: int,
        fields: tuple[FieldSpec, ...],
        parameters: dict[str, float],
    ) -> None:
        self.simulation_id = simulation_id
        self.client_count = client_count
        self.fields = fields
        self.specs = {f.name: f for f in fields}
        #: name -> (dtype, global shape, elements): what every DATA is checked against
        self.layout = {f.name: (f.dtype, f.shape, f.size) for f in fields}
        self.parameters = parameters
        # the sample's "simulation_id": int64, ids >= 2**63 wrap around (two's complement)
        self.id_array = np.array(simulation_id, np.uint64).astype(np.int64)
        self.param_array = np.array(list(parameters.values()), dtype=np.float64)
        #: one field: a whole-field DATA is a complete sample (no assembly)
        self.single = len(fields) == 1
        self.sample_nbytes = sum(f.size * f.dtype.itemsize for f in fields)
        self.done = bytearray()  # bit i: local step i completed (put into the buffer)
        self.completed = 0  # number of bits set
        self.frontier = 0  # no local step >= this is completed (an upper bound)
        self.byes: dict[int, int] = {}  # client rank -> steps_sent
        #: client ranks that asked a receipt (`receipt_of`), of the attempt it is on (a
        #: new attempt's HELLO clears it: `Ingest.hello`)
        self.asked: set[int] = set()
        self.finished = False
        #: local steps whose partial assembly was dropped (pending bound exceeded);
        #: they count as done for finishing, and are accepted if re-sent.
        self.lost: set[int] = set()
        #: DATA and BATCH messages received (duplicates and rejects included): the
        #: heartbeat; counted by `count_message` only
        self.messages = 0
        #: `time.monotonic()` when the first of them arrived (None before, and for a
        #: ledger loaded from a checkpoint: another process's clock); the launcher's exact
        #: start-up of a simulation's first attempt (`Receiver.first_message_at`)
        self.first_data_at: float | None = None
        #: the client library its first HELLO named (`Hello.client`; None: it did not say,
        #: or a ledger loaded from a checkpoint): the launcher's advice (`Receiver.client_of`)
        self.client: str | None = None
        #: its attempts failed here for NaN or Inf (``nonfinite="fail"``, `NonFiniteGuard`):
        #: a close after one is the launcher's kill (`connections.ConnectionWatch`)
        self.nonfinite_failures = 0

    @classmethod
    def from_hello(cls, hello: Hello) -> StepLedger:
        ledger = cls(hello.simulation_id, hello.client_count, hello.fields, dict(hello.parameters))
        ledger.client = hello.client
        return ledger

    def same_declaration(self, hello: Hello) -> bool:
        return (
            hello.client_count == self.client_count
            and hello.fields == self.fields
            and hello.parameters == self.parameters
        )

    def count_message(self) -> None:
        """Count one DATA or BATCH message of this simulation (duplicates and rejects
        included: the heartbeat); the first one counted also sets `first_data_at` to
        `time.monotonic()`. The one place either is changed (the ingest hot path: one
        test per message, the clock read once per ledger)."""
        if not self.messages:
            self.first_data_at = time.monotonic()
        self.messages += 1

    def order_parameters_as(self, parameters: dict[str, float]) -> None:
        """Take the order of `parameters`, the same ones (a record from an older
        checkpoint, whose JSON object sorted them or kept its HELLO's order, gets the
        study's: `Ingest.hello`, `ingest_record.load_record`)."""
        if list(parameters) != list(self.parameters):
            self.parameters = dict(parameters)
            self.param_array = np.array(list(parameters.values()), dtype=np.float64)

    # -- completed-step bits ------------------------------------------------------------

    def is_done(self, i: int) -> bool:
        byte = i >> 3
        return byte < len(self.done) and bool(self.done[byte] >> (i & 7) & 1)

    def mark(self, i: int) -> None:
        """Record local step `i` as completed (it must not be already)."""
        byte = i >> 3
        done = self.done
        if byte >= len(done):  # grow geometrically: amortized O(1)
            done.extend(bytes(max(byte + 1 - len(done), len(done))))
        done[byte] |= 1 << (i & 7)
        self.completed += 1
        if i >= self.frontier:
            self.frontier = i + 1
        if self.lost:
            self.lost.discard(i)

    def mark_many(self, steps: np.ndarray) -> None:
        """Record the local steps `steps` (distinct, none completed yet) at once."""
        if not steps.size:
            return
        byte = steps >> 3
        done, need = self.done, int(byte.max()) + 1
        if need > len(done):  # grow geometrically, before any numpy view exists
            done.extend(bytes(max(need - len(done), len(done))))
        view = np.frombuffer(done, np.uint8)
        np.bitwise_or.at(view, byte, (1 << (steps & 7)).astype(np.uint8))
        del view  # the bytearray may be resized again once no view exports it
        self.completed += int(steps.size)
        self.frontier = max(self.frontier, int(steps.max()) + 1)
        if self.lost:
            self.lost.difference_update(steps.tolist())

    def mark_range(self, a: int, b: int) -> None:
        """Record local steps ``a .. b - 1`` (``a >= frontier``: none completed yet) at
        once, with byte slices rather than one bit at a time."""
        done = self.done
        need = ((b - 1) >> 3) + 1
        if need > len(done):  # grow geometrically: amortized O(1)
            done.extend(bytes(max(need - len(done), len(done))))
        first, last = a >> 3, (b - 1) >> 3
        if first == last:
            done[first] |= ((1 << (b - a)) - 1) << (a & 7)
        else:
            done[first] |= (0xFF << (a & 7)) & 0xFF
            done[first + 1 : last] = b"\xff" * (last - first - 1)
            done[last] |= (1 << (((b - 1) & 7) + 1)) - 1
        self.completed += b - a
        self.frontier = b
        if self.lost:
            self.lost.difference_update(range(a, b))

    def unmark(self, i: int) -> bool:
        if not self.is_done(i):
            return False
        self.done[i >> 3] &= ~(1 << (i & 7)) & 0xFF
        self.completed -= 1
        return True

    def steps_announced(self) -> int | None:
        """Steps the simulation sent to this receiver (the largest BYE count) once all
        its ranks said BYE."""
        if len(self.byes) < self.client_count:
            return None
        return max(self.byes.values())

    # -- checkpoint ------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "client_count": self.client_count,
            "fields": [
                {"name": f.name, "dtype": f.dtype.str, "shape": list(f.shape)} for f in self.fields
            ],
            # pairs, not an object: a sample's parameter vector is in the study's order,
            # and checkpoints are written with sorted keys
            "parameters": [[k, v] for k, v in self.parameters.items()],
            "done": base64.b64encode(bytes(self.done)).decode("ascii"),
            "byes": {str(r): n for r, n in sorted(self.byes.items())},
            "finished": self.finished,
            "lost": sorted(self.lost),
        }

    @classmethod
    def from_state(cls, simulation_id: int, state: dict[str, Any]) -> StepLedger:
        fields = tuple(
            FieldSpec(str(f["name"]), np.dtype(str(f["dtype"])), tuple(int(d) for d in f["shape"]))
            for f in state["fields"]
        )
        raw = state["parameters"]  # pairs; an object in older checkpoints (order lost)
        pairs = raw.items() if isinstance(raw, dict) else raw
        params = {str(k): float(v) for k, v in pairs}
        rec = cls(simulation_id, int(state["client_count"]), fields, params)
        rec.done = bytearray(base64.b64decode(state["done"], validate=True))
        bits = np.unpackbits(np.frombuffer(bytes(rec.done), np.uint8), bitorder="little")
        rec.completed = int(bits.sum())
        marked = np.flatnonzero(bits)
        rec.frontier = int(marked[-1]) + 1 if marked.size else 0
        rec.byes = {int(r): int(n) for r, n in state["byes"].items()}
        rec.finished = bool(state["finished"])
        rec.lost = {int(i) for i in state.get("lost", [])}
        return rec
