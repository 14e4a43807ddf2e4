"""The top layer: `OnlineTrainer`, its loop (`loop`), the actions hooks request of it
(`actions`), its checkpoints written and read on every rank (`checkpointing`), its logs
and evaluation (`reporting`), preemption (`preemption`) and the lock of its output
directory (`output_lock`).
"""

from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = ["OnlineTrainer"]
