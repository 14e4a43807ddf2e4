"""An in-process prediction from a thread other than the training thread (an adaptive
sampler's: `serving_in_process.queued`, what `ServingHook.predict` does there) with a
long timeout is answered, as a simulation's `Predictor.predict` is, and a NaN,
infinite, zero or negative timeout is a ValueError naming it, before anything is
queued; so is a batch of more requests than the rank's queue holds; and, from either
thread, inputs that are not ``{name: array}`` are a TypeError naming the fix.

Found in a user trial (hserve, 2026-12-05): a timeout of 1e10 s raised OverflowError
from `threading`'s wait (the request left queued), 1e308 s OverflowError "cannot convert
float infinity to integer" (its milliseconds), NaN a bare ValueError "cannot convert
float NaN to integer", infinity an OverflowError. Failed before: 6 of 7 (None passed).
Later (hserve2, 2026-12-06): 0 and -1 s queued a request and raised TimeoutError "no
training step ended within -1.0 s" (a Predictor refuses them: ValueError); failed before.

A real `PredictServer` (its queue) whose requests a thread answers (``y = 2 u +
VERSION``, `predict_server.drain`)."""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from predict_server import INPUTS, VERSION, drain
from serving_parts import train_asking

from melissa_trainer import Hook, ServingHook
from melissa_trainer.hooks.serving_in_process import queued
from melissa_trainer.stream.serving import PredictServer

pytestmark = pytest.mark.timeout(60)

U = np.array([0.0, 1.0, 2.0, 3.0], np.float32)


@pytest.fixture
def server() -> Iterator[PredictServer]:
    srv = PredictServer(INPUTS)
    srv.start()
    srv.serving = True
    stop = threading.Event()
    thread = drain(srv, stop)
    try:
        yield srv
    finally:
        stop.set()
        thread.join()
        srv.stop()


@pytest.mark.parametrize(
    "timeout", [1e10, 1e306, sys.float_info.max, None], ids=["1e10-s", "1e306-s", "max", "None"]
)
def test_a_long_timeout_is_answered(server: PredictServer, timeout: float | None) -> None:
    (outputs,), version = queued(server, [{"u": U}], timeout)
    assert version == VERSION
    np.testing.assert_array_equal(outputs["y"], 2 * U + VERSION)


@pytest.mark.parametrize(
    "timeout", [math.nan, math.inf, -math.inf, 0.0, -1.0], ids=["nan", "inf", "-inf", "0", "-1"]
)
def test_a_timeout_that_is_not_finite_is_a_value_error(
    server: PredictServer, timeout: float
) -> None:
    with pytest.raises(ValueError) as raised:
        queued(server, [{"u": U}], timeout)
    text = str(raised.value)
    assert text.startswith("timeout must be a finite number of seconds > 0, or None"), text
    assert server.telemetry().get("requests", 0) == 0, server.telemetry()  # nothing queued


def test_a_batch_larger_than_the_queue_is_refused_before_anything_is_queued() -> None:
    """(Before: the first `max_queue` requests were queued, run for no one, and the batch
    refused "busy: 4 requests wait already", its own; failed before.)"""
    srv = PredictServer(INPUTS, max_queue=4)
    srv.start()
    srv.serving = True
    stop = threading.Event()
    thread = drain(srv, stop)
    try:
        with pytest.raises(ValueError) as raised:
            queued(srv, [{"u": U}] * 5, 30)
        text = str(raised.value)
        assert "5 requests from a thread other than the training thread" in text, text
        assert "(max_queue=4): ask in batches of at most 4" in text, text
        assert srv.telemetry().get("requests", 0) == 0, srv.telemetry()
        outputs, version = queued(srv, [{"u": U}] * 4, 30)  # as many as it holds: answered
        assert version == VERSION and len(outputs) == 4
    finally:
        stop.set()
        thread.join()
        srv.stop()


class BareAsker(Hook):
    """At step 2, asks from the training thread and from another thread with what is
    not ``{name: array}``; records what each got."""

    def __init__(self, serving: ServingHook) -> None:
        self.serving = serving
        self.got: dict[str, Any] = {}

    def _ask(self, key: str, call: Callable[[], Any]) -> None:
        try:
            self.got[key] = call()
        except Exception as exc:  # (the result under test)
            self.got[key] = exc

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step != 2:
            return
        x = np.ones(3, np.float32)
        calls: dict[str, Callable[[], Any]] = {
            "bare": lambda: self.serving.predict(x, timeout=60),  # type: ignore[arg-type]
            "one-dict": lambda: self.serving.predict_batch({"x": x}, timeout=60),  # type: ignore[arg-type]
            "list-of-arrays": lambda: self.serving.predict_batch([x], timeout=60),  # type: ignore[list-item]
        }
        for name, call in calls.items():
            self._ask(f"hook {name}", call)
            thread = threading.Thread(target=self._ask, args=(f"thread {name}", call))
            thread.start()
            thread.join(60)  # (refused before it is queued: no step end needed)


def test_inputs_that_are_not_mappings_are_a_type_error_naming_the_fix(tmp_path: Path) -> None:
    """(Before: AttributeError "'numpy.ndarray' object has no attribute 'items'", "'str'
    object ...": failed before.)"""
    asker = train_asking(tmp_path / "out", BareAsker)
    assert len(asker.got) == 6, asker.got
    for key, got in asker.got.items():
        assert isinstance(got, TypeError), (key, got)
        if key.endswith("one-dict"):
            assert "samples must be a list of {name: array} mappings" in str(got), (key, got)
        else:
            assert "inputs must be a mapping of input names to arrays, not ndarray" in str(got), (
                key,
                got,
            )


class EmptyAsker(BareAsker):
    """At step 2, asks `predict_batch([])` from the training thread and from another."""

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step != 2:
            return

        def call() -> Any:
            return self.serving.predict_batch([], timeout=60)

        self._ask("hook", call)
        thread = threading.Thread(target=self._ask, args=("thread", call))
        thread.start()
        thread.join(60)  # (answered at once: no step end needed)


def test_an_empty_batch_is_answered_with_no_outputs(tmp_path: Path) -> None:
    """A sampler with no candidate left asks for none: an empty list, the version now.
    (Before: IndexError "list index out of range" on the training thread, ValueError
    "max() arg is an empty sequence" from another: failed before; hserve2's trial.)"""
    asker = train_asking(tmp_path / "out", EmptyAsker)
    assert set(asker.got) == {"hook", "thread"}, asker.got
    for key, got in asker.got.items():
        assert not isinstance(got, Exception), (key, got)
        outputs, version = got
        assert (outputs, version) == ([], 2), (key, got)
