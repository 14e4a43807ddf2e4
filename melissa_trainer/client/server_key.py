"""`check_server_key`: a CURVE server key given to a client as an argument
(``Client(curve_server_key=...)``), checked before anything connects: a wrong one is
otherwise known only when the receiver refuses the handshake, or never (a key that is
not Z85 at all makes libzmq raise a bare "Invalid argument" at the socket option);
`Predictor(curve_server_key=...)` is checked alike, and against its serve file's key.
Imports the package's `ConfigError` only."""

from __future__ import annotations

from melissa_trainer.config.reading import ConfigError

__all__ = ["Z85_ALPHABET", "check_server_key", "not_the_served_key", "z85_fault"]

#: the characters of a Z85 key, in the order of their values (ZeroMQ's RFC 32)
Z85_ALPHABET = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)


def check_server_key(key: object, name: str = "curve_server_key") -> str:
    """`key` (a str, or the bytes `zmq.curve_keypair` gives) as the receivers'
    40-character Z85 CURVE public key, checked: 40 characters of the Z85 alphabet, each
    5 of them a 32-bit word.

    Raises:
        ConfigError: (a ValueError) naming `name`, what is wrong and where the key is.
    """
    text = key.decode("ascii", "replace") if isinstance(key, bytes) else key
    if not isinstance(text, str):
        wrong: str | None = f"a str (or bytes), not {type(key).__name__}"
    else:
        wrong = z85_fault(text)
    if wrong is None:
        return str(text)
    raise ConfigError(
        f"{name}={key!r} must be {wrong}: the trainer's CURVE public key in Z85, as its "
        "rendezvous files publish it (curve_public_key in rank_N.json) or "
        "zmq.curve_keypair()[0] gives it; or None for receivers without CURVE"
    )


def not_the_served_key(key: str, published: object, serve_file: str) -> ConfigError:
    """The error of a `Predictor`'s ``curve_server_key`` that is not the key its serve
    file `serve_file` publishes (`published`; None: it serves plain connections): the
    serve file gives the running trainer's key, as the rendezvous does to a `Client`
    (`config.resolve_receivers`: the same rule, in the same words)."""
    return ConfigError(
        f"curve_server_key={key!r} is not the key the serve file {serve_file} publishes "
        f"({published}; None: it serves plain connections): the serve file gives the "
        "running trainer's key, so drop curve_server_key= (or pass endpoint= for a serving "
        "socket that takes this key)"
    )


def z85_fault(text: str) -> str | None:
    """What `text` must be and is not to be a 40-character Z85 CURVE key (None: it is
    one): the words of `check_server_key` and of the env key's check (`config`), which
    the C client's (clients/c/src/z85.c mt_z85_fault) says alike."""
    if len(text) != 40:
        return f"40 characters, not {len(text)}"
    if set(text) - set(Z85_ALPHABET):
        return f"Z85 characters only, not {''.join(sorted(set(text) - set(Z85_ALPHABET)))!r}"
    if any(_word(text[i : i + 5]) >= 2**32 for i in range(0, 40, 5)):
        return "Z85 (each 5 characters encode a 32-bit word)"
    return None


def _word(chars: str) -> int:
    """The number 5 Z85 characters encode (base 85, the most significant first)."""
    value = 0
    for char in chars:
        value = value * 85 + Z85_ALPHABET.index(char)
    return value
