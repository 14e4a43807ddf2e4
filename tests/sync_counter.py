"""Counting the host waits of the training loop: a CPU stand-in for CUDA's sync debug mode,
and the hook that attributes them to steps and window boundaries.

`SyncCounter` wraps the operations that make the host wait for the device on an
accelerator (or, for a collective, for the other ranks): reading a tensor's value
(`Tensor.item`, `tolist`, `cpu`, `numpy`, `__array__`, `bool` / `int` / `float` of a
tensor), `torch.cuda.synchronize`, a CUDA stream's `synchronize`, and the collectives
of `torch.distributed` called without ``async_op=True`` (the object collectives and
`barrier` always). A CUDA event's `synchronize` waits for one point of one stream (the
staging's copies on their side stream, `StopSync`'s agreement started a window
earlier), not for the device to run what was queued: those are counted apart
(`event_waits`). It counts a call only when it is made directly by
`melissa_trainer`'s own code (the caller's file is in the package): torch's own reads
(an optimizer's step counter, kept on the host) and the test's are not the loop's.

A call that blocks for nothing on CPU counts all the same: the count says where the
loop *would* wait on an accelerator. One exception is what a GPU does not wait for
either: `StopSync.result` reads the agreement's host copy (`StopSync._recv`) after
waiting for work started one window earlier (a CUDA event), which `melissa_trainer.core.stop_sync`
explains; reads of that tensor are counted as `StopSync` reads (`stop_reads`), apart.

`StepSyncs` (a hook) snapshots the count at each STEP_START and STEP_END: `inside[s]`
is what step s counted between them (its micro-batches, its hooks), `between[s]` what
came after step s and before step s + 1 (the action point, staging, the window
boundary).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

import melissa_trainer
from melissa_trainer import Hook, TrainerControl, TrainerState

PACKAGE = str(Path(melissa_trainer.__file__).resolve().parent)

_TENSOR_READS = ("item", "tolist", "cpu", "numpy", "__array__", "__bool__", "__int__", "__float__")
_COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "reduce", "all_gather_into_tensor")
_ALWAYS_BLOCKING = ("all_gather_object", "broadcast_object_list", "gather_object", "barrier")


class SyncCounter:
    """Counts the host waits `melissa_trainer` makes (module docstring); a context manager
    that installs the wrappers and removes them. Not thread-safe (the training thread)."""

    def __init__(self) -> None:
        self.count = 0
        self.stop_reads = 0
        self.event_waits = 0
        #: where each counted call came from ("file:line name"), in order
        self.calls: list[str] = []
        self._saved: list[tuple[Any, str, Any, bool]] = []
        self.host_copies: list[torch.Tensor] = []  # StopSync._recv of the trainers watched

    def watch(self, trainer: Any) -> None:
        """Tell `StopSync.result`'s host copy of `trainer` apart (module docstring)."""
        recv = getattr(trainer.stop_sync, "_recv", None)  # (none before this change)
        if recv is not None:
            self.host_copies.append(recv)

    def _caller_in_package(self) -> str | None:
        frame = sys._getframe(2)  # 0: here, 1: the wrapper, 2: the caller
        path = frame.f_code.co_filename
        if not str(Path(path).resolve()).startswith(PACKAGE):
            return None
        return f"{Path(path).name}:{frame.f_lineno}"

    def _wrap(self, owner: Any, name: str, counts: Callable[..., bool]) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            where = self._caller_in_package()
            if where is not None and counts(*args, **kwargs):
                if owner is torch.cuda.Event:
                    self.event_waits += 1
                elif args and any(args[0] is t for t in self.host_copies):
                    self.stop_reads += 1
                else:
                    self.count += 1
                    self.calls.append(f"{where} {name}")
            return original(*args, **kwargs)

        self._saved.append((owner, name, original, name in vars(owner)))
        setattr(owner, name, wrapper)

    def __enter__(self) -> SyncCounter:
        always = lambda *a, **k: True  # noqa: E731
        for name in _TENSOR_READS:
            self._wrap(torch.Tensor, name, always)
        self._wrap(torch.cuda, "synchronize", always)
        self._wrap(torch.cuda.Event, "synchronize", always)
        self._wrap(torch.cuda.Stream, "synchronize", always)
        for name in _COLLECTIVES:
            self._wrap(dist, name, lambda *a, **k: not k.get("async_op", False))
        for name in _ALWAYS_BLOCKING:
            self._wrap(dist, name, always)
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, original, own in reversed(self._saved):
            if own:
                setattr(owner, name, original)
            else:  # inherited (a slot of torch's C base class): uncover it again
                delattr(owner, name)
        self._saved.clear()

    def describe(self) -> str:
        return "\n".join(self.calls[-20:]) or "(none)"


class StepSyncs(Hook):
    """Attributes `counter`'s counts to steps (module docstring)."""

    def __init__(self, counter: SyncCounter) -> None:
        self.counter = counter
        self.inside: dict[int, int] = {}
        self.between: dict[int, int] = {}
        self.stop_reads: dict[int, int] = {}  # StopSync reads after step s (before s + 1)
        self._start = 0
        self._end: tuple[int, int, int] | None = None  # (step, count, stop reads)

    def on_step_start(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        c = self.counter
        if self._end is not None:
            step, count, reads = self._end
            self.between[step] = c.count - count
            self.stop_reads[step] = c.stop_reads - reads
        self._start = c.count

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        c = self.counter
        self.inside[state.global_step] = c.count - self._start
        self._end = (state.global_step, c.count, c.stop_reads)
