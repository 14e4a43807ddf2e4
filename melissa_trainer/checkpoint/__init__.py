"""Checkpoints: directories and their atomic commit (`paths`), the manifest of files and
hashes (`manifest`), the errors that name a checkpoint and its file (`errors`), what a
part is and the format version (`format`), the registry of named parts a checkpoint
holds (`registry`) and the resharding of per-rank parts onto another number of ranks
(`reshard`).

What a checkpoint saves is given as parts (`core.view.CheckpointParts`), never the
trainer.
"""

from melissa_trainer.checkpoint.paths import checkpoint_path, resolve_resume
from melissa_trainer.common.checkpoint_names import PREFIX, latest_checkpoint, list_checkpoints

__all__ = ["PREFIX", "checkpoint_path", "latest_checkpoint", "list_checkpoints", "resolve_resume"]
