"""The form of an endpoint a client connects to (`endpoint_fault`): the receivers'
(`config.resolve_receivers`: ``endpoints=``, ``$MELISSA_TRAINER_ENDPOINTS``) and a
serving one (`predict_lookup.checked_endpoint`). The C client checks the same rules in
the same words (clients/c/src/serve_given.c ``mt_endpoint_fault``;
tests/c/test_c_endpoints_parity.py, tests/c/test_c_serve_endpoint_form.py). Imports
nothing (a launched simulation pays for its imports at start-up).
"""

from __future__ import annotations

__all__ = ["RECEIVER_FORM", "SERVE_FORM", "endpoint_fault"]

#: the fix a receiver's endpoint of a bad form is given
RECEIVER_FORM = "give tcp://HOST:PORT (the trainer's rank_N.json)"
#: the fix a serving endpoint of a bad form is given
SERVE_FORM = "give tcp://HOST:PORT (the trainer's serve_N.json)"
QUOTES = ("'", '"')


def endpoint_fault(endpoint: object, form: str = SERVE_FORM) -> str | None:
    """What is wrong with the form of `endpoint`, one to connect to ("endpoint 'X' has
    no port: " then `form`, the fix), or None: ``tcp://[SOURCE;]HOST:PORT`` (HOST a
    name, an address or a bracketed IPv6 one, not ``*``; PORT 1 to 65535 in ASCII
    digits, leading zeros allowed as ``int`` allows them), ``ipc://PATH`` or
    ``inproc://NAME``; other transports are ZeroMQ's to judge (at the connect). Not
    `receiver_address.bind_fault`: a bind takes ``*`` and port 0, a connection neither. A quote
    mark at its start or end is refused: a shell's or a batch script's quoting left in
    the value (``MELISSA_TRAINER_ENDPOINTS='"tcp://h:5555"'``), which ZeroMQ would call
    an unknown protocol. Before, ``tcp://127.0.0.1`` got only libzmq's "Invalid
    argument", and ``tcp://host:55x`` connected to port 55 (libzmq's atoi)."""
    if not isinstance(endpoint, str):
        return f"endpoint {endpoint!r} is not a string: {form}"
    if endpoint.startswith(QUOTES) or endpoint.endswith(QUOTES):
        return (
            f"endpoint {endpoint!r} has a quote mark at its start or end (a shell's or a "
            f"batch script's quoting left in the value): {form}"
        )
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        return f"endpoint {endpoint!r} is not like tcp://HOST:PORT: {form}"
    what = None
    if scheme == "tcp":
        rest = rest.rpartition(";")[2]  # (a source address before it)
        host, colon, port = rest.rpartition(":")
        if not colon or "]" in port or not port:
            what = "has no host and no port" if not rest else "has no port"
        elif not host or host == "*":
            what = "has no host" if not host else "has a host * (a bind's, not a connection's)"
        elif not (port.isascii() and port.isdigit() and 0 < int(port) <= 65535):
            what = "has a port that is not a number 1 to 65535"
    elif scheme in ("ipc", "inproc") and not rest:
        what, form = ("has no path", "give ipc://PATH") if scheme == "ipc" else (
            "has no name", "give inproc://NAME")  # fmt: skip
    return None if what is None else f"endpoint {endpoint!r} {what}: {form}"
