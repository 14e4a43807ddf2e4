"""Whether the trainer took this simulation, learnt while it runs (external mode).

A receiver that refuses a simulation's HELLO (fields other than the study's, its
parameters missing: `stream.schema`) drops everything it sends. `Client.close` asks
(`admission`, `confirm`), but a solver that learns it only there has computed all its
steps for nothing. So, once its HELLO has left, a client whose close would ask (its
endpoints from a rendezvous, not started by the launcher) starts an `AdmissionWatch`: a
thread of its own that asks each receiver the same ADMISSION_QUERY
(`admission.confirm_admitted`, docs/protocol.md section 17a), asking again with growing
pauses (10 ms to 0.5 s) while it says unknown, for at most `WATCH_TIMEOUT` seconds. A
refusal calls the client's ``_set_refused`` with the sentence the close would raise
(the receiver, its reason, the fix) and logs it at once; the client's next `send` raises
`SimulationRefused` with it (`Sending.send`), and every later one, sending nothing more;
so does its every `Client.predict`, asking nothing.

Why a prediction is refused too, rather than answered or a `PredictionUnavailable`: the
model serves the study it is trained on, and this simulation declared something else
(another grid, parameters missing: the refusal says which), so an answer would be of a
model of other data, given as if it were this simulation's; and a
`PredictionUnavailable` is what solvers catch to fall back, so a refused solver that
only asks (or sends rarely) would run on, its data all dropped, without hearing why. The
same `SimulationRefused` (a `ValueError`: a mistake to fix, not to fall back from) stops
it with the reason and the fix, as its next send would.

What it costs a send: one attribute read (the question is asked by the watch's thread,
never by a send, which does not wait for it). Nothing changes where no decided answer
comes: no follow socket in the rendezvous (an older trainer), a follow socket that does
not list ADMISSION_QUERY in ``follow_kinds``, endpoints given directly, a receiver busy
for longer than `WATCH_TIMEOUT` (its HELLO not processed yet), or a silent one: the close
asks as before. A client that follows a restarted trainer (`following`: its HELLO sent
to the new receivers) stops the watch of the run gone and starts one asking the run it
follows (`followed`), as the first: a restarted trainer that refuses the simulation (a
study of other fields resumed in the same place) is told at a send, not at the close.

A refusal is trusted only when its reason is one this client's HELLO would get
(`describes`): a schema or parameters difference consistent with the fields and
parameters it declares. The receiver answers from the refusals it recorded: a simulation
run again with the same id, right this time, whose question overtakes its HELLO, would
read the refusal of its earlier attempt; and an ADMISSION_QUERY names no run, so a
refusal of another run's HELLO (``wrong_run``) may be an earlier attempt's too. Such an
answer is taken as unknown (asked again: the receiver says accepted once it processed
this HELLO), and a genuine one of another kind is left to the close, whose receipt
names the run (section 17b).

Thread-safety: the watch's thread uses only sockets of a context of its own (ended
before the thread does); it hands the client one string (an attribute write, atomic
under the GIL) and reads nothing of it. `stop` (the client's `close`) ends it within
`admission.STOP_SLICE` seconds and joins it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

from melissa_trainer.client.config import launched
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.wire import FieldSpec

__all__ = ["WATCH_TIMEOUT", "AdmissionWatch", "describes"]

#: seconds the watch asks for at most (a receiver back-pressured that long has not
#: processed the HELLO: the close asks again)
WATCH_TIMEOUT = 60.0
_FIELDS_HEAD = "HELLO declares other fields than the study's: "


class Watched(Protocol):
    """What `AdmissionWatch.after_hello` reads of a `Client` (and what it calls on a
    refusal: ``_set_refused``, which sets ``_refused``)."""

    _rendezvous: str | None
    _closed: bool
    _refused: str | None
    simulation_id: int
    rank: int

    def _set_refused(self, why: str) -> None: ...

    @property
    def endpoints(self) -> Sequence[str]: ...
    @property
    def fields(self) -> Sequence[FieldSpec]: ...
    @property
    def parameters(self) -> Mapping[str, float]: ...


class AdmissionWatch:
    """Asks, in a thread of its own, whether the receivers took the simulation (module
    docstring); `refused` is called with the sentence to raise if one refused it.

    Args:
        rendezvous: the directory the client's endpoints came from (read again by the
            thread: its follow sockets).
        endpoints: the client's endpoints (a rendezvous naming others is not asked).
        simulation_id, rank: the client's.
        fields, parameters: what its HELLO declares (`describes`).
        refused: called, from the watch's thread, with the message of the
            `SimulationRefused` the next send raises.
        timeout: seconds it asks for at most.
    """

    def __init__(
        self,
        rendezvous: str,
        endpoints: Sequence[str],
        simulation_id: int,
        rank: int,
        fields: Sequence[FieldSpec],
        parameters: Sequence[str],
        refused: Callable[[str], None],
        timeout: float = WATCH_TIMEOUT,
    ) -> None:
        self._rendezvous, self._endpoints = rendezvous, list(endpoints)
        self._simulation_id, self._rank = simulation_id, rank
        self._fields, self._parameters = list(fields), list(parameters)
        self._refused, self._timeout = refused, timeout
        #: True: every receiver took it; False: one refused it; None: not decided
        self.admitted: bool | None = None
        #: malformed ADMISSION replies ignored, by reason
        self.rejected: Counter[str] = Counter()
        #: set when the thread ended (decided, or not: nothing to ask, timeout, stop)
        self.ended = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def after_hello(cls, client: Watched) -> AdmissionWatch:
        """The watch of a client whose HELLO has left, started where its close would
        ask (endpoints from a rendezvous, not launched); else an idle one (`ended`)."""
        watch = cls(
            client._rendezvous or "",
            client.endpoints,
            client.simulation_id,
            client.rank,
            client.fields,
            list(client.parameters),
            client._set_refused,
        )
        if client._rendezvous is None or launched(client.simulation_id):
            watch.ended.set()
        else:
            watch.start()
        return watch

    def followed(self, client: Watched) -> AdmissionWatch:
        """The watch of `client` once it followed a restarted trainer (its HELLO sent to
        the new receivers, its `endpoints` theirs): this one stopped (it asked the run
        gone) and a new one asking the run followed (`after_hello`); an idle one for a
        client closing (its close asks) or one already refused (it sends nothing)."""
        self.stop()
        if client._closed or client._refused is not None:
            idle = type(self)(client._rendezvous or "", [], 0, 0, [], [], self._refused)
            idle.ended.set()
            return idle
        return type(self).after_hello(client)

    def start(self) -> None:
        """Start asking, in the watch's thread (once)."""
        self._thread = threading.Thread(
            target=self._run, name="melissa-client-admission", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """End the thread (within `admission.STOP_SLICE` s) and join it; idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        # (imported here, by the watch's thread: a client's import and start-up do not
        # pay for the follow socket's messages, `tests/client/test_client_imports.py`)
        from melissa_trainer.client.admission import SimulationRefused

        try:
            self.admitted = self._ask()
        except SimulationRefused as exc:
            self.admitted = False
            why = (
                f"{exc}. Told while it ran: every send and predict from now on raises this, "
                "and sends nothing"
            )
            self._refused(why)
            from melissa_trainer.client.closing import client_logger

            client_logger().error("%s", why)
        except Exception:  # (a bug, or ZeroMQ failing: not the solver's to pay for)
            from melissa_trainer.client.closing import client_logger

            client_logger().warning(
                "simulation %d rank %d: asking the trainer whether it took this simulation "
                "failed while it ran; its close asks again",
                self._simulation_id,
                self._rank,
                exc_info=True,
            )
        finally:
            self.ended.set()

    def _ask(self) -> bool | None:
        from melissa_trainer.client.admission import confirm_admitted

        try:
            entries = fetch_rendezvous(self._rendezvous, timeout=0.0)
        except (TimeoutError, OSError):
            return None  # (stopped, or being rewritten: the close decides)
        if not all(_answers_admission(e) for e in entries):
            return None
        answer = confirm_admitted(
            entries,
            self._endpoints,
            self._simulation_id,
            self.rejected,
            self._timeout,
            partial(describes, fields=self._fields, parameters=self._parameters),
            self._stop,
        )
        return None if answer is False else answer


def _answers_admission(entry: dict[str, Any]) -> bool:
    """Whether a rendezvous entry's follow socket answers ADMISSION_QUERY (one that
    lists no ``follow_kinds`` is asked, as the close asks it)."""
    from melissa_trainer.wire.layout import ADMISSION_QUERY

    kinds = entry.get("follow_kinds")
    return bool(entry.get("follow_endpoint")) and (
        not isinstance(kinds, list) or ADMISSION_QUERY in kinds
    )


#: how a refusal for the parameters' order begins, then the names as the HELLO lists them
_ORDER_HEAD = "HELLO lists its parameters in the order "


def describes(reason: str, fields: Sequence[FieldSpec], parameters: Sequence[str]) -> bool:
    """Whether `reason`, a receiver's refusal, is one a HELLO declaring `fields` and
    parameters named `parameters` (in the HELLO's order) gets (`stream.schema`'s words):
    a parameters difference that names them, an order of them not the study's (as
    listed), or a fields difference each part of which holds for
    `fields`. Anything else (another attempt's declaration, another run's HELLO, a
    reason cut short or of another kind) is not trusted (module docstring)."""
    names = sorted(parameters)
    if reason.startswith("HELLO carries no parameters"):
        return not names
    if reason.startswith("HELLO carries parameters "):
        return reason.startswith(f"HELLO carries parameters {names}, the study's are ")
    if reason.startswith(_ORDER_HEAD):  # (`stream.schema.parameters_order_difference`)
        return reason.startswith(f"{_ORDER_HEAD}{list(parameters)}, the study's first ")
    if not reason.startswith(_FIELDS_HEAD):
        return False
    mine = {f.name: f for f in fields}
    return all(_holds(part, mine) for part in reason[len(_FIELDS_HEAD) :].split("; "))


def _holds(part: str, mine: dict[str, FieldSpec]) -> bool:
    """Whether one part of a fields difference (`stream.schema.schema_difference`)
    holds for the fields declared, `mine`."""
    if part.startswith("fields in the order "):
        return part.startswith(f"fields in the order {list(mine)}, the study's are ")
    for name, spec in mine.items():
        if part == f"field {name!r} is not one of the study's":
            return True
        if part.startswith(f"field {name!r} is {spec.dtype} {spec.shape} where the study's is "):
            return True
        if part == f"field {name!r} is missing":
            return False
    return part.startswith("field ") and part.endswith(" is missing")
