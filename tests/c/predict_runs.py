"""The preamble the C client's `mt_predict` tests share (tests/c/test_c_predict*.py,
test_c_serve_key.py): an mt_script started with an environment, its stream to the
`sink` (`start_lines`) and one request's arrays declared (`ASK`), asked for
predictions (`CPredict`, the fixture ``c_predict`` of tests/c/conftest.py). A serving
socket without CURVE that always refuses with ZeroMQ's detail: `silent_peer.plain_zmtp_peer`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from predict_script import Script, start_lines, status

#: one request's arrays, as the serving sockets of these tests take them (u: 4 float32)
ASK = ["input u 1 1 4 : 1 2 3 4", "output y 1 4"]


class CPredict:
    """mt_script processes of one test that ask for predictions: `exe` (the fixture
    ``script_exe``), each started with `start_lines` (its stream to `sink`), then
    `ask`'s lines (`ASK` by default)."""

    def __init__(self, exe: Path, sink: str) -> None:
        self.exe, self.sink = exe, sink

    @contextlib.contextmanager
    def script(
        self,
        env: dict[str, str] | None = None,
        sim: int = 7,
        ask: Sequence[str] = ASK,
        max_files: int | None = None,
    ) -> Iterator[Script]:
        """An mt_script with `env` (its MELISSA_ variables only these), started as
        simulation `sim`, `ask` sent; killed on exit."""
        script = Script(self.exe, env, max_files)
        try:
            script.send(*start_lines(self.sink, sim), *ask)
            yield script
        finally:
            script.kill()

    def replies(
        self,
        env: dict[str, str] | None,
        *timeouts: float,
        sim: int = 7,
        ask: Sequence[str] = ASK,
        finish: float = 60,
    ) -> tuple[dict[int, list[str]], list[int]]:
        """One request per timeout (seconds), in a row, by one `script`: every line's
        outputs (`Script.finish`, which waits up to `finish` s), and the requests' lines."""
        with self.script(env, sim, ask) as script:
            asked = [script.send(f"predict {timeout}") for timeout in timeouts]
            lines, _ = script.finish(timeout=finish)
        return lines, asked

    def statuses(
        self,
        env: dict[str, str] | None,
        *timeouts: float,
        sim: int = 7,
        ask: Sequence[str] = ASK,
        finish: float = 60,
    ) -> list[tuple[int, str]]:
        """The status and message of each request of `replies`, in order."""
        lines, asked = self.replies(env, *timeouts, sim=sim, ask=ask, finish=finish)
        return [status(lines, n) for n in asked]
