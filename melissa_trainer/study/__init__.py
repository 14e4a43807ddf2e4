"""`Study`: a launcher's simulations streamed into the trainer as its `train_source`
(`study`), and the hooks through which it hears of the run (`hooks`).

Joins the launcher and the stream; below the trainer, which it never imports.
"""

from melissa_trainer.study.study import Study

__all__ = ["Study"]
