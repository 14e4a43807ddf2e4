"""A trainer's hold on its output directory across its `train()` calls: rank 0's
`output_lock.OutputDirLock`, taken when the trainer is made, held while a `train()` runs,
given back when it returns or raises."""

from __future__ import annotations

from melissa_trainer.trainer.output_lock import OutputDirLock

__all__ = ["OutputDirHold"]


class OutputDirHold:
    """A trainer's hold on its `output_dir` across its `train()` calls: rank 0's
    `OutputDirLock` (`lock`: None on the other ranks and with the lock off), taken at
    construction, held while a `train()` runs, given back when it returns or raises.

    Every method is a no-op without a lock. The training thread only.
    """

    def __init__(self, lock: OutputDirLock | None, output_dir: str) -> None:
        self.lock = lock
        self.output_dir = output_dir

    def hold(self) -> None:
        """Hold `output_dir` for a `train()` (again after an earlier one released it).

        Raises:
            RuntimeError: a newer trainer of this process took it over meanwhile.
            OutputDirLocked: another trainer took it since the last `train()`.
        """
        lock = self.lock
        if lock is None:
            return
        if lock.superseded:
            raise RuntimeError(
                f"a newer OnlineTrainer of this process took output_dir {self.output_dir!r} "
                "over while this one was not training: train the newer one, or build a new one"
            )
        lock.acquire()
        lock.active = True

    def release(self) -> None:
        """Let `output_dir` go: at the end of `train`, when it raises before its loop, or
        when the trainer's construction fails. Idempotent."""
        if self.lock is not None:
            self.lock.active = False
            self.lock.release()

    def stopping(self) -> None:
        """The loop is over: a trainer started on this output_dir now waits for this one
        to exit rather than failing (`OutputDirLock.stopping`)."""
        if self.lock is not None:
            self.lock.stopping()
