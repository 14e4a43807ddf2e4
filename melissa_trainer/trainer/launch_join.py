"""This torchrun launch's id, agreed by every rank of every attempt through the
launcher's store (`stream.launch_identity`: the id the stop records carry).

torch elastic's agent store (``TORCHELASTIC_USE_AGENT_STORE``: a ``TCPStore`` hosted
by the launcher of node 0, at ``MASTER_ADDR:MASTER_PORT``) is new for each launch and
outlives its restarts (`trainer.restart_keys`). `join_launch` offers it a new id under
`LAUNCH_KEY` with an add-if-absent (``compare_set`` from ""): the first rank to ask, of
whichever attempt, sets it, and every rank of every attempt of the launch reads the
same one back, without waiting on a peer. Without an agent store (``python train.py``,
another launcher) or when it cannot be reached (its launcher has ended: torch's own
set-up then fails and says so), the process has no id (None).
"""

from __future__ import annotations

import logging
import uuid

from melissa_trainer.stream.launch_identity import note_launch
from melissa_trainer.trainer.refusal_mark import launch_store

__all__ = ["LAUNCH_KEY", "join_launch"]

logger = logging.getLogger(__name__)

#: the launcher store's key holding the launch's id
LAUNCH_KEY = "melissa_trainer/launch_id"


def join_launch() -> str | None:
    """This launch's id from the launcher's store, set there if no rank has yet, and
    noted as this process's (`stream.launch_identity.note_launch`); None (noted too)
    without a store or when it does not answer. Blocks at most the store's timeouts
    (`refusal_mark.CONNECT_TIMEOUT`, `refusal_mark.STORE_TIMEOUT`); never raises."""
    launch: str | None = None
    link = launch_store(solo=True)
    if link is not None and not isinstance(link, str):
        with link:
            try:
                said = link.store.compare_set(LAUNCH_KEY, "", uuid.uuid4().hex)
                launch = bytes(said).decode("ascii", "replace") or None
            except RuntimeError as exc:  # (torch's DistError: the store went meanwhile)
                logger.debug("no launch id from the launcher's store: %s", exc)
    note_launch(launch)
    return launch
