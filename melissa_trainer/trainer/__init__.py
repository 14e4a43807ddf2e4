"""The top layer: `OnlineTrainer`, its loop (`loop`), the actions hooks request of it
(`actions`), its checkpoints written and read on every rank (`checkpointing`), its logs
and evaluation (`reporting`), preemption (`preemption`) and the lock of its output
directory (`output_lock`).
"""

from melissa_trainer.trainer import launcher_watch

# first, before torch's import: a rank whose launcher dies during its start-up exits
launcher_watch.arm()

from melissa_trainer.trainer.loop import OnlineTrainer  # noqa: E402

__all__ = ["OnlineTrainer"]
