"""A send's `StoppedForGood` (and its kinds' subclasses) survives pickling: a solver run
in a ``multiprocessing`` or ``concurrent.futures`` process pool gets its worker's error
back whole, not a ``TypeError`` of the pool about missing arguments."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from melissa_trainer.client.admission import SimulationRefused
from melissa_trainer.client.closing import TrainerStopped
from melissa_trainer.client.gave_up import StopSaid
from melissa_trainer.client.send_errors import StoppedForGood
from melissa_trainer.client.stop_kinds import SimulationNotNeeded

KINDS = [
    ("not_needed", SimulationNotNeeded),
    ("refused", SimulationRefused),
    ("ended", TrainerStopped),
]


def _said(kind: str, error: type[Exception]) -> StopSaid:
    return StopSaid("tcp://node7:5555", kind, "the reason", "the detail", error)  # type: ignore[arg-type]


def _raise(kind: str, error: type[Exception]) -> None:
    said = _said(kind, error)
    raise StoppedForGood.of(said)("simulation 3: the send gave up", said)


@pytest.mark.parametrize(("kind", "error"), KINDS)
def test_a_send_stopped_for_good_pickles_back_whole(kind: str, error: type[Exception]) -> None:
    said = _said(kind, error)
    raised = StoppedForGood.of(said)("simulation 3: the send gave up", said)
    back = pickle.loads(pickle.dumps(raised))
    assert type(back) is type(raised) and isinstance(back, error)
    assert str(back) == "simulation 3: the send gave up"
    assert back.said == said


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_pool_worker_s_send_error_reaches_its_parent() -> None:
    with ProcessPoolExecutor(1) as pool:
        future = pool.submit(_raise, "not_needed", SimulationNotNeeded)
        with pytest.raises(SimulationNotNeeded, match="the send gave up"):
            future.result(timeout=100)
