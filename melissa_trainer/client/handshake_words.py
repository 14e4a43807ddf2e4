"""The handshake's words: what a client says of a peer that refused, or never
completed, its data socket's ZeroMQ handshake, and the fix (`handshake.Handshakes`).
The C client says the same, word for word (clients/c/src/handshake.c; the tests compare
them)."""

from __future__ import annotations

__all__ = [
    "ARGUMENT",
    "ENV",
    "KEYED",
    "MISMATCH",
    "MISMATCH_GIVEN",
    "MISMATCH_RENDEZVOUS",
    "NOT_RECEIVER",
    "NOT_RECEIVER_DROPS",
    "NO_KEY",
    "PLAIN",
    "PLAIN_GIVEN",
    "PLAIN_RENDEZVOUS",
    "RENDEZVOUS",
    "UNDETAILED_PLAIN",
    "UNDETAILED_PLAIN_GIVEN",
    "UNDETAILED_PLAIN_RENDEZVOUS",
]

#: where a client's CURVE key came from (`KEYED`): an argument (``Client(
#: curve_server_key=...)``, C ``mt_set_curve_server_key``), ``MELISSA_TRAINER_KEY``, or
#: the rendezvous file of the receiver (its ``curve_public_key``)
ARGUMENT, ENV, RENDEZVOUS = "argument", "env", "rendezvous"

#: the cause and the fix of a refused key, as the C client words them: a key of
#: MELISSA_TRAINER_KEY (`MISMATCH_GIVEN`, `MISMATCH_RENDEZVOUS`: the other sources')
MISMATCH = "the server key does not match: check MELISSA_TRAINER_KEY / the rendezvous file"
MISMATCH_GIVEN = "the server key does not match: check the curve_server_key given"
MISMATCH_RENDEZVOUS = "the server key does not match: check the rendezvous file"
#: why a receiver without CURVE refused a client with a key, and the fix (the C client's
#: words too): a key of MELISSA_TRAINER_KEY; `PLAIN_GIVEN`, `PLAIN_RENDEZVOUS`: of the
#: other sources
PLAIN = (
    "the receiver takes plain (unencrypted) connections and this client has a CURVE key "
    "for it: unset MELISSA_TRAINER_KEY (or check the endpoint / the rendezvous file if "
    "that receiver should use CURVE)"
)
PLAIN_GIVEN = (
    "the receiver takes plain (unencrypted) connections and this client has a CURVE key "
    "for it: drop the curve_server_key given (or check the endpoint if that receiver "
    "should use CURVE)"
)
PLAIN_RENDEZVOUS = (
    "the receiver takes plain (unencrypted) connections and this client has a CURVE key "
    "for it, the curve_public_key of its rendezvous file: check the rendezvous file (a "
    "stale one?) and the endpoint"
)
#: what a key refused without a detail may also be: a receiver without CURVE whose
#: mechanism mismatch lost its detail (it closes on reading the greeting, before its own
#: is flushed: seen under load); the C client's words too. By the key's source, as
#: `PLAIN`
UNDETAILED_PLAIN = "the receiver takes plain (unencrypted) connections: unset MELISSA_TRAINER_KEY"
UNDETAILED_PLAIN_GIVEN = (
    "the receiver takes plain (unencrypted) connections: drop the curve_server_key given"
)
UNDETAILED_PLAIN_RENDEZVOUS = (
    "the receiver takes plain (unencrypted) connections: check the rendezvous file (a stale one?)"
)
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

#: by the key's source (`ARGUMENT`, `ENV`, `RENDEZVOUS`), the words of a key refused:
#: not the receiver's (`MISMATCH`), for a receiver without CURVE (`PLAIN`), and what a
#: refusal without detail adds (`UNDETAILED_PLAIN`); handshake.c's `KEYED`, alike
KEYED = {
    ARGUMENT: (MISMATCH_GIVEN, PLAIN_GIVEN, UNDETAILED_PLAIN_GIVEN),
    ENV: (MISMATCH, PLAIN, UNDETAILED_PLAIN),
    RENDEZVOUS: (MISMATCH_RENDEZVOUS, PLAIN_RENDEZVOUS, UNDETAILED_PLAIN_RENDEZVOUS),
}
