"""Which attempt of this torchrun launch first said, on this rank, that a restart after a
stop for good does not train (`final_restart`).

torchrun restarts a failed run on any non-zero exit while restarts are left (its agent
knows no exit status that ends the launch; only every worker's exit 0 does, which would
say the run succeeded), so with ``--max_restarts N`` above 1 each restart after a
``nonfinite`` stop ends at once, and said its whole ERROR paragraph again: N times the
same paragraph per rank. `first_saying` asks the launcher's store (the agent's, which
outlives the restarts: `refusal_mark.launch_store`) with an add-if-absent
(``compare_set`` from ""), per rank: the first attempt to ask says the paragraph, the
later ones a short line naming it (`final_restart.refuse_final_restart`).
"""

from __future__ import annotations

import logging

from melissa_trainer.trainer.refusal_mark import launch_store

__all__ = ["SAID_KEY", "first_saying"]

logger = logging.getLogger(__name__)

#: the launcher store's key, per rank, holding the attempt that said it first
SAID_KEY = "melissa_trainer/final_stop_said/{rank}"


def first_saying(rank: int, attempt: int) -> int:
    """The attempt (torchrun's restart count) of this launch that said it first on rank
    `rank`: `attempt` when this one is the first (or no store answers: said in full),
    an earlier one's otherwise. Blocks at most the store's timeouts; never raises."""
    link = launch_store(solo=True)
    if link is None or isinstance(link, str):
        return attempt
    with link:
        try:
            said = link.store.compare_set(SAID_KEY.format(rank=rank), "", str(attempt))
            first = bytes(said).decode("ascii", "replace")
        except RuntimeError as exc:  # (torch's DistError: the store went meanwhile)
            logger.debug("no word of an earlier attempt from the launcher's store: %s", exc)
            return attempt
    return int(first) if first.isdigit() else attempt
