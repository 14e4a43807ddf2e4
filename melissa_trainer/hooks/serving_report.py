"""What `ServingHook` reports: its figures in the training logs (`log_figures`, reduced
over ranks by the trainer: console, TensorBoard ``serving/*``, ``state.log_history``)
and its end-of-run line (`summary`; logged by `log_summary`). Functions of
`ServingHook.telemetry()`, pure but `log_summary`.

The figures, cumulative since the trainer started (not checkpointed: a resumed run
counts afresh): ``serving_requests``, ``serving_answered`` (every prediction sent),
``serving_answered_late`` (of those, the ones sent past their client's timeout: taken
from the queue in time, then run or sent too late; the client had given up and fallen
back, so it never used them: a client-side count of answers is ``serving_answered``
minus these), ``serving_refused`` (every
reason: busy, not_serving, wrong_run, failed), ``serving_malformed`` (requests rejected
before they could be read as one: bad frames, bad inputs), ``serving_expired``
(dropped past their client's timeout), ``serving_batches`` (model runs), summed over
ranks; and the latency of the recent answers, ``serving_latency_steps_p50`` and
``_p99`` (in steps: model versions between arrival and answer) and
``serving_latency_ms_p50`` / ``_p99``, with ``serving_share`` (of training time), the
largest of the ranks'. The in-process calls made on the training thread (from a hook)
run at once, outside the queue, and are not counted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from melissa_trainer.common.words import plural

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView

__all__ = ["LOG_MAXIMA", "log_figures", "summary"]

#: the figures whose maximum over ranks is logged
LOG_MAXIMA = frozenset(
    {
        "serving_latency_steps_p50",
        "serving_latency_steps_p99",
        "serving_latency_ms_p50",
        "serving_latency_ms_p99",
        "serving_share",
    }
)


def log_figures(telemetry: Mapping[str, float]) -> dict[str, float]:
    """The log figures (module docstring) of one rank's telemetry: always every key
    (0 for what did not happen yet), as the reduction over ranks needs."""
    out = {
        "serving_requests": float(telemetry.get("requests", 0)),
        "serving_answered": float(telemetry.get("answered", 0)),
        "serving_answered_late": float(telemetry.get("answered_late", 0)),
        "serving_refused": float(sum(v for k, v in telemetry.items() if k.startswith("refused_"))),
        "serving_malformed": float(
            sum(v for k, v in telemetry.items() if k.startswith("rejected_"))
        ),
        "serving_expired": float(telemetry.get("expired", 0)),
        "serving_batches": float(telemetry.get("batches", 0)),
    }
    for key in sorted(LOG_MAXIMA):
        # (`telemetry()` names the share `serving_share` and the latencies `latency_*`:
        # reading only the unprefixed name logged a share of 0 whatever was spent)
        name = key if key in telemetry else key.removeprefix("serving_")
        out[key] = float(telemetry.get(name, 0.0))
    return out


def summary(rank: int, telemetry: Mapping[str, float]) -> str:
    """One line for people: what rank `rank` served over the run."""
    f = log_figures(telemetry)
    reasons = ", ".join(
        f"{k.removeprefix('refused_')} {int(v)}"
        for k, v in sorted(telemetry.items())
        if k.startswith("refused_") and v
    )
    late = int(f["serving_answered_late"])
    return (
        f"serving of rank {rank}: {plural(int(f['serving_requests']), 'request')}, "
        f"{int(f['serving_answered'])} answered in {plural(int(f['serving_batches']), 'batch')}"
        f"{_late(late)}, "
        f"{int(f['serving_refused'])} refused{f' ({reasons})' if reasons else ''}, "
        f"{int(f['serving_malformed'])} malformed, {int(f['serving_expired'])} expired; "
        f"latency p50/p99 {f['serving_latency_steps_p50']:.0f}/"
        f"{f['serving_latency_steps_p99']:.0f} steps "
        f"({f['serving_latency_ms_p50']:.1f}/{f['serving_latency_ms_p99']:.1f} ms); "
        f"{100 * f['serving_share']:.1f}% of training time"
    )


def log_summary(
    logger: logging.Logger, trainer: TrainerView | None, telemetry: Mapping[str, float]
) -> None:
    """The end-of-run line (`summary`) of `trainer`'s rank to `logger`, when it had
    requests: a WARNING when some were lost to their timeout, INFO otherwise."""
    if trainer is not None and telemetry.get("requests"):
        # (a WARNING when requests were lost to their timeout: Python's default
        # logging hides INFO, and a user's trial saw no word of 40 of 40 lost)
        lost = telemetry.get("expired", 0) or telemetry.get("answered_late", 0)
        level = logging.WARNING if lost else logging.INFO
        logger.log(level, "%s", summary(trainer.process_index, telemetry))


def _late(late: int) -> str:
    """What the summary says of the answers sent past their client's timeout."""
    return f" ({late} of them late: past their client's timeout, unread)" if late else ""
