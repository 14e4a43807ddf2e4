"""The checks of a `ServingHook`'s arguments at its construction (`check_serving`), each
error naming the ``ServingHook.`` field and the fix, as its other fields' do. A user
trial found `bind` unchecked (``"junk"``, a TCP endpoint without a port: training
failed 31 s later, with a traceback, once the receivers had started), `process_outputs`
unchecked (an int: the first served batch failed), and `max_queue`'s and an empty
`inputs`' messages without the field's name (the server's and the wire's words).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from melissa_trainer import wire as protocol
from melissa_trainer.stream.endpoints import bind_fault

__all__ = ["check_serving"]


def check_serving(
    inputs: Any, process_inputs: Any, process_outputs: Any, max_queue: Any, bind: Any
) -> None:
    """Raise ValueError naming the `ServingHook` field when one of these is not what
    its docstring says (``share``, ``max_batch``, ``max_latency_steps`` are checked
    where they are used: `ServingBudget`, `ServingHook.__init__`)."""
    if not isinstance(inputs, Mapping | list | tuple) or not inputs:
        raise ValueError(
            "ServingHook.inputs must declare at least one input, {name: (shape, dtype)} "
            f"as a request carries it (e.g. {{'u': ((64,), 'float32')}}), not {inputs!r}"
        )
    try:
        protocol.field_specs(inputs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"ServingHook.inputs: {exc}") from None
    for name, value in (("process_inputs", process_inputs), ("process_outputs", process_outputs)):
        if value is not None and not callable(value):
            raise ValueError(
                f"ServingHook.{name} must be a callable (a function, a lambda) or None for "
                f"the default, not {value!r}"
            )
    if not isinstance(max_queue, int) or isinstance(max_queue, bool) or max_queue < 1:
        raise ValueError(
            f"ServingHook.max_queue must be an integer >= 1 (requests waiting at most per "
            f"rank), not {max_queue!r}"
        )
    fault = None if bind is None else bind_fault(bind)
    if fault is not None:
        raise ValueError(
            f"ServingHook.bind must be {fault}; got {bind!r}: e.g. tcp://127.0.0.1:6000 (rank "
            "r binds port 6000 + r), tcp://*:* (every interface, a random port), or None "
            "(the receiver's interface, a random port)"
        )
