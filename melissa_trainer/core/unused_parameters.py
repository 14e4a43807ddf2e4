"""DDP's error on parameters that took no part in a step's loss, raised again naming the
fix (`unused_parameters_named`, around both training steps' loss computation).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

#: DDP's error at the forward after a backward that left parameters without gradients
_UNUSED_PARAMETERS = "Expected to have finished reduction in the prior iteration"


class unused_parameters_named(AbstractContextManager[None]):  # (as contextlib.suppress)
    """Around a step's loss computation: DDP's error on parameters that took no part in
    the previous step's loss (its own text names only DDP's keyword) is raised as a
    RuntimeError that names the fix, from DDP's; any other exception propagates
    unchanged, its traceback as it was (no frame of this one's)."""

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if isinstance(exc, RuntimeError) and _UNUSED_PARAMETERS in str(exc):
            raise RuntimeError(
                f"{exc}\nA parameter of the model took no part in a step's loss: pass "
                "--ddp_find_unused_parameters true (TrainingArguments("
                "ddp_find_unused_parameters=True)), or freeze it (requires_grad_(False))"
            ) from exc
