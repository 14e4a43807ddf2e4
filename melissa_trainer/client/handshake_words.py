"""The handshake's words: what a client says of a peer that refused, or never
completed, its data socket's ZeroMQ handshake, and the fix (`handshake.Handshakes`).
The C client says the same, word for word (clients/c/src/handshake.c; the tests compare
them)."""

from __future__ import annotations

__all__ = ["MISMATCH", "NOT_RECEIVER", "NOT_RECEIVER_DROPS", "NO_KEY", "PLAIN", "UNDETAILED_PLAIN"]

#: the cause and the fix of a refused key, as the C client words them
MISMATCH = "the server key does not match: check MELISSA_TRAINER_KEY / the rendezvous file"
#: why a receiver without CURVE refused a client with a key, and the fix (the C client's
#: words too)
PLAIN = (
    "the receiver takes plain (unencrypted) connections and this client has a CURVE key "
    "for it: unset MELISSA_TRAINER_KEY (or check the endpoint / the rendezvous file if "
    "that receiver should use CURVE)"
)
#: what a key refused without a detail may also be: a receiver without CURVE whose
#: mechanism mismatch lost its detail (it closes on reading the greeting, before its own
#: is flushed: seen under load); the C client's words too
UNDETAILED_PLAIN = "the receiver takes plain (unencrypted) connections: unset MELISSA_TRAINER_KEY"
#: what a peer that accepted TCP but never completed a ZeroMQ handshake is (another
#: program: an HTTP server), and the fix; or a trainer whose process is stopped, silent
#: until continued (tests/launcher/test_pause.py). The C client's words too
NOT_RECEIVER = (
    "not a melissa-trainer receiver (it accepted a TCP connection but no ZeroMQ handshake "
    "completed): check the endpoint (the trainer's rank_N.json); unless it is a trainer "
    "whose process is stopped (SIGSTOP, a suspended job), which answers once continued"
)
#: what a peer that ended every ZeroMQ handshake without a detail is, to a client
#: without a CURVE key, and the fixes: another program (an HTTP server answering junk),
#: or a CURVE-only receiver, whose mechanism mismatch (a detail) is lost when it closes
#: before its greeting is flushed (libzmq 4.3.4, under load: tests/c/
#: test_c_curve_mismatch.py). The C client's words too.
NOT_RECEIVER_DROPS = (
    "not a melissa-trainer receiver, or a receiver that takes CURVE (encrypted) connections "
    "only (it accepted TCP connections but ended every ZeroMQ handshake without completing "
    "one): check the endpoint (the trainer's rank_N.json); if it is a receiver, no CURVE "
    "key is known for it here: set MELISSA_TRAINER_KEY to its public key, or use the "
    "rendezvous (MELISSA_TRAINER_RENDEZVOUS: its files carry the key); nothing sent to it "
    "was delivered"
)
#: why a CURVE-only receiver refused a client without a key, and the fix
NO_KEY = (
    "it takes CURVE (encrypted) connections only, and no CURVE key is known for it here: "
    "set MELISSA_TRAINER_KEY to its public key, or use the rendezvous "
    "(MELISSA_TRAINER_RENDEZVOUS: its files carry the key)"
)
