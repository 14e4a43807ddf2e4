"""Agreement between training ranks on when to stop.

Ranks receive different data, so one rank's stream may end long before another's,
and a hook may ask to stop on one rank only. DDP needs every rank to run the same
number of steps (each backward is a collective), so the ranks agree, once per window
of `stop_sync_steps` steps, on five numbers:

* whether any rank asked to stop, as the number of ranks minus the lowest asking rank
  (0: none): the largest wins, so every rank learns which rank asked (`stop_rank`), at
  no cost, and the end of the run names it and its hook there (`trainer.stop_asked`),
* how many steps the window may run: every rank takes its window's batches from its
  buffer *before* agreeing, so a rank whose stream has ended reports fewer. The window
  runs as many as the rank with the most has (`most`), so that no rank's data is left
  untrained while another's has run out; a rank with fewer pads its window with its
  last batches (`StreamDataset.pad`) and reports what it can run with them
  (``capacity``): the window is bounded by the smallest capacity (a rank that took no
  batch yet cannot pad),
* the step at which a rank asked for a checkpoint (`request_save`; 0: none), the largest
  wins: rank 0's clock decides when a timed save is due (`hooks.flow.FlowHook`'s
  `save_seconds`) and every rank reads the request at the same window (`take_save_request`),
  so that every rank saves at the same step,
* whether any rank caught a preemption signal (`melissa_trainer.trainer.preemption`), as the
  signal's number (0: none): the largest wins, so SIGTERM (15) over SIGINT (2); or saw its
  launcher die, as a larger code that carries the launcher's pid (`trainer.stop_cause`),
* whether a rank's source failed (`SourceError`), as that rank + 1 (0: none; the largest
  wins): each rank meets such a failure at a step of its own (rank 0 in its read, the
  others from rank 0's progress file, or never), so the failing rank holds it and says
  it here, and every rank learns it at the same window, where all save a checkpoint
  together before they fail (`melissa_trainer.trainer.source_failure`),
* which of the collective requests (a log, a validation, a checkpoint) a hook made on
  any rank since the last agreement (`asks`: `TrainerControl.take_asks`, one number per
  request): every rank performs them after the window the agreement is read at
  (`OnlineTrainer.train`), so a request made on one rank alone (Hugging Face's
  ``if state.is_world_process_zero: control.should_save = True``) is every rank's.

All of them travel in one small integer tensor on the accelerator device, all-reduced
with MAX (the capacity negated), so the cost is one collective per window rather than per
step. A sixth number rides along when the caller gives one (a device scalar, reduced
with MAX into `extra`): the trainer's loss check (`melissa_trainer.core.loss_guard`), at no
extra collective or sync. Every rank calls `agree` / `start` at the same windows, so no
rank ever runs a collective that another skips. A rank that waits long for the others
(one stopped, hung, or saving) warns, at 60 s and each doubling (`WaitWatch`).

Two ways to agree:

* `agree`: issue the all-reduce and wait for its result (the host blocks until the
  device has run everything queued before it: on a GPU, the queue drains). The trainer
  uses it for a window that nothing was agreed ahead for (a run's first step, alone,
  and the rest of its first window; a resume's first; the one after an end of stream).
* `start`, then `result` one window later: the all-reduce is issued without waiting
  (``async_op=True``) and, on CUDA, its result copied into pinned host memory behind
  a CUDA event; `result` waits for that event only (off CUDA, gloo's all-reduce is
  waited for in `start`: no device queue to keep full there, and no work left in
  flight). The
  trainer starts the agreement on window k+1 before it queues window k's steps, and
  reads it after: by then the device has long run the all-reduce, and the host never
  waits for the steps it queued (the GPU queue stays full). See `OnlineTrainer.train`.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from melissa_trainer.core.wait_watch import WaitWatch

#: what a rank waiting in the agreement waits for (`WaitWatch`'s warnings)
_WAITS_FOR = "the other ranks at the stop agreement (StopSync, one all-reduce per window)"

#: what `agree` and `result` return: (any rank asked to stop, the smallest capacity,
#: signal); the largest number of batches in hand is `StopSync.most`, the failed source's
#: rank `StopSync.source_failed`
Agreement = tuple[bool, int, int]

#: the requests an agreement carries (`TrainerControl.take_asks`: log, validate, save)
_ASKS = 3
#: the integers each rank sends: stop, capacity, signal, in hand, save, failed, the asks
#: (the loss guard's `extra` follows them)
_SENT = 6 + _ASKS


class StopSync:
    """One all-reduce per window; a no-op without a process group.

    Not thread-safe: call from the training thread, on every rank, in lockstep.
    """

    def __init__(self, device: torch.device, num_processes: int) -> None:
        self.distributed = num_processes > 1 and dist.is_available() and dist.is_initialized()
        self._flag = torch.zeros(_SENT + 1, dtype=torch.int64, device=device)
        self._cuda = device.type == "cuda"
        # Host sides of the flag on CUDA: pinned, so that both copies are asynchronous
        # (from pageable memory, a "non-blocking" upload may wait for the stream).
        pin = self._cuda and torch.cuda.is_available()
        self._send = torch.zeros(_SENT, dtype=torch.int64, pin_memory=pin)
        self._recv = torch.zeros(_SENT + 1, dtype=torch.int64, pin_memory=pin)
        self._work: Any | None = None  # the started all-reduce (`start`), until `result`
        self._event: Any | None = None  # CUDA: recorded after the copy into `_recv`
        #: `start`'s arguments (what `result` returns undistributed), until `result`
        self._pending: tuple[bool, int, int, bool, int, int, int, tuple[int, ...]] | None = None
        #: this rank's save request for the next `start` (`request_save`: step + 1; 0: none)
        self._save_asked = 0
        #: the agreed save request not taken yet (`take_save_request`: step + 1; 0: none)
        self._save_agreed = 0
        self.collectives = 0  # how many all-reduces were run (for tests and telemetry)
        self.rank = dist.get_rank() if self.distributed else 0
        self._world = dist.get_world_size() if self.distributed else 1
        #: the lowest rank that asked to stop, as the last agreement says (None: none):
        #: the same on every rank after the same `result`
        self.stop_rank: int | None = None
        #: warns when a wait for the agreement lasts (a stopped or hung rank): never silent
        self.watch = WaitWatch(self.rank)
        #: the maximum over ranks of the last agreement's `extra` (None: none given)
        self.extra: int | None = None
        #: the largest number of batches any rank had in hand at the last agreement
        #: (its `batches_in_hand`): the window runs that many where every capacity allows
        self.most = 0
        #: the largest rank whose source failed, as the last agreement says (its
        #: `source_failed`); None: no rank's. The same on every rank after the same `result`
        self.source_failed: int | None = None
        #: the requests some rank made, as the last agreement says (`start`'s `asks`,
        #: the maximum over ranks): the same on every rank after the same `result`
        self.asks: tuple[int, ...] = (0,) * _ASKS

    @property
    def started(self) -> bool:
        """An agreement was `start`-ed and its `result` not read yet."""
        return self._pending is not None

    def request_save(self, step: int) -> None:
        """Ask every rank for a checkpoint: the request (`step`, this rank's step when it
        asked) goes out with the next `start` and is read by every rank from the `result`
        of that agreement on (`take_save_request`). Any rank may ask; the built-in policy
        asks on rank 0 only, by its clock, so that the ranks' clocks never disagree."""
        self._save_asked = max(self._save_asked, int(step) + 1)

    def take_save_request(self) -> int | None:
        """The step at which a rank asked for a checkpoint (the largest, if several),
        agreed by the last `result` and not taken yet; None if none. The same on every
        rank after the same `result`: take it at the same point on every rank (the first
        step end after it), and save there."""
        agreed, self._save_agreed = self._save_agreed, 0
        return agreed - 1 if agreed else None

    def abandon(self) -> None:
        """Forget a `start`-ed agreement left unread (a `train()` that raised between
        the two). Its collective was issued on every rank alike, so the ranks' sequences
        of collectives still match."""
        self._pending = self._work = self._event = None

    def agree(
        self,
        stop_requested: bool,
        batches_available: int,
        signum: int = 0,
        extra: torch.Tensor | None = None,
        batches_in_hand: int | None = None,
        source_failed: int = 0,
        asks: tuple[int, ...] = (),
    ) -> Agreement:
        """Return `(any rank asked to stop, smallest capacity over ranks, signal)`.

        `batches_available` is this rank's capacity: the batches it can run this window
        (its batches in hand, or more if it can pad). `batches_in_hand` (default: the
        capacity) is what it has of its own data; the largest over ranks is set as
        `most`. `signum` is the preemption signal this rank caught (0: none); the
        returned one is the largest over ranks, 0 if no rank caught one. `extra`, an
        int64 device scalar, is reduced with MAX into `self.extra` (None without a
        process group). `source_failed` is this rank's rank + 1 when its source failed
        (0: not); the largest rank whose did is set as `source_failed`. `asks`: this
        rank's requests (`TrainerControl.take_asks`; () is none), the maximum over ranks
        set as `asks`. Blocks until
        every rank has called it (a collective) and the result is on the host. Raises
        RuntimeError while a `start`-ed agreement is unread.
        """
        self.start(
            stop_requested, batches_available, signum, extra, batches_in_hand, source_failed, asks
        )
        return self.result()

    def start(
        self,
        stop_requested: bool,
        batches_available: int,
        signum: int = 0,
        extra: torch.Tensor | None = None,
        batches_in_hand: int | None = None,
        source_failed: int = 0,
        asks: tuple[int, ...] = (),
    ) -> None:
        """Issue `agree`'s all-reduce without waiting for it; `result` returns it.

        No host sync: on CUDA the flag goes up from pinned memory, is all-reduced on
        NCCL's stream, and comes back into pinned memory, all queued behind the work
        queued so far. Raises RuntimeError while an earlier `start` is unread.
        """
        if self._pending is not None:
            raise RuntimeError("StopSync.start: the previous agreement was not read (result)")
        in_hand = int(batches_available if batches_in_hand is None else batches_in_hand)
        own = tuple(int(a) for a in asks) + (0,) * (_ASKS - len(asks))
        self._pending = (
            bool(stop_requested),
            int(batches_available),
            int(signum),
            extra is None,
            in_hand,
            self._save_asked,
            int(source_failed),
            own,
        )
        send_save, self._save_asked = self._save_asked, 0
        if not self.distributed:
            return
        send = self._send
        # (the lowest asking rank sends the largest: `stop_rank`)
        send[0] = self._world - self.rank if stop_requested else 0
        send[1] = -int(batches_available)
        send[2], send[3], send[4] = int(signum), in_hand, send_save
        send[5] = int(source_failed)
        for i, asked in enumerate(own):
            send[6 + i] = asked
        self._flag[:_SENT].copy_(send, non_blocking=True)
        if extra is None:
            self._flag[_SENT:].zero_()
        else:
            self._flag[_SENT:].copy_(extra.reshape(1))  # device to device: no sync
        work = dist.all_reduce(self._flag, op=dist.ReduceOp.MAX, async_op=True)
        self.collectives += 1
        if self._cuda:
            work.wait()  # NCCL: the current stream waits for the collective, not the host
            self._recv.copy_(self._flag, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
            self._work, self._event = None, event
        else:
            # Off CUDA there is no device queue for the host to keep full: wait here, so
            # that no asynchronous gloo work is ever left in flight (one left at exit
            # holds the exit's teardown until every rank has run it: see
            # `melissa_trainer.core.process_group`). `result` stays a window late.
            with self.watch.waiting(_WAITS_FOR):
                work.wait()
            self._recv.copy_(self._flag)
            self._work = None

    def result(self) -> Agreement:
        """The agreement `start`-ed last, as `agree` returns it; sets `extra`.

        Blocks until every rank has started it (a collective), and on CUDA until the
        device has run what was queued before it (not what was queued after: the steps
        of the window in between). The one host wait of a window. Raises RuntimeError
        when nothing was started.
        """
        if self._pending is None:
            raise RuntimeError("StopSync.result: no agreement was started")
        stop, available, signum, no_extra, in_hand, save, failed, own = self._pending
        self._pending = None
        self.extra = None
        if not self.distributed:
            self.most = in_hand
            self.source_failed = failed - 1 if failed else None
            self._save_agreed = max(self._save_agreed, save)
            self.asks = own
            self.stop_rank = 0 if stop else None
            return stop, available, signum
        if self._event is not None:
            with self.watch.waiting(_WAITS_FOR):
                self._event.synchronize()
            self._event = None
        elif self._work is not None:  # (not left by `start` today: see there)
            with self.watch.waiting(_WAITS_FOR):
                self._work.wait()
            self._work = None
            self._recv.copy_(self._flag)
        values = self._recv.tolist()  # host memory: no device sync
        any_stop, neg_available, any_signum, most, save, failed = values[:6]
        self.most = int(most)
        self.source_failed = int(failed) - 1 if failed else None
        self._save_agreed = max(self._save_agreed, int(save))
        self.asks = tuple(int(v) for v in values[6:_SENT])
        self.extra = None if no_extra else int(values[_SENT])
        self.stop_rank = self._world - int(any_stop) if any_stop else None
        return bool(any_stop), -int(neg_available), int(any_signum)


def window_steps(step: int, every: int, max_steps: int | None) -> int:
    """The steps of the stop-sync window that starts at `step`: up to the next multiple
    of `every` (``stop_sync_steps``: windows are aligned on them, so that a resume knows
    where the window of its checkpoint ends, whatever batches were taken ahead), fewer
    if `max_steps` is nearer; <= 0: no more steps. A window that starts off a multiple
    (after a run's first window, one step; after an end of stream; at a resume)
    runs to the next multiple: the windows realign."""
    window = every - step % every
    if max_steps is not None:
        window = min(window, max_steps - step)
    return window
