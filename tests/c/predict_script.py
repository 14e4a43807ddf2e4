"""The parts shared by the C client's `mt_predict` tests (test_c_predict.py,
test_c_predict_builds.py, test_c_serve_key.py, test_c_predict_trainer_gone.py): the
status codes, an mt_script process fed line by line, a sink for the stream the client
must start, an endpoint where nothing listens, and readers of the script's output lines.
"""

from __future__ import annotations

import os
import resource
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq
from held_ports import refused_endpoint

#: the C client's status codes (melissa_trainer.h) these tests name
MT_ESHAPE, MT_EFIELD, MT_EDTYPE, MT_ETIMEDOUT, MT_EREFUSED, MT_EREPLY = 4, 2, 3, 8, 12, 13
MT_EENV = 6


class Script:
    """An mt_script process fed line by line (so a test can answer in between, or
    read a line's outputs as it is done: `wait`). `max_files`: its limit of open file
    descriptors (RLIMIT_NOFILE), if given."""

    def __init__(
        self, exe: Path, env: dict[str, str] | None = None, max_files: int | None = None
    ) -> None:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}

        def limit() -> None:
            if max_files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (max_files, max_files))

        self.proc = subprocess.Popen(
            [str(exe)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**clean, **(env or {})},
            preexec_fn=limit if max_files is not None else None,
        )
        self.line = 0
        self.seen: dict[int, list[str]] = {}  # the lines `wait` read

    def wait(self, n: int) -> list[str]:
        """Block until line `n` is done (its status line printed): its outputs, status
        line last (the pytest timeout bounds the wait)."""
        assert self.proc.stdout is not None
        while not (n in self.seen and self.seen[n][-1].split(" ", 1)[0].lstrip("-").isdigit()):
            text = self.proc.stdout.readline()
            assert text, f"mt_script ended before line {n} was done"
            number, rest = text.rstrip("\n").split(" ", 1)
            self.seen.setdefault(int(number), []).append(rest)
        return self.seen[n]

    def send(self, *lines: str) -> int:
        """Write `lines`; the number of the last."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(f"{line}\n" for line in lines))
        self.proc.stdin.flush()
        self.line += len(lines)
        return self.line

    def finish(self, timeout: float = 60) -> tuple[dict[int, list[str]], str]:
        """Close stdin and wait: each line's outputs (status line first), stderr."""
        if self.seen:  # (`wait` read through the pipes' buffers: communicate would skip them)
            assert self.proc.stdin is not None and self.proc.stdout is not None
            assert self.proc.stderr is not None
            self.proc.stdin.close()
            out, err = self.proc.stdout.read(), self.proc.stderr.read()
            self.proc.wait(timeout)
        else:
            out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, err
        lines: dict[int, list[str]] = {n: list(got) for n, got in self.seen.items()}
        for text in out.splitlines():
            number, rest = text.split(" ", 1)
            lines.setdefault(int(number), []).append(rest)
        return lines, err

    def open_files(self) -> int:
        """How many file descriptors the script's process holds now (Linux's /proc)."""
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def zctx() -> Iterator[zmq.Context]:
    ctx = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


@pytest.fixture
def sink(zctx: zmq.Context) -> str:
    """A PULL endpoint for the stream the client must start (nothing is sent there)."""
    pull = zctx.socket(zmq.PULL)
    pull.bind("tcp://127.0.0.1:*")
    return str(pull.getsockopt_string(zmq.LAST_ENDPOINT))


def dead_endpoint() -> str:
    """A loopback endpoint where nothing listens (refused at once, as a dead trainer's),
    held until the test ends (`held_ports`: a port closed at once may be taken meanwhile)."""
    return refused_endpoint()


def start_lines(sink: str, sim: int = 7) -> list[str]:
    return [f"id {sim}", f"endpoints {sink}", "field x 1 1 3", "start"]


def status(lines: dict[int, list[str]], n: int) -> tuple[int, str]:
    """The status and message of line `n` (its last output line)."""
    code, _, message = lines[n][-1].partition(" ")
    return int(code), message.strip()


def outputs_of(lines: dict[int, list[str]], n: int) -> tuple[int, dict[str, np.ndarray]]:
    version, outs = -1, {}
    for text in lines[n]:
        if text.startswith("version "):
            version = int(text.split()[1])
        elif text.startswith("out "):
            head, values = text[4:].split(" :")
            name, ndim, *dims = head.split()
            assert len(dims) == int(ndim)
            outs[name] = np.array([float(v) for v in values.split()]).reshape(tuple(map(int, dims)))
    return version, outs
