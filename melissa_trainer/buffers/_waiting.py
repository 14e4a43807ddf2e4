"""The slow paths of :class:`~melissa_trainer.buffers.Buffer`: a ``put`` or a read that
has to wait.

Both sleep on a condition of the buffer's lock and are woken only by an event that can
unblock them. Liveness under a rate limiter: a ``put`` waiting for room lets reads go
past the limiter, and a read waiting for more samples lets inserts go past it
(`_n_room_blocked`, `_n_size_blocked`), so a waiting producer and a waiting consumer
never wait for each other forever.
"""

from __future__ import annotations

import time

from ._common import BufferClosedError
from ._core import NO_WAITER, BufferCore

__all__ = ["WaitingMixin"]


class WaitingMixin(BufferCore):
    """`_wait_writable` and `_wait_readable`, called by `Buffer` with the lock held."""

    def _wait_writable(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        lim = self._limiter
        room_blocked = False
        self._n_put_waiting += 1
        try:
            while True:
                if self._closed:
                    raise BufferClosedError("buffer closed while put() was waiting")
                no_room = not self._has_room()
                if no_room != room_blocked:
                    room_blocked = no_room
                    if no_room:
                        self._n_room_blocked += 1
                        # a read held back by the limiter may now go ahead (liveness)
                        if self._get_needs:
                            self._readable.notify_all()
                    else:
                        self._n_room_blocked -= 1
                if not no_room and (lim is None or self._n_size_blocked or lim.can_insert()):
                    return
                if deadline is None:
                    self._writable.wait()
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        why = "buffer full" if no_room else "rate limiter holds inserts back"
                        raise TimeoutError(
                            f"put() timed out after {timeout}s ({why}; "
                            f"{self._size()}/{self._capacity} samples held)"
                        )
                    self._writable.wait(remaining)
        finally:
            self._n_put_waiting -= 1
            if room_blocked:
                self._n_room_blocked -= 1

    def _wait_readable(self, n: int, need: int, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        lim = self._limiter
        size_blocked = False
        self._get_needs.append(need)
        if need < self._wake_len:
            self._wake_len = need
        try:
            while not self._closed:
                too_few = self._size() < need
                if too_few != size_blocked:
                    size_blocked = too_few
                    if too_few:
                        self._n_size_blocked += 1
                        # an insert held back by the limiter may now go ahead (liveness)
                        if self._n_put_waiting:
                            self._writable.notify_all()
                    else:
                        self._n_size_blocked -= 1
                if not too_few and (lim is None or self._n_room_blocked or lim.can_sample(n)):
                    return
                if deadline is None:
                    self._readable.wait()
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        why = (
                            f"{self._size()} samples held, {need} needed"
                            if too_few
                            else "rate limiter holds reads back"
                        )
                        raise TimeoutError(
                            f"get_batch({n}) timed out after {timeout}s: no data yet ({why})"
                        )
                    self._readable.wait(remaining)
        finally:
            if size_blocked:
                self._n_size_blocked -= 1
            self._get_needs.remove(need)
            self._wake_len = min(self._get_needs) if self._get_needs else NO_WAITER
