"""Stand-ins for the launcher's store that `trainer.refusal_mark` uses (torch elastic's
agent ``TCPStore``, hosted by ``accelerate launch``), for its tests: the environment a
rank finds it by (`as_rank`), and a store in a process of its own that a test ends while
a rank uses it (`store_process`), as a launcher ends."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

#: a store's server, its port printed once it listens; it ends when its stdin closes
_SERVER = """\
import datetime, sys
from torch.distributed import TCPStore
store = TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=10))
print(store.port, flush=True)
sys.stdin.read()
"""


def as_rank(monkeypatch: pytest.MonkeyPatch, port: int, rank: int = 1, world: int = 2) -> None:
    """This process as rank `rank` of `world` under a torch elastic agent whose store
    listens on 127.0.0.1:`port` (the variables that torchrun sets in a worker)."""
    env = {"TORCHELASTIC_USE_AGENT_STORE": "True", "WORLD_SIZE": str(world), "RANK": str(rank)}
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    env.update({"TORCHELASTIC_RUN_ID": "test", "TORCHELASTIC_RESTART_COUNT": "0"})
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@contextlib.contextmanager
def store_process() -> Iterator[tuple[int, Callable[[], None]]]:
    """A store served by a process of its own: its port, and a function that ends the
    process and returns once it has exited (its sockets closed, as a launcher's are
    when it ends). Ended on exit if not yet."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None

    def end() -> None:
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()
        proc.wait(timeout=60)

    try:
        port = proc.stdout.readline().strip()
        assert port.isdigit(), f"the store's process said {port!r}, exit {proc.poll()}"
        yield int(port), end
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
        proc.stdout.close()
