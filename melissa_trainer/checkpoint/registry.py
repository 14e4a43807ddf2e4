"""A checkpoint as a registry of named parts: the one list of what a checkpoint holds.

Each stateful part of a run owns its state (``state_dict`` / ``load_state_dict``, or
``save`` / ``load`` for the parts kept as arrays); this module names the parts
(`parts`), says for each where its files are and whether its state is global or per
rank (a `format.Part`), writes them (`write`, into the staging directory of
`trainer.checkpointing.save_checkpoint`: the atomic commit and the manifest are theirs)
and reads them back in order (`load`). What a part is, its `Scope`, and the format
version of the whole checkpoint (`FORMAT_FILE`) are `format`'s; the
migrations of every record are in `common.migrations`.

Resuming on another number of ranks: a checkpoint written by ``k`` ranks loads on
``m != k`` ranks part by part in the same order, each per-rank part through its
``reshard`` (`Part`), which reads every old rank's files and takes this rank's share
through its owner's pure function (`checkpoint.reshard`: the buffers' samples and
pending batches dealt out, the source's records split, the sums of the per-rank
figures kept, the RNG seeded afresh); a per-rank part without one is refused before
anything is loaded (`load`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetensors.numpy import load_file, save_file

from melissa_trainer.buffers import STATE_FILES as BUFFER_FILES
from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint import registered_objects, scheduler_class
from melissa_trainer.checkpoint.errors import naming_file
from melissa_trainer.checkpoint.files import read_json, record_text, write_json

# `X as X`: kept importable here for this module's old path (issue 45); they go with _moved.py
from melissa_trainer.checkpoint.format import FORMAT_FILE as FORMAT_FILE
from melissa_trainer.checkpoint.format import FORMAT_VERSION as FORMAT_VERSION
from melissa_trainer.checkpoint.format import Part, Scope, format_of, write_format
from melissa_trainer.checkpoint.reshard import Reshard, check_same_ranks_buffer
from melissa_trainer.checkpoint.resume_end import warn_nothing_to_train
from melissa_trainer.checkpoint.resumed_args import warn_changed_settings
from melissa_trainer.checkpoint.resumed_best import restart_best
from melissa_trainer.common.migrations import trainer_rank_of, upgrade
from melissa_trainer.config.arguments_file import ARGS_FILE
from melissa_trainer.core import loss_per_simulation
from melissa_trainer.core.loss_per_simulation import SimulationLosses
from melissa_trainer.core.pending_file import PENDING_FILES
from melissa_trainer.core.state import RANK_STATE_FILE
from melissa_trainer.core.state import STATE_FILE as TRAINER_STATE_FILE
from melissa_trainer.hooks.base import STATE_FILE as HOOKS_FILE
from melissa_trainer.sources.source import STATE_FILE as SOURCE_FILE

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import CheckpointParts

__all__ = ["RANK_STATE", "SAVE_FIRST", "load", "parts", "training_ranks", "write"]  # fmt: skip

logger = logging.getLogger(__name__)

#: per-rank trainer figures: this rank's `samples_seen` and its loss since the last log
RANK_STATE = RANK_STATE_FILE
#: the parts `write` saves first, in this order (the rest in `parts` order): the buffer's
#: snapshot before the source's record (see `write`)
SAVE_FIRST = ("buffer", "source")
#: the keys of Accelerate's RNG file that its `load_state` restores (it ignores the file,
#: logging at INFO level only, when it does not load: see `_check_rng`)
_RNG_KEYS = ("random_state", "numpy_random_seed", "torch_manual_seed")


def parts(trainer: CheckpointParts) -> list[Part]:
    """The parts of `trainer`'s checkpoints, in the order they are loaded (and written,
    but for `SAVE_FIRST`, which `write` saves before the others): the source
    first (a study resumed with settings it cannot follow is refused before anything
    else is loaded, docs/resume.md), the RNG file checked before Accelerate loads it,
    the trainer state before the hooks, the buffer before the pending batches. When
    resharding, the source's step computes the buffer's share first (the source's
    share needs its put count), and Accelerate's load keeps the fresh RNG states."""
    rank = trainer.process_index
    mine = ckpt.rank_path(Path("."), rank).as_posix()  # "rank_R"
    acc, state = trainer.accelerator, trainer.state
    reshard = Reshard(trainer)

    def own(*names: str) -> Callable[[Path, int], list[str]]:
        return lambda path, r: [f"rank_{r}/{name}" for name in names]

    def root(*names: str) -> Callable[[Path, int], list[str]]:
        return lambda path, r: list(names)

    def rank_dir(path: Path) -> Path:
        return ckpt.rank_path(path, rank)

    def load_source(path: Path, version: int) -> None:
        with naming_file(path, [f"{mine}/{SOURCE_FILE}"]):
            source_state = read_json(rank_dir(path) / SOURCE_FILE)
        trainer.source.load_state_dict(source_state)  # its own errors, as they are

    def load_trainer_state(path: Path, version: int) -> None:
        saved = read_json(path / TRAINER_STATE_FILE)
        # (its version is the format's)
        state.load_state_dict(upgrade("trainer_state", saved, version))
        state.max_steps = trainer.args.max_steps  # the new run's limit wins

    def save_rank(path: Path) -> None:
        figures = {"samples_seen": state.samples_seen, **trainer.log_figures.state_dict()}
        write_json(rank_dir(path) / RANK_STATE, figures)

    def load_rank(path: Path, version: int) -> None:
        file = rank_dir(path) / RANK_STATE
        if file.is_file():
            figures = read_json(file)
        else:  # a checkpoint of a version before it: rank 0's count, in the trainer state
            figures = trainer_rank_of(read_json(path / TRAINER_STATE_FILE))
        state.samples_seen = int(figures["samples_seen"])
        trainer.log_figures.load_state_dict(figures)

    def load_args(path: Path, version: int) -> None:
        # for reference, not restored: the changes of this run's are named (main rank)
        # (every rank: the best of another metric is forgotten on all, `restart_best`)
        file = path / ARGS_FILE
        if file.is_file():
            saved, current = read_json(file), trainer.args.to_dict()
            if trainer.is_main_process:
                warn_changed_settings(path, saved, current)
            restart_best(path, saved, current, state, trainer.is_main_process)

    # The per-simulation losses, when the run tracks them (`CheckpointParts.tracked_losses`).
    # A run without them writes an empty record all the same: every checkpoint has the
    # same files, and one of an untracked run resumes with tracking turned on.
    tracked = trainer.tracked_losses

    def save_losses(path: Path) -> None:
        losses = tracked if tracked is not None else SimulationLosses(acc.device, False)
        save_file(losses.state_dict(), str(rank_dir(path) / loss_per_simulation.STATE_FILE))

    def load_losses(path: Path, version: int) -> None:
        file = rank_dir(path) / loss_per_simulation.STATE_FILE
        if tracked is None:  # not tracked in this run: the statistics are not carried on
            return
        if file.is_file():
            tracked.load_state_dict(load_file(str(file)))
        else:  # a checkpoint of an earlier version
            logger.warning(
                "%s has no per-simulation losses (written by an earlier version): the "
                "simulations trained on before it are not observed by the sampler",
                path,
            )

    def reshard_losses(path: Path, old: int, version: int) -> None:
        files = [ckpt.rank_path(path, r) / loss_per_simulation.STATE_FILE for r in range(old)]
        if tracked is None:  # as in `load_losses`
            return
        if all(file.is_file() for file in files):
            reshard.simulation_losses(path, old, version, tracked)
        else:  # a checkpoint of an earlier version
            logger.warning(
                "%s has no per-simulation losses (written by an earlier version): the "
                "simulations trained on before it are not observed by the sampler",
                path,
            )

    return [
        # (a `Study`'s source state holds, on rank 0 only, the launcher's record: global
        # state inside a per-rank part, which `Study.reshard_state` gives new rank 0)
        Part(
            "source",
            Scope.PER_RANK,
            own(SOURCE_FILE),
            lambda path: (rank_dir(path) / SOURCE_FILE).write_bytes(
                record_text(trainer.source.state_dict()).encode()
            ),  # (`record_text`: the bytes whose hash `end_save` compares at the end)
            load_source,
            names_file=False,
            reshard=reshard.source,
        ),
        Part(
            "rng",
            Scope.PER_RANK,
            lambda path, r: [ckpt.rng_file(r)],
            None,
            lambda path, version: _check_rng(path / ckpt.rng_file(rank)),
            reshard=reshard.rng,
        ),
        Part(
            "accelerate",
            Scope.GLOBAL,
            _accelerate_files,
            lambda path: acc.save_state(str(path), safe_serialization=True),
            lambda path, version: acc.load_state(str(path)),
            collective=True,
            reshard=reshard.accelerate,
        ),
        Part(
            "trainer_state",
            Scope.GLOBAL,
            root(TRAINER_STATE_FILE),
            lambda path: (path / TRAINER_STATE_FILE).write_text(state.to_json()),
            load_trainer_state,
        ),
        Part(
            "hooks",
            Scope.GLOBAL,
            root(HOOKS_FILE),
            lambda path: write_json(path / HOOKS_FILE, trainer.hooks.state_dict()),
            lambda path, version: trainer.hooks.load_state_dict(read_json(path / HOOKS_FILE)),
        ),
        Part(
            "buffer",
            Scope.PER_RANK,
            own(*BUFFER_FILES),
            lambda path: trainer.buffer.save(rank_dir(path)),
            lambda path, version: trainer.buffer.load(rank_dir(path)),
            reshard=reshard.buffer,
        ),
        Part(
            "pending",
            Scope.PER_RANK,
            own(*PENDING_FILES),
            lambda path: trainer.dataset.save(rank_dir(path)),
            lambda path, version: trainer.dataset.load(rank_dir(path)),
            reshard=reshard.pending,
        ),
        Part(
            "trainer_rank",
            Scope.PER_RANK,
            own(RANK_STATE),
            save_rank,
            load_rank,
            reshard=reshard.trainer_rank,
        ),
        Part(
            "simulation_losses",
            Scope.PER_RANK,
            own(loss_per_simulation.STATE_FILE),
            save_losses,
            load_losses,
            reshard=reshard_losses,
        ),
        Part(
            "training_args",
            Scope.GLOBAL,
            root(ARGS_FILE),
            lambda path: write_json(path / ARGS_FILE, trainer.args.to_dict()),
            load_args,
        ),
        Part(  # (read by `load` before any part: `scheduler_class.check`)
            "lr_scheduler",
            Scope.GLOBAL,
            root(scheduler_class.SCHEDULER_FILE),
            lambda path: scheduler_class.record(
                path, trainer.lr_scheduler, registered_objects.recorded(trainer.accelerator)
            ),
            lambda path, version: None,
        ),
    ]


def write(trainer: CheckpointParts, staging: Path) -> None:
    """Write this rank's parts of the checkpoint into `staging` (not synced), and on the
    main rank `FORMAT_FILE`: the format version and each part's scope.

    The buffer's snapshot is taken first and the source's record right after it
    (`SAVE_FIRST`), then the other parts in `parts` order: a source's receiver puts on
    while a checkpoint is written, and its record forgets at load the samples it
    recorded after the buffer's snapshot (`IngestState.load_state_dict`), so that they
    are accepted again when re-sent. A record taken before the buffer's snapshot lacked
    the samples put in between, which the buffer held: put twice after a resume."""
    main = trainer.is_main_process
    ckpt.rank_path(staging, trainer.process_index).mkdir(parents=True, exist_ok=True)
    registered = parts(trainer)
    first = [part for name in SAVE_FIRST for part in registered if part.name == name]
    for part in [*first, *(part for part in registered if part.name not in SAVE_FIRST)]:
        if part.save is None:
            continue
        if part.scope is Scope.PER_RANK or part.collective or main:
            part.save(staging)
    if main:
        write_format(staging, registered)


def load(trainer: CheckpointParts, path: Path) -> None:
    """Restore every part from checkpoint `path`, in order; each part's error names its
    file (`naming_file`), but the source's own refusal, raised as it is.

    A checkpoint of another number of ranks (``rank_R`` directories) loads each
    per-rank part through its ``reshard`` (see the module docstring).

    Raises:
        ValueError: a checkpoint of another number of ranks, and a per-rank part
            without a ``reshard`` (before anything is loaded).
    """
    version = format_of(path)
    scheduler_class.check(path, trainer.lr_scheduler)  # (Accelerate's load would mix two)
    registered_objects.check(path, path / scheduler_class.SCHEDULER_FILE, trainer.accelerator)
    old, rank = ckpt.count_ranks(path), trainer.process_index
    registered = parts(trainer)
    resharding = old != trainer.num_processes
    if resharding:
        _check_reshardable(path, registered, old, trainer.num_processes)
        if trainer.is_main_process:  # a warning: shown with no logging set up (a user's
            # script rarely sets any up), since the run's RNG streams change with it
            logger.warning(
                "%s was written by %s, this run has %d: each rank takes its "
                "share of every per-rank part (docs/how-to/resize.md)",
                path,
                training_ranks(old),
                trainer.num_processes,
            )
    else:  # another buffer_size is taken on another number of ranks only: say so first
        check_same_ranks_buffer(path, trainer)
    for part in registered:
        per_rank = part.scope is Scope.PER_RANK
        if resharding and part.reshard is not None:
            files = [f for r in range(old if per_rank else 1) for f in part.files(path, r)]

            def action(part: Part = part) -> None:
                assert part.reshard is not None
                part.reshard(path, old, version)

        else:
            files = part.files(path, rank)

            def action(part: Part = part) -> None:
                part.load(path, version)

        if not part.names_file:
            action()
            continue
        with naming_file(path, files):
            action()
    if trainer.is_main_process:  # (after the buffer: the advice depends on what it holds)
        warn_nothing_to_train(trainer, path)


def training_ranks(n: int) -> str:
    """``"1 training rank"``, ``"2 training ranks"``: a count as the messages say it."""
    return f"{n} training rank" + ("" if n == 1 else "s")


def _check_reshardable(path: Path, registered: list[Part], old: int, world_size: int) -> None:
    """Refuse, before anything is loaded, a checkpoint of `old` ranks on `world_size`
    when a per-rank part cannot be resharded (it has no ``reshard``)."""
    if old < 1:
        raise ValueError(f"checkpoint {path} has no rank_R directory: it is not a checkpoint")
    missing = [p.name for p in registered if p.scope is Scope.PER_RANK and p.reshard is None]
    if missing:
        raise ValueError(
            f"checkpoint {path} was written by {training_ranks(old)} but this run has "
            f"{world_size}, and the per-rank parts {missing} cannot be split or merged "
            f"over another number of ranks: resume with --num_processes {old}"
        )


def _accelerate_files(path: Path, rank: int) -> list[str]:
    """The files `Accelerator.load_state` reads on rank `rank`, in its order (the
    candidates `naming_file` names one of)."""
    names = ["model.safetensors"]
    for pattern in ("model_*.safetensors", "optimizer*.bin", "scheduler*.bin", "scaler.pt"):
        names += sorted(p.name for p in path.glob(pattern))
    names += sorted(p.name for p in path.glob("custom_checkpoint_*.pkl"))
    return [*dict.fromkeys(names), ckpt.rng_file(rank)]


def _check_rng(file: Path) -> None:
    """Load Accelerate's RNG file as its `load_state` does, and check it holds the
    states it restores. Why: `accelerate.checkpointing.load_accelerator_state` wraps
    this load in ``except Exception: logger.info("Could not load random states")``, so
    a damaged file would be ignored without a word and the run would go on with other
    random numbers (dropout, ...) than the run it resumes."""
    from accelerate.utils import load as accelerate_load

    states: Any = accelerate_load(file)
    missing = [key for key in _RNG_KEYS if not isinstance(states, dict) or key not in states]
    if missing:
        raise ValueError(f"{file.name} lacks the RNG states {missing}")
