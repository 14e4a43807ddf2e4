"""`ReceiverConfig.bind` is checked where it is given (`receiver_address.bind_fault`): a
malformed endpoint raised ZeroMQ's bare "Invalid argument" only when the receiver bound."""

from __future__ import annotations

import pytest

from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("bind", "words"),
    [
        ("junk", "like tcp://HOST:PORT (or ipc://PATH)"),
        ("tcp://127.0.0.1", "it has no port"),
        ("tcp://127.0.0.1:99999", "PORT a number 0 to 65535 or *, not '99999'"),
        ("tcp://:5555", "HOST an address, an interface or *"),
        ("ipc://", "ipc:// needs a path"),
        (5555, "a string like tcp://HOST:PORT, not int"),
    ],
)
def test_a_malformed_bind_is_refused_at_construction_naming_the_field(
    bind: object, words: str
) -> None:
    with pytest.raises(ValueError) as info:
        ReceiverConfig(bind=bind)  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith("ReceiverConfig.bind must be "), message
    assert words in message, message
    assert repr(bind) in message, message  # the value given, named
    assert "tcp://127.0.0.1:*" in message, message  # an example of the fix


@pytest.mark.parametrize(
    "bind",
    ["tcp://127.0.0.1:*", "tcp://*:*", "tcp://0.0.0.0:5555", "tcp://[::1]:0", "ipc:///tmp/r"],
)
def test_well_formed_binds_are_taken(bind: str) -> None:
    assert ReceiverConfig(bind=bind).bind == bind
