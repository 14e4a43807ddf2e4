"""What the tests of ``nonfinite="fail"`` over two ranks share: two real receivers of one
run in this process, the launcher played by the test (`two_fail_ranks`:
tests/stream/test_nonfinite_handoff.py, test_nonfinite_kill_other_rank.py), and a real
study on rank 0 with a real receiver of rank 1 (`restarting_launcher`, `two_rank_study`,
`wait_study_end`: their *_study.py variants, and test_nonfinite_kill_close.py's launcher).
The ranks share nothing but the rendezvous directory and the sockets."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from helpers import running
from waiting import wait_until

from melissa_trainer import StreamSource, Study
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.study.launch import receiver_notices

__all__ = ["restarting_launcher", "two_fail_ranks", "two_rank_study", "wait_study_end"]


@contextmanager
def two_fail_ranks(directory: Path, launcher: bool = True) -> Iterator[tuple[Receiver, Receiver]]:
    """Rank 0 and rank 1 of 2 under ``nonfinite="fail"`` (each on a FIFO of 100), one
    rendezvous directory `directory` and run (``r1``), stopped on exit. With `launcher`,
    rank 0's failures are read by one, as a Study makes them: an earlier run's notices
    cleared (`receiver_notices`), then `Receiver.report_refusals_to_launcher` on rank 0."""
    with ExitStack() as stack:
        ranks = [
            stack.enter_context(
                running(
                    FIFOBuffer(100),
                    rank,
                    2,
                    rendezvous_dir=directory,
                    run_id="r1",
                    nonfinite="fail",
                )
            )
            for rank in (0, 1)
        ]
        if launcher:
            receiver_notices(directory)  # (a Study clears an earlier run's files first)
            ranks[0].report_refusals_to_launcher()
        yield ranks[0], ranks[1]


def restarting_launcher(
    tmp_path: Path,
    solver: str,
    parameters: Sequence[Mapping[str, float]],
    env: Mapping[str, str] | None = None,
) -> Launcher:
    """A launcher (local backend, not started) of the Python script `solver` (dedented,
    written to ``tmp_path/solver.py``), one simulation per entry of `parameters`, that
    restarts a failed simulation once (``max_restarts=1``; a kill's grace 2 s) and has
    `env` in its jobs' environment."""
    script = tmp_path / "solver.py"
    script.write_text(textwrap.dedent(solver))
    return Launcher(
        [sys.executable, str(script)],
        list(parameters),
        len(parameters),
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=1),
        env=env,
    )


@contextmanager
def two_rank_study(launch: Launcher, rendezvous: Path) -> Iterator[Receiver]:
    """`launch` run as the `Study` of a `StreamSource` of rank 0 of 2 under
    ``nonfinite="fail"``, every rank started; yields rank 1's receiver (a real one, of
    the same directory). `rendezvous` is made here (it must not exist). On exit the
    study is stopped, then rank 1's receiver. Neither buffer (a FIFO of 100 each) is
    drained."""
    rendezvous.mkdir()
    config = ReceiverConfig(rendezvous_dir=rendezvous, nonfinite="fail")
    with running(FIFOBuffer(100), 1, 2, rendezvous_dir=rendezvous, nonfinite="fail") as rank1:
        source = Study(launch, StreamSource(config))
        source.start(FIFOBuffer(100), 0, 2)
        try:
            source.on_all_ranks_started()
            yield rank1
        finally:
            source.stop()


def wait_study_end(
    launch: Launcher, timeout: float, between: Callable[[], object] = lambda: None
) -> None:
    """Return once `launch` is done (`Launcher.check` raising on a failure, at each
    poll); `between` is called at each poll before it ends (a check of another rank's
    receiver, for one). AssertionError past `timeout` seconds."""

    def ended() -> bool:
        if launch.check() is None and launch.done:
            return True
        between()
        return False

    wait_until(ended, "the study's end", timeout, interval=0.02)
