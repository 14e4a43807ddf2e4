"""How to train on past the end of a stream: one rule, for the end-of-run line
(`ProgressHook`) and the resume warning of a checkpoint at or past `max_steps`
(`checkpoint.registry`).

Once the stream has ended, a larger `max_steps` trains nothing more; `--pseudo_epochs`
replays the buffer, also on resume, but only if the buffer keeps something to replay
(`Buffer.replayable`): a FIFO/FIRO buffer keeps the samples it served only when the run
that served them had `pseudo_epochs > 1` (``retain``), a reservoir keeps its contents.
"""

from __future__ import annotations

from typing import Any

#: what brings more data, whichever the buffer
_MORE_DATA = (
    "more data takes more simulations (a study whose stream ended cannot grow on resume: "
    "a new study)"
)


def train_on_advice(buffer: Any, passes_done: int) -> str:
    """The clause saying how to train on past the stream's end, after `passes_done`
    passes over the data (the live stream and its replays: ``state.pseudo_epoch + 1``).

    `buffer`'s `replayable` (main rank's buffer; None or absent: not known) decides:
    with samples to replay, ``--pseudo_epochs passes_done + 1`` on resume replays them;
    with none (e.g. ``--buffer fifo`` run with ``pseudo_epochs`` 1), a replay on resume
    would train on nothing, so the clause names what would: a new run with
    ``--pseudo_epochs`` from the start, or a reservoir."""
    replayable = getattr(buffer, "replayable", None)
    if replayable is None or replayable > 0:
        return (
            f"--pseudo_epochs {passes_done + 1} or more replays the buffer (also on "
            f"resume); {_MORE_DATA}"
        )
    return (
        "the buffer keeps no sample to replay (a fifo/firo buffer keeps what it served "
        "only with --pseudo_epochs 2 or more from the start), so --pseudo_epochs on "
        "resume trains nothing: a new run with --pseudo_epochs N from the start, or "
        f"--buffer reservoir; {_MORE_DATA}"
    )
