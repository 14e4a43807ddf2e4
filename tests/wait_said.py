"""The wait watch's warnings read back in tests (`core.wait_watch`'s logger): `Said`,
a handler keeping each message and setting an event, and the `said` fixture that
attaches one for a test (tests/conftest.py registers it for every test).
Shared by the wait-watch tests of tests/core and tests/trainer."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

#: seconds an event is waited for before a test fails (never reached when it passes)
WAIT = 30.0


class Said(logging.Handler):
    """The wait watch's warnings, and an event set at each."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.warned = threading.Event()
        self._said = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._said:
            self.messages.append(record.getMessage())
            self._said.notify_all()
        self.warned.set()

    def heard(self, text: str, timeout: float) -> str | None:
        """The first warning holding `text`, waited for up to `timeout` s (other waits
        of a trainer whose watch's bound is tiny warn too: the loss check's, before)."""
        with self._said:
            self._said.wait_for(lambda: any(text in m for m in self.messages), timeout)
            return next((m for m in self.messages if text in m), None)


@pytest.fixture
def said() -> Iterator[Said]:
    """A `Said` attached to the wait watch's logger for the test."""
    handler = Said()
    log = logging.getLogger("melissa_trainer.core.wait_watch")
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
