"""The end-of-run reuse warning says first that samples were refused as NaN or Inf, and
that the solver's output is the cause. A user trial's solver sent NaN from step 5 of 20
in every simulation: 60 of its 80 samples were refused, and the warning that followed
("training ended with the stream after 8 steps ... Lower --batch_size ... or stream more
samples per rank") named only the training settings."""

from __future__ import annotations

from melissa_trainer import TrainerState
from melissa_trainer.hooks.reuse import reuse_report


def warning_of(refused: float | None) -> str:
    """The warning of the trial's run: 20 samples put, read 16 at a time by a reservoir
    drawing each 16 times, 128 trained on; `refused` the log's nonfinite count (None:
    a log without it, a source that has no receiver)."""
    state = TrainerState(global_step=8, total_samples_seen=128, stream_ended=True)
    logs = {"buffer_put": 20.0, "buffer_got": 128.0}
    if refused is not None:
        logs["source_nonfinite_refused"] = refused
    state.append_log(logs)
    report = reuse_report(state, 1, 1, ratio=16.0, batch_size=16, tolerance=240.0)
    assert report is not None and report[1] is not None
    return report[1]


def test_the_refused_samples_come_first_with_their_count_share_and_cause() -> None:
    said = warning_of(60.0)
    assert said.startswith(
        "training ended with the stream after 8 steps, and 60 of the 80 samples received "
        "(75%) were refused for holding NaN or Inf (nonfinite_refused): the solver's "
        "output is the first cause, not the training settings. "
    ), said
    assert "Then, on the 20 samples left, training used each 6.4 times on average: the " in said
    # the training settings' advice still follows, after the cause
    assert said.index("NaN or Inf") < said.index("Lower --batch_size")


def test_without_refusals_the_warning_reads_as_before() -> None:
    for refused in (None, 0.0):
        said = warning_of(refused)
        assert said.startswith(
            "training ended with the stream after 8 steps, having used each sample 6.4 "
            "times on average: the model may be far from trained. A reservoir"
        ), said
        assert "NaN" not in said
