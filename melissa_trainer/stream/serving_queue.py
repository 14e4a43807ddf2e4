"""`RequestQueue`: one training rank's bounded queue of prediction requests waiting for
the model, each stamped with the model version it entered at, and the serving counters
(docs/protocol.md, section 16). Socket- and torch-free: `PredictServer`
(`melissa_trainer.stream.serving`) queues into it from its I/O thread and from
in-process callers (`PredictServer.submit`), and sends the refusals; the training thread
drains it between steps (`melissa_trainer.hooks.serving.ServingHook`).

* Bounded: never more than `max_queue` requests wait; `offer` turns away the others
  (``busy``: back-pressure), and every request while nothing is served
  (``not_serving``: before the trainer's first step, after its last).
* Stamped: a request carries the version at which it entered the queue, set under the
  lock that also guards the version, so a request stamped at version v is queued
  before the version becomes v + 1 (the latency bound counts from there).
* Expired: `take` drops, unanswered, a request older than its client's timeout
  (counted ``expired``): its client has given up and fallen back.

Thread-safety: every method from any thread (one lock guards the queue, the version and
the counters). Nothing blocks but `wait_pending` (up to its timeout).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from melissa_trainer.common.words import plural
from melissa_trainer.wire import PredictRequest

__all__ = ["DEFAULT_MAX_QUEUE", "Deliver", "Pending", "RequestQueue", "ServingRefused"]

#: default bound on the requests waiting for the model, per rank
DEFAULT_MAX_QUEUE = 64
#: how an in-process request gets its answer: ``deliver(outputs, version, error)``
Deliver = Callable[[dict[str, np.ndarray] | None, int, str], None]


class ServingRefused(RuntimeError):
    """An in-process request refused (`reason`: ``busy`` or ``not_serving``)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass
class Pending:
    """A request waiting for the model: from a peer (`identity`) or in process (`deliver`)."""

    request: PredictRequest
    received: float  #: time.monotonic() at arrival
    version: int  #: the model version (global step) at arrival
    identity: bytes | None = None
    deliver: Deliver | None = field(default=None, repr=False)

    def expired(self, now: float) -> bool:
        timeout = self.request.timeout_ms
        return timeout > 0 and (now - self.received) * 1000 > timeout


class RequestQueue:
    """The requests waiting for the model, oldest first, and the counters (module
    docstring). `max_queue` (>= 1, checked by the caller): requests waiting at most."""

    def __init__(self, max_queue: int) -> None:
        self.max_queue = max_queue
        self._version = 0
        self._serving = False
        self._queue: collections.deque[Pending] = collections.deque()
        self._lock = threading.Lock()  # the queue, the version, the counters
        self._arrived = threading.Condition(self._lock)  # a request was queued
        self._counts: collections.Counter[str] = collections.Counter()
        # the timeouts (ms) of the requests expired or answered late since `late_timeouts`
        # last took them: the slow-serving warning names them (`hooks.serving_slow`)
        self._late_ms: collections.deque[int] = collections.deque(maxlen=1024)

    @property
    def version(self) -> int:
        """The model version now (the trainer's global step; set by the drainer, under
        the queue's lock: a request is stamped and queued under it too, so one stamped
        at version v is in the queue before the version becomes v + 1, and a drainer
        that sets the version and then looks at the queue sees it)."""
        return self._version

    @version.setter
    def version(self, value: int) -> None:
        with self._lock:
            self._version = int(value)

    @property
    def serving(self) -> bool:
        """Whether requests are queued (True) or turned away ``not_serving`` (False)."""
        return self._serving

    @serving.setter
    def serving(self, value: bool) -> None:
        self._serving = bool(value)

    def pending(self) -> int:
        """Requests waiting now."""
        return len(self._queue)

    def oldest_version(self) -> int | None:
        """The model version at which the oldest waiting request arrived (None: none
        waits). Requests are queued in arrival order, so it is the smallest."""
        with self._lock:
            return self._queue[0].version if self._queue else None

    def wait_pending(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a request to wait; True if one does."""
        with self._arrived:
            if not self._queue:
                self._arrived.wait(timeout)
            return bool(self._queue)

    def take(self, n: int) -> list[Pending]:
        """Up to `n` requests, oldest first; those older than their client's timeout
        are dropped on the way (counted ``expired``, unanswered)."""
        now = time.monotonic()
        out: list[Pending] = []
        with self._lock:
            while self._queue and len(out) < n:
                pending = self._queue.popleft()
                if pending.expired(now):
                    self._counts["expired"] += 1
                    self._late_ms.append(pending.request.timeout_ms)
                    continue
                out.append(pending)
        return out

    def drain(self) -> list[Pending]:
        """Every waiting request, expired or not, oldest first; the queue is then empty."""
        with self._lock:
            out = list(self._queue)
            self._queue.clear()
        return out

    def offer(self, *pending: Pending) -> tuple[str, str] | None:
        """Count `pending` (``requests``, one each) and queue them all, stamped with the
        version now; or, not serving or the queue without room for them all, queue none
        and return the refusal's (reason, detail), which the caller sends (and counts).
        All or none: an in-process batch refused ``busy`` partway had its first requests
        queued, to be run later for a caller told "busy" (a user's trial)."""
        with self._lock:
            self._counts["requests"] += len(pending)
            waiting = len(self._queue)
            if self._serving and waiting + len(pending) <= self.max_queue:
                for p in pending:
                    # (stamped here, not when it was read: a thread descheduled in between
                    # would queue it with an older version than the drainer's, past the bound)
                    p.version = self._version
                    self._queue.append(p)
                self._arrived.notify_all()  # (every waiter: the idle thread is one)
                return None
        if not self._serving:
            return "not_serving", "the trainer serves no model now (starting or stopping)"
        if len(pending) == 1:
            return "busy", f"{plural(self.max_queue, 'request waits', 'requests wait')} already"
        return "busy", (
            f"{waiting} of {plural(self.max_queue, 'place')} in the queue are taken: no room for a "
            f"batch of {len(pending)} (none of it was queued)"
        )

    def count(self, key: str, n: int = 1) -> None:
        """Add `n` to the counter `key`."""
        with self._lock:
            self._counts[key] += n

    def late(self, pending: Pending) -> None:
        """Count `pending` ``answered_late`` (answered past its client's timeout)."""
        with self._lock:
            self._counts["answered_late"] += 1
            self._late_ms.append(pending.request.timeout_ms)

    def late_timeouts(self) -> list[int]:
        """The timeouts (ms) of the requests expired or answered late since the last
        call (the most recent 1024), oldest first; then forgotten."""
        with self._lock:
            out = list(self._late_ms)
            self._late_ms.clear()
        return out

    def telemetry(self) -> dict[str, int]:
        """Counters: requests, answered (every reply sent), answered_late (of those,
        the replies sent past their client's timeout, which it no longer reads),
        expired, refused_<reason>, rejected_<reason>."""
        with self._lock:
            return dict(self._counts)
