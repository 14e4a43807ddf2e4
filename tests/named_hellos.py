"""`named`: the HELLOs a receiver's `ConnectionWatch` has named, for the stream tests
that close a connection after its HELLO (tests/stream/conftest.py makes it theirs)."""

from __future__ import annotations

import threading

import pytest

from melissa_trainer.stream import connections


class Named:
    """How many HELLOs the receivers' `ConnectionWatch` has been given (its `hello`
    returned), for a test to wait on before it closes their connections."""

    def __init__(self) -> None:
        self._count = 0
        self._changed = threading.Condition()

    def add(self) -> None:
        with self._changed:
            self._count += 1
            self._changed.notify_all()

    def wait(self, n: int, timeout: float = 30) -> bool:
        """Whether `n` HELLOs were named within `timeout` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self._count >= n, timeout)


@pytest.fixture
def named(monkeypatch: pytest.MonkeyPatch) -> Named:
    """The HELLOs named (`Named`). A test that waited instead for what the ingester does
    first (the ledger in ``ingest.sims``, a refusal counted) and then closed the
    connection could have the close read before the HELLO: the watch drains the
    monitor before it names a connection (`connections`), so that close was nobody's,
    not counted nor said (the 4-worker flake of test_lost_without_data.py: the close not
    counted in 30 s; the order made certain there: `test_a_close_read_before_the_watch_
    named_its_hello_is_nobodys`)."""
    seen = Named()
    real = connections.ConnectionWatch.hello

    def hello(self: connections.ConnectionWatch, *args: object, **kw: object) -> None:
        real(self, *args, **kw)  # type: ignore[arg-type]
        seen.add()

    monkeypatch.setattr(connections.ConnectionWatch, "hello", hello)
    return seen
