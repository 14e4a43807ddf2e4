"""A torchrun restart's process group formed on a store cleared of the failed attempt's
keys.

torch elastic's agent store (``TORCHELASTIC_USE_AGENT_STORE``: a ``TCPStore`` hosted by
the launcher of node 0, at ``MASTER_ADDR:MASTER_PORT``) outlives a restart
(``accelerate launch --max_restarts N``), and torch forms the default group under the
same keys at every attempt (``default_pg/...``: torch 2.13's
``torch/distributed/rendezvous.py`` assumes "a new TCPStore for every retry", which the
static rendezvous does not make). A restarted rank that reaches the group's set-up
before its peer reads that peer's gloo address of the failed attempt: "Gloo
connectFullMesh failed ... Connection refused", and the restart is lost (2 of 5
one-node restarts on a 2-core machine; 3 of 3 with ``--rdzv_backend c10d``; by hand,
tests/scripts/restart_ranks.py).

`clear_failed_attempt`, on a restart (``TORCHELASTIC_RESTART_COUNT`` above 0) before the
group forms: rank 0 deletes the store's ``default_pg/`` keys, then sets the attempt's
`cleared_key`; every other rank waits for that key before it forms the group, so no
rank reads a key of the failed attempt. The first attempt, one process, no agent store,
or a group formed already: nothing.

Blocking: a rank other than 0 waits up to `CLEARED_WAIT` s for rank 0 (which starts as
it does: a rank 0 that fails first makes torchrun end this one). Runs once per process,
on the thread that builds the trainer.
"""

from __future__ import annotations

import datetime
import logging
import os
from typing import TYPE_CHECKING

from melissa_trainer.trainer.refusal_mark import launch_store

if TYPE_CHECKING:
    from torch.distributed import TCPStore

__all__ = ["CLEARED_WAIT", "GROUP_PREFIX", "clear", "clear_failed_attempt", "cleared_key"]

logger = logging.getLogger(__name__)

#: the keys torch forms the default process group under (every attempt alike)
GROUP_PREFIX = "default_pg/"
#: seconds a rank other than 0 waits for rank 0 to have cleared the failed attempt's keys
CLEARED_WAIT = 600.0


def cleared_key(attempt: int) -> str:
    """The key rank 0 sets once the keys of the attempts before `attempt` are gone."""
    return f"melissa_trainer/restart/{attempt}/cleared"


def clear_failed_attempt() -> None:
    """Before a restarted run's process group forms: rank 0 clears the failed attempt's
    group keys from the launcher's store, the other ranks wait until it has (see the
    module's docstring). A no-op on a first attempt or without an agent store.

    Raises:
        RuntimeError: a rank other than 0 waited `CLEARED_WAIT` s for rank 0 in vain
            (torch's store timeout, its words kept).
    """
    try:
        attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        rank = int(os.environ.get("RANK", "0"))
    except ValueError:
        return
    if attempt <= 0:
        return
    link = launch_store()
    if link is None or isinstance(link, str):
        return  # (no agent store, or it is gone: torch's own set-up says so)
    with link:
        clear(link.store, attempt, rank)


def clear(store: TCPStore, attempt: int, rank: int, wait: float = CLEARED_WAIT) -> None:
    """`clear_failed_attempt` on `store`: rank 0 deletes the `GROUP_PREFIX` keys and sets
    `cleared_key` (`attempt`); another rank waits up to `wait` s for that key.

    Raises:
        RuntimeError: the wait ended without the key (torch's ``DistStoreError``).
    """
    if rank == 0:
        stale = [key for key in store.list_keys() if key.startswith(GROUP_PREFIX)]
        for key in stale:
            store.delete_key(key)
        store.set(cleared_key(attempt), "1")
        logger.debug("restart %d: %d key(s) of the failed attempt cleared", attempt, len(stale))
    else:
        store.wait([cleared_key(attempt)], datetime.timedelta(seconds=wait))
