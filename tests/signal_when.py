"""Signal this process from a thread once a check passes; a failed check fails the test
at once, with its message.

The preemption tests run `trainer.train()` in the test's thread (Python runs signal
handlers only there) and send SIGTERM from another thread at the moment under test (the
trainer reached step N and waits for data). A check made in that thread used to fail only
by the test's timeout: the signal never came, `train()` waited for it (its source never
ends the stream), and the assertion's message was lost behind the timeout's stack dump.

`signal_when(check)` runs `check()` in a thread. Once it returns, `sig` is sent to this
process (the moment the test wants). If it raises, the test's thread is interrupted at
once (a SIGINT sent to that thread, which the trainer's handler takes as a preemption,
Python's as a KeyboardInterrupt; not sent where no Python handler takes it, where it
could kill pytest) and the block re-raises the check's
failure with its message when it ends. A block that ends first (its `train()` raised
something else) is never signalled afterwards: the thread, still waiting, sends nothing.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["signal_when"]


@contextmanager
def signal_when(check: Callable[[], None], sig: int = signal.SIGTERM) -> Iterator[None]:
    """Send `sig` to this process once `check()` (run in a thread) returns; if it raises,
    interrupt the block and raise the check's exception when the block ends (chained to
    whatever the interruption raised there)."""
    failures: list[BaseException] = []
    lock = threading.Lock()
    ended = False  # under `lock`: the block ended, signal nothing more

    def run() -> None:
        try:
            check()
        except BaseException as exc:  # noqa: BLE001 (re-raised in the test's thread)
            with lock:
                failures.append(exc)
                if not ended:
                    _interrupt_main()
            return
        with lock:
            if not ended:
                os.kill(os.getpid(), sig)

    def end() -> None:
        """Mark the block ended (no signal after it); a pending interruption of a failed
        check is run here (a Python call checks for it) rather than in later code."""
        nonlocal ended
        with lock:
            ended = True
        (lambda: None)()

    thread = threading.Thread(target=run, name="signal_when", daemon=True)
    block_error: BaseException | None = None
    try:
        thread.start()
        yield
    except BaseException as exc:
        block_error = exc
    while True:  # (the interruption comes once, wherever the test's thread is)
        try:
            end()
            break
        except KeyboardInterrupt as exc:
            if not failures:
                raise
            block_error = block_error or exc
    if block_error is None:
        thread.join()  # (signalled or failed already, unless the block never waited)
    elif not failures:
        raise block_error  # (the thread may still wait: it sends nothing now)
    if failures:  # the check's failure: the cause of any interruption of the block
        raise failures[0] from block_error


def _interrupt_main() -> None:
    """SIGINT to the test's thread, if a Python handler takes it (else it could kill
    pytest). A real signal to that thread: `_thread.interrupt_main` only marks the
    handler due, which a thread blocked in a lock's wait (`Event.wait`) never runs."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
