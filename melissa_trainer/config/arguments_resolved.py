"""What `TrainingArguments`' fields resolve to: `ResolvedArguments`, a base of it.

The values a run uses that no single field holds: the TensorBoard directory
(`resolved_logging_dir`), the options given to `torch.compile` (`compile_options`) and
the configuration of each rank's buffer (`buffer_config`). Kept apart from `arguments`,
which holds the fields and their documentation; pure functions of the fields.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from melissa_trainer.buffers.config import BufferConfig
from melissa_trainer.config import compile_options as compiled
from melissa_trainer.config.argument_values import buffer_values, compile_options_of

__all__ = ["ResolvedArguments"]


class ResolvedArguments:
    """The resolved values of a `TrainingArguments` (which derives from it)."""

    if TYPE_CHECKING:  # the fields read here (the dataclass deriving from it has them)
        output_dir: str
        logging_dir: str | None
        seed: int

        def __init__(self, **values: Any) -> None: ...

    def compile_options(self) -> compiled.CompileOptions | None:
        """What `torch.compile` is given for the training step; None without
        `torch_compile`."""
        return compile_options_of(vars(self))

    @property
    def resolved_logging_dir(self) -> str:
        """`logging_dir`, or ``{output_dir}/runs`` when it is None."""
        if self.logging_dir is not None:
            return self.logging_dir
        return os.path.join(self.output_dir, "runs")

    def buffer_config(self, process_index: int = 0) -> BufferConfig:
        """The configuration of the buffer of training rank `process_index` (each rank
        seeds its buffer with ``seed + process_index``); `make_buffer` builds it.

        Its `BufferConfig.resolved_tolerance` is the sample-to-insert tolerance in use.
        """
        values = buffer_values(vars(self))
        values["seed"] = self.seed + process_index
        return BufferConfig(**values)
