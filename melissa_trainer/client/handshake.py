"""Whether each receiver accepted the handshake of the client's data socket.

ZeroMQ reports a refused handshake only to a socket monitor: with a CURVE key the
receiver does not hold (another receiver's, a stale rendezvous file's) it reconnects for
ever, each attempt closed by the server mid-handshake (``HANDSHAKE_FAILED_NO_DETAIL``);
with a key for a receiver without CURVE, or none for one with it, it gives the
connection up (``HANDSHAKE_FAILED_PROTOCOL``) and drops what was queued. Either way
nothing reaches the trainer, and a close learnt it only from its timeout, naming no
cause. `Handshakes` monitors each data socket from before it connects (a refusal may
come at once, and only once) so that `Transport.close` says which receiver refused and
what to fix, as the C client does (clients/c/src/handshake.c). As the serving socket
(`melissa_trainer.client.predict`): a failure without detail counts as a refusal when it
comes twice in a row (once may be a receiver that stopped mid-handshake).

Not one that ends a silent connection: libzmq ends a handshake its peer never answers
after ``ZMQ_HANDSHAKE_IVL`` (30 s) without a detail too: two (a minute) were a refused
key against a silent peer (``python -m http.server``) or a stopped trainer's receiver
(SIGSTOP: it delivers once continued). A receiver refuses a key in milliseconds, so a
failure that may end a connection `timeout_bound` s old (2 s, less for a shorter
``ZMQ_HANDSHAKE_IVL``) is not counted (`NOT_RECEIVER` and the waits apply; the serving
socket's `predict_link` too). Limits: events carry no time and may be read late (a send
after a computation): a connection began after the last read that found the monitor
empty before its CONNECTED, ended before the read of its failure, and each failure let
off puts later events the bound later; so at most one per bound is let off: a key
refused at each reconnection (RECONNECT_IVL, 100 ms) still is.

ZeroMQ allows one monitor per socket (a second ``zmq_socket_monitor`` replaces the
first, and the first reader hears nothing more), so this is the one reader of each data
socket's monitor: it also keeps since when each connection is down (`down_since`), which
the waits of a blocked send (`send_wait`) and of a close (`peer_watch.PeerWatch`) read;
an event read by one is thus known to all. It is read by a wait that ran out of a slice,
and by a send that does not block at most every `send_wait.LOOK_EVERY` seconds (a
comparison of a clock it reads anyway: `benchmarks/client_send.py` measures it).

Not thread-safe: used by the client's thread only (its sends' waits and its close;
the outbox's flusher thread never reads it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import zmq

from melissa_trainer.client.handshake_events import HandshakeEvents
from melissa_trainer.client.handshake_timing import NOT_ZMQ_AFTER, REPEAT_AFTER
from melissa_trainer.client.handshake_words import NO_KEY, NOT_RECEIVER, NOT_RECEIVER_DROPS

__all__ = ["Handshakes"]


class Handshakes(HandshakeEvents):
    """The handshake outcome and the connection state of each data socket, from a
    monitor set up before it connects (`watch`, in connection order; module docstring):
    what the events read say (`HandshakeEvents`), in words, and the waits for them.
    """

    def refused(self, endpoints: Sequence[str]) -> str | None:
        """Why a receiver refused its handshake ("to ENDPOINT: ..."), or None (events
        read without blocking). `endpoints`: the sockets' endpoints, in order."""
        self.warn(endpoints)
        for index, endpoint in enumerate(endpoints[: len(self._monitors)]):
            self._read(index)
            refusal = self._refusal[index]
            if refusal is None:
                continue
            if not self._keyed[index] and refusal[0] == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                # (a peer that ends every handshake without a detail, and never completed
                # one (`_read`: else no refusal), is another program, an HTTP server
                # answering junk, or a CURVE-only receiver whose mechanism mismatch was
                # lost: `NOT_RECEIVER_DROPS` names both)
                return f"to {endpoint}: {NOT_RECEIVER_DROPS}"
            mismatch, plain, undetailed_plain = self._keyed_words  # (named the key's source)
            if not self._keyed[index]:
                cause = NO_KEY
            elif refusal == (
                zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
                zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH,
            ):
                cause = plain
            else:  # (without detail, it may be a plain receiver's lost mismatch too)
                cause = (
                    f"{mismatch} (the receiver's curve_public_key, that of the trainer running now)"
                )
                if refusal[0] == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                    cause += f"; or {undetailed_plain}"
            return (
                f"to {endpoint}: the receiver refused this client's handshake, nothing sent "
                f"to it was delivered: {cause}"
            )
        return None

    def never_connected(self, endpoints: Sequence[str]) -> list[str]:
        """The `endpoints` (the sockets', in order) no connection of which was ever
        accepted, as the events read (without blocking; kept after `close`) say: a wrong
        endpoint, or no trainer started. Not inproc ones: a monitor reports none."""
        self.read()
        watched = zip(endpoints, self._ever, strict=False)  # (a connect failed part-way: fewer)
        return [e for e, ever in watched if not ever and not e.startswith("inproc:")]

    def not_receivers(self, endpoints: Sequence[str]) -> list[str]:
        """The `endpoints` (the sockets', in order) whose peer accepted a TCP connection
        `NOT_ZMQ_AFTER` seconds ago or more, never completed a ZeroMQ handshake, and whose
        connection is up now (events read without blocking; kept after `close`): not a
        receiver (`NOT_RECEIVER`). Not one whose connection closed since: a trainer
        killed between its kernel's accept and its handshake, its port refusing now
        (tests/client/test_handshake_peer_gone.py)."""
        self.read()
        now, found = time.monotonic(), []
        for index, endpoint in enumerate(endpoints[: len(self._tcp_at)]):
            tcp_at, up = self._tcp_at[index], self.down_since[index] is None
            silent = not self._zmtp[index] and tcp_at is not None and up
            if silent and tcp_at is not None and now - tcp_at >= NOT_ZMQ_AFTER:
                found.append(endpoint)
        return found

    def pending(self, endpoints: Sequence[str]) -> list[tuple[str, float]]:
        """The `endpoints` (the sockets', in order) whose peer accepted a TCP connection
        less than `NOT_ZMQ_AFTER` seconds ago, is connected now, and never completed a
        ZeroMQ handshake, each with the seconds since the client connected its socket
        (events read without blocking): not known yet to be `not_receivers`. (Since
        the client's connect, not the TCP connection's: its event, read only now and
        then, carries no time.)"""
        self.read()
        now, found = time.monotonic(), []
        for index, endpoint in enumerate(endpoints[: len(self._tcp_at)]):
            tcp_at = self._tcp_at[index]
            if self._zmtp[index] or tcp_at is None or self.down_since[index] is not None:
                continue
            if now - tcp_at < NOT_ZMQ_AFTER:
                found.append((endpoint, now - self._watched_at[index]))
        return found

    def warn(self, endpoints: Sequence[str]) -> None:
        """Log that a socket's peer is not a receiver (`not_receivers`) when first seen,
        and how long it is silent at `REPEAT_AFTER` s and each doubling: said by the
        waits that read the monitors (`refused`, each slice) and by the sends that do not
        block (`SendWait.look`). The wait goes on (`wait`: a stopped trainer is silent)."""
        now = time.monotonic()
        for endpoint in self.not_receivers(endpoints):
            index = list(endpoints).index(endpoint)
            silent, due = now - (self._tcp_at[index] or now), self._warn_due[index]
            if silent < due:
                continue
            self._warn_due[index] = max(REPEAT_AFTER, 2 * silent)
            import logging  # (as `closing.client_logger`: on the rare path only)

            still = f"still no ZeroMQ handshake {silent:.0f} s after TCP connected: " if due else ""
            logging.getLogger("melissa_trainer.client.client").warning(
                "%sto %s: %s%s; nothing sent to it is delivered%s", self._whose, endpoint, still,
                NOT_RECEIVER, "; waiting on until send_timeout or close_timeout" if due else "",
            )  # fmt: skip

    def await_outcomes(self, endpoints: Sequence[str], deadline: float | None) -> None:
        """Wait until the monitor of each socket has reported the outcome of its first
        connect: a connection (TCP accepted: ``CONNECTED``) or a failure (refused, or
        abandoned after ZMQ_CONNECT_TIMEOUT: down, `down_since`), or `deadline` passed
        (`time.monotonic()`; None: no bound). Returns at once, after one read that never
        blocks, when every outcome is known (a client that sent, or whose receiver
        answered, long before). `endpoints`: the sockets', in order; inproc ones are not
        waited for (a monitor reports none).

        Why: a close after a failure does not wait for a receiver not connected
        (`patience.CloseWait.not_connected`); read right after the client connected, a
        refusal not reported yet made it wait for a handshake that could not come, its
        whole ``failed_close_timeout`` (tests/client/test_failed_close_first_outcome.py)."""
        poller: zmq.Poller | None = None
        while True:
            self.read()
            known = zip(endpoints, self._ever, self.down_since, strict=False)
            if all(ever or down is not None or e.startswith("inproc:") for e, ever, down in known):
                return
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return
            if poller is None:
                poller = zmq.Poller()
                for monitor in self._monitors:
                    poller.register(monitor, zmq.POLLIN)
            poller.poll(int(min(left, 1.0) * 1000) + 1)

    def wait(
        self, endpoints: Sequence[str], deadline: float | None, down_ends: bool = False
    ) -> str | None:
        """Wait until every receiver accepted its handshake (None), one refused it (why,
        as `refused`: a peer that ends every handshake is said not a receiver at once),
        or `deadline` passed (None, and `accepted` is false); with `down_ends` (a close
        after a failure, which waits for no receiver disconnected), also once one is
        down (None, `down_since`: its caller says why). A peer that accepted TCP
        and is silent (`not_receivers`, said by time alone) is waited for: a receiver
        whose trainer is stopped (SIGSTOP, a suspended job) is silent too, and delivers
        everything once continued (tests/launcher/test_pause.py)."""
        poller = zmq.Poller()
        for monitor in self._monitors:
            poller.register(monitor, zmq.POLLIN)
        while True:
            why = self.refused(endpoints)
            if why is not None or all(self._accepted):
                return why
            if down_ends and any(since is not None for since in self.down_since):
                return None
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return None
            poller.poll(int(min(left, NOT_ZMQ_AFTER / 4, 1.0) * 1000) + 1)
