"""`TrainerRanks`: `OnlineTrainer` among the launch's ranks, a base class of it: this
process's rank (`process_index`), the ranks' number (`num_processes`), whether it is the
main one (`is_main_process`), and whether a peer's process is known to have ended
(`peer_ended`: its hook mark's pid, `hook_mark.known_gone`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from melissa_trainer.trainer.hook_mark import known_gone
from melissa_trainer.trainer.rank_failure import NOTES_DIR

if TYPE_CHECKING:  # pragma: no cover - types only
    from accelerate import Accelerator

    from melissa_trainer.config.arguments import TrainingArguments

__all__ = ["TrainerRanks"]


class TrainerRanks:
    """The ranks of `OnlineTrainer` (which sets the attributes declared here)."""

    accelerator: Accelerator
    args: TrainingArguments
    #: this run's identity (`OnlineTrainer.run_id`): the hook marks' run
    run_id: str

    @property
    def is_main_process(self) -> bool:
        return self.accelerator.is_main_process

    @property
    def process_index(self) -> int:
        return self.accelerator.process_index

    @property
    def num_processes(self) -> int:
        return self.accelerator.num_processes

    def peer_ended(self, rank: int) -> bool:
        """Whether rank `rank`'s process is known to have ended, by the pid its hook
        mark holds, on this host (`hook_mark.known_gone`; False where not known: another
        host, no mark, one process). A study's end waits no longer for its last word."""
        notes = Path(self.args.output_dir) / NOTES_DIR
        return self.num_processes > 1 and known_gone(notes, str(self.run_id), rank)
