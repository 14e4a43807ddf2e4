"""Resuming on another number of ranks: this rank's share of each per-rank part of a
checkpoint written by ``k`` ranks, on a run of ``m != k`` ranks.

`checkpoint.registry` loads such a checkpoint part by part, in its usual order: each
`Scope.GLOBAL` part as it is (model, optimizer and scheduler through Accelerate, which
reads one copy on any number of ranks; `TrainerState`; the hooks), each
`Scope.PER_RANK` part through its ``reshard``, the methods of `Reshard` below. Each
reads every old rank's files (``rank_0`` ... ``rank_{k-1}``) and takes this rank's
share through its owner's pure function:

* buffer: `melissa_trainer.buffers.reshard.share` of every old rank's snapshot and
  pending batches (the pending batches are folded into the buffers: after a resize no
  rank has a pending batch), fit to this run's buffer_size, which may
  differ from the checkpoint's (a resume on fewer ranks may need a larger one: the
  refusal names it, the same on every rank);
* source: `Source.reshard_state`, given the put count of this rank's buffer share;
* ``trainer_rank``: `state.share_samples_seen` and `core.figures.LogFigures.reshard_state`
  (the sums over ranks kept);
* per-simulation losses: `SimulationLosses.reshard_state` (the statistics as they are,
  each old rank's unreduced samples held by one new rank);
* RNG: a fresh seed per new rank, derived from the checkpoint (`reshard_seed`).

The buffer's share is computed first, then the source's, and the source's is loaded
first (`Part` order): a source that refuses the checkpoint (a study changed in a way it
cannot follow, a user `Source` that cannot reshard) refuses before anything is loaded,
as on the same number of ranks. Nothing here is a collective: every rank reads the
files it needs (every old rank's buffer, pending batches and source state).
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from safetensors.numpy import load_file

from melissa_trainer.buffers import META_FILE as BUFFER_META
from melissa_trainer.buffers import STATE_FILES as BUFFER_FILES
from melissa_trainer.buffers import ShareTooSmall, read_snapshot
from melissa_trainer.buffers.reshard import share
from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint.errors import naming_file
from melissa_trainer.checkpoint.files import read_json
from melissa_trainer.common.migrations import trainer_rank_of
from melissa_trainer.config.reading import ConfigError
from melissa_trainer.core import loss_per_simulation
from melissa_trainer.core.figures import LogFigures
from melissa_trainer.core.loss_per_simulation import SimulationLosses
from melissa_trainer.core.pending_file import PENDING_FILES, read_pending
from melissa_trainer.core.state import RANK_STATE_FILE, share_samples_seen
from melissa_trainer.core.state import STATE_FILE as TRAINER_STATE_FILE
from melissa_trainer.sources.source import STATE_FILE as SOURCE_FILE

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import CheckpointParts

__all__ = [
    "RESHARD_SEED_TAG",
    "Reshard",
    "check_same_ranks_buffer",
    "reshard_seed",
    "seed_everything",
]

#: what `reshard_seed` hashes first (so that its seeds are no other hash's)
RESHARD_SEED_TAG = b"melissa-trainer/reshard-seed/1"
#: what a buffer's share reads of each old rank, in that order (each part's own names)
_BUFFER_FILES = (*BUFFER_FILES, *PENDING_FILES)


def reshard_seed(torch_rng_state: bytes, world_size: int, rank: int) -> int:
    """The seed of rank `rank` of `world_size` resuming from a checkpoint of another
    number of ranks: the first 8 bytes (big-endian, top bit cleared) of the SHA-256 of
    `RESHARD_SEED_TAG`, then old rank 0's torch RNG state as the checkpoint holds it
    (`torch_rng_state`, the bytes of ``random_states_0.pkl``'s ``torch_manual_seed``),
    then ``f"{world_size}:{rank}"``. Deterministic (the same checkpoint resumed on the
    same number of ranks draws the same numbers), different on every rank and at every
    checkpoint. Pure."""
    digest = hashlib.sha256(RESHARD_SEED_TAG)
    digest.update(torch_rng_state)
    digest.update(f"{world_size}:{rank}".encode())
    return int.from_bytes(digest.digest()[:8], "big") & (2**63 - 1)


def seed_everything(seed: int) -> None:
    """Seed what Accelerate's RNG file restores on a CPU or CUDA run: Python's `random`
    with `seed`, numpy's global generator with ``seed % 2**32`` (its limit), torch's
    (every device's) with `seed`."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # (seeds every CUDA device too)


class Reshard:
    """The resharding load of one checkpoint on this rank: the ``reshard`` of each
    per-rank part (see the module docstring), and Accelerate's load with the fresh RNG
    kept. One per `checkpoint.registry.parts` call; the buffer's share is computed once
    (by the source's step, which needs its put count) and kept until the buffer's step
    loads it. Training thread only."""

    def __init__(self, trainer: CheckpointParts) -> None:
        self.trainer = trainer
        self._share: tuple[Path, tuple[dict[str, np.ndarray], dict[str, Any]]] | None = None
        self._old_puts: list[int] = []  # each old rank's buffer put count
        self._step: int | None = None  # Accelerate's step counter, from old rank 0's RNG file

    @property
    def rank(self) -> int:
        return self.trainer.process_index

    @property
    def world_size(self) -> int:
        return self.trainer.num_processes

    # -- the buffer and the source ----------------------------------------------------

    def buffer_share(self, path: Path, old: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """This rank's share of the old ranks' buffers and pending batches (computed
        once per checkpoint), fit to this run's buffer_size (any: a resume on fewer
        ranks may need a larger one, `buffers.reshard.share`).

        Raises:
            ConfigError: the checkpoint's buffers are of another kind, or disagree on a
                rate limiter, or a new rank's share holds more never-drawn reservoir
                samples than this run's buffer_size (the same on every rank: the
                message names the --buffer_size that fits every rank's).
        """
        if self._share is None or self._share[0] != path:
            snapshots, pending = [], []
            for r in range(old):  # each file read named in its error
                with naming_file(path, [f"rank_{r}/{name}" for name in _BUFFER_FILES]):
                    snapshots.append(read_snapshot(ckpt.rank_path(path, r)))
                    pending.append(read_pending(ckpt.rank_path(path, r)))
            self._old_puts = [int(meta["put"]) for _, meta in snapshots]
            _check_fits(snapshots[0][1], self.trainer)
            capacity = self.trainer.buffer.capacity
            try:
                shared = share(snapshots, pending, self.rank, self.world_size, capacity)
            except ShareTooSmall as exc:
                raise ConfigError(
                    f"{exc.problem}; resume with --buffer_size {exc.needed} or more (per "
                    f"rank; this run's is {capacity}), or on more ranks than {self.world_size}"
                ) from exc
            del snapshots, pending  # (their arrays are the share's, or freed)
            self._share = (path, shared)
        return self._share[1]

    def source(self, path: Path, old: int, version: int) -> None:
        """The source's share (`Source.reshard_state`, with this rank's buffer share's
        put count), loaded: its refusal comes first, as it is."""
        states = []
        for r in range(old):
            with naming_file(path, [f"rank_{r}/{SOURCE_FILE}"]):
                states.append(read_json(ckpt.rank_path(path, r) / SOURCE_FILE))
        _, meta = self.buffer_share(path, old)
        puts, put = self._old_puts, int(meta["put"])
        source = self.trainer.source
        state = source.reshard_state(states, puts, self.rank, self.world_size, put)
        source.load_state_dict(state)

    def buffer(self, path: Path, old: int, version: int) -> None:
        """Load this rank's buffer share; it is forgotten here (its memory is the buffer's)."""
        arrays, meta = self.buffer_share(path, old)
        self.trainer.buffer.load_state_dict(arrays, meta)
        self._share = None

    def pending(self, path: Path, old: int, version: int) -> None:
        """No pending batch after a resize: the old ones are in the buffers' shares."""
        self.trainer.dataset.clear_pending()

    # -- the trainer's own records ----------------------------------------------------

    def trainer_rank(self, path: Path, old: int, version: int) -> None:
        """`samples_seen` and the loss since the last log: the old ranks' sums, dealt
        out (`share_samples_seen`, `LogFigures.reshard_state`)."""
        records = []
        for r in range(old):
            file = ckpt.rank_path(path, r) / RANK_STATE_FILE
            if file.is_file():
                records.append(read_json(file))
            else:  # an earlier version's: rank 0's count, which every rank resumed with
                records.append(trainer_rank_of(read_json(path / TRAINER_STATE_FILE)))
        trainer = self.trainer
        counts = [int(record["samples_seen"]) for record in records]
        trainer.state.samples_seen = share_samples_seen(counts, self.rank, self.world_size)
        trainer.log_figures.load_state_dict(LogFigures.reshard_state(records, self.rank))

    def simulation_losses(
        self, path: Path, old: int, version: int, losses: SimulationLosses
    ) -> None:
        """Into `losses` (the run's `SimulationLossTracker`'s): the per-simulation
        statistics as they are, and this rank's share of the old ranks' unreduced
        samples (`SimulationLosses.reshard_state`); none from a checkpoint of an
        earlier version, which has none."""
        files = [ckpt.rank_path(path, r) / loss_per_simulation.STATE_FILE for r in range(old)]
        if not all(file.is_file() for file in files):
            return  # (an earlier version's: `checkpoint.registry` warns as on one rank)
        states = [load_file(str(file)) for file in files]
        shared = SimulationLosses.reshard_state(states, self.rank, self.world_size)
        losses.load_state_dict(shared)

    # -- the RNG ----------------------------------------------------------------------

    def rng(self, path: Path, old: int, version: int) -> None:
        """Seed this rank afresh (`reshard_seed` of old rank 0's RNG file) and keep
        Accelerate's step counter of that file for `accelerate`. Old rank 0's file is
        loaded whole (a damaged one is an error, as on the same number of ranks)."""
        from accelerate.utils import load as accelerate_load

        states: Any = accelerate_load(path / ckpt.rng_file(0))
        if not isinstance(states, dict) or "torch_manual_seed" not in states:
            raise ValueError(f"{ckpt.rng_file(0)} lacks the RNG state torch_manual_seed")
        torch_state = torch.as_tensor(states["torch_manual_seed"]).numpy().tobytes()
        seed_everything(reshard_seed(torch_state, self.world_size, self.rank))
        self._step = int(states["step"]) if "step" in states else None

    def accelerate(self, path: Path, old: int, version: int) -> None:
        """Accelerate's `load_state` (model, optimizer, scheduler, scaler: one copy),
        keeping the RNG states `rng` seeded: Accelerate would restore old rank R's into
        new rank R (and nothing on a rank the checkpoint lacks). Its step counter is
        old rank 0's (the same on every rank)."""
        kept = (random.getstate(), np.random.get_state(), torch.get_rng_state())
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        acc = self.trainer.accelerator
        acc.load_state(str(path))
        random.setstate(kept[0])
        np.random.set_state(kept[1])
        torch.set_rng_state(kept[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
        if self._step is not None:
            acc.step = self._step


def _check_fits(meta: dict[str, Any], trainer: CheckpointParts) -> None:
    """Refuse the old ranks' buffers (old rank 0's snapshot `meta`: every old rank's
    buffer is alike) when this run's buffer cannot take their share, before anything
    is loaded (the buffer's own check would come after the source and the model).
    Another buffer_size is taken (`buffers.reshard.share` fits the share to it)."""
    buffer, args = trainer.buffer, trainer.args
    if meta.get("kind") != buffer.kind:
        raise ConfigError(
            f"the checkpoint's buffers are {meta.get('kind')!r}, this run's {buffer.kind!r} "
            f"(--buffer {args.buffer}): a buffer's samples and statistics are its kind's; "
            f"resume with --buffer {meta.get('kind')}"
        )
    if (meta.get("rate_limiter") is None) != (buffer.rate_limiter is None):
        has = "has" if meta.get("rate_limiter") is not None else "has no"
        raise ConfigError(
            f"the checkpoint {has} sample-to-insert ratio, this run "
            f"{'has' if buffer.rate_limiter is not None else 'has none'}: resume with the "
            "same --sample_to_insert_ratio"
        )


def check_same_ranks_buffer(path: Path, trainer: CheckpointParts) -> None:
    """On the same number of ranks, refuse before anything is loaded a checkpoint whose
    buffers are of another kind or size than this run's, naming the flag and the value
    that resume it (each rank loads its own buffer as it was: its size is the
    checkpoint's; another size is taken on another number of ranks only). A buffer
    file that does not read is left to the buffer's own load, which names it."""
    try:
        meta = read_json(ckpt.rank_path(path, trainer.process_index) / BUFFER_META)
        kind, capacity = meta["kind"], int(meta["capacity"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    buffer, args = trainer.buffer, trainer.args
    if kind != buffer.kind:
        raise ConfigError(
            f"the checkpoint's buffers are {kind!r}, this run's {buffer.kind!r} (--buffer "
            f"{args.buffer}): a buffer's samples and statistics are its kind's; resume "
            f"with --buffer {kind}"
        )
    if capacity != buffer.capacity:
        raise ConfigError(
            f"the checkpoint's buffers have room for {capacity} samples per rank "
            f"(its --buffer_size), this run's for {buffer.capacity}: on the same number "
            f"of ranks ({trainer.num_processes}) each rank loads its buffer as it was; "
            f"resume with --buffer_size {capacity}"
        )
