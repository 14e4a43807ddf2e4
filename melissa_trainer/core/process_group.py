"""The end of the trainer's process group: torch.distributed's gloo group destroyed, and
its worker threads joined, before the interpreter finalizes.

Why. A gloo process group runs each collective on one of its worker threads
(``pt_gloo_runloop``). The worker signals the collective complete, and only then drops
its reference to the work, whose tensors have Python objects: dropping them takes the
GIL. When the main thread has meanwhile reached the interpreter's finalization (the
script ended right after its last collective), the worker's attempt to take the GIL
makes CPython end the thread (`PyThread_exit_thread`), whose forced unwinding through
torch's ``noexcept`` work destructor calls ``std::terminate``: "terminate called without
an active exception", SIGABRT, a complete run that exits -6 (a core's backtrace, on the
worker: ``~AsyncAllreduceWork`` (a trainer run's) or ``~AsyncAllgatherWork``
(``all_gather_object``'s) <- ``ProcessGroupGloo::runLoop``, ``decref_pyobject``,
``gil_scoped_acquire``, ``take_gil``, ``PyThread_exit_thread``, ``__pthread_unwind``,
``std::terminate``; the main thread in ``Py_FinalizeEx``). A torch bug, open
(pytorch/pytorch#190489; an atexit destroy in torch itself, pytorch/pytorch#179291,
was abandoned).

The fix is an order: at exit (`atexit`, which runs before finalization, while other
threads may still take the GIL), the group is destroyed *and its last reference
dropped*, so that ``~ProcessGroupGloo`` runs there: it waits for its queue to drain and
joins its workers, with the GIL released (torch's holder drops it), so a worker's last
release happens while the interpreter is whole. `destroy_process_group` alone does not
free the group while something else holds it, so the teardown first releases the two
holders a trainer run leaves:

* the trainer's DDP wrapper (its ``process_group``, its C++ ``reducer`` and the
  ``logger`` holding that reducer), registered by `release_at_exit`, and the copies of
  these attributes in torch.compile's ``functools.wraps`` of it (`torch_compile`);
* `torch.distributed.nn.functional`, whose functions take ``group=group.WORLD`` as a
  default evaluated at import: imported after the group formed (DDP imports it), they
  hold it for good. `prepare` imports it before the group forms (its defaults are then
  None).

Only gloo groups (NCCL groups are left as torch leaves them: untested here). A group a
user destroyed first is left alone. The teardown is collective-free but waits for every
collective still queued on this rank, as ``~ProcessGroupGloo`` does: a collective left
in flight (an ``async_op`` work never waited for) whose peers never run it holds the
exit until gloo's timeout. An `atexit` handler registered before the trainer's runs
after this teardown, without a process group.

Not thread-safe: `prepare` and `release_at_exit` run on the thread that builds the
trainer; the teardown runs once, at exit.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import logging
import weakref
from pathlib import Path

import torch
import torch.distributed as dist

__all__ = ["gloo_worker_threads", "prepare", "release_at_exit", "teardown"]

logger = logging.getLogger(__name__)

#: torch modules whose function defaults evaluate ``group.WORLD`` at import
#: (torch/distributed/nn/functional.py: ``def broadcast(tensor, src, group=group.WORLD)``
#: and nine more); cheap to import (a few ms). ZeroRedundancyOptimizer's and FSDP's
#: ShardedGradScaler's modules do the same but cost over a second to import, and a
#: trainer run imports neither.
_CAPTURE_WORLD_AT_IMPORT = ("torch.distributed.nn.functional",)

#: the thread name gloo's worker threads carry (torch sets it; /proc shows it)
_GLOO_WORKER = "pt_gloo_runloop"

_models: weakref.WeakSet[torch.nn.parallel.DistributedDataParallel] = weakref.WeakSet()
_registered = False


def prepare() -> None:
    """Before a multi-process trainer's Accelerator forms the process group: import the
    modules that would hold it from their defaults, and register `teardown` with
    `atexit` (once per process).

    Imported after the group formed (a user's own ``init_process_group`` before the
    trainer), they already hold it; `teardown` then warns that the group outlives it.
    """
    global _registered
    if not dist.is_available():
        return
    if not dist.is_initialized():
        for name in _CAPTURE_WORLD_AT_IMPORT:
            importlib.import_module(name)
    if not _registered:
        atexit.register(teardown)
        _registered = True


def release_at_exit(model: torch.nn.Module) -> None:
    """Have `teardown` release `model`'s hold on the process group (a no-op for a model
    that is not a `DistributedDataParallel`). Weakly held: a model collected before the
    exit holds nothing."""
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        _models.add(model)


def teardown() -> None:
    """Destroy the default gloo process group and join its threads (see the module's
    docstring); called by `atexit`. A no-op without one (never formed, or destroyed by
    the user first) or for another backend.

    After it, the DDP wrappers registered with `release_at_exit` hold no group (they
    cannot run a step; at exit nothing does). A full garbage collection runs only when
    gloo worker threads outlive the group's release (it frees holders in reference
    cycles); warns when they outlive that too (something else still holds the group: the
    exit may then abort as before).
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    if dist.get_backend() != "gloo":
        return
    # Held here so that the group's last reference is dropped below, by this frame:
    # torch's holder releases the GIL around the destructor, which joins the workers
    # (dropped last by `destroy_process_group`'s own registry call, the destructor
    # would join them with the GIL held, while a worker may be waiting for it).
    group = dist.group.WORLD
    logger.debug("tearing down the gloo process group at exit")
    for model in list(_models):
        _release(model)
    _models.clear()
    dist.destroy_process_group()
    del group  # the last reference: ~ProcessGroupGloo drains its queue, joins its workers
    left = gloo_worker_threads()
    if left:
        # Something still holds the group: a trainer dropped in a reference cycle (its
        # DDP wrapper with it) is freed by a full collection, which drops the group as
        # `del` does. Only then: a full collection walks every object torch and the
        # script made (1.2 to 1.3 s per rank, the 2-rank heat example on a 2-core machine
        # at load average 15 to 19), at every multi-process exit when it ran always.
        gc.collect()
        left = gloo_worker_threads()
    if left:
        logger.warning(
            "%d gloo worker thread(s) outlive the process group's destruction at exit: "
            "something still holds the group (a DistributedDataParallel not built by "
            "the trainer, a module imported after the group formed), and the exit may "
            "abort ('terminate called without an active exception'); destroy the "
            "group yourself once nothing holds it",
            left,
        )


def _release(model: torch.nn.parallel.DistributedDataParallel) -> None:
    """Drop the references `model` holds to its process group: the C++ reducer (and the
    logger that holds it) and the group itself, from its attributes and from the copies
    of them that `functools.wraps(model)` made (torch.compile's wrappers of the DDP
    module: `functools.update_wrapper` copies the wrapped object's ``__dict__``)."""
    own = vars(model)
    held = {name: own[name] for name in ("logger", "reducer", "process_group") if name in own}
    reducer = held.get("reducer")
    copies = [] if reducer is None else gc.get_referrers(reducer)
    for attrs in [own, *copies]:
        if attrs is held or not isinstance(attrs, dict) or attrs.get("reducer") is not reducer:
            continue  # (`own` without a reducer: only its process_group, below)
        for name, value in held.items():
            if attrs.get(name) is value:
                del attrs[name]
    own["process_group"] = None  # (typed a ProcessGroup: never None in use)


def gloo_worker_threads() -> int:
    """How many of this process's threads are gloo worker threads (by the name torch
    gives them; 0 where /proc cannot tell, off Linux)."""
    tasks = Path("/proc/self/task")
    count = 0
    try:
        entries = list(tasks.iterdir())
    except OSError:
        return 0
    for entry in entries:
        try:
            if (entry / "comm").read_text().strip() == _GLOO_WORKER:
                count += 1
        except OSError:  # the thread ended meanwhile
            continue
    return count
