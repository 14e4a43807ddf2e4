"""`ServingHook`'s arguments checked at construction, each error naming the
``ServingHook.`` field and the fix (a user trial, finding F5): before, ``bind="junk"``
and a TCP bind without a port were accepted and training died 31 s later, with a
traceback, at the socket's bind; ``process_outputs=3`` was accepted; ``max_queue=0``
and ``inputs={}`` said "max_queue must be ..." and "declare at least one field"."""

from __future__ import annotations

from typing import Any

import pytest

from melissa_trainer.hooks.serving import ServingHook

pytestmark = pytest.mark.timeout(60)

_INPUTS = {"u": ((4,), "float32")}


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        (
            {"bind": "junk"},
            "ServingHook.bind must be like tcp://HOST:PORT (or ipc://PATH); got 'junk'",
        ),
        (
            {"bind": "tcp://127.0.0.1"},
            "ServingHook.bind must be like tcp://HOST:PORT: it has no port",
        ),
        ({"bind": "tcp://h:70000"}, "PORT a number 0 to 65535 or *, not '70000'"),
        ({"bind": "tcp://:6000"}, "HOST an address, an interface or *, not ''"),
        ({"bind": 6000}, "ServingHook.bind must be a string like tcp://HOST:PORT, not int"),
        ({"process_outputs": 3}, "ServingHook.process_outputs must be a callable"),
        ({"process_inputs": "u"}, "ServingHook.process_inputs must be a callable"),
        ({"max_queue": 0}, "ServingHook.max_queue must be an integer >= 1"),
        ({"inputs": {}}, "ServingHook.inputs must declare at least one input"),
        ({"inputs": 5}, "ServingHook.inputs must declare at least one input"),
        ({"inputs": {"u": ((4,), "flaot32")}}, "ServingHook.inputs: field 'u': 'flaot32'"),
    ],
)
def test_a_bad_argument_names_its_field(kwargs: dict[str, Any], said: str) -> None:
    args: dict[str, Any] = {"inputs": _INPUTS, **kwargs}
    with pytest.raises(ValueError) as raised:
        ServingHook(**args)
    assert said in str(raised.value), raised.value


def test_the_bind_error_gives_the_fix() -> None:
    with pytest.raises(ValueError) as raised:
        ServingHook(_INPUTS, bind="tcp://127.0.0.1")
    assert "e.g. tcp://127.0.0.1:6000" in str(raised.value)


@pytest.mark.parametrize(
    "bind",
    ["tcp://127.0.0.1:*", "tcp://*:*", "tcp://0.0.0.0:6000", "tcp://[::1]:0", "ipc:///tmp/s"],
)
def test_good_binds_are_taken(bind: str) -> None:
    from melissa_trainer.stream.receiver_address import bind_fault

    assert bind_fault(bind) is None
    ServingHook(_INPUTS, bind=bind, process_outputs=lambda y: {"y": y}, max_queue=1)
