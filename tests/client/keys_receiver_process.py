"""A trainer's receiving side in a process of its own (`tests/scripts/keys_receiver.py`:
the real `Receiver`), for the client tests that SIGKILL or SIGSTOP their trainer, and
what those tests read of the kernel's TCP table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["ReceiverProcess", "closing", "established"]

SCRIPT = Path(__file__).parents[1] / "scripts" / "keys_receiver.py"


class ReceiverProcess:
    """`keys_receiver.py` running with `options` (its command line: ``--rendezvous DIR
    --run_id ID``, ``--fifo N``, ``--batch N``, ``--hold`` or ``--on_stdin``), its
    endpoint bound (`endpoint`); `keys()` reads what it received once it ended. `stop`
    ends it, stopped (SIGSTOP) or not; a failed start ends it too."""

    def __init__(self, *options: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), *options],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert self.proc.stdout is not None
            first = self.proc.stdout.readline().split()
            assert first[:1] == ["endpoint"], first
        except BaseException:
            self.stop()
            raise
        self.endpoint = first[1]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL, and wait until it is gone (its kernel closed its connections)."""
        self.proc.kill()
        self.proc.wait(timeout=60)

    def go(self) -> None:
        """The line an ``--on_stdin`` receiver waits for before it drains its FIFO."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def keys(self) -> list[tuple[int, int]]:
        """The (simulation, step) keys put, in order, once the stream ended (it then
        printed ``end`` and exited 0)."""
        out, _ = self.proc.communicate(timeout=60)
        lines = out.splitlines()
        assert lines and lines[-1] == "end", lines[-5:]
        assert self.proc.returncode == 0
        return [(int(w[1]), int(w[2])) for w in (line.split() for line in lines[:-1])]

    def stop(self) -> None:
        """Kill it if it runs (continued first: a stopped process dies only once
        continued), then reap it and close its pipes. Idempotent."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
        self.proc.communicate(timeout=60)


def closing(client: Any) -> tuple[threading.Thread, list[BaseException]]:
    """`client.close()` in a thread of its own (daemon: a close that never ends is the
    test's failure, not its hang), started; the list gets what the close raised."""
    failed: list[BaseException] = []

    def close() -> None:
        try:
            client.close()
        except BaseException as exc:  # noqa: BLE001 - the test's oracle
            failed.append(exc)

    thread = threading.Thread(target=close, name="closing", daemon=True)
    thread.start()
    return thread, failed


def established(port: int) -> bool:
    """Whether the kernel has a TCP connection to local port `port` (IPv4, Linux's
    ``/proc/net/tcp``: no event to wait on)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] == "01":  # ESTABLISHED
            return True
    return False
