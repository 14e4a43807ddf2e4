"""An in-process prediction (`ServingHook.predict`, from a hook or from another thread)
whose inputs hold NaN or Inf is refused as a simulation's request is, under the
serving's ``nonfinite`` policy (`serving_requests.arrays_problem`): `ValueError` with
the same detail, naming the input and the policy; served under ``"accept"``.

Before: a hook's or a sampler's request was served whatever the policy, and answered
NaN (only the network's requests were checked)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from predict_server import INPUTS as SERVER_INPUTS
from predict_server import VERSION, drain
from serving_parts import train_asking

from melissa_trainer import Hook, ServingHook
from melissa_trainer.hooks.serving_in_process import queued
from melissa_trainer.stream.serving import PredictServer

pytestmark = pytest.mark.timeout(120)

DETAIL = (
    "nonfinite: input 'x' holds NaN or Inf; this trainer refuses such requests "
    "(its nonfinite='refuse'; nonfinite='accept' serves them)"
)


class NaNAsker(Hook):
    """At step 2, asks with a NaN input from the training thread and from another
    thread, then a finite one from the training thread; records what each got."""

    def __init__(self, serving: ServingHook) -> None:
        self.serving = serving
        self.got: dict[str, Any] = {}

    def _ask(self, key: str, x: np.ndarray) -> None:
        try:
            self.got[key] = self.serving.predict({"x": x}, timeout=60)
        except Exception as exc:  # (the result under test)
            self.got[key] = exc

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step != 2:
            return
        bad = np.array([0.0, np.nan, 1.0], np.float32)
        self._ask("hook", bad)
        inf = np.where(bad == 1, np.inf, bad).astype(np.float32)
        thread = threading.Thread(target=self._ask, args=("thread", inf))
        thread.start()
        thread.join(60)  # (refused before it is queued: no step end needed)
        self._ask("finite", np.ones(3, np.float32))


def test_a_hooks_and_a_threads_nonfinite_inputs_are_refused(tmp_path: Path) -> None:
    asker = train_asking(tmp_path / "out", NaNAsker)
    for key in ("hook", "thread"):
        refused = asker.got[key]
        assert isinstance(refused, ValueError) and str(refused) == DETAIL, key
    outputs, version = asker.got["finite"]
    assert version == 2 and np.isfinite(outputs["prediction"]).all()


@pytest.mark.parametrize("policy", ["refuse", "fail", "accept"])
def test_a_queued_request_follows_the_servers_policy(tmp_path: Path, policy: str) -> None:
    """`PredictServer.submit` (the queue a thread's request joins) under each policy."""
    server = PredictServer(SERVER_INPUTS, nonfinite=policy)
    server.start()
    server.serving = True
    stop = threading.Event()
    thread = drain(server, stop)
    u = np.array([0.0, 1.0, np.nan, 3.0], np.float32)
    try:
        if policy == "accept":
            (outputs,), version = queued(server, [{"u": u}], 30)
            assert version == VERSION
            np.testing.assert_array_equal(outputs["y"], 2 * u + VERSION)
        else:
            with pytest.raises(ValueError, match=f"its nonfinite={policy!r}"):
                queued(server, [{"u": u}], 30)
    finally:
        stop.set()
        thread.join()
        server.stop()
