"""The host waits of a run's start and end run inside the trainer's wait watch
(`core.wait_watch`, `StopSync.watch`), each with its own usual cause: the output lock's
broadcast as the trainer is made (`trainer.lock_share`), the barrier once every rank's
source started and the loss check of the last window after the loop
(`trainer.run_waits`), a resumed study's gather of its complete simulations
(`study.launch`), and the gather of a run that trained nothing (`trainer.no_training`).
A rank held in one by another (stopped, hung) warns with the wait's words instead of
waiting silently until the process group's timeout.

One process, whose collectives are fakes (torch.distributed's functions replaced), as
tests/trainer/test_checkpoint_wait_watch.py: each blocks until the warning is said."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: wait_said
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/trainer
from wait_said import WAIT, Said  # noqa: E402

from melissa_trainer import Study  # noqa: E402
from melissa_trainer.core.wait_watch import WaitWatch  # noqa: E402
from melissa_trainer.launcher import Launcher, make_sampler  # noqa: E402
from melissa_trainer.study import study as study_module  # noqa: E402
from melissa_trainer.study.hooks import StudyEvents  # noqa: E402
from melissa_trainer.study.launch import complete_on_every_rank  # noqa: E402
from melissa_trainer.trainer import exit_meeting  # noqa: E402
from melissa_trainer.trainer.no_training import NoTrainingError, refuse_untrained  # noqa: E402
from melissa_trainer.trainer.run_waits import last_window_check, sources_started  # noqa: E402
from melissa_trainer.trainer.setup import claim_output_dir  # noqa: E402


def held(said: Said, call: Callable[[], object], release: threading.Event, what: str) -> str:
    """Run `call` in a thread while its collective blocks on `release`; the first
    warning said meanwhile that holds `what` (the wait's own words: a watch thread left
    by an earlier test of this process may warn into the same logger), its wait
    released once said. Raises what `call` raised, but for the quiet refusals
    (`SystemExit`) a refused run raises."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # (read below)
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        first = said.heard(what, WAIT)
        assert first is not None, f"no warning holding {what!r}: {said.messages}"
    finally:
        release.set()
        thread.join(WAIT)
    for exc in errors:
        if not isinstance(exc, (SystemExit, NoTrainingError)):
            raise exc
    return first


def fake_group(monkeypatch: pytest.MonkeyPatch, release: threading.Event) -> None:
    """torch.distributed as one rank of two whose collectives block until `release`."""
    dist = torch.distributed

    def gather_object(out: list[Any], obj: Any, *a: Any, **k: Any) -> None:
        assert release.wait(WAIT)
        out[:] = [obj] * len(out)

    def broadcast(*a: Any, **k: Any) -> None:
        assert release.wait(WAIT)

    monkeypatch.setattr(dist, "all_gather_object", gather_object)
    monkeypatch.setattr(dist, "broadcast", broadcast)
    monkeypatch.setattr(dist, "all_reduce", broadcast)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda *a, **k: 2)


def view(watch: WaitWatch, **more: Any) -> SimpleNamespace:
    """A trainer of one rank of two, as the waits read it."""
    stop_sync = SimpleNamespace(watch=watch, distributed=True)
    return SimpleNamespace(num_processes=2, process_index=0, stop_sync=stop_sync, **more)


@pytest.mark.timeout(60)
def test_the_output_lock_broadcast_held_warns_naming_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: Said
) -> None:
    release = threading.Event()
    fake_group(monkeypatch, release)
    acc = SimpleNamespace(process_index=0, num_processes=2, device=torch.device("cpu"))
    source = SimpleNamespace(configure=lambda d: None, set_run_id=lambda r: None)
    watch = WaitWatch(rank=0, first=0.001)
    claimed: list[Any] = []
    run = lambda: claimed.append(claim_output_dir(str(tmp_path), acc, source, watch))  # noqa: E731
    first = held(said, run, release, "output_dir's lock")
    assert first.startswith("rank 0 has waited"), first
    assert "the other ranks at output_dir's lock, as the trainer is made" in first, first
    assert "Rank 0 still taking output_dir's lock" in first, first
    assert "kill -CONT PID" in first, first
    claimed[0][0].release()  # (rank 0 took the lock)


@pytest.mark.timeout(60)
def test_the_barrier_once_every_source_started_held_warns(
    monkeypatch: pytest.MonkeyPatch, said: Said
) -> None:
    """The barrier is the all-reduce that agrees the last meeting's bound."""
    release = threading.Event()
    fake_group(monkeypatch, release)
    monkeypatch.setattr(exit_meeting, "group_timeout", lambda device: 1800.0)
    accelerator = SimpleNamespace(device=torch.device("cpu"))
    source = SimpleNamespace(stop_bound=lambda: 0.0)
    trainer = view(WaitWatch(rank=0, first=0.001), accelerator=accelerator, source=source)
    first = held(said, lambda: sources_started(trainer), release, "a barrier")  # type: ignore[arg-type]
    assert "once every rank's source started (a barrier)" in first, first
    assert "loading its checkpoint or starting its source" in first, first


@pytest.mark.timeout(60)
def test_the_loss_check_after_the_loop_held_warns(said: Said) -> None:
    release = threading.Event()
    guard = SimpleNamespace(check=lambda: release.wait(WAIT))
    trainer = view(WaitWatch(rank=0, first=0.001))
    trainer.state = SimpleNamespace(global_step=40)
    first = held(said, lambda: last_window_check(trainer, guard.check), release, "after the loop")  # type: ignore[arg-type]
    assert "the other ranks at step 40's loss check after the loop (an all-reduce)" in first
    assert "still running the last window's steps" in first, first


@pytest.mark.timeout(60)
def test_a_resumed_studys_gather_held_warns(monkeypatch: pytest.MonkeyPatch, said: Said) -> None:
    release = threading.Event()
    fake_group(monkeypatch, release)
    watch = WaitWatch(rank=0, first=0.001)
    first = held(said, lambda: complete_on_every_rank([3, 1], watch), release, "resumed study")
    assert "a resumed study's start (the all-gather of its complete simulations)" in first
    assert "had started its source just before" in first, first
    # the study's hook gives the trainer's watch (as `Study.wait_watch`, before the call)
    given: list[Any] = []
    study = SimpleNamespace(on_all_ranks_started=lambda: given.append(study.wait_watch))
    StudyEvents(study).on_source_started(view(watch), None, None)  # type: ignore[arg-type]
    assert given == [watch], given


class OldOverride(Study):
    """A user's study written before the wait watch: ``on_all_ranks_started(self)``."""

    def __init__(self) -> None:
        super().__init__(Launcher(["true"], make_sampler("uniform", {"a": (0.0, 1.0)}, seed=0), 2))
        self.seen: list[Any] = []

    def on_all_ranks_started(self) -> None:
        self.seen.append(self.wait_watch)


@pytest.mark.timeout(60)
def test_an_override_of_the_old_signature_is_called_with_the_watch_beside() -> None:
    """The study hook under a real trainer (a `stop_sync` with a watch) called
    ``on_all_ranks_started(watch)``: a TypeError for a subclass's override without it."""
    watch = WaitWatch(rank=0, first=0.001)
    study = OldOverride()
    StudyEvents(study).on_source_started(view(watch), None, None)  # type: ignore[arg-type]
    assert study.seen == [watch]


@pytest.mark.timeout(60)
def test_the_study_s_resumed_gather_is_watched_by_its_wait_watch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    watch, gathered = WaitWatch(rank=0, first=0.001), []
    study = Study(Launcher(["true"], make_sampler("uniform", {"a": (0.0, 1.0)}, seed=0), 2))
    receiver = SimpleNamespace(completed=lambda: [1])
    monkeypatch.setattr(type(study.stream), "receiver", property(lambda s: receiver))
    monkeypatch.setattr(
        study_module, "complete_on_every_rank", lambda done, w: gathered.append(w) or set()
    )
    study._resumed, study._rank = True, 1  # (a resumed run's rank 1: no launcher to start)
    study.wait_watch = watch
    study.on_all_ranks_started()
    assert gathered == [watch]


@pytest.mark.timeout(60)
def test_the_gather_of_a_run_that_trained_nothing_held_warns(
    monkeypatch: pytest.MonkeyPatch, said: Said
) -> None:
    release = threading.Event()
    fake_group(monkeypatch, release)
    trainer = view(
        WaitWatch(rank=0, first=0.001),
        state=SimpleNamespace(global_step=0, stream_ended=True),
        ended_by="end of stream",
        buffer=SimpleNamespace(stats=lambda: SimpleNamespace(put=3)),
        source=SimpleNamespace(),
        args=SimpleNamespace(batch_size=4),
    )
    first = held(said, lambda: refuse_untrained(trainer, 0), release, "trained no step")  # type: ignore[arg-type]
    assert "the end of a run that trained no step (the all-gather of the samples" in first
    assert "the stream ended before a first step" in first, first
