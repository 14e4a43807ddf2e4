"""The options of `torch.compile` as `TrainingArguments` names them (those of Hugging Face
`transformers`: `torch_compile`, `torch_compile_backend`, `torch_compile_mode`): their
resolution and their checks, each problem one line naming the field and the fix.

torch is imported only inside the checks, which run when compilation is asked for
(torch's compiler takes about a second to import); `core.compiled` compiles.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from melissa_trainer.config.reading import ConfigError, ConversionError, convert_value

#: the backend `torch_compile` uses when `torch_compile_backend` is unset (as in HF)
DEFAULT_BACKEND = "inductor"
#: modes that capture CUDA graphs (inductor's ``triton.cudagraphs``)
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")
#: the backend that is CUDA graphs alone
CUDA_GRAPH_BACKEND = "cudagraphs"


@dataclass(frozen=True)
class CompileOptions:
    """What `torch.compile` is given: a registered backend's name and, for inductor, a
    mode (None: torch's default)."""

    backend: str = DEFAULT_BACKEND
    mode: str | None = None

    @property
    def cuda_graphs(self) -> bool:
        """Whether these options capture CUDA graphs (on a CUDA device)."""
        return self.backend == CUDA_GRAPH_BACKEND or self.mode in CUDA_GRAPH_MODES


def compile_unavailable() -> str | None:
    """Why this torch cannot compile, or None when it can (torch >= 2.0 with dynamo
    supported on this Python and platform)."""
    import torch

    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile (it came with torch 2.0)"
    from torch._dynamo.eval_frame import is_dynamo_supported

    if not is_dynamo_supported():
        return f"torch {torch.__version__} cannot compile on this Python or platform"
    return None


def backends() -> list[str]:
    """The backends registered with torch (debug and experimental ones included)."""
    import torch.compiler

    return sorted(torch.compiler.list_backends(exclude_tags=()))


def common_backends() -> list[str]:
    """The backends worth naming in an error: torch's non-debug ones, plus the two
    debugging ones a user reaches for (``eager``: dynamo alone; ``aot_eager``: with
    AOTAutograd, ATen's kernels)."""
    import torch.compiler

    named = set(torch.compiler.list_backends()) | ({"eager", "aot_eager"} & set(backends()))
    return sorted(named)


def modes() -> list[str]:
    """Inductor's modes (no public API lists them: `torch._inductor`'s, as torch.compile
    reads them)."""
    from torch._inductor import list_mode_options

    return sorted(list_mode_options())


def resolve_options(
    torch_compile: bool, backend: str | None, mode: str | None
) -> tuple[bool, str | None, str | None, list[str]]:
    """`TrainingArguments`' three fields resolved as `transformers` does (a backend or a
    mode turns `torch_compile` on; its backend is then inductor unless given; names
    stripped, modes lower-cased), and the problems `option_problems` finds (checked only
    when compiling)."""
    backend = backend.strip() if backend is not None else None
    mode = mode.strip().lower() if mode is not None else None
    torch_compile = torch_compile or backend is not None or mode is not None
    if not torch_compile:
        return False, None, None, []
    problems = option_problems(backend, mode)
    return True, backend or DEFAULT_BACKEND, mode, problems


def refuse_compile_off(given: Mapping[str, Any], context: str) -> None:
    """Refuse `given` (a `TrainingArguments`' keyword arguments: what a script, a command
    line or a file set, not the defaults) when it sets ``torch_compile`` to false
    explicitly together with a backend or a mode, which would turn compiling on
    (`resolve_options`, as `transformers` does): ``--torch_compile false
    --torch_compile_backend eager`` compiled. A value that does not convert is left to
    the field's own check.

    Raises:
        ConfigError: naming both fields and the two fixes.
    """
    if "torch_compile" not in given:
        return
    try:
        on = convert_value(given["torch_compile"], bool)
    except ConversionError:
        return
    set_ = [
        f"{name}={given[name]!r}"
        for name in ("torch_compile_backend", "torch_compile_mode")
        if given.get(name) is not None
    ]
    if on or not set_:
        return
    raise ConfigError(
        [
            f"torch_compile=False with {' and '.join(set_)}: a backend or a mode turns "
            "compiling on (as in transformers), which torch_compile=False refuses: drop "
            f"{' and '.join(s.split('=')[0] for s in set_)} to train without compiling, "
            "or set torch_compile=True (or leave it unset) to compile with them"
        ],
        context=context,
    )


def option_problems(backend: str | None, mode: str | None) -> list[str]:
    """The problems with compiling with `backend` (None: inductor) and `mode`, one
    line each naming the `TrainingArguments` field and the fix; [] when fine. Imports
    torch's compiler (about a second), so call it only when compilation is asked for."""
    import torch

    why = compile_unavailable()
    if why is not None:
        return [
            f"torch_compile=True: {why}: upgrade torch (pip install -U torch), or set "
            "torch_compile=False"
        ]
    problems = []
    if backend is not None and backend not in backends():
        close = difflib.get_close_matches(backend, backends(), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        problems.append(
            f"torch_compile_backend={backend!r} is not a backend of torch "
            f"{torch.__version__}: {hint}choose one of {', '.join(common_backends())} "
            f"(default: {DEFAULT_BACKEND}; every one: torch.compiler.list_backends(()))"
        )
    if mode is not None:
        if mode not in modes():
            problems.append(
                f"torch_compile_mode={mode!r} is not supported: choose one of "
                f"{', '.join(modes())}, or leave it unset (None) for torch's default"
            )
        elif backend not in (None, DEFAULT_BACKEND) and mode != "default":
            problems.append(
                f"torch_compile_mode={mode!r} is a mode of the inductor backend, not of "
                f"torch_compile_backend={backend!r}: set torch_compile_backend='inductor', "
                "or leave torch_compile_mode unset"
            )
    return problems


def accumulation_problem(options: CompileOptions, accumulation: int) -> str | None:
    """Why CUDA graphs refuse `gradient_accumulation_steps` > 1, or None.

    The first micro-batch's gradients are the backward graph's outputs, which autograd
    keeps as ``.grad`` without a copy; the next replay writes its own into the same
    memory, and the accumulated gradient is lost: an error at best ("accessing tensor
    output of CUDAGraphs that has been overwritten by a subsequent run",
    pytorch/pytorch#169545, open), a silently wrong gradient in some versions
    (pytorch/pytorch#96693)."""
    if not options.cuda_graphs or accumulation <= 1:
        return None
    field = (
        f"torch_compile_backend={options.backend!r}"
        if options.backend == CUDA_GRAPH_BACKEND
        else f"torch_compile_mode={options.mode!r}"
    )
    return (
        f"{field} (CUDA graphs) with gradient_accumulation_steps={accumulation}: a CUDA "
        "graph's next replay overwrites the gradients accumulated so far "
        "(pytorch/pytorch#169545): use gradient_accumulation_steps=1 with a larger "
        "batch_size, or compile without CUDA graphs (torch_compile_mode unset, or "
        "'max-autotune-no-cudagraphs')"
    )
